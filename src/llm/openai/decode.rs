//! Chunk decoding: a text chunk through the fast scanner of `text_chunk.rs`, a tool-call
//! chunk through `tool_chunk.rs`, every other chunk through serde visitors writing straight into
//! the [`Assembler`]; and the hooks the fuzz targets and `tests/delta.rs` reach it by.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::llm::assembly::{Assembler, Usage};
use crate::llm::text_chunk::{text_chunk, LastTextChunk};
use crate::llm::tool_chunk::tool_chunk;
use crate::llm::LlmError;

/// An in-stream error object, mapped to an HTTP status where the policy says so.
pub(super) fn in_stream_error(e: &Value) -> LlmError {
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error in stream")
        .to_owned();
    let code = e.get("code");
    let error_type = e.get("type").and_then(Value::as_str);
    let status = match code {
        Some(Value::Number(n)) => n.as_u64().map(|n| n as u16),
        Some(Value::String(s)) if s == "server_error" => Some(500),
        Some(Value::String(s)) if s == "rate_limit_exceeded" => Some(429),
        Some(Value::String(s)) => s.parse::<u16>().ok(),
        _ if error_type == Some("server_error") => Some(500),
        _ => None,
    };
    match status {
        Some(s) => LlmError::status(s, message, code.and_then(Value::as_str), error_type),
        None => LlmError::api(message).with_code(code.and_then(Value::as_str)),
    }
    .in_stream()
}
pub(super) enum Decoded {
    Chunk,
    /// A chunk the fast path read.
    Fast,
    Done,
}

pub(super) fn decode_event(data: &[u8], asm: &mut Assembler) -> Result<Decoded, LlmError> {
    decode_event_by(data, asm, DecodePath::Auto, &mut LastTextChunk::default())
}

pub(super) fn decode_event_by(
    data: &[u8],
    asm: &mut Assembler,
    path: DecodePath,
    last: &mut LastTextChunk,
) -> Result<Decoded, LlmError> {
    let trimmed = data.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(Decoded::Done);
    }
    if path == DecodePath::Auto {
        if let Some(chunk) = last.read(trimmed) {
            chunk.apply(asm);
            return Ok(Decoded::Fast);
        }
    }
    // The event is checked for UTF-8 once (the standard library's ASCII fast path) rather than
    // each of its ~15 strings by the parser: that was a fifth of a delta's instructions. Not
    // UTF-8: parsed from bytes as before, so it fails where it always did.
    let text = std::str::from_utf8(trimmed).ok();
    if let (DecodePath::Auto | DecodePath::NoMemo, Some(text)) = (path, text) {
        let memo = path == DecodePath::Auto;
        let resume = if memo { last.head.resume(text) } else { None };
        // Before the text scanner, which would read a tool-call chunk up to its calls in vain.
        if let Some((chunk, top)) = tool_chunk(text, resume) {
            chunk.apply(asm);
            if memo {
                last.head.after_read(asm, text, resume, &top);
            }
            return Ok(Decoded::Fast);
        }
        if let Some((chunk, top)) = text_chunk(text, resume) {
            chunk.apply(asm);
            if memo {
                last.head.after_read(asm, text, resume, &top);
            }
            last.remember(text, &chunk, resume);
            return Ok(Decoded::Fast);
        }
    }
    let mut error = None;
    let seed = ChunkSeed {
        asm,
        error: &mut error,
    };
    let parsed = match text {
        Some(text) => seed.deserialize(&mut serde_json::Deserializer::from_str(text)),
        None => seed.deserialize(&mut serde_json::Deserializer::from_slice(trimmed)),
    };
    // A line that is not a chunk is skipped: one garbled keep-alive must not end a good stream.
    if parsed.is_err() {
        return Ok(Decoded::Chunk);
    }
    match error {
        Some(e) => Err(e),
        None => Ok(Decoded::Chunk),
    }
}

pub(super) struct ChunkSeed<'a> {
    pub(super) asm: &'a mut Assembler,
    pub(super) error: &'a mut Option<LlmError>,
}

impl<'de> DeserializeSeed<'de> for ChunkSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChunkSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chat.completion.chunk object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut object_error = false;
        let mut message: Option<String> = None;
        let mut code: Option<Value> = None;
        let mut error_type: Option<Value> = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.as_ref() {
                "choices" => map.next_value_seed(ChoicesSeed(self.asm))?,
                "usage" => {
                    if let Some(u) = map.next_value::<Option<Value>>()? {
                        if u.is_object() {
                            self.asm.usage(Usage::from_openai(&u));
                        }
                    }
                }
                "model" => {
                    if let Some(m) = map.next_value::<Option<Str<'de>>>()? {
                        self.asm.model(&m);
                    }
                }
                "error" => {
                    let e = map.next_value::<Value>()?;
                    if !e.is_null() {
                        let obj = if e.is_object() {
                            e
                        } else {
                            serde_json::json!({"message": e.as_str().unwrap_or("error in stream")})
                        };
                        *self.error = Some(in_stream_error(&obj));
                    }
                }
                "object" => {
                    object_error =
                        map.next_value::<Option<Str<'de>>>()?.as_deref() == Some("error");
                }
                "message" => {
                    message = map.next_value::<Option<String>>().ok().flatten();
                }
                "code" => code = Some(map.next_value::<Value>()?),
                "type" => error_type = Some(map.next_value::<Value>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if object_error && self.error.is_none() {
            let msg = message.unwrap_or_else(|| "error in stream".into());
            *self.error = Some(in_stream_error(
                &serde_json::json!({"message": msg, "code": code, "type": error_type}),
            ));
        }
        Ok(())
    }
}

/// A key or short string value, borrowed from the chunk when it has no escapes. (serde's own
/// `Cow<str>` always deserializes owned: that was one allocation per key, ~10 per delta.)
pub(super) struct Str<'de>(Cow<'de, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Str<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

