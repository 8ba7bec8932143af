//! The Messages stream: `message_start`, content blocks (`text`, `thinking` with its
//! `signature`, `redacted_thinking`, `tool_use` with `input_json_delta` pieces),
//! `message_delta` (stop reason, cumulative usage), `message_stop`, `ping`, `error`. Unknown
//! events and block types are ignored, as the API reserves the right to add them.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::fast_event::{fast_event, DeltaFields, FastEvent, LastTextDelta};
use crate::llm::assembly::{Assembler, Usage, WireCarrier};
use crate::llm::openai::DecodePath;
use crate::llm::wire::{truncated, Flow};
use crate::llm::LlmError;

#[derive(Debug, Clone)]
enum Block {
    Text,
    Thinking {
        thinking: String,
        signature: String,
    },
    /// Kept exactly as it came.
    Redacted(Value),
    ToolUse {
        args_seen: bool,
    },
    Other,
}

/// One attempt's decoding state.
#[derive(Debug, Default, Clone)]
pub(crate) struct Decoder {
    /// Open blocks by their index (a handful: scanned).
    blocks: Vec<(u64, Block)>,
    /// Finished thinking blocks, in order.
    thinking: Vec<Value>,
    input: u64,
    cache_read: u64,
    cache_creation: u64,
    output: u64,
    /// What the fast path remembers of the last text delta.
    last_text: LastTextDelta,
}

/// `stop_reason` as a Chat Completions finish reason; an unknown one is passed on.
pub(crate) fn finish_reason(stop: &str) -> &str {
    match stop {
        "end_turn" | "stop_sequence" | "pause_turn" => "stop",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        other => other,
    }
}

/// An error `type` as the HTTP status it stands for.
pub(crate) fn status_of(error_type: &str) -> Option<u16> {
    Some(match error_type {
        "overloaded_error" => 529,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "timeout_error" => 504,
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        _ => return None,
    })
}

/// An `error` event's payload (`{"type":"error","error":{"type","message"}}`).
pub(crate) fn in_stream_error(v: &Value) -> LlmError {
    let e = v.get("error").unwrap_or(v);
    let error_type = e.get("type").and_then(Value::as_str);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error in stream")
        .to_owned();
    match error_type.and_then(status_of) {
        Some(s) => LlmError::status(s, message, None, error_type),
        None => LlmError::api(message),
    }
    .in_stream()
}

/// A delta member as the API means it: absent is empty.
fn s<'a>(f: &'a Option<Cow<'_, str>>) -> &'a str {
    f.as_deref().unwrap_or_default()
}

fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl Decoder {
    fn block(&mut self, index: u64) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    /// Counts as the API reports them (cumulative: the latest wins); prompt tokens are the
    /// input and both cache counts.
    fn usage(&mut self, u: &Value, asm: &mut Assembler) {
        if let Some(n) = count(u, "input_tokens") {
            self.input = n;
        }
        if let Some(n) = count(u, "cache_read_input_tokens") {
            self.cache_read = n;
        }
        if let Some(n) = count(u, "cache_creation_input_tokens") {
            self.cache_creation = n;
        }
        if let Some(n) = count(u, "output_tokens") {
            self.output = n;
        }
        asm.usage(Usage {
            prompt_tokens: self.input + self.cache_read + self.cache_creation,
            completion_tokens: self.output,
            cache_read_tokens: self.cache_read,
            cache_creation_tokens: self.cache_creation,
            reasoning_tokens: 0,
            cost_nano_usd: 0,
        });
    }

    /// A `content_block_delta`: text and thinking to the assembler, thinking and signature
    /// pieces kept for the block whole, input-JSON pieces to the call.
    fn block_delta(&mut self, index: u64, d: &DeltaFields<'_>, asm: &mut Assembler) {
        match d.kind.as_deref() {
            Some("text_delta") => asm.text(s(&d.text)),
            Some("thinking_delta") => {
                asm.reasoning(s(&d.thinking));
                if let Some(Block::Thinking { thinking, .. }) = self.block(index) {
                    thinking.push_str(s(&d.thinking));
                }
            }
            Some("signature_delta") => {
                if let Some(Block::Thinking { signature, .. }) = self.block(index) {
                    signature.push_str(s(&d.signature));
                }
            }
            Some("input_json_delta") => {
                let part = s(&d.partial_json);
                if !part.is_empty() {
                    if let Some(Block::ToolUse { args_seen }) = self.block(index) {
                        *args_seen = true;
                    }
                    asm.tool_delta(Some(index), None, None, Some(part));
                }
            }
            _ => {}
        }
    }

    /// A `content_block_stop`: a thinking block kept whole, a call without input given `{}`.
    fn block_stop(&mut self, index: u64, asm: &mut Assembler) {
        let at = self.blocks.iter().position(|(i, _)| *i == index);
        match at.map(|at| self.blocks.swap_remove(at).1) {
            Some(Block::Thinking {
                thinking,
                signature,
            }) => self.thinking.push(json!({
                "type": "thinking", "thinking": thinking, "signature": signature})),
            Some(Block::Redacted(b)) => self.thinking.push(b),
            // A tool without parameters can stream no input at all.
            Some(Block::ToolUse { args_seen: false }) => {
                asm.tool_delta(Some(index), None, None, Some("{}"))
            }
            _ => {}
        }
    }

    /// `message_stop`: the thinking blocks go with the response.
    fn message_stop(&mut self, asm: &mut Assembler) -> Flow {
        if !self.thinking.is_empty() {
            asm.carrier = Some(WireCarrier::AnthropicThinking(std::mem::take(
                &mut self.thinking,
            )));
        }
        Flow::End
    }
}

