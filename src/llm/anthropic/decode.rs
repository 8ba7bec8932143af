//! The Messages stream: `message_start`, content blocks (`text`, `thinking` with its
//! `signature`, `redacted_thinking`, `tool_use` with `input_json_delta` pieces),
//! `message_delta` (stop reason, cumulative usage), `message_stop`, `ping`, `error`. Unknown
//! events and block types are ignored, as the API reserves the right to add them.

use serde_json::{json, Value};

use crate::llm::assembly::{Assembler, Usage, WireCarrier};
use crate::llm::wire::{truncated, Flow};
use crate::llm::LlmError;

#[derive(Debug)]
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
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// Open blocks by their index (a handful: scanned).
    blocks: Vec<(u64, Block)>,
    /// Finished thinking blocks, in order.
    thinking: Vec<Value>,
    input: u64,
    cache_read: u64,
    cache_creation: u64,
    output: u64,
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
}

pub(crate) fn decode(
    dec: &mut Decoder,
    data: &[u8],
    asm: &mut Assembler,
) -> Result<Flow, LlmError> {
    // A line that is not an event is skipped, as on Chat Completions.
    let Ok(v) = serde_json::from_slice::<Value>(data.trim_ascii()) else {
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
            let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default();
            match d.get("type").and_then(Value::as_str) {
                Some("text_delta") => asm.text(s("text")),
                Some("thinking_delta") => {
                    asm.reasoning(s("thinking"));
                    if let Some(Block::Thinking { thinking, .. }) = dec.block(index) {
                        thinking.push_str(s("thinking"));
                    }
                }
                Some("signature_delta") => {
                    if let Some(Block::Thinking { signature, .. }) = dec.block(index) {
                        signature.push_str(s("signature"));
                    }
                }
                Some("input_json_delta") => {
                    let part = s("partial_json");
                    if !part.is_empty() {
                        if let Some(Block::ToolUse { args_seen }) = dec.block(index) {
                            *args_seen = true;
                        }
                        asm.tool_delta(Some(index), None, None, Some(part));
                    }
                }
                _ => {}
            }
        }
        "content_block_stop" => {
            let at = dec.blocks.iter().position(|(i, _)| *i == index);
            match at.map(|at| dec.blocks.swap_remove(at).1) {
                Some(Block::Thinking {
                    thinking,
                    signature,
                }) => dec.thinking.push(json!({
                    "type": "thinking", "thinking": thinking, "signature": signature})),
                Some(Block::Redacted(b)) => dec.thinking.push(b),
                // A tool without parameters can stream no input at all.
                Some(Block::ToolUse { args_seen: false }) => {
                    asm.tool_delta(Some(index), None, None, Some("{}"))
                }
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                asm.finish_reason(finish_reason(r));
            }
            if let Some(u) = v.get("usage") {
                dec.usage(u, asm);
            }
        }
        "message_stop" => {
            if !dec.thinking.is_empty() {
                asm.carrier = Some(WireCarrier::AnthropicThinking(std::mem::take(
                    &mut dec.thinking,
                )));
            }
            return Ok(Flow::End);
        }
        "error" => return Err(in_stream_error(&v)),
        _ => {}
    }
    Ok(Flow::More)
}

/// A stream without `message_stop` is cut: retried like a dropped connection.
pub(crate) fn at_eof(_dec: &mut Decoder, _asm: &mut Assembler) -> Result<(), LlmError> {
    Err(truncated("message_stop"))
}
