//! The conformance suite every wire passes: one behaviour, rendered in each wire's stream
//! format by a loopback server, through the whole client (HTTP, SSE, decoder, assembler,
//! retry policy, cancellation). The table of behaviour × wire is in docs/wires.md.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::config::WireKind;
use super::{ChatRequest, LlmClient, LlmError, LlmResponse, Message, MessagesVersion, Piece};
use crate::cancel::CancelToken;

const WIRES: [WireKind; 3] = [
    WireKind::ChatCompletions,
    WireKind::Anthropic,
    WireKind::Responses,
];

/// What the model says, wire-neutrally.
#[derive(Clone, Default)]
struct Say {
    reasoning: Vec<&'static str>,
    text: Vec<&'static str>,
    /// `(id, name, argument pieces)`.
    calls: Vec<(&'static str, &'static str, Vec<&'static str>)>,
    /// Leave out the terminal event (a cut stream).
    cut: bool,
}

/// One HTTP answer of the loopback server.
#[derive(Clone)]
enum Answer {
    Stream(Say),
    Status(u16, Value),
    /// An error event inside a 200 stream, of the wire's kind (`overloaded`: 529-like).
    StreamError,
}

fn sse(events: &[Value], names: bool) -> String {
    let mut out = String::new();
    for e in events {
        if names {
            if let Some(t) = e.get("type").and_then(Value::as_str) {
                out.push_str(&format!("event: {t}\n"));
            }
        }
        out.push_str(&format!("data: {e}\n\n"));
    }
    out
}

fn chat_body(s: &Say) -> String {
    let mut ev = Vec::new();
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    for r in &s.reasoning {
        ev.push(chunk(json!({"reasoning_content": r}), Value::Null));
    }
    for t in &s.text {
        ev.push(chunk(json!({"content": t}), Value::Null));
    }
    for (i, (id, name, parts)) in s.calls.iter().enumerate() {
        ev.push(chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for p in parts {
            ev.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
    }
    let finish = if s.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    ev.push(chunk(json!({}), json!(finish)));
    ev.push(
        json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 2}}}),
    );
    let mut body = sse(&ev, false);
    if !s.cut {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

fn anthropic_body(s: &Say) -> String {
    let mut ev = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": "m", "content": [], "stop_reason": null,
        "usage": {"input_tokens": 4, "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 2, "output_tokens": 1}}}),
    ];
    let mut index = 0;
    if !s.reasoning.is_empty() {
        ev.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
        for r in &s.reasoning {
            ev.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": r}}));
        }
        ev.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "signature_delta", "signature": "sig"}}));
        ev.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    if !s.text.is_empty() {
        ev.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}}));
        ev.push(json!({"type": "ping"}));
        for t in &s.text {
            ev.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": t}}));
        }
        ev.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for (id, name, parts) in &s.calls {
        ev.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        for p in parts {
            ev.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p}}));
        }
        ev.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let stop = if s.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    ev.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": 5}}),
    );
    if !s.cut {
        ev.push(json!({"type": "message_stop"}));
    }
    sse(&ev, true)
}

fn responses_body(s: &Say) -> String {
    let mut ev = vec![json!({"type": "response.created", "sequence_number": 0,
        "response": {"id": "resp_1", "object": "response", "model": "m", "status": "in_progress", "output": []}})];
    let mut index = 0;
    let mut output = Vec::new();
    if !s.reasoning.is_empty() {
        let item = json!({"type": "reasoning", "id": "rs_1", "summary": [],
            "encrypted_content": "enc"});
        ev.push(json!({"type": "response.output_item.added", "output_index": index, "item": item}));
        for r in &s.reasoning {
            ev.push(
                json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1",
                "output_index": index, "summary_index": 0, "delta": r}),
            );
        }
        ev.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
        output.push(item);
        index += 1;
    }
    if !s.text.is_empty() {
        ev.push(json!({"type": "response.output_item.added", "output_index": index,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}));
        for t in &s.text {
            ev.push(
                json!({"type": "response.output_text.delta", "item_id": "msg_1",
                "output_index": index, "content_index": 0, "delta": t}),
            );
        }
        // A compatible server's stream: no `*.done` events for the message.
        index += 1;
    }
    for (id, name, parts) in &s.calls {
        let item_id = format!("fc_{id}");
        ev.push(
            json!({"type": "response.output_item.added", "output_index": index,
            "item": {"type": "function_call", "id": item_id, "call_id": id, "name": name,
                "arguments": "", "status": "in_progress"}}),
        );
        for p in parts {
            ev.push(
                json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                "output_index": index, "delta": p}),
            );
        }
        output.push(
            json!({"type": "function_call", "id": item_id, "call_id": id,
            "name": name, "arguments": parts.concat(), "status": "completed"}),
        );
        index += 1;
    }
    if !s.cut {
        ev.push(
            json!({"type": "response.completed", "response": {"id": "resp_1",
            "object": "response", "model": "m", "status": "completed", "output": output,
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
                "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2},
                "total_tokens": 15}}}),
        );
    }
    sse(&ev, true)
}

