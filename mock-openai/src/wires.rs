//! The same scripted responses on the two other wires the library speaks: the Anthropic
//! Messages stream (`POST /v1/messages`) and the OpenAI Responses stream (`POST
//! /v1/responses`), event for event as the official SDKs read them. Faults become the wire's
//! own: an HTTP error with the wire's error body, an `error` event inside the stream, a stream
//! cut before its terminal event.

use agentao::llm::script::{Fault, ScriptArgs, ScriptEvent, ScriptResponse};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::http::{write_chunk, write_error};

/// The wire a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    Responses,
}

impl Wire {
    /// The wire of a request path, if it is one of these two.
    pub fn of_path(path: &str) -> Option<Wire> {
        if path.ends_with("/messages") {
            Some(Wire::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Wire::Responses)
        } else {
            None
        }
    }
}

fn frame(out: &mut Vec<u8>, v: &Value) {
    let t = v.get("type").and_then(Value::as_str).unwrap_or("message");
    out.extend_from_slice(format!("event: {t}\ndata: {v}\n\n").as_bytes());
}

fn args_piece(call: &agentao::llm::script::ScriptToolCall, piece: usize) -> String {
    match &call.args {
        ScriptArgs::Pieces(p) => p.get(piece).cloned().unwrap_or_default(),
        ScriptArgs::Object(o) => o.to_string(),
    }
}

fn call_id(call: &agentao::llm::script::ScriptToolCall, slot: usize, prefix: &str) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("{prefix}mock_{slot}"))
}

fn usage_of(events: &[ScriptEvent<'_>]) -> Option<Value> {
    events.iter().find_map(|e| match e {
        ScriptEvent::Usage(u) => Some((*u).clone()),
        _ => None,
    })
}

fn n(u: Option<&Value>, p: &str) -> u64 {
    u.and_then(|u| u.pointer(p))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// The Anthropic events of a response, `cut_after` script events at most (then no more).
fn anthropic_events(resp: &ScriptResponse, model: &str, n_resp: usize) -> Vec<Value> {
    let events = resp.events();
    let usage = usage_of(&events);
    let u = usage.as_ref();
    let cache_read = n(u, "/prompt_tokens_details/cached_tokens");
    let mut out = vec![json!({"type": "message_start", "message": {
        "id": format!("msg_mock_{n_resp}"), "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": n(u, "/prompt_tokens").saturating_sub(cache_read),
            "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": 0,
            "output_tokens": 1}}})];
    // The open block: its index and what it is.
    let mut open: Option<(usize, &'static str, usize)> = None;
    let mut index = 0;
    let close = |out: &mut Vec<Value>, open: &mut Option<(usize, &'static str, usize)>| {
        if let Some((i, kind, _)) = open.take() {
            if kind == "thinking" {
                out.push(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "signature_delta", "signature": format!("mock-signature-{i}")}}));
            }
            out.push(json!({"type": "content_block_stop", "index": i}));
        }
    };
    let mut stop = "end_turn";
    for e in &events {
        match e {
            ScriptEvent::Reasoning(r) => {
                if !matches!(open, Some((_, "thinking", _))) {
                    close(&mut out, &mut open);
                    out.push(json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
                    open = Some((index, "thinking", 0));
                    index += 1;
                }
                let i = open.map_or(0, |o| o.0);
                out.push(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "thinking_delta", "thinking": r}}));
            }
            ScriptEvent::Text(t) => {
                if !matches!(open, Some((_, "text", _))) {
                    close(&mut out, &mut open);
                    out.push(json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}));
                    open = Some((index, "text", 0));
                    index += 1;
                }
                let i = open.map_or(0, |o| o.0);
                out.push(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "text_delta", "text": t}}));
            }
            ScriptEvent::ToolCall { slot, call, piece } => {
                if !matches!(open, Some((_, "tool_use", s)) if s == *slot) {
                    close(&mut out, &mut open);
                    out.push(json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": call_id(call, *slot, "toolu_"),
                            "name": call.name, "input": {}}}));
                    open = Some((index, "tool_use", *slot));
                    index += 1;
                }
                let i = open.map_or(0, |o| o.0);
                let piece = args_piece(call, *piece);
                if !piece.is_empty() {
                    out.push(json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}));
                }
            }
            ScriptEvent::Finish(f) => {
                stop = match *f {
                    "tool_calls" => "tool_use",
                    "length" => "max_tokens",
                    "content_filter" => "refusal",
                    _ => "end_turn",
                }
            }
            ScriptEvent::Usage(_) => {}
        }
    }
    close(&mut out, &mut open);
    out.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": n(u, "/completion_tokens")}}),
    );
    out.push(json!({"type": "message_stop"}));
    out
}

