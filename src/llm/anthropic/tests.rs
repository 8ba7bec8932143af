//! Unit tests of the Messages wire: the outgoing copy of the conversation and the decoder.

use std::sync::Arc;

use serde_json::{json, Value};

use super::decode::{decode, finish_reason, Decoder};
use super::request::{messages, render, tool_id, SYNTHETIC_USER};
use crate::llm::assembly::{Assembler, WireCarrier};
use crate::llm::wire::{Flow, WireSettings};
use crate::llm::{ChatRequest, LlmError, Message, MessagesVersion};

fn host(v: Value) -> Message {
    Message::from_host(v.as_object().unwrap().clone())
}

fn request<'a>(history: &'a [Message], tools: &'a Arc<Vec<Value>>) -> ChatRequest<'a> {
    ChatRequest {
        system: "sys",
        history,
        history_version: MessagesVersion::unknown(),
        transcript: &[],
        transcript_version: MessagesVersion::unknown(),
        tail: None,
        tools,
    }
}

fn settings() -> WireSettings {
    WireSettings {
        model: "claude".into(),
        max_tokens: 100,
        temperature: Some(0.3),
        extra_body: Default::default(),
    }
}

#[test]
fn tool_ids_fit_the_pattern_and_stay_distinct() {
    assert_eq!(tool_id("toolu_01A-b"), "toolu_01A-b");
    let long = "call_x|".to_owned() + &"i".repeat(200);
    for id in ["call_1|fc_2", "", "a.b", &long, "é"] {
        let t = tool_id(id);
        assert!(
            (1..=64).contains(&t.len())
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{id} -> {t}"
        );
        assert_eq!(tool_id(id), t, "stable");
    }
    assert_ne!(tool_id("a.b"), tool_id("a,b"), "distinct ids stay distinct");
}

