//! The Responses stream's typed events: text, function-call arguments, reasoning summary and
//! reasoning text deltas, output items, `response.completed` / `.incomplete` / `.failed`, and
//! `error`. Compatible servers sometimes omit the `*.done` events, so nothing depends on them:
//! a call's arguments come from the deltas (from `.done` or the completed response only when
//! no delta came), and reasoning items whole from `output_item.done` or, failing that, from
//! the completed response's `output`.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::fast_event::{fast_event, FastEvent, PieceAt};
use super::read_members::read_members;
use crate::llm::assembly::{Assembler, Usage, WireCarrier};
use crate::llm::openai::DecodePath;
use crate::llm::wire::{truncated, Flow};
use crate::llm::LlmError;

#[derive(Debug, Clone)]
struct Call {
    output_index: u64,
    item_id: String,
    args_seen: bool,
}

#[derive(Debug, Clone)]
struct Reasoning {
    output_index: u64,
    /// The item whole, once an event carried it so.
    item: Option<Value>,
    id: String,
    /// The summary streamed, for a server that never sends the item whole.
    text: String,
}

/// One attempt's decoding state.
#[derive(Debug, Default, Clone)]
pub(crate) struct Decoder {
    calls: Vec<Call>,
    reasoning: Vec<Reasoning>,
}

/// An error code as the HTTP status the policy classifies it by.
fn status_of(code: &str) -> Option<u16> {
    Some(match code {
        "server_error" | "internal_error" => 500,
        "rate_limit_exceeded" => 429,
        "server_is_overloaded" | "overloaded" => 503,
        "context_length_exceeded" | "invalid_prompt" | "invalid_request_error" => 400,
        other => return other.parse().ok(),
    })
}

/// An `error` event (`{code, message}` or `{error:{…}}`) or a failed response's `error`.
pub(crate) fn in_stream_error(v: &Value) -> LlmError {
    let e = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error in stream")
        .to_owned();
    let code = e.get("code").and_then(Value::as_str);
    let error_type = e
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| *t != "error");
    match code.or(error_type).and_then(status_of) {
        Some(s) => LlmError::status(s, message, code, error_type),
        None => LlmError::api(message),
    }
    .in_stream()
}

fn usage(u: &Value) -> Usage {
    // Member by member: a JSON pointer parses its path on every call.
    let n = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_u64);
    Usage {
        prompt_tokens: n(Some(u), "input_tokens").unwrap_or(0),
        completion_tokens: n(Some(u), "output_tokens").unwrap_or(0),
        cache_read_tokens: n(u.get("input_tokens_details"), "cached_tokens").unwrap_or(0),
        cache_creation_tokens: 0,
        reasoning_tokens: n(u.get("output_tokens_details"), "reasoning_tokens").unwrap_or(0),
        cost_nano_usd: 0,
    }
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

impl Decoder {
    fn call_at(&mut self, at: &PieceAt<'_>) -> Option<&mut Call> {
        let item = at.item_id.as_deref();
        self.calls.iter_mut().find(|c| {
            at.output_index == Some(c.output_index) || item.is_some_and(|i| i == c.item_id)
        })
    }

    /// A non-empty `function_call_arguments.delta`, to its call (by output index or item id).
    fn arguments_delta(&mut self, at: &PieceAt<'_>, index: u64, delta: &str, asm: &mut Assembler) {
        let known = self.call_at(at).map(|c| {
            c.args_seen = true;
            c.output_index
        });
        asm.tool_delta(Some(known.unwrap_or(index)), None, None, Some(delta));
    }

    /// `function_call_arguments.done`: the arguments, only when no delta gave them.
    fn arguments_done(&mut self, at: &PieceAt<'_>, args: &str, asm: &mut Assembler) {
        if let Some(c) = self
            .call_at(at)
            .filter(|c| !c.args_seen && !args.is_empty())
        {
            c.args_seen = true;
            let at = c.output_index;
            asm.tool_delta(Some(at), None, None, Some(args));
        }
    }

