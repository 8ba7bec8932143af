//! A typed wire's request body written straight as bytes (the Anthropic Messages and OpenAI
//! Responses wires): the wire's keys in its order, with `extra_body`'s value in a key's place
//! when it names one of them and its other keys after, as inserting them into a JSON map would
//! place them; the parts rendered once (the system prompt, the tools array, the conversation's
//! sealed turns) shared as the buffers they live in rather than copied.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value};

use super::fingerprint::{PerList, SharedMemo};
use super::request_body::RequestBody;
use super::sealed_conversation::ArrayOut;

/// The body of one request being written: `{`, then fields.
pub(crate) struct TypedBody<'e> {
    out: Vec<u8>,
    /// Shared parts to insert at offsets of `out`, in order.
    shared: Vec<(usize, Bytes)>,
    extra: &'e Map<String, Value>,
    /// The wire's keys whose value `extra_body` gave (written in the wire's place).
    overridden: Vec<&'static str>,
    fields: usize,
}

impl<'e> TypedBody<'e> {
    pub(crate) fn new(extra: &'e Map<String, Value>, capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.push(b'{');
        TypedBody {
            out,
            shared: Vec::new(),
            extra,
            overridden: Vec::new(),
            fields: 0,
        }
    }

    fn separate(&mut self) {
        if self.fields > 0 {
            self.out.push(b',');
        }
        self.fields += 1;
    }

    /// `"key":` and the value `write` writes, or `extra_body`'s value for `key` when it has
    /// one. `key` is one of ours: plain ASCII, nothing to escape.
    pub(crate) fn field(&mut self, key: &'static str, write: impl FnOnce(&mut Self)) {
        debug_assert!(!key.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
        self.separate();
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        match self.extra.get(key) {
            Some(v) => {
                write_json(&mut self.out, v);
                self.overridden.push(key);
            }
            None => write(self),
        }
    }

    /// A field whose value is `v` as JSON.
    pub(crate) fn value<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) {
        self.field(key, |b| write_json(&mut b.out, v));
    }

    /// A field whose value is already JSON.
    pub(crate) fn raw(&mut self, key: &'static str, json: &[u8]) {
        self.field(key, |b| b.out.extend_from_slice(json));
    }

    /// A field whose value is a shared rendered part.
    pub(crate) fn shared(&mut self, key: &'static str, json: Bytes) {
        self.field(key, |b| b.share(json));
    }

    /// A field whose value is an array `write` writes (or `extra_body`'s value).
    pub(crate) fn array(&mut self, key: &'static str, write: impl FnOnce(&mut ArrayOut<'_>)) {
        self.field(key, |b| {
            write(&mut ArrayOut::new(&mut b.out, &mut b.shared))
        });
    }

    /// `json` comes next, as its own piece of the body.
    pub(crate) fn share(&mut self, json: Bytes) {
        if !json.is_empty() {
            self.shared.push((self.out.len(), json));
        }
    }

    /// The body: `extra_body`'s remaining keys, in its order, and `}`.
    pub(crate) fn finish(mut self) -> RequestBody {
        for (k, v) in self.extra {
            if self.overridden.contains(&k.as_str()) {
                continue;
            }
            self.separate();
            write_json(&mut self.out, k);
            self.out.push(b':');
            write_json(&mut self.out, v);
        }
        self.out.push(b'}');
        RequestBody::spliced(self.out, self.shared)
    }
}

/// `v` as compact JSON, appended to `out`.
pub(crate) fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    serde_json::to_writer(out, v).expect("serializing JSON values into a Vec cannot fail");
}

/// A text and its JSON string.
#[derive(Clone)]
pub(crate) struct RenderedText {
    text: Arc<str>,
    json: Bytes,
}

/// `text` as a JSON string, escaped once per distinct text in the process and kept by the
/// agent while it stays the same (`mine`: a compare of the text, no hash).
pub(crate) fn json_text(mine: &mut Option<RenderedText>, text: &str) -> Bytes {
    static RENDERED: SharedMemo<RenderedText> = SharedMemo::new();
    if let Some(r) = mine.as_ref().filter(|r| *r.text == *text) {
        return r.json.clone();
    }
    let r = RENDERED.get_or(text.as_bytes(), || {
        let mut json = Vec::with_capacity(text.len() + 2);
        write_json(&mut json, text);
        RenderedText {
            text: Arc::from(text),
            json: Bytes::from(json),
        }
    });
    let json = r.json.clone();
    *mine = Some(r);
    json
}

