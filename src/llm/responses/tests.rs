//! Unit tests of the Responses wire: the `input` items and the typed events.

use std::sync::Arc;

use serde_json::{json, Value};

use super::decode::{decode, Decoder};
use super::request::{render, split_id};
use crate::llm::assembly::{Assembler, WireCarrier};
use crate::llm::wire::{Flow, WireSettings};
use crate::llm::{ChatRequest, LlmError, Message, MessagesVersion};

fn host(v: Value) -> Message {
    Message::from_host(v.as_object().unwrap().clone())
}

#[test]
fn the_body_is_stateless_and_its_items_round_trip() {
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [],
        "encrypted_content": "ENC"});
    let history = vec![
        Message::User("q".into()),
        host(json!({"role": "assistant", "content": "",
            "tool_calls": [{"id": "call_1|fc_1", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\":1}"}}],
            "openai_reasoning_items": [reasoning]})),
        host(json!({"role": "tool", "tool_call_id": "call_1|fc_1", "name": "f", "content": "out"})),
        Message::System("note".into()),
        host(
            json!({"role": "user", "content": [{"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]}),
        ),
    ];
    let tools = Arc::new(vec![json!({"type": "function", "function": {"name": "f",
        "description": "d", "parameters": {"type": "object"}}})]);
    let req = ChatRequest {
        system: "sys",
        history: &history,
        history_version: MessagesVersion::unknown(),
        transcript: &[],
        transcript_version: MessagesVersion::unknown(),
        tail: Some("tail"),
        tools: &tools,
    };
    let s = WireSettings {
        model: "o4".into(),
        max_tokens: 3,
        temperature: None,
        extra_body: Default::default(),
    };
    let body = render(&req, &s, None);
    assert_eq!(body["store"], false);
    assert!(!body.contains_key("previous_response_id"));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["max_output_tokens"], 16, "at least 16");
    assert_eq!(body["instructions"], "sys");
    assert!(!body.contains_key("temperature"));
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "f", "description": "d",
            "parameters": {"type": "object"}, "strict": false}])
    );
    let input = body["input"].as_array().unwrap();
    assert_eq!(
        input[0],
        json!({"role": "user", "content": [{"type": "input_text", "text": "q"}]})
    );
    assert_eq!(input[1], reasoning, "whole");
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "call_1", "id": "fc_1", "name": "f",
            "arguments": "{\"a\":1}"})
    );
    assert_eq!(
        input[3],
        json!({"type": "function_call_output", "call_id": "call_1", "output": "out"})
    );
    assert_eq!(input[4], json!({"role": "system", "content": "note"}));
    assert_eq!(
        input[5]["content"][1],
        json!({"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "auto"})
    );
    assert_eq!(input[6]["content"][0]["text"], "tail");
    assert_eq!(split_id("a|b"), ("a", Some("b")));
    assert_eq!(split_id("a"), ("a", None));
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
fn without_done_events_the_completed_response_fills_the_gaps() {
    let whole = json!({"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text",
        "text": "why"}], "encrypted_content": "E"});
    let (asm, end) = run(&[
        json!({"type": "response.created", "response": {"model": "gpt-x"}}),
        json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_9", "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "why"}),
        json!({"type": "response.reasoning_text.delta", "output_index": 0, "delta": "!"}),
        // A call whose arguments arrive only in the completed response.
        json!({"type": "response.output_item.added", "output_index": 1,
            "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}}),
        json!({"type": "response.completed", "response": {"status": "completed",
            "output": [whole, {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                "name": "f", "arguments": "{\"x\":2}"}],
            "usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 8},
                "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 4}}}}),
    ]);
    assert_eq!(end.unwrap(), Flow::End);
    let r = asm.finish();
    assert_eq!(r.reasoning, "why!");
    assert_eq!(
        r.carrier,
        Some(WireCarrier::ResponsesReasoning(vec![whole]))
    );
    assert_eq!(&*r.tool_calls[0].id, "call_1|fc_1");
    assert_eq!(r.tool_calls[0].canonical_arguments(), "{\"x\": 2}");
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    let u = r.usage.unwrap();
    assert_eq!(
        (
            u.prompt_tokens,
            u.completion_tokens,
            u.cache_read_tokens,
            u.reasoning_tokens
        ),
        (20, 6, 8, 4)
    );
    assert_eq!(r.model, "gpt-x");
}

#[test]
fn arguments_from_deltas_are_not_doubled_by_the_done_events() {
    let (asm, _) = run(&[
        json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": "{\"a\""}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": ":1}"}),
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": "{\"a\":1}"}),
        json!({"type": "response.output_item.done", "output_index": 0,
            "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"}}),
        json!({"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}}),
    ]);
    let r = asm.finish();
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].canonical_arguments(), "{\"a\": 1}");
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
}

#[test]
fn error_events_and_failed_responses_are_classified() {
    let (_, end) =
        run(&[json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow"})]);
    let e = end.unwrap_err();
    assert_eq!(
        (e.status, e.retryable, e.in_stream),
        (Some(429), true, true)
    );
    let (_, end) = run(&[
        json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "server_error", "message": "boom"}}}),
    ]);
    let e = end.unwrap_err();
    assert_eq!((e.status, e.retryable), (Some(500), true));
    assert_eq!(e.reference_text(), "boom");
    let (_, end) = run(&[json!({"type": "error", "code": "invalid_prompt", "message": "no"})]);
    assert!(!end.unwrap_err().retryable);
}

