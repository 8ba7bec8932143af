//! Result post-processing (spec §1.16): what the model sees of a tool's raw result.
//!
//! A result over 40,000 characters is saved (secret-redacted) under
//! `<workspace>/.agentao/tool-outputs/{tool}_{unix_ts}_{6hex}.txt` and the model gets the first
//! 8,000 and last 32,000 characters with the reference's header and marker. The first save into
//! a directory prunes files there older than 7 days. Unicode tag characters are stripped from
//! the model's copy (well-formed flag emoji tag sequences kept).

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::fs::FileSystem;
use super::secrets;
use super::spill_dir::SpillDir;
use crate::pycompat::char_count;

pub(crate) const SAVE_THRESHOLD: usize = 40_000;
pub(crate) const HEAD_CHARS: usize = 8_000;
pub(crate) const TAIL_CHARS: usize = SAVE_THRESHOLD - HEAD_CHARS;
pub(crate) const RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Where spills go, relative to the workspace, unless `tools.settings.tool_outputs_dir` says
/// otherwise.
pub(crate) const DEFAULT_OUTPUT_DIR: &str = ".agentao/tool-outputs";

/// A raw result made ready for history and for the `tool_result` event.
#[derive(Debug, Clone)]
pub struct FormattedResult {
    /// The text that goes into history, in the `Arc` history keeps (one copy of the result,
    /// not a `String` and then the `Arc`).
    pub model_text: Arc<str>,
    pub original_chars: usize,
    pub saved_to_disk: bool,
    pub disk_path: Option<PathBuf>,
}

/// Directories already pruned by this process (the reference prunes once per formatter).
static PRUNED: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// The `tool_result` event's `content_hash`: `sha256` hex of the raw content. Apart from
/// the result's formatting, since only the event needs it (a SHA-256 of every result was
/// a visible part of every tool-loop iteration for a host that does not listen).
pub(crate) fn content_hash(raw: &str) -> String {
    lower_hex(&Sha256::digest(raw.as_bytes()))
}

/// Whether a result is long enough to be saved in full and shown as an excerpt.
pub(crate) fn spills(raw: &str) -> bool {
    // A text has at most as many characters as bytes: most results are decided by their length.
    raw.len() > SAVE_THRESHOLD && char_count(raw) > SAVE_THRESHOLD
}

/// Formats one result, spilling into `output_dir` through `fs`: with a host file system the
/// saved copy lives where the rest of the workspace does (never pruned: the seam has no delete).
pub(crate) fn format_result_to(
    output_dir: &SpillDir,
    tool_name: &str,
    raw: &str,
    fs: &dyn FileSystem,
) -> FormattedResult {
    let original_chars = char_count(raw);
    if original_chars <= SAVE_THRESHOLD {
        return whole(raw, original_chars);
    }
    let saved = save(output_dir, tool_name, raw, fs).ok();
    if saved.is_some() && fs.is_local() {
        let dir = output_dir.path();
        let first = PRUNED
            .lock()
            .map(|mut set| set.insert(dir.to_path_buf()))
            .unwrap_or(false);
        if first {
            prune(dir, SystemTime::now());
        }
    }
    excerpt(raw, original_chars, saved)
}

/// A result formatted as [`format_result_to`] does when its full copy could not be saved (the
/// save failed, or it did not end in time).
pub(crate) fn format_unsaved(raw: &str) -> FormattedResult {
    let original_chars = char_count(raw);
    if original_chars <= SAVE_THRESHOLD {
        return whole(raw, original_chars);
    }
    excerpt(raw, original_chars, None)
}

fn whole(raw: &str, original_chars: usize) -> FormattedResult {
    FormattedResult {
        model_text: strip_tag_chars_cow(raw).into(),
        original_chars,
        saved_to_disk: false,
        disk_path: None,
    }
}

