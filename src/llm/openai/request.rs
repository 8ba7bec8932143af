//! The request body: rendered in the reference's key order, with the static parts (system
//! message, tools array) rendered once and spliced as bytes, and the one-shot repairs.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Map, Value};

use super::OpenAiBackend;
use crate::llm::fingerprint::{PerList, SharedMemo};
use crate::llm::message::WireJson;
use crate::llm::request_body::RequestBody;
use crate::llm::wire_cache::{SystemWire, UserWire};
use crate::llm::Message;
use crate::llm::{ChatRequest, LlmError};

/// A `tools` array rendered as JSON, for the schemas it was rendered from.
pub(super) type RenderedTools = PerList<Bytes>;

/// The `tools` array of `schemas` as JSON, rendered once per process for each distinct
/// schema list (agents of one tool selection share the list).
pub(super) fn rendered_tools(schemas: &Arc<Vec<Value>>) -> Bytes {
    static SHARED: Mutex<Vec<RenderedTools>> = Mutex::new(Vec::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = shared.iter().find(|r| r.of(schemas)) {
        return r.value.clone();
    }
    shared.retain(RenderedTools::is_live);
    let json = json_bytes(&**schemas);
    shared.push(RenderedTools::new(schemas, json.clone()));
    json
}

/// A system prompt and its message's JSON.
#[derive(Clone)]
pub(super) struct RenderedSystem {
    prompt: Arc<str>,
    json: Bytes,
}

pub(super) fn json_bytes<T: serde::Serialize + ?Sized>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("serializing JSON values cannot fail"))
}
impl OpenAiBackend {
    /// `{"role":"system","content":…}`, rendered once per distinct prompt.
    pub(super) fn system_message(&self, system: &str) -> Bytes {
        static RENDERED: SharedMemo<RenderedSystem> = SharedMemo::new();
        let mut mine = self.system.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = mine.as_ref().filter(|r| *r.prompt == *system) {
            return r.json.clone();
        }
        let r = RENDERED.get_or(system.as_bytes(), || RenderedSystem {
            prompt: Arc::from(system),
            json: json_bytes(&SystemWire(system)),
        });
        let json = r.json.clone();
        *mine = Some(r);
        json
    }

    /// The rendered `tools` array; this agent's last one is kept here so a request takes no
    /// process-wide lock.
    pub(super) fn tools_json(&self, schemas: &Arc<Vec<Value>>) -> Bytes {
        let mut mine = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = mine.as_ref().filter(|r| r.of(schemas)) {
            return r.value.clone();
        }
        let json = rendered_tools(schemas);
        *mine = Some(RenderedTools::new(schemas, json.clone()));
        json
    }
    /// See [`crate::llm::LlmClient::offer_rendered`].
    pub(crate) fn offer_rendered(&self, at: usize, messages: &[Message], json: Vec<WireJson>) {
        let mut rendered = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        rendered.offer(at, messages, json);
    }

