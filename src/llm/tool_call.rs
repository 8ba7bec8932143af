//! A tool call as the model sent it, its arguments parsed once (with the reference's repairs)
//! into a typed value or a typed failure.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Shared by history, planning, execution and the answer (each copied them before).
    pub id: Arc<str>,
    pub name: Arc<str>,
    /// The arguments string exactly as received (the identical-call guard compares it).
    pub raw_arguments: String,
    /// Shared with the planned call and the running job (a tool-loop iteration cloned the map
    /// three times).
    pub(crate) arguments: Result<Arc<Map<String, Value>>, ArgumentsError>,
}

impl ToolCall {
    /// A call as assembled from the stream; its arguments are parsed here, once.
    pub(crate) fn new(
        id: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        raw_arguments: String,
    ) -> ToolCall {
        let arguments = parse_arguments(&raw_arguments).map(Arc::new);
        ToolCall {
            id: id.into(),
            name: name.into(),
            raw_arguments,
            arguments,
        }
    }

    /// The arguments as history records them: Python's `json.dumps` layout of the parsed
    /// object, `{}` when they did not parse (as the reference).
    pub(crate) fn canonical_arguments(&self) -> String {
        match &self.arguments {
            Ok(m) => crate::pycompat::python_json(&**m),
            Err(_) => "{}".to_owned(),
        }
    }
}

/// What JSON value the arguments held instead of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    Array,
    String,
    Number,
    Boolean,
}

/// Why the arguments are not usable; `Display` is the reason the model is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgumentsError {
    /// No repair made them parse (the parser's own detail is not shown, as in the reference).
    Unparseable,
    NotAnObject(JsonKind),
}

impl fmt::Display for ArgumentsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgumentsError::Unparseable => {
                f.write_str("could not parse tool arguments as JSON or Python literal")
            }
            ArgumentsError::NotAnObject(kind) => write!(
                f,
                "expected a JSON object, got {}",
                match kind {
                    JsonKind::Array => "an array",
                    JsonKind::String => "a string",
                    JsonKind::Number => "a number",
                    JsonKind::Boolean => "a boolean",
                }
            ),
        }
    }
}

/// Parses tool-call arguments with the reference's repairs; never guesses punctuation.
pub fn parse_arguments(raw: &str) -> Result<Map<String, Value>, ArgumentsError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() || trimmed == "none" || trimmed == "null" {
        return Ok(Map::new());
    }
    let unfenced = strip_fence(trimmed);
    let value = serde_json::from_str::<Value>(unfenced)
        .or_else(|first| {
            escape_control_chars(unfenced)
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
                .or_else(|| serde_json::from_str::<Value>(&remove_trailing_commas(unfenced)).ok())
                .or_else(|| {
                    python_literal_to_json(unfenced).and_then(|s| serde_json::from_str(&s).ok())
                })
                .ok_or(first)
        })
        .map_err(|_| ArgumentsError::Unparseable)?;
    let value = match value {
        // Double-encoded: a JSON string holding the object.
        Value::String(inner) => {
            serde_json::from_str::<Value>(&inner).map_err(|_| ArgumentsError::Unparseable)?
        }
        other => other,
    };
    match value {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        Value::Array(_) => Err(ArgumentsError::NotAnObject(JsonKind::Array)),
        Value::String(_) => Err(ArgumentsError::NotAnObject(JsonKind::String)),
        Value::Number(_) => Err(ArgumentsError::NotAnObject(JsonKind::Number)),
        Value::Bool(_) => Err(ArgumentsError::NotAnObject(JsonKind::Boolean)),
    }
}