/// The head and tail of a long result, with where its full copy was saved (the path, and
/// whether credential-shaped strings were redacted in it), if it was.
fn excerpt(raw: &str, original_chars: usize, saved: Option<(PathBuf, bool)>) -> FormattedResult {
    let (file_ref, disk_path) = match saved {
        Some((path, redacted)) => {
            let note = if redacted {
                "  (credential-shaped strings in the saved copy are replaced with [REDACTED:<kind>]; \
                 the excerpt below is verbatim)"
            } else {
                ""
            };
            (
                format!(
                    "\nFull output saved to: {}  (use read_file to access){note}",
                    path.display()
                ),
                Some(path),
            )
        }
        None => (String::new(), None),
    };
    let omitted = original_chars - SAVE_THRESHOLD;
    let head_end = raw
        .char_indices()
        .nth(HEAD_CHARS)
        .map(|(i, _)| i)
        .unwrap_or(raw.len());
    let tail_start = raw
        .char_indices()
        .nth(original_chars - TAIL_CHARS)
        .map(|(i, _)| i)
        .unwrap_or(raw.len());
    let excerpt = format!(
        "[Output truncated: {} chars total, showing first {} and last {} chars.{file_ref}]\n\n{}\n\n[… {} chars omitted …]\n\n{}",
        thousands(original_chars as u64),
        thousands(HEAD_CHARS as u64),
        thousands(TAIL_CHARS as u64),
        &raw[..head_end],
        thousands(omitted as u64),
        &raw[tail_start..],
    );
    FormattedResult {
        model_text: strip_tag_chars_cow(&excerpt).into(),
        original_chars,
        saved_to_disk: disk_path.is_some(),
        disk_path,
    }
}

/// Writes the redacted copy; returns its path and whether anything was redacted.
fn save(
    spill: &SpillDir,
    tool_name: &str,
    raw: &str,
    fs: &dyn FileSystem,
) -> std::io::Result<(PathBuf, bool)> {
    let dir = spill.path();
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let uid = uuid::Uuid::new_v4().simple().to_string();
    let safe: String = tool_name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{safe}_{ts}_{}.txt", &uid[..6]));
    let (redacted, hits) = secrets::scan_and_redact(raw);
    if fs.is_local() {
        spill.prepare()?;
        // Never through a link or over a file planted at the name.
        std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&path)?
            .write_all(redacted.as_bytes())?;
    } else {
        fs.write_bytes(&path, redacted.as_bytes(), false)?;
    }
    Ok((path, !hits.is_empty()))
}

/// Deletes saved outputs older than the retention; best effort. Returns how many. Only
/// regular files named as [`save`] names them are ours: a host's own `*.txt` in a shared
/// directory is left alone (the reference deletes every old `*.txt`).
pub(crate) fn prune(dir: &Path, now: SystemTime) -> usize {
    let Some(cutoff) = now.checked_sub(RETENTION) else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let ours = entry.file_type().is_ok_and(|t| t.is_file())
            && entry.file_name().to_str().is_some_and(is_saved_output_name);
        if !ours {
            continue;
        }
        let path = entry.path();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < cutoff);
        if old && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// `{tool}_{unix_ts}_{6hex}.txt`, the name [`save`] gives (a tool name is alphanumeric, `-`
/// and `_`).
fn is_saved_output_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".txt") else {
        return false;
    };
    let mut parts = stem.rsplitn(3, '_');
    let (Some(uid), Some(ts), Some(tool)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    uid.len() == 6
        && uid.bytes().all(|b| b.is_ascii_hexdigit())
        && !ts.is_empty()
        && ts.bytes().all(|b| b.is_ascii_digit())
        && !tool.is_empty()
}

/// `{n:,}`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

const TAG_BASE: char = '\u{1F3F4}';
const TAG_TERM: char = '\u{E007F}';
const MAX_TAG_PAYLOAD: usize = 5;
const MAX_TAG_SEQUENCES: usize = 8;

fn is_tag(c: char) -> bool {
    ('\u{E0000}'..='\u{E007F}').contains(&c)
}

fn is_tag_payload(c: char) -> bool {
    ('\u{E0030}'..='\u{E0039}').contains(&c) || ('\u{E0061}'..='\u{E007A}').contains(&c)
}

/// Lowercase hex of `bytes`, as `format!("{:x}")` writes a digest (whose formatting
/// machinery cost more than the digest's last block).
fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xF)]));
    }
    s
}

/// Removes Unicode tag characters (U+E0000–U+E007F) from the model's copy, keeping up to 8
/// well-formed emoji tag sequences (a black flag, 1–5 tag digits/letters, the cancel tag).
pub(crate) fn strip_tag_chars(s: &str) -> String {
    strip_tag_chars_cow(s).into_owned()
}