fn stream_error(wire: WireKind) -> String {
    match wire {
        WireKind::ChatCompletions => sse(
            &[
                json!({"error": {"message": "Overloaded", "type": "server_error", "code": "server_error"}}),
            ],
            false,
        ),
        WireKind::Anthropic => sse(
            &[
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ],
            true,
        ),
        WireKind::Responses => sse(
            &[
                json!({"type": "error", "code": "server_error", "message": "Overloaded", "param": null}),
            ],
            true,
        ),
    }
}

fn render(wire: WireKind, a: &Answer) -> (u16, String) {
    match a {
        Answer::Status(s, body) => (*s, body.to_string()),
        Answer::StreamError => (200, stream_error(wire)),
        Answer::Stream(s) => (
            200,
            match wire {
                WireKind::ChatCompletions => chat_body(s),
                WireKind::Anthropic => anthropic_body(s),
                WireKind::Responses => responses_body(s),
            },
        ),
    }
}

/// A loopback server answering each request with the next answer (the last repeats); the
/// request bodies are recorded.
async fn serve(wire: WireKind, answers: Vec<Answer>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let answer = answers[n.min(answers.len() - 1)].clone();
            n += 1;
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head_end, len) = loop {
                    let Ok(k) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if k == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..k]);
                    if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (at + 4, len);
                    }
                };
                while buf.len() < head_end + len {
                    let Ok(k) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if k == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..k]);
                }
                if let Ok(v) = serde_json::from_slice(&buf[head_end..]) {
                    log.lock().unwrap().push(v);
                }
                let (status, body) = render(wire, &answer);
                let ct = if status == 200 {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    let base = match wire {
        // The Anthropic SDK's base URL has no `/v1`: the wire adds it.
        WireKind::Anthropic => format!("http://{addr}"),
        _ => format!("http://{addr}/v1"),
    };
    (base, seen)
}

fn client(wire: WireKind, base: &str) -> LlmClient {
    let config = crate::config::AgentConfig::from_json(
        &json!({"working_directory": std::env::temp_dir(), "llm": {
            "provider": wire.name(), "base_url": base, "api_key": "k", "model": "m",
            "max_tokens": 1000, "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 1,
            "temperature": 0.5}})
        .to_string(),
    )
    .map_err(|e| e.0)
    .unwrap();
    LlmClient::new(&config.llm).unwrap()
}

/// The outcome of one call: its pieces, its end, the response.
struct Run {
    pieces: Vec<String>,
    error: Option<LlmError>,
    response: LlmResponse,
    cancelled: bool,
}

