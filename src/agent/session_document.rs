//! The session document: everything a session needs to continue in another agent or another
//! process, as one versioned JSON object: history (images and compaction summaries are
//! messages of it), the permission mode and the rules hosts added (run-scope rules, remembered
//! approvals), the todo list, background-task records, usage and cost totals, and lineage.
//!
//! `format_version` is read before anything else: a document of a newer version is refused
//! (a newer writer may mean something this reader would misread), and an older one is migrated
//! to this version before it is typed, so a document is never read under the wrong schema.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::llm::{Message, Usage};
use crate::permissions::{AddedRules, Mode};
use crate::subagents::background::record::TaskRecord;
use crate::tools::TodoItem;

/// The version this library writes and reads.
pub const SESSION_FORMAT_VERSION: u64 = 1;

/// A document larger than this is refused before it is parsed.
pub const MAX_DOCUMENT_BYTES: usize = 256 << 20;

/// Where a session came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Started afresh.
    #[default]
    New,
    /// A copy of another session under a new id.
    Fork,
    /// A sub-agent of another session.
    Subagent,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lineage {
    #[serde(default)]
    pub origin: Origin,
    /// The session this one was forked from or is a sub-agent of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PermissionState {
    pub(crate) mode: String,
    #[serde(default)]
    pub(crate) added: Vec<AddedRules>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TodoEntry {
    pub(crate) content: String,
    pub(crate) status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BackgroundEntry {
    pub(crate) id: String,
    #[serde(flatten)]
    pub(crate) record: TaskRecord,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageTotals {
    #[serde(default)]
    pub(crate) prompt_tokens: u64,
    #[serde(default)]
    pub(crate) completion_tokens: u64,
    #[serde(default)]
    pub(crate) cache_read_tokens: u64,
    #[serde(default)]
    pub(crate) cache_creation_tokens: u64,
    #[serde(default)]
    pub(crate) reasoning_tokens: u64,
    /// Billionths of a US dollar, by the config's price table.
    #[serde(default)]
    pub(crate) cost_nano_usd: u64,
}

impl From<&Usage> for UsageTotals {
    fn from(u: &Usage) -> Self {
        UsageTotals {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_creation_tokens: u.cache_creation_tokens,
            reasoning_tokens: u.reasoning_tokens,
            cost_nano_usd: u.cost_nano_usd,
        }
    }
}

impl UsageTotals {
    pub(crate) fn to_usage(self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_creation_tokens: self.cache_creation_tokens,
            reasoning_tokens: self.reasoning_tokens,
            cost_nano_usd: self.cost_nano_usd,
        }
    }
}

/// The document, typed. Unknown keys are refused: within one format version the schema is
/// closed, so a key this reader does not know means the writer was not this version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionDocument {
    pub(crate) format_version: u64,
    pub(crate) session_id: String,
    #[serde(default)]
    pub(crate) lineage: Lineage,
    /// Messages in the wire shape `agentao_agent_history` gives.
    pub(crate) history: Vec<Map<String, Value>>,
    /// `None`: the session had no permission engine.
    #[serde(default)]
    pub(crate) permissions: Option<PermissionState>,
    #[serde(default)]
    pub(crate) todos: Vec<TodoEntry>,
    #[serde(default)]
    pub(crate) background_tasks: Vec<BackgroundEntry>,
    #[serde(default)]
    pub(crate) usage: UsageTotals,
}

/// Why a document cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("session document: not JSON (truncated or damaged?): {0}")]
    NotJson(String),
    #[error("session document: {0}")]
    NotADocument(String),
    #[error("session document: format_version {found} is newer than this library reads ({SESSION_FORMAT_VERSION}); upgrade libagentao to resume it")]
    Newer { found: u64 },
    #[error("session document: format_version {found} was never written by libagentao (it reads 1 to {SESSION_FORMAT_VERSION})")]
    Unknown { found: u64 },
    #[error("session document: {0}")]
    Invalid(String),
}