/// [`strip_tag_chars`], borrowing `s` when it has nothing to strip (almost always).
pub(crate) fn strip_tag_chars_cow(s: &str) -> Cow<'_, str> {
    // Tag characters encode as F3 A0 xx xx: text without an F3 byte has none (fast path).
    if !s.as_bytes().contains(&0xF3) || !s.chars().any(is_tag) {
        return Cow::Borrowed(s);
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut kept = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == TAG_BASE {
            let mut j = i + 1;
            let mut payload = 0;
            let mut end = None;
            while j < chars.len() {
                if chars[j] == TAG_TERM {
                    if payload > 0 {
                        end = Some(j + 1);
                    }
                    break;
                }
                if payload < MAX_TAG_PAYLOAD && is_tag_payload(chars[j]) {
                    payload += 1;
                    j += 1;
                    continue;
                }
                break;
            }
            if let Some(end) = end.filter(|_| kept < MAX_TAG_SEQUENCES) {
                out.extend(&chars[i..end]);
                kept += 1;
                i = end;
                continue;
            }
            out.push(c);
        } else if !is_tag(c) {
            out.push(c);
        }
        i += 1;
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::fs::LocalFileSystem;

    fn format_result(workspace: &Path, tool_name: &str, raw: &str) -> FormattedResult {
        format_result_to(
            &SpillDir::new(workspace, DEFAULT_OUTPUT_DIR),
            tool_name,
            raw,
            &LocalFileSystem,
        )
    }

    #[test]
    fn the_digest_is_written_as_format_wrote_it() {
        let long = "x".repeat(100_000);
        for raw in ["", "hello", "é\u{2028}\u{1F600}\0", long.as_str()] {
            let d = Sha256::digest(raw.as_bytes());
            assert_eq!(lower_hex(&d), format!("{d:x}"));
        }
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }

    #[test]
    fn small_results_pass_through() {
        let dir = tempfile::tempdir().unwrap();
        let r = format_result(dir.path(), "read_file", "hello");
        assert_eq!(&*r.model_text, "hello");
        assert!(!r.saved_to_disk);
        assert_eq!(r.original_chars, 5);
        assert_eq!(
            content_hash("hello"),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
    }

    #[test]
    fn large_results_spill_with_redaction() {
        let dir = tempfile::tempdir().unwrap();
        let raw = format!(
            "{} password=supersecret99 {}",
            "a".repeat(10_000),
            "b".repeat(40_000)
        );
        let r = format_result(dir.path(), "run_shell_command", &raw);
        assert!(r.saved_to_disk);
        let path = r.disk_path.clone().unwrap();
        assert!(path.starts_with(dir.path().join(".agentao/tool-outputs")));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("run_shell_command_") && name.ends_with(".txt"),
            "{name}"
        );
        let saved = std::fs::read_to_string(&path).unwrap();
        assert!(saved.contains("[REDACTED:kv_secret]"));
        let header = format!(
            "[Output truncated: 50,024 chars total, showing first 8,000 and last 32,000 chars.\nFull output saved to: {}  (use read_file to access)  (credential-shaped strings in the saved copy are replaced with [REDACTED:<kind>]; the excerpt below is verbatim)]\n\n",
            path.display()
        );
        assert!(
            r.model_text.starts_with(&header),
            "{}",
            &r.model_text[..400]
        );
        assert!(r.model_text.contains("\n\n[… 10,024 chars omitted …]\n\n"));
        assert!(r.model_text.ends_with(&"b".repeat(100)));
        assert_eq!(
            r.model_text.chars().count(),
            header.chars().count() + 40_000 + "\n\n[… 10,024 chars omitted …]\n\n".chars().count()
        );
    }

    #[test]
    fn only_our_saved_outputs_are_pruned() {
        for ours in ["read_file_1796463209_94179e.txt", "mcp_a_b-c_1_abcdef.txt"] {
            assert!(is_saved_output_name(ours), "{ours}");
        }
        for theirs in [
            "notes.txt",
            "read_file_1796463209_94179e.md",
            "read_file_1796463209_94179.txt",
            "read_file_17x6463209_94179e.txt",
            "_1796463209_94179e.txt",
            "1796463209_94179e.txt",
            "read_file__94179e.txt",
        ] {
            assert!(!is_saved_output_name(theirs), "{theirs}");
        }
    }

    #[test]
    fn tags_stripped_flags_kept() {
        let flag = "\u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}";
        assert_eq!(
            strip_tag_chars(&format!("a\u{E0041}b{flag}")),
            format!("ab{flag}")
        );
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
