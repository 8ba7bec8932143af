//! The reference's Python spellings that the model, the host or a rule pattern can see: how
//! Python prints a value (`json.dumps`, `str`, `repr`), counts, splits and strips text, words a
//! UTF-8 decode error, and what its `re` calls `\s` and IGNORECASE.

use serde_json::Value;

/// Python's `json.dumps` layout (`", "` and `": "` separators, UTF-8 kept), which is what the
/// reference writes into history for canonical tool arguments. Generic so a map is written
/// as it is, not cloned into a `Value` first (it serializes to the same bytes).
pub(crate) fn python_json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    struct PyFormatter;
    impl serde_json::ser::Formatter for PyFormatter {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            item_separator(w, first)
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            item_separator(w, first)
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
        ) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::with_capacity(64);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    serde::Serialize::serialize(v, &mut ser).expect("serializing a JSON value cannot fail");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

fn item_separator<W: ?Sized + std::io::Write>(w: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        w.write_all(b", ")
    }
}

/// Python's `str()` of a JSON value (what the reference matches `args` patterns against).
pub fn python_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

fn python_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => {
            if n.is_f64() {
                let f = n.as_f64().unwrap_or(0.0);
                python_float(f)
            } else {
                n.to_string()
            }
        }
        Value::String(s) => py_repr(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", py_repr(k), python_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn python_float(f: f64) -> String {
    if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
        format!("{f:.1}")
    } else if f.is_finite() && (f.abs() >= 1e16 || (f != 0.0 && f.abs() < 1e-4)) {
        let s = format!("{f:e}");
        // Rust: 1e20 / 1.5e-7; Python: 1e+20 / 1.5e-07
        match s.split_once('e') {
            Some((m, e)) => {
                let (sign, digits) = match e.strip_prefix('-') {
                    Some(d) => ("-", d),
                    None => ("+", e),
                };
                format!("{m}e{sign}{digits:0>2}")
            }
            None => s,
        }
    } else if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        format!("{f}")
    }
}

/// Python's `repr()` of a string, as the reference's messages show URLs.
pub(crate) fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `str.splitlines`: every line boundary Python knows, `\r\n` as one.
pub(crate) fn splitlines(s: &str, keepends: bool) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let is_break = matches!(
            c,
            '\n' | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if !is_break {
            continue;
        }
        let mut end = i + c.len_utf8();
        if c == '\r' {
            if let Some(&(_, '\n')) = it.peek() {
                it.next();
                end += 1;
            }
        }
        out.push(if keepends {
            &s[start..end]
        } else {
            &s[start..i]
        });
        start = end;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Python's `str.strip()` whitespace.
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Code points in `s` (what Python's `len` counts), without decoding when it is ASCII.
pub(crate) fn char_count(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

/// Python's `UnicodeDecodeError` text for strict UTF-8.
pub(crate) fn utf8_error_text(bytes: &[u8], e: std::str::Utf8Error) -> String {
    let pos = e.valid_up_to();
    let byte = bytes.get(pos).copied().unwrap_or(0);
    let why = match e.error_len() {
        None => "unexpected end of data",
        Some(_) if (0x80..0xC2).contains(&byte) || byte >= 0xF5 => "invalid start byte",
        Some(_) => "invalid continuation byte",
    };
    format!("'utf-8' codec can't decode byte 0x{byte:02x} in position {pos}: {why}")
}

/// Python's `\s` (`str.isspace`): Unicode whitespace and the separators `\x1c`–`\x1f`.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Case folding as Python's `re.IGNORECASE` applies it against ASCII pattern letters (the
/// long s, the Kelvin sign and the dotted / dotless i match ASCII letters).
pub(crate) fn ignorecase_fold(c: char) -> char {
    match c {
        'A'..='Z' => c.to_ascii_lowercase(),
        '\u{17F}' => 's',
        '\u{212A}' => 'k',
        '\u{130}' | '\u{131}' => 'i',
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_layout() {
        assert_eq!(
            python_json(&json!({"a": [1, 2], "b": "é"})),
            r#"{"a": [1, 2], "b": "é"}"#
        );
    }

    #[test]
    fn py_str() {
        assert_eq!(python_str(&serde_json::json!(5)), "5");
        assert_eq!(python_str(&serde_json::json!(1.5)), "1.5");
        assert_eq!(python_str(&serde_json::json!(true)), "True");
        assert_eq!(python_str(&serde_json::json!(["a", 1])), "['a', 1]");
        assert_eq!(python_str(&serde_json::json!(null)), "None");
    }
}