    /// The request body, in the reference's key order; `extra_body` keys win. Written as
    /// serde_json's compact map would write it, with our keys as literals (they need no
    /// escape; serde's map path scanned each for one) and the rendered parts spliced as bytes.
    pub(crate) fn render_body(&self, req: &ChatRequest<'_>) -> RequestBody {
        let mut body = JsonObject::with_capacity(self.body_size_hint.load(Ordering::Relaxed));
        let extra = &self.extra_body;
        let own = |k: &str| !extra.contains_key(k);
        if own("model") {
            write_json(body.key("model"), &self.model);
        }
        if own("messages") {
            let mut rendered = self.messages.lock().unwrap_or_else(|e| e.into_inner());
            rendered.sync(
                (req.history, req.history_version),
                (req.transcript, req.transcript_version),
            );
            let system = self.system_message(req.system);
            body.key("messages").push(b'[');
            body.share(system);
            let (sealed, open) = rendered.conversation();
            for chunk in sealed {
                body.share(chunk.clone());
            }
            let out = body.out();
            out.extend_from_slice(open);
            if let Some(tail) = req.tail {
                out.push(b',');
                write_json(out, &UserWire(tail));
            }
            out.push(b']');
        }
        if own("stream") {
            body.key("stream").extend_from_slice(b"true");
        }
        if own("stream_options") {
            body.key("stream_options")
                .extend_from_slice(br#"{"include_usage":true}"#);
        }
        let temperature = self
            .temperature
            .filter(|_| !self.drop_temperature.load(Ordering::Relaxed));
        if let Some(t) = temperature.filter(|_| own("temperature")) {
            write_json(body.key("temperature"), &t);
        }
        if !req.tools.is_empty() {
            if own("tools") {
                body.key("tools");
                body.share(self.tools_json(req.tools));
            }
            if own("tool_choice") {
                body.key("tool_choice").extend_from_slice(br#""auto""#);
            }
        }
        let max_key = if self.use_max_completion_tokens.load(Ordering::Relaxed) {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        if own(max_key) {
            write_json(body.key(max_key), &self.max_tokens);
        }
        for (k, v) in extra {
            let out = body.escaped_key(k);
            write_json(out, v);
        }
        let (mut out, shared) = body.end();
        // Room for the next request's additions (one more exchange of history).
        self.body_size_hint
            .store(out.len() + out.len() / 4 + 1024, Ordering::Relaxed);
        // The body lives as long as the call; its unused room (a quarter of it and more) was
        // most of the scale run's memory per agent in flight. Shrinking is done in place.
        out.shrink_to_fit();
        RequestBody::spliced(out, shared)
    }

    /// The one-shot request repairs of spec §4.6: a server that rejects `max_tokens` in favour
    /// of `max_completion_tokens`, or rejects `temperature`, gets the body fixed once (and every
    /// later request of this client). Returns the repaired body, or `None` when no repair fits.
    pub(crate) fn repair(&self, e: &LlmError, body: &RequestBody) -> Option<RequestBody> {
        if !matches!(e.status, Some(400) | Some(422)) {
            return None;
        }
        let msg = e.message.to_ascii_lowercase();
        let mut v: Map<String, Value> = serde_json::from_slice(&body.to_bytes()).ok()?;
        if msg.contains("max_tokens")
            && msg.contains("max_completion_tokens")
            && !self.use_max_completion_tokens.swap(true, Ordering::Relaxed)
        {
            v = v
                .into_iter()
                .map(|(k, val)| {
                    if k == "max_tokens" {
                        ("max_completion_tokens".to_owned(), val)
                    } else {
                        (k, val)
                    }
                })
                .collect();
        } else if msg.contains("temperature")
            && [
                "unsupported",
                "not supported",
                "does not support",
                "deprecated",
            ]
            .iter()
            .any(|w| msg.contains(w))
            && v.contains_key("temperature")
            && !self.drop_temperature.swap(true, Ordering::Relaxed)
        {
            v.remove("temperature");
        } else {
            return None;
        }
        serde_json::to_vec(&v).ok().map(|b| Bytes::from(b).into())
    }

    /// The streaming-unsupported fallback of spec §4.6: a server whose refusal says it cannot
    /// stream gets this one request again without `stream` (its JSON answer is decoded as one
    /// chunk). Not latched: the body of the next call streams again.
    pub(crate) fn without_stream(&self, e: &LlmError, body: &RequestBody) -> Option<RequestBody> {
        const PHRASES: [&str; 5] = [
            "does not support streaming",
            "streaming is not supported",
            "streaming not supported",
            "stream=true is not supported",
            "stream is not supported",
        ];
        if e.retryable || e.status.is_none() || e.in_stream {
            return None;
        }
        let msg = e.message.to_ascii_lowercase();
        if !PHRASES.iter().any(|p| msg.contains(p)) {
            return None;
        }
        let mut v: Map<String, Value> = serde_json::from_slice(&body.to_bytes()).ok()?;
        v.remove("stream")?;
        v.remove("stream_options");
        serde_json::to_vec(&v).ok().map(|b| Bytes::from(b).into())
    }
}

/// A JSON object written as serde_json's compact formatter writes a map: `{`, entries
/// separated by `,`, `}`.
pub(super) struct JsonObject {
    out: Vec<u8>,
    entries: usize,
    /// Rendered parts to insert at offsets of `out` instead of copying them in.
    shared: Vec<(usize, Bytes)>,
}

impl JsonObject {
    pub(super) fn with_capacity(n: usize) -> Self {
        let mut out = Vec::with_capacity(n);
        out.push(b'{');
        JsonObject {
            out,
            entries: 0,
            shared: Vec::new(),
        }
    }

    pub(super) fn separate(&mut self) {
        if self.entries > 0 {
            self.out.push(b',');
        }
        self.entries += 1;
    }

    /// `"key":` for one of our keys (plain ASCII, nothing to escape); the value is written to
    /// the returned buffer.
    pub(super) fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        debug_assert!(!key.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
        self.separate();
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        &mut self.out
    }

    /// `"key":` for a key from the config, escaped.
    pub(super) fn escaped_key(&mut self, key: &str) -> &mut Vec<u8> {
        self.separate();
        write_json(&mut self.out, key);
        self.out.push(b':');
        &mut self.out
    }

    /// Where the next bytes of a value go.
    pub(super) fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// `json` comes next, as its own piece of the body.
    pub(super) fn share(&mut self, json: Bytes) {
        self.shared.push((self.out.len(), json));
    }

    pub(super) fn end(mut self) -> (Vec<u8>, Vec<(usize, Bytes)>) {
        self.out.push(b'}');
        (self.out, self.shared)
    }
}

/// `v` as compact JSON, appended to `out`.
pub(super) fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    serde_json::to_writer(out, v).expect("serializing JSON values into a Vec cannot fail");
}
