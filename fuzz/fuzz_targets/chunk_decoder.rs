//! The streamed chat-completion chunk decoder (`llm/openai/decode.rs`: serde visitors writing into the
//! `Assembler`), through `decode_events_for_fuzzing`.
//!
//! Input, first byte even: raw events, one per line (an optional `data:` prefix is dropped),
//! as a hostile server may send them. Asserts no panic and bounded output: the assembled text,
//! reasoning, tool names, ids and arguments together stay within a small multiple of the input.
//!
//! Each raw event is also decoded on its own both ways: the fast path for plain text chunks
//! and the general decoder must leave the same state and the same error; and so must the fast
//! path reading an event after the one before it (what it remembers of the last text chunk).
//!
//! First byte odd: a round trip. The rest of the input is cut into deltas (text, reasoning,
//! tool-call fragments, finish reason), each rendered as a real chunk with serde_json; the
//! decoder must give back exactly the joined text, the joined reasoning and, per call index,
//! the id, name and joined arguments.
#![no_main]

use agentao::llm::openai::{
    decode_event_after_for_fuzzing, decode_event_for_fuzzing, decode_events_for_fuzzing, DecodePath,
};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn raw_case(input: &[u8]) {
    let events: Vec<&[u8]> = input
        .split(|b| *b == b'\n')
        .map(|l| {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            l.strip_prefix(b"data:").unwrap_or(l)
        })
        .collect();
    for e in &events {
        let auto = decode_event_for_fuzzing(e, DecodePath::Auto);
        let mut general = decode_event_for_fuzzing(e, DecodePath::GeneralOnly);
        general.fast = auto.fast;
        assert_eq!(auto, general, "{:?}", String::from_utf8_lossy(e));
    }
    // The last text chunk remembered: each event decoded after the one before it.
    for pair in events.windows(2) {
        let auto = decode_event_after_for_fuzzing(pair[0], pair[1], DecodePath::Auto);
        let mut general = decode_event_for_fuzzing(pair[1], DecodePath::GeneralOnly);
        general.fast = auto.fast;
        assert_eq!(auto, general, "{:?}", String::from_utf8_lossy(pair[1]));
    }
    let (resp, _err) = decode_events_for_fuzzing(events.iter().copied());
    let out = resp.content.len()
        + resp.reasoning.len()
        + resp.model.len()
        + resp.finish_reason.as_ref().map_or(0, String::len)
        + resp
            .tool_calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.raw_arguments.len())
            .sum::<usize>();
    // Non-string `arguments` are re-serialized (`-0` becomes `-0.0`): allow a factor of 2.
    assert!(
        out <= 2 * input.len() + 16,
        "{out} bytes assembled from {}",
        input.len()
    );
}

fn round_trip(input: &[u8]) {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls: Vec<(u8, String)> = Vec::new();
    let mut finish: Option<String> = None;
    let mut events = Vec::new();
    for piece in input.chunks(7) {
        let kind = piece[0] % 4;
        let body = String::from_utf8_lossy(&piece[1..]).into_owned();
        let chunk = match kind {
            0 => {
                text.push_str(&body);
                json!({"choices": [{"index": 0, "delta": {"content": body}}]})
            }
            1 => {
                reasoning.push_str(&body);
                json!({"choices": [{"index": 0, "delta": {"reasoning_content": body}}]})
            }
            2 => {
                let index = piece[0] / 4 % 4;
                let call = match calls.iter_mut().find(|(i, _)| *i == index) {
                    Some(c) => {
                        c.1.push_str(&body);
                        json!({"index": index, "function": {"arguments": body}})
                    }
                    None => {
                        calls.push((index, body.clone()));
                        json!({"index": index, "id": format!("call_{index}"), "type": "function",
                               "function": {"name": format!("tool_{index}"), "arguments": body}})
                    }
                };
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
            }
            _ => {
                if !body.trim().is_empty() {
                    finish = Some(body.trim().to_owned());
                }
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": body}]})
            }
        };
        events.push(serde_json::to_vec(&chunk).expect("a json! value serializes"));
    }
    events.push(b"[DONE]".to_vec());
    events.push(br#"{"choices":[{"delta":{"content":"after DONE"}}]}"#.to_vec());
    let (resp, err) = decode_events_for_fuzzing(events.iter().map(Vec::as_slice));
    assert!(err.is_none(), "{err:?}");
    assert_eq!(resp.content, text);
    assert_eq!(resp.reasoning, reasoning);
    assert_eq!(resp.finish_reason, finish);
    let got: Vec<(String, String, String)> = resp
        .tool_calls
        .into_iter()
        .map(|c| (c.id.to_string(), c.name.to_string(), c.raw_arguments))
        .collect();
    let want: Vec<(String, String, String)> = calls
        .into_iter()
        .map(|(i, a)| (format!("call_{i}"), format!("tool_{i}"), a))
        .collect();
    assert_eq!(got, want);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        raw_case(rest);
    } else {
        round_trip(rest);
    }
});
