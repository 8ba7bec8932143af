//! Whether a value serializes to given JSON bytes, found without serializing it again. The
//! request body's system message is rendered once per distinct prompt; an agent checks its
//! prompt against the rendering it used last instead of hashing the whole prompt into the
//! process-wide memo on every request. Checking a string against its JSON form is one compare
//! when it needs no escape, else a `memchr` for each escape and a `memcmp` in between.
//! (The wire cache's messages are compared with `==` instead: most of them need escapes, and
//! checking each against its JSON on every request cost more than the escaping it saved.)
//!
//! The check walks the value through serde, as serialization does, and compares each token
//! with what `serde_json`'s compact formatter writes; a string is equal when the text equals
//! the JSON string's unescaped content, which (escaping being deterministic) is when its
//! escaping equals those bytes. The value shapes our messages do not use (numbers, tuples,
//! structs, enums) answer "no", so the worst a new shape can cost is a rendering.

use std::fmt;

use serde::ser::{self, Impossible, Serialize, SerializeMap, SerializeSeq};

/// True when `serde_json::to_vec(v)` would be exactly `json`; false when it would not, or
/// when `v` holds a shape this check does not know. `json` must be what serde_json wrote for
/// some value (the cache's own renderings): a raw control character in a string is taken to
/// be impossible.
pub(crate) fn serializes_to<T: Serialize + ?Sized>(v: &T, json: &[u8]) -> bool {
    let mut m = Matcher { rest: json };
    v.serialize(&mut m).is_ok() && m.rest.is_empty()
}

struct Matcher<'j> {
    /// The JSON not matched yet.
    rest: &'j [u8],
}

#[derive(Debug)]
struct Mismatch;

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the value does not serialize to these bytes")
    }
}

impl std::error::Error for Mismatch {}

impl ser::Error for Mismatch {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Mismatch
    }
}

type Step = Result<(), Mismatch>;

impl Matcher<'_> {
    fn token(&mut self, t: &[u8]) -> Step {
        self.rest = self.rest.strip_prefix(t).ok_or(Mismatch)?;
        Ok(())
    }

    fn string(&mut self, text: &str) -> Step {
        self.token(b"\"")?;
        let mut text = text.as_bytes();
        // Most strings (all keys, ids, names) need no escape: then the JSON holds the text
        // itself and a quote. Equal bytes cannot hide a control character (the JSON has none
        // raw), and a quote or backslash in the text is looked for only then.
        if let Some((plain, after)) = self.rest.split_at_checked(text.len()) {
            if after.first() == Some(&b'"')
                && plain == text
                && memchr::memchr2(b'"', b'\\', text).is_none()
            {
                self.rest = &after[1..];
                return Ok(());
            }
        }
        loop {
            // The JSON is serde_json's: no raw control character, and a quote or a backslash
            // only where a string ends or an escape starts.
            let at = memchr::memchr2(b'"', b'\\', self.rest).ok_or(Mismatch)?;
            let (plain, special) = self.rest.split_at(at);
            text = text.strip_prefix(plain).ok_or(Mismatch)?;
            if special[0] == b'"' {
                self.rest = &special[1..];
                return if text.is_empty() {
                    Ok(())
                } else {
                    Err(Mismatch)
                };
            }
            let (byte, len) = unescape(&special[1..])?;
            text = match text.split_first() {
                Some((&b, tail)) if b == byte => tail,
                _ => return Err(Mismatch),
            };
            self.rest = &special[1 + len..];
        }
    }
}

/// The byte an escape after its backslash stands for, and the escape's length. serde_json
/// escapes only single ASCII bytes; anything else is a mismatch.
fn unescape(e: &[u8]) -> Result<(u8, usize), Mismatch> {
    let byte = match *e.first().ok_or(Mismatch)? {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let hex = e.get(1..5).ok_or(Mismatch)?;
            let hex = std::str::from_utf8(hex).map_err(|_| Mismatch)?;
            let code = u8::from_str_radix(hex, 16).map_err(|_| Mismatch)?;
            return if code.is_ascii() {
                Ok((code, 5))
            } else {
                Err(Mismatch)
            };
        }
        _ => return Err(Mismatch),
    };
    Ok((byte, 1))
}

/// A map or a sequence being matched.
struct Compound<'a, 'j> {
    m: &'a mut Matcher<'j>,
    first: bool,
}

impl Compound<'_, '_> {
    fn separator(&mut self) -> Step {
        if std::mem::take(&mut self.first) {
            Ok(())
        } else {
            self.m.token(b",")
        }
    }
}

impl SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Mismatch;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Step {
        self.separator()?;
        v.serialize(&mut *self.m)
    }

    fn end(self) -> Step {
        self.m.token(b"]")
    }
}

impl SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Mismatch;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Step {
        self.separator()?;
        k.serialize(&mut *self.m)
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Step {
        self.m.token(b":")?;
        v.serialize(&mut *self.m)
    }

    fn end(self) -> Step {
        self.m.token(b"}")
    }
}