impl SessionDocument {
    /// Reads a document of this or an older version.
    pub(crate) fn parse(text: &str) -> Result<SessionDocument, DocumentError> {
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(DocumentError::NotADocument(format!(
                "{} bytes, more than the {MAX_DOCUMENT_BYTES} a document may have",
                text.len()
            )));
        }
        let value: Value =
            serde_json::from_str(text).map_err(|e| DocumentError::NotJson(e.to_string()))?;
        let Value::Object(doc) = value else {
            return Err(DocumentError::NotADocument("must be a JSON object".into()));
        };
        let version = match doc.get("format_version") {
            None => {
                return Err(DocumentError::NotADocument(
                    "no format_version: not a session document".into(),
                ))
            }
            Some(v) => v.as_u64().ok_or_else(|| {
                DocumentError::NotADocument(format!(
                    "format_version must be a positive integer, not {v}"
                ))
            })?,
        };
        let doc = migrate(version, doc)?;
        let doc: SessionDocument = serde_path_to_error::deserialize(Value::Object(doc))
            .map_err(|e| DocumentError::Invalid(format!("{}: {}", e.path(), e.inner())))?;
        crate::session_store::check_session_id(&doc.session_id)
            .map_err(|e| DocumentError::Invalid(e.to_string()))?;
        if let Some(p) = &doc.permissions {
            if Mode::parse(&p.mode).is_none() {
                return Err(DocumentError::Invalid(format!(
                    "permissions.mode: unknown mode {:?}",
                    p.mode
                )));
            }
        }
        Ok(doc)
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a session document serializes")
    }

    pub(crate) fn todo_items(&self) -> Vec<TodoItem> {
        self.todos
            .iter()
            .map(|t| TodoItem {
                content: t.content.clone(),
                status: t.status.clone(),
            })
            .collect()
    }
}

/// Brings a document of `version` to [`SESSION_FORMAT_VERSION`]. Each older version gets one
/// step here when the format changes; version 1 is the first.
fn migrate(version: u64, doc: Map<String, Value>) -> Result<Map<String, Value>, DocumentError> {
    match version {
        SESSION_FORMAT_VERSION => Ok(doc),
        v if v > SESSION_FORMAT_VERSION => Err(DocumentError::Newer { found: v }),
        v => Err(DocumentError::Unknown { found: v }),
    }
}

/// A history as messages: each an object with a role of system, user, assistant or tool.
pub(crate) fn typed_history(messages: Vec<Map<String, Value>>) -> Result<Vec<Message>, String> {
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            if matches!(
                m.get("role").and_then(Value::as_str),
                Some("system" | "user" | "assistant" | "tool")
            ) {
                Ok(Message::from_host(m))
            } else {
                Err(format!(
                    "history[{i}]: needs a role of system, user, assistant or tool"
                ))
            }
        })
        .collect()
}

/// A copy of `document` as a new session: `new_id` (a fresh one when `None`), with lineage
/// naming the session it came from.
pub fn fork_document(document: &str, new_id: Option<&str>) -> Result<String, DocumentError> {
    let mut doc = SessionDocument::parse(document)?;
    let id = match new_id {
        Some(id) => {
            crate::session_store::check_session_id(id)
                .map_err(|e| DocumentError::Invalid(e.to_string()))?;
            id.to_owned()
        }
        None => uuid::Uuid::new_v4().to_string(),
    };
    doc.lineage = Lineage {
        origin: Origin::Fork,
        parent_session_id: Some(std::mem::replace(&mut doc.session_id, id)),
    };
    Ok(doc.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal(version: &str) -> String {
        format!(r#"{{"format_version": {version}, "session_id": "s1", "history": []}}"#)
    }

    #[test]
    fn versions_are_read_refused_or_named() {
        assert!(SessionDocument::parse(&minimal("1")).is_ok());
        let e = SessionDocument::parse(&minimal("2")).unwrap_err();
        assert_eq!(e, DocumentError::Newer { found: 2 });
        assert!(e.to_string().contains("upgrade libagentao"), "{e}");
        assert_eq!(
            SessionDocument::parse(&minimal("0")).unwrap_err(),
            DocumentError::Unknown { found: 0 }
        );
        assert!(matches!(
            SessionDocument::parse(&minimal("\"1\"")),
            Err(DocumentError::NotADocument(_))
        ));
        assert!(matches!(
            SessionDocument::parse(r#"{"session_id": "s1", "history": []}"#),
            Err(DocumentError::NotADocument(_))
        ));
    }

    #[test]
    fn a_truncated_or_foreign_document_is_refused_with_its_reason() {
        let full = minimal("1");
        let e = SessionDocument::parse(&full[..full.len() - 3]).unwrap_err();
        assert!(matches!(e, DocumentError::NotJson(_)), "{e}");
        let e = SessionDocument::parse(
            r#"{"format_version": 1, "session_id": "s1", "history": [], "extra": 1}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("extra"), "{e}");
        let e = SessionDocument::parse(
            r#"{"format_version": 1, "session_id": "s1", "history": [{"role": 3}], "todos": [{"content": 1}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("todos"), "{e}");
    }

    #[test]
    fn a_fork_names_its_parent() {
        let forked: Value =
            serde_json::from_str(&fork_document(&minimal("1"), Some("s2")).unwrap()).unwrap();
        assert_eq!(forked["session_id"], "s2");
        assert_eq!(forked["lineage"]["origin"], "fork");
        assert_eq!(forked["lineage"]["parent_session_id"], "s1");
    }
}