/// The Responses events of a response.
fn responses_events(resp: &ScriptResponse, model: &str, n_resp: usize) -> Vec<Value> {
    let events = resp.events();
    let usage = usage_of(&events);
    let u = usage.as_ref();
    let id = format!("resp_mock_{n_resp}");
    let response = |status: &str, output: &[Value], usage: Value| {
        json!({"id": id, "object": "response", "created_at": 0, "model": model,
            "status": status, "output": output, "parallel_tool_calls": true,
            "tool_choice": "auto", "tools": [], "usage": usage})
    };
    let mut out = vec![json!({"type": "response.created", "sequence_number": 0,
        "response": response("in_progress", &[], Value::Null)})];
    let mut output: Vec<Value> = Vec::new();
    // The open item: its output index, kind, slot and accumulated text.
    let mut open: Option<(usize, &'static str, usize, String)> = None;
    let mut calls: Vec<Value> = Vec::new();
    let close = |out: &mut Vec<Value>,
                 output: &mut Vec<Value>,
                 calls: &mut Vec<Value>,
                 open: &mut Option<(usize, &'static str, usize, String)>| {
        let Some((i, kind, _, text)) = open.take() else {
            return;
        };
        let item = match kind {
            "reasoning" => {
                out.push(json!({"type": "response.reasoning_summary_text.done",
                    "item_id": format!("rs_mock_{i}"), "output_index": i, "summary_index": 0, "text": text}));
                out.push(json!({"type": "response.reasoning_summary_part.done",
                    "item_id": format!("rs_mock_{i}"), "output_index": i, "summary_index": 0,
                    "part": {"type": "summary_text", "text": text}}));
                json!({"type": "reasoning", "id": format!("rs_mock_{i}"),
                    "summary": [{"type": "summary_text", "text": text}],
                    "encrypted_content": format!("mock-encrypted-{i}")})
            }
            "message" => {
                out.push(
                    json!({"type": "response.output_text.done", "item_id": format!("msg_mock_{i}"),
                    "output_index": i, "content_index": 0, "text": text, "logprobs": []}),
                );
                out.push(json!({"type": "response.content_part.done", "item_id": format!("msg_mock_{i}"),
                    "output_index": i, "content_index": 0,
                    "part": {"type": "output_text", "text": text, "annotations": [], "logprobs": []}}));
                json!({"type": "message", "id": format!("msg_mock_{i}"), "role": "assistant",
                    "status": "completed", "content": [{"type": "output_text", "text": text,
                        "annotations": [], "logprobs": []}]})
            }
            _ => {
                let mut call = calls.pop().unwrap_or(Value::Null);
                out.push(json!({"type": "response.function_call_arguments.done",
                    "item_id": call["id"], "output_index": i, "arguments": text}));
                call["arguments"] = json!(text);
                call["status"] = json!("completed");
                call
            }
        };
        out.push(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
        output.push(item);
    };
    let mut finish = "stop";
    for e in &events {
        match e {
            ScriptEvent::Reasoning(r) => {
                if !matches!(open, Some((_, "reasoning", _, _))) {
                    close(&mut out, &mut output, &mut calls, &mut open);
                    let i = output.len();
                    out.push(json!({"type": "response.output_item.added", "output_index": i,
                        "item": {"type": "reasoning", "id": format!("rs_mock_{i}"), "summary": []}}));
                    out.push(json!({"type": "response.reasoning_summary_part.added",
                        "item_id": format!("rs_mock_{i}"), "output_index": i, "summary_index": 0,
                        "part": {"type": "summary_text", "text": ""}}));
                    open = Some((i, "reasoning", 0, String::new()));
                }
                if let Some((i, _, _, text)) = open.as_mut() {
                    text.push_str(r);
                    out.push(json!({"type": "response.reasoning_summary_text.delta",
                        "item_id": format!("rs_mock_{i}"), "output_index": i, "summary_index": 0, "delta": r}));
                }
            }
            ScriptEvent::Text(t) => {
                if !matches!(open, Some((_, "message", _, _))) {
                    close(&mut out, &mut output, &mut calls, &mut open);
                    let i = output.len();
                    out.push(json!({"type": "response.output_item.added", "output_index": i,
                        "item": {"type": "message", "id": format!("msg_mock_{i}"), "role": "assistant",
                            "status": "in_progress", "content": []}}));
                    out.push(json!({"type": "response.content_part.added",
                        "item_id": format!("msg_mock_{i}"), "output_index": i, "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}));
                    open = Some((i, "message", 0, String::new()));
                }
                if let Some((i, _, _, text)) = open.as_mut() {
                    text.push_str(t);
                    out.push(json!({"type": "response.output_text.delta", "item_id": format!("msg_mock_{i}"),
                        "output_index": i, "content_index": 0, "delta": t, "logprobs": []}));
                }
            }
            ScriptEvent::ToolCall { slot, call, piece } => {
                if !matches!(&open, Some((_, "function_call", s, _)) if s == slot) {
                    close(&mut out, &mut output, &mut calls, &mut open);
                    let i = output.len();
                    let item = json!({"type": "function_call", "id": format!("fc_mock_{i}"),
                        "call_id": call_id(call, *slot, "call_"), "name": call.name,
                        "arguments": "", "status": "in_progress"});
                    out.push(json!({"type": "response.output_item.added", "output_index": i, "item": item}));
                    calls.push(item);
                    open = Some((i, "function_call", *slot, String::new()));
                }
                let piece = args_piece(call, *piece);
                if let Some((i, _, _, text)) = open.as_mut() {
                    text.push_str(&piece);
                    if !piece.is_empty() {
                        out.push(json!({"type": "response.function_call_arguments.delta",
                            "item_id": format!("fc_mock_{i}"), "output_index": i, "delta": piece}));
                    }
                }
            }
            ScriptEvent::Finish(f) => finish = f,
            ScriptEvent::Usage(_) => {}
        }
    }
    close(&mut out, &mut output, &mut calls, &mut open);
    let usage = json!({"input_tokens": n(u, "/prompt_tokens"),
        "input_tokens_details": {"cached_tokens": n(u, "/prompt_tokens_details/cached_tokens")},
        "output_tokens": n(u, "/completion_tokens"),
        "output_tokens_details": {"reasoning_tokens": n(u, "/completion_tokens_details/reasoning_tokens")},
        "total_tokens": n(u, "/prompt_tokens") + n(u, "/completion_tokens")});
    let terminal = match finish {
        "length" | "content_filter" => {
            let reason = if finish == "length" {
                "max_output_tokens"
            } else {
                "content_filter"
            };
            let mut r = response("incomplete", &output, usage);
            r["incomplete_details"] = json!({"reason": reason});
            json!({"type": "response.incomplete", "response": r})
        }
        _ => {
            json!({"type": "response.completed", "response": response("completed", &output, usage)})
        }
    };
    out.push(terminal);
    for (i, e) in out.iter_mut().enumerate() {
        e["sequence_number"] = json!(i);
    }
    out
}

fn error_type_of(wire: Wire, status: u16) -> &'static str {
    match (wire, status) {
        (Wire::Anthropic, 529) => "overloaded_error",
        (Wire::Anthropic, 429) => "rate_limit_error",
        (Wire::Anthropic, 401) => "authentication_error",
        (Wire::Anthropic, s) if s >= 500 => "api_error",
        (Wire::Anthropic, _) => "invalid_request_error",
        (Wire::Responses, s) if s >= 500 => "server_error",
        (Wire::Responses, _) => "invalid_request_error",
    }
}

/// Serves one scripted response on `wire`. `Ok(true)`: keep the connection.
pub(crate) async fn serve(
    stream: &mut TcpStream,
    wire: Wire,
    resp: &ScriptResponse,
    model: &str,
    n_resp: usize,
    client_close: bool,
) -> std::io::Result<bool> {
    if let Some(Fault::HttpError {
        status,
        message,
        error_type,
        code,
        headers,
    }) = &resp.fault
    {
        let t = error_type
            .clone()
            .unwrap_or_else(|| error_type_of(wire, *status).to_owned());
        let body = match wire {
            Wire::Anthropic => json!({"type": "error", "error": {"type": t, "message": message}}),
            Wire::Responses => {
                json!({"error": {"message": message, "type": t, "param": null, "code": code}})
            }
        }
        .to_string();
        write_error(stream, *status, headers, &body, client_close).await?;
        return Ok(!client_close);
    }
    let events = match wire {
        Wire::Anthropic => anthropic_events(resp, model, n_resp),
        Wire::Responses => responses_events(resp, model, n_resp),
    };
    // A fault counts script events; the wire's events around them (starts, stops) are
    // many more, so the cut is placed by the share of script events before it.
    let script_events = resp.events().len().max(1);
    let at = |after: usize| 1 + (events.len() - 2) * after.min(script_events) / script_events;
    let (end, tail): (usize, Option<Value>) = match &resp.fault {
        Some(Fault::Drop { after_events }) => (at(*after_events), None),
        Some(Fault::InStreamError {
            after_events,
            message,
            code,
            error_type,
        }) => {
            let e = match wire {
                Wire::Anthropic => json!({"type": "error", "error": {
                    "type": error_type.clone().unwrap_or_else(|| "overloaded_error".into()),
                    "message": message}}),
                Wire::Responses => {
                    json!({"type": "error", "code": code.clone().unwrap_or(json!("server_error")),
                    "message": message, "param": null, "sequence_number": 0})
                }
            };
            (at(*after_events), Some(e))
        }
        _ => (events.len(), None),
    };
    let close = client_close || end < events.len();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
         transfer-encoding: chunked\r\n{}\r\n",
        if close { "connection: close\r\n" } else { "" }
    );
    stream.write_all(head.as_bytes()).await?;
    let mut out = Vec::with_capacity(512);
    for e in &events[..end] {
        out.clear();
        frame(&mut out, e);
        write_chunk(stream, &out).await?;
    }
    if let Some(e) = tail {
        out.clear();
        frame(&mut out, &e);
        write_chunk(stream, &out).await?;
    }
    if end < events.len() && matches!(resp.fault, Some(Fault::Drop { .. })) {
        // Mid-body: the chunked encoding is left unfinished.
        stream.flush().await?;
        return Ok(false);
    }
    stream.write_all(b"0\r\n\r\n").await?;
    Ok(!close)
}

/// The whole stream of a response on `wire` as bytes (no faults): for the SDK checks.
pub fn render_wire_sse(wire: Wire, resp: &ScriptResponse, model: &str) -> Vec<u8> {
    let events = match wire {
        Wire::Anthropic => anthropic_events(resp, model, 1),
        Wire::Responses => responses_events(resp, model, 1),
    };
    let mut out = Vec::new();
    for e in &events {
        frame(&mut out, e);
    }
    out
}

/// Every listed response of a script (at least one) as [`render_wire_sse`] renders it: the
/// typed wires' input of [`MockBuilder::start_prerendered_wires`]. The script's `wire` key
/// (the chat wire's framing quirks) does not apply.
///
/// [`MockBuilder::start_prerendered_wires`]: crate::MockBuilder::start_prerendered_wires
pub fn render_wire_sse_all(wire: Wire, script: Value) -> Result<Vec<bytes::Bytes>, String> {
    let (v, _) = crate::render::split_wire(script)?;
    let script = agentao::llm::script::Script::from_value(v)?;
    let model = script.model.as_deref().unwrap_or("mock-model");
    Ok((0..script.responses.len().max(1))
        .map(|i| bytes::Bytes::from(render_wire_sse(wire, &script.response(i), model)))
        .collect())
}