async fn call(
    wire: WireKind,
    answers: Vec<Answer>,
    history: &[Message],
    cancel_after: Option<usize>,
) -> (Run, Vec<Value>) {
    let (base, seen) = serve(wire, answers).await;
    let c = client(wire, &base);
    let tools = Arc::new(vec![
        json!({"type": "function", "function": {"name": "read_file",
        "description": "Reads a file.", "parameters": {"type": "object",
            "properties": {"path": {"type": "string"}}, "required": ["path"]}}}),
    ]);
    let req = ChatRequest {
        system: "You are a test.",
        history,
        history_version: MessagesVersion::unknown(),
        transcript: &[],
        transcript_version: MessagesVersion::unknown(),
        tail: None,
        tools: &tools,
    };
    let cancel = CancelToken::new();
    let mut call = c.start(&req, &cancel);
    let mut pieces = Vec::new();
    let error = loop {
        match call.next().await {
            Ok(Some(Piece::Text(t))) => pieces.push(format!("text:{}", t.text)),
            Ok(Some(Piece::Reasoning(t))) => pieces.push(format!("reasoning:{t}")),
            Ok(Some(Piece::Retry { reason, .. })) => pieces.push(format!("retry:{reason}")),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
        if cancel_after == Some(pieces.len()) {
            cancel.cancel("host");
        }
    };
    let cancelled = call.was_cancelled();
    let response = call.finish();
    let bodies = seen.lock().unwrap().clone();
    (
        Run {
            pieces,
            error,
            response,
            cancelled,
        },
        bodies,
    )
}

fn user(t: &str) -> Vec<Message> {
    vec![Message::User(t.into())]
}

#[tokio::test]
async fn text_streams_with_usage_on_every_wire() {
    for wire in WIRES {
        let say = Say {
            text: vec!["Hel", "lo"],
            ..Say::default()
        };
        let (run, bodies) = call(wire, vec![Answer::Stream(say)], &user("hi"), None).await;
        assert!(run.error.is_none(), "{wire:?}: {:?}", run.error);
        assert_eq!(run.pieces, ["text:Hel", "text:lo"], "{wire:?}");
        assert_eq!(run.response.content, "Hello");
        assert_eq!(
            run.response.finish_reason.as_deref(),
            Some("stop"),
            "{wire:?}"
        );
        let u = run.response.usage.expect("usage");
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cache_read_tokens),
            (10, 5, 4),
            "{wire:?}"
        );
        assert_eq!(bodies.len(), 1);
    }
}

#[tokio::test]
async fn reasoning_streams_before_text_on_every_wire() {
    for wire in WIRES {
        let say = Say {
            reasoning: vec!["think", "ing"],
            text: vec!["ok"],
            ..Say::default()
        };
        let (run, _) = call(wire, vec![Answer::Stream(say)], &user("hi"), None).await;
        assert!(run.error.is_none(), "{wire:?}: {:?}", run.error);
        assert_eq!(run.response.reasoning, "thinking", "{wire:?}");
        assert_eq!(run.pieces.last().map(String::as_str), Some("text:ok"));
        // The opaque carriers of the wires that have one.
        let carrier = run.response.carrier.as_ref().map(|c| c.history_key());
        let expected = match wire {
            WireKind::ChatCompletions => None,
            WireKind::Anthropic => Some("anthropic_thinking_blocks"),
            WireKind::Responses => Some("openai_reasoning_items"),
        };
        assert_eq!(carrier, expected, "{wire:?}");
    }
}

#[tokio::test]
async fn parallel_tool_calls_with_split_arguments_on_every_wire() {
    for wire in WIRES {
        let say = Say {
            calls: vec![
                ("call_a", "read_file", vec!["{\"pa", "th\":", "\"a.txt\"}"]),
                ("call_b", "read_file", vec!["{\"path\"", ":\"b.txt\"}"]),
            ],
            ..Say::default()
        };
        let (run, _) = call(wire, vec![Answer::Stream(say)], &user("hi"), None).await;
        assert!(run.error.is_none(), "{wire:?}: {:?}", run.error);
        let calls = &run.response.tool_calls;
        assert_eq!(calls.len(), 2, "{wire:?}");
        assert_eq!(&*calls[0].name, "read_file");
        assert_eq!(
            calls[0].canonical_arguments(),
            r#"{"path": "a.txt"}"#,
            "{wire:?}"
        );
        assert_eq!(
            calls[1].canonical_arguments(),
            r#"{"path": "b.txt"}"#,
            "{wire:?}"
        );
        let id_b = match wire {
            WireKind::Responses => "call_b|fc_call_b",
            _ => "call_b",
        };
        assert_eq!(&*calls[1].id, id_b, "{wire:?}");
        assert_eq!(
            run.response.finish_reason.as_deref(),
            Some("tool_calls"),
            "{wire:?}"
        );
    }
}

