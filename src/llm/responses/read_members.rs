//! The general decoder's view of a Responses event: the event as a `serde_json::Value` that
//! holds only the members `decode.rs` reads. `response.created`, `.in_progress`, `.completed`
//! and `.incomplete` repeat the whole response object (its `tools`, `instructions`, `text` and
//! `reasoning` settings, every output item with its text), and `.output_item.*` a whole item;
//! built as maps of owned strings (SipHash-keyed, with `preserve_order`) four such events were
//! ~94k of a one-request turn's ~228k instructions on this wire. The members nobody reads are
//! still checked as JSON, but not built: the event must be one valid JSON object as before.
//!
//! Kept, and built as they are: the event's `type`, `output_index`, `item_id`, `delta`,
//! `arguments`, and an `error` event's `error`, `message` and `code`; of `response`, its
//! `model`, `usage`, `incomplete_details`, `error` and `output`; of an item (`item`, and each
//! of `output`'s), the whole item when it is a `function_call` or a `reasoning` item (which
//! the decoder keeps whole for the history), else null (the decoder only looks at the type of
//! other items, to pass them by). A key given twice keeps its last value, as a map does; a
//! `response` or `output` of another type than the decoder reads is null, which it reads the
//! same way (as nothing).
//!
//! One difference from building the whole event: serde_json refuses a number beyond `f64`'s
//! range and a lone surrogate escape only when it builds the value, so in a member nobody reads
//! they no longer make the event unreadable (the members read are built, and refused, as before).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The event's members that the decoder reads (see the module's text); `None` when the data
/// is not one JSON object, or a member that is built does not build.
pub(super) fn read_members(data: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(data).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let event = de.deserialize_map(Members(Place::Event)).ok()?;
    de.end().ok()?;
    event
}

/// Where an object lies, which decides the members kept.
#[derive(Clone, Copy)]
enum Place {
    Event,
    Response,
}

/// What is done with one member's value.
#[derive(Clone, Copy)]
enum Keep {
    Whole,
    Item,
    Output,
    Response,
    Skip,
}

impl Place {
    fn keep(self, key: &str) -> Keep {
        match (self, key) {
            (
                Place::Event,
                "type" | "output_index" | "item_id" | "delta" | "arguments" | "error" | "message"
                | "code",
            )
            | (Place::Response, "model" | "usage" | "incomplete_details" | "error") => Keep::Whole,
            (Place::Event, "item") => Keep::Item,
            (Place::Event, "response") => Keep::Response,
            (Place::Response, "output") => Keep::Output,
            _ => Keep::Skip,
        }
    }
}

/// An object's kept members. The visitor's value is `None` when a kept member did not build
/// (the event is then unreadable, as it was when the whole event was built).
struct Members(Place);

impl<'de> Visitor<'de> for Members {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        let mut whole = true;
        while let Some((name, keep)) = map.next_key_seed(KeyOf(self.0))? {
            let value = match keep {
                Keep::Whole => Some(map.next_value::<Value>()?),
                Keep::Skip => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                Keep::Item => item(map.next_value::<&RawValue>()?),
                Keep::Output => map.next_value_seed(Nested(Keep::Output))?,
                Keep::Response => map.next_value_seed(Nested(Keep::Response))?,
            };
            match value {
                Some(v) => {
                    kept.insert(name, v);
                }
                None => whole = false,
            }
        }
        Ok(whole.then_some(Value::Object(kept)))
    }
}

/// A member's key, with what is done with its value (the key of a member not kept is not
/// copied: it is left empty).
struct KeyOf(Place);

impl<'de> DeserializeSeed<'de> for KeyOf {
    type Value = (String, Keep);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyOf {
    type Value = (String, Keep);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(match self.0.keep(key) {
            Keep::Skip => (String::new(), Keep::Skip),
            keep => (key.to_owned(), keep),
        })
    }
}

/// A `response` (its kept members when it is an object) or an `output` (its items as [`item`]
/// reads them when it is a list), read in the one pass over the event; of another type, null.
struct Nested(Keep);

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Nested {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        match self.0 {
            Keep::Response => Members(Place::Response).visit_map(map),
            _ => IgnoredAny.visit_map(map).map(|_| Some(Value::Null)),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if !matches!(self.0, Keep::Output) {
            return IgnoredAny.visit_seq(seq).map(|_| Some(Value::Null));
        }
        let mut items = Vec::new();
        let mut whole = true;
        while let Some(raw) = seq.next_element::<&RawValue>()? {
            match item(raw) {
                Some(v) => items.push(v),
                None => whole = false,
            }
        }
        Ok(whole.then_some(Value::Array(items)))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Some(Value::Null))
    }
}

