//! `save_memory` (spec §1.14): one memory, by key, into the agent's store
//! ([`ToolServices::memory`](super::ToolServices::memory)).

use serde_json::{Map, Value};

use super::{arg_str, required_str, tool_metadata, Tool, ToolContext, ToolError};
use crate::tools::memory::{keywords_of, MemoryRecord, MemoryScope};
use crate::tools::secrets;

const KEY_MAX_CHARS: usize = 80;
const CONTENT_MAX_CHARS: usize = 4000;
const TYPES: &[&str] = &[
    "preference",
    "profile",
    "project_fact",
    "workflow",
    "decision",
    "constraint",
    "note",
];
const USER_TAGS: &[&str] = &["user", "preference", "profile", "personal"];

pub(crate) struct SaveMemory;

/// snake_case: words split at non-alphanumerics and lower-to-upper steps, joined by `_`, at
/// most 80 characters.
pub(crate) fn normalize_key(key: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
            prev_lower = c.is_lowercase() || c.is_numeric();
        } else {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    let trimmed: String = out.trim_matches('_').chars().take(KEY_MAX_CHARS).collect();
    trimmed.trim_end_matches('_').to_owned()
}

/// Tags are matched against every later user message, in every later session: a label's
/// worth each (the reference takes any number of any length).
const MAX_TAGS: usize = 32;
const TAG_MAX_CHARS: usize = 64;

fn error(msg: impl std::fmt::Display) -> String {
    format!("Error saving memory: {msg}")
}

impl Tool for SaveMemory {
    tool_metadata! {
        name: "save_memory",
        description: "Save a durable memory: a fact, preference or decision worth keeping for later sessions. \
         Give it a short key; saving the same key again replaces the memory. Never save secrets.",
        parameters: {"type": "object", "properties": {
            "key": {"type": "string", "description": "A short name for the memory, e.g. preferred_language."},
            "value": {"type": "string", "description": "What to remember (1 to 4000 characters)."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Optional labels."},
            "scope": {"type": "string", "enum": ["user", "project"], "description": "user: about the person; project: about this workspace. Inferred when omitted."},
            "type": {"type": "string", "enum": TYPES, "description": "The kind of memory."}},
            "required": ["key", "value"]},
    }
    fn requires_confirmation(&self) -> bool {
        false
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let key = required_str(args, "key", "save_memory")?;
        let value = required_str(args, "value", "save_memory")?;
        let tags: Vec<String> = match args.get("tags") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    ToolError::new("TypeError", "argument 'tags' must be a list of strings")
                })?,
            Some(_) => {
                return Err(ToolError::new(
                    "TypeError",
                    "argument 'tags' must be a list of strings",
                ))
            }
        };
        let key = normalize_key(key);
        if key.is_empty() {
            return Ok(error("Memory key is empty after normalization"));
        }
        if tags.len() > MAX_TAGS || tags.iter().any(|t| t.chars().count() > TAG_MAX_CHARS) {
            return Ok(error(format!(
                "at most {MAX_TAGS} tags of at most {TAG_MAX_CHARS} characters each"
            )));
        }
        let content = value.trim();
        let n = content.chars().count();
        if n == 0 {
            return Ok(error("Memory content is empty"));
        }
        if n > CONTENT_MAX_CHARS {
            return Ok(error(format!(
                "Memory content exceeds max length ({n} > {CONTENT_MAX_CHARS})"
            )));
        }
        if !secrets::scan_and_redact(content).1.is_empty() {
            return Ok(
                "Refused to save: content appears to contain sensitive credentials".to_owned(),
            );
        }
        let scope = match arg_str(args, "scope")? {
            Some(s) => match MemoryScope::parse(s) {
                Some(s) => s,
                None => return Ok(error(format!("unknown scope '{s}' (user or project)"))),
            },
            None if key.starts_with("user_")
                || tags
                    .iter()
                    .any(|t| USER_TAGS.contains(&t.to_lowercase().as_str())) =>
            {
                MemoryScope::User
            }
            None => MemoryScope::Project,
        };
        let kind = match arg_str(args, "type")? {
            Some(t) if TYPES.contains(&t) => t.to_owned(),
            Some(t) => return Ok(error(format!("unknown type '{t}'"))),
            None => "note".to_owned(),
        };
        let store = ctx.services.memory();
        let now = crate::events::host::now_rfc3339();
        let existing = match store.get(scope, &key) {
            Ok(e) => e,
            Err(e) => return Ok(error(e)),
        };
        let (id, created_at) = match &existing {
            Some(r) => (r.id.clone(), r.created_at.clone()),
            None => (
                uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
                now.clone(),
            ),
        };
        let record = MemoryRecord {
            id,
            scope,
            kind,
            title: key.replace('_', " "),
            keywords: keywords_of(&format!("{} {content}", key.replace('_', " "))),
            key_normalized: key.clone(),
            content: content.to_owned(),
            tags,
            source: "explicit".to_owned(),
            confidence: 1.0,
            sensitivity: "normal".to_owned(),
            created_at,
            updated_at: now,
            deleted_at: None,
        };
        let usage = match store.usage() {
            Ok(u) => u,
            Err(e) => return Ok(error(e)),
        };
        if let Err(e) = ctx
            .services
            .memory_budget
            .admit(usage, existing.as_ref(), &record)
        {
            return Ok(error(e));
        }
        Ok(match store.upsert(&record) {
            Ok(()) => format!("Saved memory: {key}"),
            Err(e) => error(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::normalize_key;

    #[test]
    fn keys_become_snake_case() {
        assert_eq!(normalize_key("Preferred Language"), "preferred_language");
        assert_eq!(normalize_key("userName"), "user_name");
        assert_eq!(normalize_key("  --a..b--  "), "a_b");
        assert_eq!(normalize_key("!!!"), "");
        assert_eq!(normalize_key(&"k".repeat(100)).len(), 80);
    }
}