#[tokio::test]
async fn a_retryable_status_is_retried_on_every_wire() {
    for wire in WIRES {
        let ok = Answer::Stream(Say {
            text: vec!["fine"],
            ..Say::default()
        });
        let busy = Answer::Status(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
        let (run, bodies) = call(wire, vec![busy, ok], &user("hi"), None).await;
        assert!(run.error.is_none(), "{wire:?}: {:?}", run.error);
        assert_eq!(run.pieces, ["retry:status=529", "text:fine"], "{wire:?}");
        assert_eq!(bodies.len(), 2);
        assert_eq!(
            bodies[0], bodies[1],
            "{wire:?}: a retry sends the same body"
        );
    }
}

#[tokio::test]
async fn an_in_stream_error_is_classified_and_retried_on_every_wire() {
    for wire in WIRES {
        let ok = Answer::Stream(Say {
            text: vec!["after"],
            ..Say::default()
        });
        let (run, _) = call(wire, vec![Answer::StreamError, ok], &user("hi"), None).await;
        assert!(run.error.is_none(), "{wire:?}: {:?}", run.error);
        let retry = &run.pieces[0];
        let expected = match wire {
            WireKind::Anthropic => "retry:status=529",
            _ => "retry:status=500",
        };
        assert_eq!(retry, expected, "{wire:?}");
    }
}

#[tokio::test]
async fn a_stream_cut_before_its_terminal_event_is_retried_on_the_typed_wires() {
    for wire in [WireKind::Anthropic, WireKind::Responses] {
        let cut = Answer::Stream(Say {
            calls: vec![("call_a", "read_file", vec!["{}"])],
            cut: true,
            ..Say::default()
        });
        let ok = Answer::Stream(Say {
            text: vec!["whole"],
            ..Say::default()
        });
        let (run, bodies) = call(wire, vec![cut, ok], &user("hi"), None).await;
        assert!(run.error.is_none(), "{wire:?}: {:?}", run.error);
        assert_eq!(
            run.pieces,
            ["retry:APIConnectionError", "text:whole"],
            "{wire:?}"
        );
        assert!(
            run.response.tool_calls.is_empty(),
            "the cut attempt is forgotten"
        );
        assert_eq!(bodies.len(), 2);
    }
}

#[tokio::test]
async fn a_cancel_mid_stream_keeps_what_arrived_on_every_wire() {
    for wire in WIRES {
        let say = Say {
            text: vec!["one", "two", "three"],
            ..Say::default()
        };
        let (run, _) = call(wire, vec![Answer::Stream(say)], &user("hi"), Some(1)).await;
        assert!(run.error.is_none(), "{wire:?}");
        assert!(run.cancelled, "{wire:?}");
        assert_eq!(run.pieces, ["text:one"], "{wire:?}");
    }
}

#[tokio::test]
async fn an_overflow_refusal_is_recognised_on_the_typed_wires() {
    let cases = [
        (
            WireKind::Anthropic,
            json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
            Some(200000),
        ),
        (
            WireKind::Responses,
            json!({"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
                "type": "invalid_request_error", "code": "context_length_exceeded"}}),
            None,
        ),
    ];
    for (wire, body, limit) in cases {
        let (run, _) = call(wire, vec![Answer::Status(400, body)], &user("x"), None).await;
        let e = run.error.expect("an error");
        let c = client(wire, "http://127.0.0.1:9");
        assert_eq!(e.status, Some(400));
        assert!(!e.retryable);
        let o = c.overflow(&e).unwrap_or_else(|| panic!("{wire:?}: {e}"));
        assert_eq!(o.limit, limit, "{wire:?}");
    }
}

#[tokio::test]
async fn anthropic_max_tokens_is_repaired_once() {
    let refusal = Answer::Status(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "max_tokens: 1000 > 800, which is the maximum allowed number of output tokens for m"}}),
    );
    let ok = Answer::Stream(Say {
        text: vec!["ok"],
        ..Say::default()
    });
    let (run, bodies) = call(WireKind::Anthropic, vec![refusal, ok], &user("hi"), None).await;
    assert!(run.error.is_none(), "{:?}", run.error);
    assert_eq!(run.pieces, ["retry:parameter_repair", "text:ok"]);
    assert_eq!(bodies[0]["max_tokens"], 1000);
    assert_eq!(bodies[1]["max_tokens"], 800);
    assert!(
        bodies.iter().all(|b| b.get("temperature").is_none()),
        "never sent"
    );
}