#[test]
fn the_conversation_is_converted_as_the_api_requires() {
    let history = vec![
        Message::assistant_text("I start"),
        Message::System("mid-history note".into()),
        Message::User("question".into()),
        host(json!({"role": "assistant", "content": "calling",
            "tool_calls": [
                {"id": "call_1|fc_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}}],
            "anthropic_thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "S"},
                {"type": "redacted_thinking", "data": "R"}]})),
        host(json!({"role": "tool", "tool_call_id": "call_1|fc_1", "name": "f", "content": "one"})),
        host(json!({"role": "tool", "tool_call_id": "c2", "name": "g", "content": ""})),
        Message::User("and then".into()),
        host(
            json!({"role": "user", "content": [{"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}),
        ),
    ];
    let tools = Arc::new(vec![json!({"type": "function", "function": {"name": "f",
        "description": "d", "parameters": {"type": "object", "properties": {}}}})]);
    let req = request(&history, &tools);
    let m = messages(&req);
    assert_eq!(
        m[0],
        json!({"role": "user", "content": [{"type": "text", "text": SYNTHETIC_USER}]})
    );
    assert_eq!(m[1]["role"], "assistant");
    // The system message and the question merged into one user turn.
    assert_eq!(
        m[2],
        json!({"role": "user", "content": [{"type": "text", "text": "mid-history note"},
            {"type": "text", "text": "question"}]})
    );
    let blocks = m[3]["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "thinking", "thinking": "t", "signature": "S"})
    );
    assert_eq!(blocks[1], json!({"type": "redacted_thinking", "data": "R"}));
    assert_eq!(blocks[2], json!({"type": "text", "text": "calling"}));
    let id = tool_id("call_1|fc_1");
    assert_eq!(
        blocks[3],
        json!({"type": "tool_use", "id": id, "name": "f", "input": {"a": 1}})
    );
    assert_eq!(
        blocks[4]["input"],
        json!({}),
        "unparsable arguments go as {{}}"
    );
    // Results first, then the user's text and images, in one user turn.
    let user = m[4]["content"].as_array().unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(
        user[0],
        json!({"type": "tool_result", "tool_use_id": id, "content": "one"})
    );
    assert_eq!(user[1]["type"], "tool_result");
    assert_eq!(user[1]["content"], "(empty)");
    assert_eq!(user[2], json!({"type": "text", "text": "and then"}));
    assert_eq!(
        user[4],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
    );
    assert_eq!(
        user[5],
        json!({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}})
    );

    let body = render(&req, &settings(), 100);
    assert_eq!(body["system"], "sys");
    assert_eq!(body["stream"], true);
    assert!(!body.contains_key("temperature"));
    assert_eq!(
        body["tools"],
        json!([{"name": "f", "description": "d", "input_schema": {"type": "object", "properties": {}}}])
    );
}

fn run(events: &[Value]) -> (Assembler, Result<Flow, LlmError>) {
    let mut dec = Decoder::default();
    let mut asm = Assembler::default();
    let mut last = Ok(Flow::More);
    for e in events {
        last = decode(&mut dec, e.to_string().as_bytes(), &mut asm);
        if !matches!(last, Ok(Flow::More)) {
            break;
        }
    }
    (asm, last)
}

#[test]
fn signed_thinking_blocks_come_back_whole_and_usage_adds_the_cache() {
    let (asm, end) = run(&[
        json!({"type": "message_start", "message": {"model": "claude-x", "usage": {
            "input_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3,
            "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "a"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "b"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "xyz"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "noargs", "input": {}}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "future_event"}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 11}}),
        json!({"type": "message_stop"}),
    ]);
    assert_eq!(end.unwrap(), Flow::End);
    let r = asm.finish();
    assert_eq!(r.reasoning, "ab");
    assert_eq!(
        r.carrier,
        Some(WireCarrier::AnthropicThinking(vec![
            json!({"type": "thinking", "thinking": "ab", "signature": "SIG"}),
            json!({"type": "redacted_thinking", "data": "xyz"}),
        ]))
    );
    let u = r.usage.unwrap();
    assert_eq!(
        (
            u.prompt_tokens,
            u.completion_tokens,
            u.cache_read_tokens,
            u.cache_creation_tokens
        ),
        (15, 11, 7, 3),
        "cumulative output: the latest wins"
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.tool_calls[0].canonical_arguments(), "{}");
    assert_eq!(r.model, "claude-x");
}

#[test]
fn stop_reasons_and_in_stream_errors_map_as_the_reference() {
    for (stop, want) in [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("something_new", "something_new"),
    ] {
        assert_eq!(finish_reason(stop), want);
    }
    for (t, status, retryable) in [
        ("overloaded_error", 529, true),
        ("rate_limit_error", 429, true),
        ("api_error", 500, true),
        ("timeout_error", 504, true),
        ("invalid_request_error", 400, false),
    ] {
        let (_, end) = run(&[json!({"type": "error", "error": {"type": t, "message": "m"}})]);
        let e = end.unwrap_err();
        assert_eq!(
            (e.status, e.retryable, e.in_stream),
            (Some(status), retryable, true),
            "{t}"
        );
        assert_eq!(e.reference_text(), "m");
    }
}

/// Streams as the API sends them (text, thinking with its signature, a redacted block, a call
/// streamed in pieces, one without input, pings, an unknown event, an error).
fn corpus() -> Vec<Vec<Value>> {
    vec![
        vec![
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null,
                "usage": {"input_tokens": 5, "cache_read_input_tokens": 2, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm\n"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi \"x\""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ab"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": ""}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ],
        vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "xyz"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "future_event", "x": [1, {"y": null}]}),
            json!({"type": "message_stop"}),
        ],
        vec![
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "é"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "\u{1f600}\n"}}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ],
    ]
}

/// The fast path leaves the decoder, the assembler and each event's outcome as the general
/// decoder does, on the corpus and on every single-byte mutation and truncation of each event;
/// and it reads the corpus's deltas, block ends and pings itself.
#[test]
fn fast_and_general_paths_agree() {
    use super::decode::{at_eof, decode_by};
    use crate::llm::event_scan::assert_paths_agree_on_mutations;
    use crate::llm::openai::DecodePath;
    let mut fast = 0;
    for stream in corpus() {
        let events: Vec<Vec<u8>> = stream.iter().map(|e| e.to_string().into_bytes()).collect();
        for e in &events {
            let text = std::str::from_utf8(e).unwrap();
            fast += usize::from(super::fast_event::fast_event(text, None).is_some());
        }
        assert_paths_agree_on_mutations::<Decoder, _>(
            &events,
            &[
                DecodePath::GeneralOnly,
                DecodePath::NoMemo,
                DecodePath::Auto,
            ],
            decode_by,
            at_eof,
        );
    }
    assert_eq!(
        fast, 19,
        "the deltas, block ends, pings, unknown events and message ends"
    );
}

/// A message of our own shapes is written as its blocks straight, byte for byte what its map
/// and the blocks built from it give: texts with every kind of escape, ids that fit the API's
/// pattern and ids that do not, arguments that are an object, something else, or no JSON.
#[test]
fn our_messages_are_written_as_their_maps_give_them() {
    use super::request::{write_blocks, write_blocks_as_maps, TurnPart, Turns};
    use crate::llm::sealed_conversation::Units;
    use crate::llm::wire::messages_of_our_shapes;
    let long = "x".repeat(80);
    let arguments = [
        "{\"a\":1,\"b\":[true,null],\"c\":{\"d\":\"\\u00e9\\n\"}}",
        " {} ",
        "[1]",
        "\"s\"",
        "not json",
        "",
    ];
    let messages = messages_of_our_shapes(&["toolu_01", "call_1|fc_1", "", &long], &arguments);
    let written = |part: &TurnPart| {
        let mut out = Vec::new();
        Turns::write_unit(&[part], &mut out);
        (Turns::key(part), String::from_utf8(out).unwrap())
    };
    for m in &messages {
        let (mut straight, mut as_maps) = (TurnPart::default(), TurnPart::default());
        assert!(write_blocks(m, &mut straight), "{m:?}");
        write_blocks_as_maps(m, &mut as_maps);
        assert_eq!(written(&straight), written(&as_maps), "{m:?}");
    }
    assert!(!write_blocks(
        &Message::System("s".into()),
        &mut TurnPart::default()
    ));
}