fn strip_fence(s: &str) -> &str {
    let Some(rest) = s.strip_prefix("```") else {
        return s;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.trim_start().strip_suffix("```").unwrap_or(rest).trim()
}

/// Where a character of a JSON text stands, for the lenient repairs below.
#[derive(PartialEq)]
enum Place {
    /// Outside any string literal.
    Code,
    /// An ordinary character of a string: not a quote, a backslash or an escaped character.
    StringText,
    /// A quote, a backslash or an escaped character.
    StringSyntax,
}

/// Follows string literals (and their escapes) through a JSON text, one character at a time.
#[derive(Default)]
struct Strings {
    in_str: bool,
    escaped: bool,
}

impl Strings {
    fn place(&mut self, c: char) -> Place {
        if !self.in_str {
            if c == '"' {
                self.in_str = true;
                return Place::StringSyntax;
            }
            return Place::Code;
        }
        if self.escaped {
            self.escaped = false;
        } else if c == '\\' {
            self.escaped = true;
        } else if c == '"' {
            self.in_str = false;
        } else {
            return Place::StringText;
        }
        Place::StringSyntax
    }
}

/// Lenient JSON: raw control characters inside strings escaped.
fn escape_control_chars(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len() + 8);
    let mut strings = Strings::default();
    let mut changed = false;
    for c in s.chars() {
        if strings.place(c) == Place::StringText && (c as u32) < 0x20 {
            changed = true;
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    changed.then_some(out)
}

fn remove_trailing_commas(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut strings = Strings::default();
    for (i, &c) in chars.iter().enumerate() {
        if strings.place(c) == Place::Code && c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Python literal syntax (`{'a': True, 'b': None}`) to JSON.
fn python_literal_to_json(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            let quote = c;
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != quote {
                match chars[i] {
                    '\\' if i + 1 < chars.len() => {
                        if chars[i + 1] == '\'' {
                            out.push('\'');
                        } else {
                            out.push('\\');
                            out.push(chars[i + 1]);
                        }
                        i += 2;
                        continue;
                    }
                    '"' => out.push_str("\\\""),
                    ch => out.push(ch),
                }
                i += 1;
            }
            if i >= chars.len() {
                return None;
            }
            out.push('"');
            i += 1;
            continue;
        }
        if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match word.as_str() {
                "True" => out.push_str("true"),
                "False" => out.push_str("false"),
                "None" => out.push_str("null"),
                _ => return None,
            }
            continue;
        }
        if c == '(' || c == ')' {
            out.push(if c == '(' { '[' } else { ']' });
            i += 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    Some(remove_trailing_commas(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_repairs() {
        assert!(parse_arguments("").unwrap().is_empty());
        assert!(parse_arguments("null").unwrap().is_empty());
        assert_eq!(parse_arguments("```json\n{\"a\":1}\n```").unwrap()["a"], 1);
        assert_eq!(parse_arguments("\"{\\\"a\\\":1}\"").unwrap()["a"], 1);
        assert_eq!(parse_arguments("{\"a\":\"x\ny\"}").unwrap()["a"], "x\ny");
        assert_eq!(parse_arguments("{\"a\":[1,2,],}").unwrap()["a"][1], 2);
        // A comma inside a string stays, even before a bracket; an escaped quote does not end it.
        let m = parse_arguments("{\"a\":\"x,}\\\",]\",\"b\":[1,],}").unwrap();
        assert_eq!(m["a"], "x,}\",]");
        assert_eq!(parse_arguments("{\"a\":\"\\\"\t\"}").unwrap()["a"], "\"\t");
        let m = parse_arguments("{'a': True, 'b': None, 'c': 'it\\'s'}").unwrap();
        assert_eq!(m["a"], true);
        assert!(m["b"].is_null());
        assert_eq!(m["c"], "it's");
        assert!(parse_arguments("[1]").is_err());
        assert!(parse_arguments("{\"a\": ").is_err());
    }

    #[test]
    fn parsed_once_with_its_canonical_form() {
        let c = ToolCall::new("i", "n", "{'a': True}".into());
        assert_eq!(c.canonical_arguments(), r#"{"a": true}"#);
        assert_eq!(c.raw_arguments, "{'a': True}");
        let bad = ToolCall::new("i", "n", "[1]".into());
        assert_eq!(bad.canonical_arguments(), "{}");
        assert_eq!(
            bad.arguments.unwrap_err().to_string(),
            "expected a JSON object, got an array"
        );
    }

    /// Every call's arguments in the reference transcripts and edge cases (escapes, control
    /// characters, astral characters, nesting, empty, huge): the map written as it is gives the
    /// old rendering, which cloned it into a `Value` first.
    #[test]
    fn canonical_arguments_are_the_old_rendering() {
        fn collect(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, v) in m {
                        match (k.as_str(), v) {
                            ("arguments", Value::String(s)) => out.push(s.clone()),
                            ("arguments", Value::Object(_)) => out.push(v.to_string()),
                            _ => collect(v, out),
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|v| collect(v, out)),
                _ => {}
            }
        }
        let mut raws = Vec::new();
        for t in crate::llm::script::conformance_transcripts() {
            collect(&t, &mut raws);
        }
        assert!(raws.len() >= 10, "{} arguments", raws.len());
        let huge = format!("{{\"text\": \"{}\"}}", "ab\\n\u{e9}".repeat(50_000));
        raws.extend(
            [
                "",
                "{}",
                r#"{"a": "q\"\\/\b\f\n\r\t\u0001\u001f\u007f"}"#,
                r#"{"e": "\u00e9\u2028\ud83d\ude00 \udb40\udc41", "n": -1.5e3, "z": 0}"#,
                r#"{"nested": {"list": [1, [], {}, null, true], "s": ""}, "b": false}"#,
                "{'a': True, 'b': None}",
                huge.as_str(),
            ]
            .map(str::to_owned),
        );
        for raw in &raws {
            let call = ToolCall::new("i", "n", raw.clone());
            let old = match &call.arguments {
                Ok(m) => crate::pycompat::python_json(&Value::Object((**m).clone())),
                Err(_) => "{}".to_owned(),
            };
            assert_eq!(call.canonical_arguments(), old, "{raw:?}");
        }
    }
}