    fn reasoning_delta(&mut self, index: u64, delta: &str, asm: &mut Assembler) {
        asm.reasoning(delta);
        self.reasoning_at(index).text.push_str(delta);
    }

    fn reasoning_at(&mut self, index: u64) -> &mut Reasoning {
        let at = match self.reasoning.iter().position(|r| r.output_index == index) {
            Some(at) => at,
            None => {
                self.reasoning.push(Reasoning {
                    output_index: index,
                    item: None,
                    id: String::new(),
                    text: String::new(),
                });
                self.reasoning.len() - 1
            }
        };
        &mut self.reasoning[at]
    }

    /// A function-call item (added, done, or in the completed output).
    fn call_item(&mut self, index: u64, item: &Value, whole: bool, asm: &mut Assembler) {
        let item_id = s(item, "id").unwrap_or_default();
        let known = self
            .calls
            .iter()
            .position(|c| c.output_index == index || (!item_id.is_empty() && c.item_id == item_id));
        let at = match known {
            Some(at) => at,
            None => {
                let call_id = s(item, "call_id").unwrap_or(item_id);
                let id = if item_id.is_empty() || item_id == call_id {
                    call_id.to_owned()
                } else {
                    format!("{call_id}|{item_id}")
                };
                asm.tool_delta(Some(index), Some(&id), s(item, "name"), None);
                self.calls.push(Call {
                    output_index: index,
                    item_id: item_id.to_owned(),
                    args_seen: false,
                });
                self.calls.len() - 1
            }
        };
        let args = s(item, "arguments").filter(|a| !a.is_empty());
        let call = &mut self.calls[at];
        if let (Some(a), false) = (args, call.args_seen) {
            // Only when no delta came: a whole item's arguments repeat the deltas.
            if whole || !a.is_empty() {
                call.args_seen = true;
                asm.tool_delta(Some(call.output_index), None, None, Some(a));
            }
        }
    }

    fn reasoning_item(&mut self, index: u64, item: &Value, whole: bool) {
        let r = self.reasoning_at(index);
        if let Some(id) = s(item, "id") {
            r.id = id.to_owned();
        }
        if whole {
            r.item = Some(item.clone());
        }
    }

    /// The completed (or incomplete) response: usage, the items no event gave whole, the
    /// reasoning items for the history.
    fn settle(&mut self, response: &Value, asm: &mut Assembler) {
        if let Some(u) = response.get("usage").filter(|u| u.is_object()) {
            asm.usage(usage(u));
        }
        if let Some(m) = s(response, "model") {
            asm.model(m);
        }
        for (i, item) in response
            .get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            match s(item, "type") {
                Some("function_call") => self.call_item(i as u64, item, true, asm),
                Some("reasoning") if self.reasoning_at(i as u64).item.is_none() => {
                    self.reasoning_item(i as u64, item, true);
                }
                _ => {}
            }
        }
        let mut items: Vec<&Reasoning> = self.reasoning.iter().collect();
        items.sort_by_key(|r| r.output_index);
        let items: Vec<Value> = items
            .into_iter()
            .filter_map(|r| match &r.item {
                Some(item) => Some(item.clone()),
                None if !r.id.is_empty() => Some(json!({"type": "reasoning", "id": r.id,
                    "summary": [{"type": "summary_text", "text": r.text}]})),
                None => None,
            })
            .collect();
        if !items.is_empty() {
            asm.carrier = Some(WireCarrier::ResponsesReasoning(items));
        }
    }
}

pub(crate) fn decode(
    dec: &mut Decoder,
    data: &[u8],
    asm: &mut Assembler,
) -> Result<Flow, LlmError> {
    decode_by(dec, data, asm, DecodePath::Auto)
}