pub(crate) fn decode(
    dec: &mut Decoder,
    data: &[u8],
    asm: &mut Assembler,
) -> Result<Flow, LlmError> {
    decode_by(dec, data, asm, DecodePath::Auto)
}

/// [`decode`], by the fast path where it reads the event (`DecodePath::Auto`; `NoMemo` without
/// the remembered last text delta) or the general decoder alone (`GeneralOnly`, for the tests
/// and fuzz target that compare them).
pub(crate) fn decode_by(
    dec: &mut Decoder,
    data: &[u8],
    asm: &mut Assembler,
    path: DecodePath,
) -> Result<Flow, LlmError> {
    let data = data.trim_ascii();
    let text = std::str::from_utf8(data).ok();
    if let (DecodePath::Auto, Some(text)) = (path, text) {
        if let Some((index, t)) = dec.last_text.read(text) {
            let delta = DeltaFields {
                kind: Some(Cow::Borrowed("text_delta")),
                text: Some(t),
                ..DeltaFields::default()
            };
            dec.block_delta(index, &delta, asm);
            return Ok(Flow::More);
        }
    }
    if let (DecodePath::Auto | DecodePath::NoMemo, Some(text)) = (path, text) {
        let last = (path == DecodePath::Auto).then_some(&mut dec.last_text);
        if let Some(event) = fast_event(text, last) {
            return Ok(match event {
                FastEvent::BlockDelta { index, delta } => {
                    dec.block_delta(index, &delta, asm);
                    Flow::More
                }
                FastEvent::BlockStop { index } => {
                    dec.block_stop(index, asm);
                    Flow::More
                }
                FastEvent::MessageStop => dec.message_stop(asm),
                FastEvent::Ignored => Flow::More,
            });
        }
    }
    // A line that is not an event is skipped, as on Chat Completions.
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return Ok(Flow::More);
    };
    let index = count(&v, "index").unwrap_or(0);
    match v.get("type").and_then(Value::as_str).unwrap_or_default() {
        "message_start" => {
            let m = v.get("message").unwrap_or(&Value::Null);
            if let Some(model) = m.get("model").and_then(Value::as_str) {
                asm.model(model);
            }
            if let Some(u) = m.get("usage") {
                dec.usage(u, asm);
            }
        }
        "content_block_start" => {
            let b = v.get("content_block").unwrap_or(&Value::Null);
            let block = match b.get("type").and_then(Value::as_str) {
                Some("text") => {
                    asm.text(b.get("text").and_then(Value::as_str).unwrap_or_default());
                    Block::Text
                }
                Some("thinking") => {
                    let thinking = b
                        .get("thinking")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    asm.reasoning(thinking);
                    Block::Thinking {
                        thinking: thinking.to_owned(),
                        signature: b
                            .get("signature")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    }
                }
                Some("redacted_thinking") => Block::Redacted(b.clone()),
                Some("tool_use") => {
                    asm.tool_delta(
                        Some(index),
                        b.get("id").and_then(Value::as_str),
                        b.get("name").and_then(Value::as_str),
                        None,
                    );
                    // A server that sends the whole input at the start (no deltas).
                    let input = b
                        .get("input")
                        .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()));
                    if let Some(i) = input {
                        asm.tool_delta(Some(index), None, None, Some(&i.to_string()));
                    }
                    Block::ToolUse {
                        args_seen: input.is_some(),
                    }
                }
                _ => Block::Other,
            };
            dec.blocks.retain(|(i, _)| *i != index);
            dec.blocks.push((index, block));
        }
        "content_block_delta" => {
            let d = v.get("delta").unwrap_or(&Value::Null);
            let s = |k: &str| d.get(k).and_then(Value::as_str).map(Cow::Borrowed);
            let fields = DeltaFields {
                kind: s("type"),
                text: s("text"),
                thinking: s("thinking"),
                signature: s("signature"),
                partial_json: s("partial_json"),
            };
            dec.block_delta(index, &fields, asm);
        }
        "content_block_stop" => dec.block_stop(index, asm),
        "message_delta" => {
            if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                asm.finish_reason(finish_reason(r));
            }
            if let Some(u) = v.get("usage") {
                dec.usage(u, asm);
            }
        }
        "message_stop" => return Ok(dec.message_stop(asm)),
        "error" => return Err(in_stream_error(&v)),
        _ => {}
    }
    Ok(Flow::More)
}

/// A stream without `message_stop` is cut: retried like a dropped connection.
pub(crate) fn at_eof(_dec: &mut Decoder, _asm: &mut Assembler) -> Result<(), LlmError> {
    Err(truncated("message_stop"))
}

/// The decoder applied by `path` to a sequence of SSE data payloads, as one attempt reads them
/// (up to `message_stop` or an in-stream error, then the end of the body): each event's outcome
/// and the decoder's and assembler's whole state after the last (`Debug`), and the response.
/// For the `anthropic_decoder` fuzz target and the tests that compare the fast path with the
/// general decoder.
#[doc(hidden)]
pub fn decode_for_fuzzing<'a>(
    events: impl IntoIterator<Item = &'a [u8]>,
    path: DecodePath,
) -> (String, crate::llm::LlmResponse) {
    crate::llm::event_scan::decode_trace::<Decoder>(
        events,
        |dec, data, asm| decode_by(dec, data, asm, path),
        at_eof,
    )
}