impl<'a, 'j> ser::Serializer for &'a mut Matcher<'j> {
    type Ok = ();
    type Error = Mismatch;
    type SerializeSeq = Compound<'a, 'j>;
    type SerializeTuple = Impossible<(), Mismatch>;
    type SerializeTupleStruct = Impossible<(), Mismatch>;
    type SerializeTupleVariant = Impossible<(), Mismatch>;
    type SerializeMap = Compound<'a, 'j>;
    type SerializeStruct = Impossible<(), Mismatch>;
    type SerializeStructVariant = Impossible<(), Mismatch>;

    fn serialize_str(self, v: &str) -> Step {
        self.string(v)
    }

    fn serialize_bool(self, v: bool) -> Step {
        self.token(if v { b"true" } else { b"false" })
    }

    fn serialize_unit(self) -> Step {
        self.token(b"null")
    }

    fn serialize_none(self) -> Step {
        self.token(b"null")
    }

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Step {
        v.serialize(self)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Mismatch> {
        self.token(b"[")?;
        Ok(Compound {
            m: self,
            first: true,
        })
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Mismatch> {
        self.token(b"{")?;
        Ok(Compound {
            m: self,
            first: true,
        })
    }

    // Shapes no message has: "no", so the message is rendered.
    fn serialize_i8(self, _: i8) -> Step {
        Err(Mismatch)
    }
    fn serialize_i16(self, _: i16) -> Step {
        Err(Mismatch)
    }
    fn serialize_i32(self, _: i32) -> Step {
        Err(Mismatch)
    }
    fn serialize_i64(self, _: i64) -> Step {
        Err(Mismatch)
    }
    fn serialize_u8(self, _: u8) -> Step {
        Err(Mismatch)
    }
    fn serialize_u16(self, _: u16) -> Step {
        Err(Mismatch)
    }
    fn serialize_u32(self, _: u32) -> Step {
        Err(Mismatch)
    }
    fn serialize_u64(self, _: u64) -> Step {
        Err(Mismatch)
    }
    fn serialize_f32(self, _: f32) -> Step {
        Err(Mismatch)
    }
    fn serialize_f64(self, _: f64) -> Step {
        Err(Mismatch)
    }
    fn serialize_char(self, _: char) -> Step {
        Err(Mismatch)
    }
    fn serialize_bytes(self, _: &[u8]) -> Step {
        Err(Mismatch)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Step {
        Err(Mismatch)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Step {
        Err(Mismatch)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, _: &T) -> Step {
        Err(Mismatch)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Step {
        Err(Mismatch)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Mismatch> {
        Err(Mismatch)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Mismatch> {
        Err(Mismatch)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Mismatch> {
        Err(Mismatch)
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Mismatch> {
        Err(Mismatch)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Mismatch> {
        Err(Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Texts whose escapings are close to each other: escapes at the ends, control
    /// characters, `\u` escapes, non-ASCII, prefixes and one-byte changes.
    const TEXTS: [&str; 16] = [
        "",
        "a",
        "ab",
        "a\"",
        "\"",
        "\\",
        "\\\\",
        "\n",
        "\\n",
        "line\nline\n",
        "tab\there\r\n",
        "\u{1}\u{1f}\u{7f}",
        "\u{8}\u{c}",
        "é ✓ 𝄞 \u{2028}",
        "\"quoted\" and \\back\\",
        "/ slash",
    ];

    #[test]
    fn a_string_matches_its_own_json_and_no_other() {
        for a in TEXTS {
            for b in TEXTS {
                let json = serde_json::to_vec(b).unwrap();
                assert_eq!(serializes_to(a, &json), a == b, "{a:?} against {b:?}");
            }
        }
    }

    #[test]
    fn structure_is_matched_token_by_token() {
        let values = [
            json!({"role": "user", "content": "x"}),
            json!({"role": "user", "content": "x", "name": "n"}),
            json!({"content": "x", "role": "user"}),
            json!({"role": "user", "content": null}),
            json!({"role": "user", "content": true}),
            json!({"role": "user", "content": ["x"]}),
            json!({"role": "user", "content": ["x", "y"]}),
            json!({"role": "user", "content": []}),
            json!({"role": "user", "content": {}}),
            json!({"role": "user", "content": {"a": "x"}}),
            json!({"role": "user"}),
            json!([]),
        ];
        for a in &values {
            for b in &values {
                let json = serde_json::to_vec(b).unwrap();
                assert_eq!(
                    serializes_to(a, &json),
                    serde_json::to_vec(a).unwrap() == json,
                    "{a} against {b}"
                );
            }
        }
    }

    #[test]
    fn trailing_or_truncated_bytes_do_not_match() {
        let json = br#"{"a":"b"}"#;
        assert!(serializes_to(&json!({"a": "b"}), json));
        assert!(!serializes_to(&json!({"a": "b"}), &json[..json.len() - 1]));
        assert!(!serializes_to(&json!({"a": "b"}), br#"{"a":"b"} "#));
        assert!(!serializes_to(&json!({"a": "b"}), br#"{"a":"b\"#));
    }

    #[test]
    fn shapes_it_does_not_know_are_a_mismatch() {
        let json = serde_json::to_vec(&json!({"n": 1})).unwrap();
        assert!(!serializes_to(&json!({"n": 1}), &json));
    }
}
