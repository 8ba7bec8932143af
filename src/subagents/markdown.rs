//! Markdown definitions with front matter, from the directory the config names (spec §6.1).
//!
//! The reference reads `<workspace>/.agentao/agents/*.md` always; we read a directory only when
//! the config names one, so repository content cannot add tools silently (docs/deviations.md).
//! The front matter is the subset these files use: `key: value` scalars (quoted or not), inline
//! lists `[a, b]` and block lists of `- item` lines. A file that does not parse is skipped, as
//! the reference skips it.

use std::path::Path;

use serde_json::{Map, Value};

use super::definition::SubagentDefinition;

/// Files larger than this are not definitions (real ones are a few hundred bytes).
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Every `*.md` in `dir`, in name order, that parses.
pub(crate) fn load_directory(dir: &Path) -> Result<Vec<SubagentDefinition>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read '{}': {e}", dir.display()))?;
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md") && p.is_file())
        .collect();
    files.sort();
    Ok(files
        .iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() <= MAX_FILE_BYTES))
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            let stem = p.file_stem()?.to_str()?;
            parse(&text, stem)
        })
        .collect())
}

/// One file: front matter between `---` lines, then the body (the instructions).
pub(crate) fn parse(text: &str, stem: &str) -> Option<SubagentDefinition> {
    let mut lines = text.lines();
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut fields = Map::new();
    let mut list_key: Option<String> = None;
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if let (Some(key), Some(item)) = (&list_key, line.trim_start().strip_prefix("- ")) {
            if let Some(Value::Array(a)) = fields.get_mut(key) {
                a.push(Value::String(unquote(item.trim()).to_owned()));
                continue;
            }
        }
        let (key, value) = line.split_once(':')?;
        let (key, value) = (key.trim().to_owned(), value.trim());
        if value.is_empty() {
            fields.insert(key.clone(), Value::Array(Vec::new()));
            list_key = Some(key);
            continue;
        }
        list_key = None;
        fields.insert(key, scalar(value));
    }
    if !closed {
        return None;
    }
    let body: Vec<&str> = lines.collect();
    let body = body.join("\n");
    fields
        .entry("name")
        .or_insert_with(|| Value::String(stem.to_owned()));
    if !body.trim().is_empty() {
        fields.insert("instructions".into(), Value::String(body.trim().to_owned()));
    }
    // Numbers in front matter may be written as strings; the reference converts them.
    for key in ["max_turns", "temperature"] {
        if let Some(Value::String(s)) = fields.get(key) {
            let n: Value = serde_json::from_str(s).ok()?;
            fields.insert(key.into(), n);
        }
    }
    SubagentDefinition::from_value(&Value::Object(fields)).ok()
}

fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

fn scalar(value: &str) -> Value {
    if let Some(inner) = value.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return Value::Array(
            inner
                .split(',')
                .map(|s| unquote(s.trim()))
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_owned()))
                .collect(),
        );
    }
    if value.starts_with(['"', '\'']) {
        return Value::String(unquote(value).to_owned());
    }
    match serde_json::from_str::<Value>(value) {
        Ok(n @ Value::Number(_)) => n,
        _ => Value::String(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_reference_shapes() {
        let d = parse(
            "---\nname: investigator\ndescription: \"Looks: around\"\ntools:\n  - read_file\n  - glob\nmax_turns: 7\n---\nBe careful.\n",
            "file",
        )
        .unwrap();
        assert_eq!(d.name, "investigator");
        assert_eq!(d.description, "Looks: around");
        assert_eq!(d.tools, Some(vec!["read_file".into(), "glob".into()]));
        assert_eq!(d.max_turns, 7);
        assert_eq!(d.instructions.as_deref(), Some("Be careful."));
        let d = parse("---\ntools: [a, 'b']\ntemperature: 0.5\n---\n", "stem").unwrap();
        assert_eq!(d.name, "stem");
        assert_eq!(d.tools, Some(vec!["a".into(), "b".into()]));
        assert_eq!(d.temperature, Some(0.5));
        assert!(parse("no front matter", "x").is_none());
        assert!(parse("---\nname: x\n", "x").is_none());
        assert!(parse("---\nmax_turns: lots\n---\n", "x").is_none());
    }
}