/// An item: whole when it is a function call or a reasoning item, else null.
fn item(raw: &RawValue) -> Option<Value> {
    if !raw.get().starts_with('{') {
        return Some(Value::Null);
    }
    // Its `type` is read, so built (and refused) as before.
    let ItemType(kind) = serde_json::from_str(raw.get()).ok()?;
    match kind.as_deref() {
        Some("function_call" | "reasoning") => serde_json::from_str(raw.get()).ok(),
        _ => Some(Value::Null),
    }
}

/// An object's `type` when it is a string (the last `type`, as a map keeps it).
struct ItemType(Option<String>);

impl<'de> serde::Deserialize<'de> for ItemType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ItemTypeVisitor)
    }
}

struct ItemTypeVisitor;

impl<'de> Visitor<'de> for ItemTypeVisitor {
    type Value = ItemType;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an item")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ItemType, A::Error> {
        let mut kind = None;
        while let Some(is_type) = map.next_key_seed(IsType)? {
            if is_type {
                kind = match map.next_value::<Value>()? {
                    Value::String(s) => Some(s),
                    _ => None,
                };
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(ItemType(kind))
    }
}

/// Whether a key is `type` (its text, escapes read: not copied).
struct IsType;

impl<'de> DeserializeSeed<'de> for IsType {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for IsType {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == "type")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(v: &Value) -> Option<Value> {
        read_members(v.to_string().as_bytes())
    }

    #[test]
    fn keeps_what_the_decoder_reads() {
        let call = json!({"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f",
            "arguments": "{}", "status": "completed"});
        let reasoning = json!({"type": "reasoning", "id": "rs", "summary": [],
            "encrypted_content": "E"});
        let message = json!({"type": "message", "id": "m", "content": [{"type": "output_text",
            "text": "long text", "annotations": []}]});
        let event = json!({"type": "response.completed", "sequence_number": 9,
            "response": {"id": "r", "model": "o4", "status": "completed",
                "instructions": "sys", "tools": [{"type": "function", "name": "f",
                    "parameters": {"type": "object", "properties": {}}}],
                "output": [message, call, reasoning, 7],
                "usage": {"input_tokens": 3}, "metadata": {}}});
        assert_eq!(
            read(&event),
            Some(
                json!({"type": "response.completed", "response": {"model": "o4",
                "output": [null, call, reasoning, null], "usage": {"input_tokens": 3}}})
            )
        );
        let added = json!({"type": "response.output_item.added", "output_index": 2,
            "item": message, "sequence_number": 3});
        assert_eq!(
            read(&added),
            Some(json!({"type": "response.output_item.added", "output_index": 2, "item": null}))
        );
        let error = json!({"type": "error", "code": "server_error", "message": "boom",
            "param": null});
        assert_eq!(
            read(&error),
            Some(json!({"type": "error", "code": "server_error", "message": "boom"}))
        );
    }

    #[test]
    fn reads_keys_and_repeats_as_a_map_does() {
        // The last of a key given twice; an escaped key is its text.
        let text = r#"{"typ\u0065":"a","type":"response.created","response":{"model":"x","model":"y"},"output_index":1,"output_index":2}"#;
        assert_eq!(
            read_members(text.as_bytes()),
            Some(
                json!({"type": "response.created", "response": {"model": "y"},
                "output_index": 2})
            )
        );
        // An item's type is its last `type`, and only a string one counts.
        let item = r#"{"item":{"type":"function_call","type":"message"}}"#;
        assert_eq!(read_members(item.as_bytes()), Some(json!({"item": null})));
        let item = r#"{"item":{"type":"message","type":"function_call","id":"x"}}"#;
        assert_eq!(
            read_members(item.as_bytes()),
            Some(json!({"item": {"type": "function_call", "id": "x"}}))
        );
        // A response or an output of another type reads as nothing.
        let odd = r#"{"response":"r","item":[1],"x":{"response":{}}}"#;
        assert_eq!(
            read_members(odd.as_bytes()),
            Some(json!({"response": null, "item": null}))
        );
        let odd = r#"{"response":{"output":{"a":1}}}"#;
        assert_eq!(
            read_members(odd.as_bytes()),
            Some(json!({"response": {"output": null}}))
        );
    }

    #[test]
    fn an_event_that_is_not_one_valid_object_is_unreadable() {
        for bad in [
            &b"[1]"[..],
            b"\"x\"",
            b"{\"type\":\"a\"} {}",
            b"{\"type\":\"a\",\"tools\":[1,]}",
            b"{\"tools\":\"\x01\"}",
            b"{\"tools\":\"\xff\"}",
            b"{\"response\":{\"model\":\"x\",\"tools\":[}}",
            b"{\"item\":{\"type\":\"reasoning\",\"n\":1e400}}",
        ] {
            assert_eq!(read_members(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        // Not built, so not refused: a number beyond f64 in a member nobody reads.
        assert_eq!(
            read_members(b"{\"type\":\"a\",\"sequence_number\":1e400}"),
            Some(json!({"type": "a"}))
        );
    }
}