/// Streams as the API sends them (reasoning, text, a call in pieces with its `.done` events)
/// and as compatible servers do (no `.done` events), and an error.
fn corpus() -> Vec<Vec<Value>> {
    vec![
        vec![
            json!({"type": "response.created", "sequence_number": 0, "response": {"id": "r", "model": "o4", "output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_0", "summary": []}}),
            json!({"type": "response.reasoning_summary_part.added", "item_id": "rs_0", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
            json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_0", "output_index": 0, "summary_index": 0, "delta": "think"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "E"}}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Hi\n\"x\"", "logprobs": [], "sequence_number": 7}),
            json!({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 1, "content_index": 0, "text": "Hi", "logprobs": []}),
            json!({"type": "response.output_item.added", "output_index": 2, "item": {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "f", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_2", "output_index": 2, "delta": "{\"a\":"}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_2", "output_index": 2, "delta": "1}"}),
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_2", "output_index": 2, "arguments": "{\"a\":1}"}),
            json!({"type": "response.completed", "response": {"model": "o4", "output": [],
                "usage": {"input_tokens": 3, "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 1}}}}),
        ],
        vec![
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": "fc_0", "call_id": "call_0", "name": "g", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_0", "output_index": 0, "arguments": "{}"}),
            json!({"type": "response.reasoning_text.delta", "output_index": 1, "delta": "r"}),
            json!({"type": "response.refusal.delta", "output_index": 2, "delta": "no"}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_9", "delta": "{}"}),
            json!({"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}}),
        ],
        vec![
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "é"}),
            json!({"type": "error", "code": "server_error", "message": "boom"}),
        ],
    ]
}

/// The fast path leaves the decoder, the assembler and each event's outcome as the general
/// decoder does, on the corpus and on every single-byte mutation and truncation of each event;
/// and it reads the corpus's deltas, `.done` arguments and ignored events itself.
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
            fast += usize::from(super::fast_event::fast_event(text).is_some());
        }
        assert_paths_agree_on_mutations::<Decoder, _>(
            &events,
            &[DecodePath::GeneralOnly, DecodePath::Auto],
            decode_by,
            at_eof,
        );
    }
    assert_eq!(
        fast, 12,
        "the deltas, the .done arguments and the ignored events"
    );
}

/// Events whose nested objects the general decoder reads, as the API sends them: a whole
/// response (its tools, instructions and message text, none of which the decoder reads) and
/// whole items of each kind.
fn whole_responses() -> Vec<Value> {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
        "arguments": "{\"a\":1}", "status": "completed"});
    let reasoning = json!({"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text",
        "text": "t"}], "encrypted_content": "E"});
    let message = json!({"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Hi", "annotations": [], "logprobs": []}]});
    let response = |status: &str, output: Value| {
        json!({"id": "resp_1", "object": "response", "created_at": 0, "model": "o4",
            "status": status, "instructions": "sys", "output": output,
            "tools": [{"type": "function", "name": "f", "description": "d",
                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}],
            "usage": {"input_tokens": 5, "output_tokens": 2}})
    };
    vec![
        json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress", json!([]))}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": call}),
        json!({"type": "response.output_item.done", "output_index": 2, "item": message}),
        json!({"type": "response.completed", "sequence_number": 9,
            "response": response("completed", json!([reasoning, call, message]))}),
    ]
}

/// The general decoder reads only some members of an event (`read_members`); what it does is
/// what it did with the whole event built, on the corpus and on every single-byte mutation and
/// truncation of each event.
#[test]
fn the_members_read_decode_as_the_whole_event() {
    use super::decode::{apply, at_eof};
    use super::read_members::read_members;
    use crate::llm::event_scan::assert_paths_agree_on_mutations;
    #[derive(Debug, Clone, Copy)]
    enum Built {
        Whole,
        MembersRead,
    }
    let decode = |dec: &mut Decoder, data: &[u8], asm: &mut Assembler, built: Built| {
        let data = data.trim_ascii();
        let event = match built {
            Built::Whole => serde_json::from_slice::<Value>(data).ok(),
            Built::MembersRead => read_members(data),
        };
        match event {
            Some(v) => apply(dec, &v, asm),
            None => Ok(Flow::More),
        }
    };
    for stream in corpus().into_iter().chain([whole_responses()]) {
        let events: Vec<Vec<u8>> = stream.iter().map(|e| e.to_string().into_bytes()).collect();
        assert_paths_agree_on_mutations::<Decoder, _>(
            &events,
            &[Built::Whole, Built::MembersRead],
            decode,
            at_eof,
        );
    }
}

/// A message of our own shapes is written as its items straight, byte for byte what its map
/// and the items built from it give: texts with every kind of escape, ids with and without
/// an item id, calls with and without text.
#[test]
fn our_messages_are_written_as_their_maps_give_them() {
    use super::request::{write_items, write_items_as_maps};
    use crate::llm::wire::messages_of_our_shapes;
    let ids = ["call_1", "call_1|fc_1", "call_1|", "|fc_1", "a|b|c", ""];
    let messages = messages_of_our_shapes(&ids, &["{\"a\":\"q\\\"\\n\"}", ""]);
    for m in &messages {
        let (mut straight, mut as_maps) = (Vec::new(), Vec::new());
        assert!(write_items(m, &mut straight), "{m:?}");
        write_items_as_maps(m, &mut as_maps);
        assert_eq!(
            String::from_utf8(straight).unwrap(),
            String::from_utf8(as_maps).unwrap(),
            "{m:?}"
        );
    }
    assert!(!write_items(&Message::System("s".into()), &mut Vec::new()));
}