/// [`decode`], by the fast path where it reads the event (`DecodePath::Auto`, `NoMemo`) or the
/// general decoder alone (`GeneralOnly`, for the tests and fuzz target that compare them).
pub(crate) fn decode_by(
    dec: &mut Decoder,
    data: &[u8],
    asm: &mut Assembler,
    path: DecodePath,
) -> Result<Flow, LlmError> {
    let data = data.trim_ascii();
    if path != DecodePath::GeneralOnly {
        if let Some(event) = std::str::from_utf8(data).ok().and_then(fast_event) {
            match event {
                FastEvent::Text(t) => asm.text(&t),
                FastEvent::Reasoning {
                    output_index,
                    delta,
                } => dec.reasoning_delta(output_index, &delta, asm),
                FastEvent::ArgumentsDelta { at, delta } => {
                    let index = at.output_index.unwrap_or(0);
                    dec.arguments_delta(&at, index, &delta, asm);
                }
                FastEvent::ArgumentsDone { at, arguments } => {
                    dec.arguments_done(&at, &arguments, asm)
                }
                FastEvent::Ignored => {}
            }
            return Ok(Flow::More);
        }
    }
    let Some(v) = read_members(data) else {
        return Ok(Flow::More);
    };
    apply(dec, &v, asm)
}

/// What the general decoder does with an event's members (all of them, or those
/// [`read_members`] keeps: the same).
pub(super) fn apply(dec: &mut Decoder, v: &Value, asm: &mut Assembler) -> Result<Flow, LlmError> {
    let at = PieceAt {
        output_index: v.get("output_index").and_then(Value::as_u64),
        item_id: s(v, "item_id").map(Cow::Borrowed),
    };
    let index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0);
    let delta = s(v, "delta").unwrap_or_default();
    let null = Value::Null;
    let item = v.get("item").unwrap_or(&null);
    match s(v, "type").unwrap_or_default() {
        "response.created" | "response.in_progress" => {
            if let Some(m) = v.get("response").and_then(|r| s(r, "model")) {
                asm.model(m);
            }
        }
        "response.output_item.added" | "response.output_item.done" => {
            let whole = s(v, "type") == Some("response.output_item.done");
            match s(item, "type") {
                Some("function_call") => dec.call_item(index, item, whole, asm),
                Some("reasoning") => dec.reasoning_item(index, item, whole),
                _ => {}
            }
        }
        "response.output_text.delta" => asm.text(delta),
        "response.refusal.delta" => asm.text(delta),
        "response.function_call_arguments.delta" if !delta.is_empty() => {
            dec.arguments_delta(&at, index, delta, asm)
        }
        "response.function_call_arguments.done" => {
            let args = s(v, "arguments").unwrap_or_default();
            dec.arguments_done(&at, args, asm);
        }
        "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
            dec.reasoning_delta(index, delta, asm)
        }
        "response.completed" => {
            let r = v.get("response").unwrap_or(&null);
            dec.settle(r, asm);
            asm.finish_reason(if dec.calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            });
            return Ok(Flow::End);
        }
        "response.incomplete" => {
            let r = v.get("response").unwrap_or(&null);
            dec.settle(r, asm);
            let reason = r
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str);
            asm.finish_reason(match reason {
                Some("content_filter") => "content_filter",
                _ => "length",
            });
            return Ok(Flow::End);
        }
        "response.failed" => {
            let e = v.pointer("/response/error").unwrap_or(&null);
            return Err(in_stream_error(e));
        }
        "error" => return Err(in_stream_error(v)),
        _ => {}
    }
    Ok(Flow::More)
}

/// A stream without its terminal response event is cut: retried like a dropped connection.
pub(crate) fn at_eof(_dec: &mut Decoder, _asm: &mut Assembler) -> Result<(), LlmError> {
    Err(truncated("response.completed"))
}

/// The decoder applied by `path` to a sequence of SSE data payloads, as one attempt reads them
/// (up to the terminal response or an in-stream error, then the end of the body): each event's
/// outcome and the decoder's and assembler's whole state after the last (`Debug`), and the
/// response. For the `responses_decoder` fuzz target and the tests that compare the fast path
/// with the general decoder.
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
