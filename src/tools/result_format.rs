//! Result post-processing (spec §1.16): what the model sees of a tool's raw result.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A raw result made ready for history and for the `tool_result` event.
#[derive(Debug, Clone)]
pub struct FormattedResult {
    /// The text that goes into history.
    pub model_text: String,
    /// `sha256` hex of the raw content.
    pub content_hash: String,
    pub original_chars: usize,
    pub saved_to_disk: bool,
    pub disk_path: Option<PathBuf>,
}

/// Formats one result. (Spill to `.agentao/tool-outputs/` lands with the tool catalogue.)
pub fn format_result(_workspace: &Path, _tool_name: &str, raw: &str) -> FormattedResult {
    FormattedResult {
        model_text: strip_tag_chars(raw),
        content_hash: hex(&Sha256::digest(raw.as_bytes())),
        original_chars: raw.chars().count(),
        saved_to_disk: false,
        disk_path: None,
    }
}

/// Removes Unicode tag characters (U+E0000–U+E007F) from the model's copy.
pub fn strip_tag_chars(s: &str) -> String {
    if !s.chars().any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)) {
        return s.to_owned();
    }
    s.chars()
        .filter(|c| !('\u{E0000}'..='\u{E007F}').contains(c))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