/// A wire's `tools` arrays, each rendered once per tool-schema list for the process (agents of
/// one tool selection share the list).
pub(crate) struct SharedTools(Mutex<Vec<PerList<Bytes>>>);

impl SharedTools {
    pub(crate) const fn new() -> Self {
        SharedTools(Mutex::new(Vec::new()))
    }

    /// The array of `schemas`, each converted by `tool`; the agent's last one is kept in
    /// `mine`, so a request with the same list takes no process-wide lock.
    pub(crate) fn get(
        &self,
        mine: &mut Option<PerList<Bytes>>,
        schemas: &Arc<Vec<Value>>,
        tool: fn(&Value) -> Value,
    ) -> Bytes {
        if let Some(r) = mine.as_ref().filter(|r| r.of(schemas)) {
            return r.value.clone();
        }
        let json = {
            let mut shared = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match shared.iter().find(|r| r.of(schemas)) {
                Some(r) => r.value.clone(),
                None => {
                    shared.retain(PerList::is_live);
                    let array = Value::Array(schemas.iter().map(tool).collect());
                    let mut json = Vec::new();
                    write_json(&mut json, &array);
                    let json = Bytes::from(json);
                    shared.push(PerList::new(schemas, json.clone()));
                    json
                }
            }
        };
        *mine = Some(PerList::new(schemas, json.clone()));
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The bytes a JSON map gives for the wire's keys then `extra`'s inserted over them.
    fn as_a_map(own: &[(&str, Value)], extra: &Map<String, Value>) -> Vec<u8> {
        let mut m = Map::new();
        for (k, v) in own {
            m.insert((*k).to_owned(), v.clone());
        }
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
        serde_json::to_vec(&m).unwrap()
    }

    #[test]
    fn extra_body_keys_take_a_wire_keys_place_or_come_after() {
        let extra = json!({"z": 1, "stream": false, "we\"ird": [1, {"b": 2, "a": 3}]});
        let extra = extra.as_object().unwrap();
        for extra in [&Map::new(), extra] {
            let mut b = TypedBody::new(extra, 0);
            b.value("model", "m");
            b.raw("stream", b"true");
            b.shared("tools", Bytes::from_static(b"[1]"));
            let body = b.finish().to_bytes();
            let want = as_a_map(
                &[
                    ("model", json!("m")),
                    ("stream", json!(true)),
                    ("tools", json!([1])),
                ],
                extra,
            );
            assert_eq!(
                String::from_utf8_lossy(&body),
                String::from_utf8_lossy(&want)
            );
        }
    }

    #[test]
    fn a_text_and_a_tool_list_are_rendered_once() {
        let (mut mine, mut other) = (None, None);
        let a = json_text(&mut mine, "say \"hi\"\n");
        assert_eq!(&a[..], br#""say \"hi\"\n""#);
        let again = json_text(&mut other, "say \"hi\"\n");
        assert_eq!(a.as_ptr(), again.as_ptr(), "shared, not rendered again");
        assert_eq!(&json_text(&mut mine, "")[..], b"\"\"");

        static TOOLS: SharedTools = SharedTools::new();
        let list = Arc::new(vec![json!({"name": "f"})]);
        let (mut one, mut other) = (None, None);
        let name = |v: &Value| v["name"].clone();
        let a = TOOLS.get(&mut one, &list, name);
        assert_eq!(&a[..], br#"["f"]"#);
        let b = TOOLS.get(&mut other, &list, name);
        assert_eq!(a.as_ptr(), b.as_ptr(), "agents of one list share it");
        let copy = Arc::new((*list).clone());
        let c = TOOLS.get(&mut one, &copy, name);
        assert_eq!(
            (&c[..], c.as_ptr() == a.as_ptr()),
            (&br#"["f"]"#[..], false)
        );
    }
}