pub(super) struct ChoicesSeed<'a>(&'a mut Assembler);

impl<'de> DeserializeSeed<'de> for ChoicesSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ChoicesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of choices or null")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(MapSeed(&mut *self.0, Level::Choice))?
            .is_some()
        {}
        Ok(())
    }
}

#[derive(Clone, Copy)]
pub(super) enum Level {
    Choice,
    Delta,
}

pub(super) struct MapSeed<'a>(&'a mut Assembler, Level);

impl<'de> DeserializeSeed<'de> for MapSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MapSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let asm = self.0;
        let mut saw_reasoning_content = false;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match (self.1, key.as_ref()) {
                (Level::Choice, "delta") | (Level::Choice, "message") => {
                    map.next_value_seed(MapSeed(&mut *asm, Level::Delta))?
                }
                (Level::Choice, "finish_reason") => {
                    if let Some(r) = map.next_value::<Option<Str<'de>>>()? {
                        asm.finish_reason(&r);
                    }
                }
                (Level::Delta, "content") => map.next_value_seed(TextSeed(&mut *asm, false))?,
                (Level::Delta, "reasoning_content") => {
                    saw_reasoning_content = true;
                    map.next_value_seed(TextSeed(&mut *asm, true))?
                }
                (Level::Delta, "reasoning") if !saw_reasoning_content => {
                    map.next_value_seed(TextSeed(&mut *asm, true))?
                }
                (Level::Delta, "tool_calls") => {
                    for call in map
                        .next_value::<Option<Vec<ToolCallDelta<'de>>>>()?
                        .unwrap_or_default()
                    {
                        let f = call.function.as_ref();
                        let args = f.and_then(|f| f.arguments.as_ref()).map(|a| match a {
                            Value::String(s) => Cow::Borrowed(s.as_str()),
                            Value::Null => Cow::Borrowed(""),
                            other => Cow::Owned(other.to_string()),
                        });
                        let id = call.id.as_deref().or(f.and_then(|f| f.id.as_deref()));
                        asm.tool_delta(
                            call.index,
                            id,
                            f.and_then(|f| f.name.as_deref()),
                            args.as_deref(),
                        );
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

#[derive(Deserialize)]
pub(super) struct ToolCallDelta<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
pub(super) struct FunctionDelta<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    arguments: Option<Value>,
    // Old llama.cpp put the call id here.
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
}

/// Writes a string value straight into the assembler (text or reasoning); null is nothing.
pub(super) struct TextSeed<'a>(&'a mut Assembler, bool);

impl<'de> DeserializeSeed<'de> for TextSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or null")
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        if self.1 {
            self.0.reasoning(s);
        } else {
            self.0.text(s);
        }
        Ok(())
    }
    /// serde_json lends a string read without escapes (and refuses raw control characters):
    /// its JSON is its bytes between quotes, as for the fast path's borrowed text.
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<(), E> {
        if self.1 {
            self.0.reasoning(s);
        } else {
            self.0.verbatim_text(s);
        }
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The chunk decoder applied to a sequence of SSE data payloads, as one attempt reads them:
/// stops at `[DONE]` or at the first in-stream error. Only for the fuzz targets in `fuzz/`,
/// which cannot reach the private decoder otherwise.
#[doc(hidden)]
pub fn decode_events_for_fuzzing<'a>(
    events: impl IntoIterator<Item = &'a [u8]>,
) -> (crate::llm::LlmResponse, Option<LlmError>) {
    let mut asm = Assembler::default();
    let mut error = None;
    let mut last = LastTextChunk::default();
    for data in events {
        match decode_event_by(data, &mut asm, DecodePath::Auto, &mut last) {
            Ok(Decoded::Chunk | Decoded::Fast) => {}
            Ok(Decoded::Done) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    (asm.finish(), error)
}

/// Which decoder [`decode_event_for_fuzzing`] uses.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodePath {
    /// As the library decodes: the fast path for plain text chunks, the general decoder else.
    Auto,
    /// As `Auto`, without the remembered last text chunk (`LastTextChunk`).
    NoMemo,
    /// The general decoder for every event.
    GeneralOnly,
}

/// One event decoded into a fresh assembler, for `tests/delta.rs` and the fuzz target, which
/// check that both paths agree.
#[doc(hidden)]
#[derive(Debug, PartialEq, Eq)]
pub struct DecodedEvent {
    /// The fast path read it.
    pub fast: bool,
    /// `[DONE]`.
    pub done: bool,
    /// The assembler's whole state afterwards (`Debug`).
    pub assembler: String,
    /// The in-stream error (`Debug`).
    pub error: Option<String>,
}

#[doc(hidden)]
pub fn decode_event_for_fuzzing(data: &[u8], path: DecodePath) -> DecodedEvent {
    decode_event_after_for_fuzzing(&[], data, path)
}

/// As [`decode_event_for_fuzzing`], after `previous` was decoded the same way (what the decoder
/// remembers of it is used for `data`; its effect on the assembler is not kept).
#[doc(hidden)]
pub fn decode_event_after_for_fuzzing(
    previous: &[u8],
    data: &[u8],
    path: DecodePath,
) -> DecodedEvent {
    let mut last = LastTextChunk::default();
    let _ = decode_event_by(previous, &mut Assembler::default(), path, &mut last);
    let mut asm = Assembler::default();
    let decoded = decode_event_by(data, &mut asm, path, &mut last);
    DecodedEvent {
        fast: matches!(decoded, Ok(Decoded::Fast)),
        done: matches!(decoded, Ok(Decoded::Done)),
        assembler: format!("{asm:?}"),
        error: decoded.err().map(|e| format!("{e:?}")),
    }
}
