//! Unit tests of the OpenAI wire: rendering, decoding and the attempt's event reading.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::de::DeserializeSeed;
use serde_json::{Map, Value};

use super::decode::*;
use super::http::*;
use super::*;
use crate::llm::assembly::Assembler;
use crate::llm::sse::SseParser;
use crate::llm::text_chunk::{read_framed, LastTextChunk};
use crate::llm::{ChatRequest, LlmError};
use crate::llm::{Message, MessagesVersion};

/// Buffered events read as `try_ready` reads them (the remembered chunk's framed read
/// first, then the parser's whole-event path and the decoder) leave the assembler as the
/// general parser and the general decoder leave it, however the body is cut into reads.
#[test]
fn the_framed_read_decodes_as_the_parser_and_the_decoder() {
    let frame = |model: &str, content: &str, finish: &str| {
        format!(
            r#"{{"id":"c-1","object":"chat.completion.chunk","created":1,"model":"{model}","choices":[{{"index":0,"delta":{{"content":{content}}},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}"#
        )
    };
    let contents = [
        r#""abcd""#,
        r#""""#,
        r#""a\nb\"c\\""#,
        r#""\ud83d\ude00 é""#,
        r#""\ud800""#,
        "\"a\u{1}\"",
        "\"a\\\nb\"",
        "null",
        r#""a","x":"y""#,
        r#""xyz""#,
    ];
    let mut bodies = Vec::new();
    for (prefix, end) in [
        ("data: ", "\n"),
        ("data:", "\r\n"),
        ("data: ", "\r"),
        ("data:  ", "\n"),
    ] {
        let mut body = String::new();
        let event = |body: &mut String, data: &str| {
            body.push_str(prefix);
            body.push_str(data);
            body.push_str(end);
            body.push_str(end);
        };
        for (i, content) in contents.iter().cycle().take(30).enumerate() {
            let model = if i == 17 { "n" } else { "m" };
            // The bytes after the content differ, at the same length.
            let finish = if i == 21 { r#""ab""# } else { "null" };
            event(&mut body, &frame(model, content, finish));
            if i == 9 {
                body.push_str(&format!(": keep-alive{end}"));
            }
            if i == 12 {
                // One chunk over two data lines: the remembered sides then hold an LF.
                let f = frame("m", r#""ab""#, "null");
                let (a, b) = f.split_at(20);
                body.push_str(&format!("data: {a}{end}data: {b}{end}{end}"));
            }
        }
        for _ in 0..20 {
            event(&mut body, &frame("m", r#""plain""#, "null"));
        }
        event(&mut body, &frame("m", r#""end""#, r#""stop""#));
        event(
            &mut body,
            r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
        );
        event(&mut body, "[DONE]");
        bodies.push(body);
    }
    let mut framed = 0;
    for body in &bodies {
        let body = body.as_bytes();
        for cut in [body.len(), 1, 7, 64, 333] {
            for limit in [1 << 20, 240] {
                // The assembler after each event, both ways.
                let (mut states, mut general_states) = (Vec::new(), Vec::new());
                let mut asm = Assembler::default();
                let (mut p, mut last) = (SseParser::with_limit(limit), LastTextChunk::default());
                for part in body.chunks(cut) {
                    let mut pos = 0;
                    while pos < part.len() && !p.overflowed() {
                        let input = &part[pos..];
                        if let Some(n) = read_framed(&mut p, &last, input, &mut asm) {
                            pos += n;
                            framed += 1;
                            states.push(format!("{asm:?}"));
                            continue;
                        }
                        let (n, data) = p.next_event(input);
                        pos += n;
                        if let Some(d) = data {
                            let _ = decode_event_by(d, &mut asm, DecodePath::Auto, &mut last);
                            states.push(format!("{asm:?}"));
                        }
                    }
                }
                if p.finish() {
                    let _ = decode_event_by(p.data(), &mut asm, DecodePath::Auto, &mut last);
                }
                let mut general = Assembler::default();
                let mut q = SseParser::with_limit(limit);
                let mut no_memo = LastTextChunk::default();
                let mut pos = 0;
                while pos < body.len() && !q.overflowed() {
                    let (n, ready) = q.advance(&body[pos..]);
                    pos += n;
                    if ready {
                        let _ = decode_event_by(
                            q.data(),
                            &mut general,
                            DecodePath::GeneralOnly,
                            &mut no_memo,
                        );
                        general_states.push(format!("{general:?}"));
                    }
                }
                if q.finish() {
                    let _ = decode_event_by(
                        q.data(),
                        &mut general,
                        DecodePath::GeneralOnly,
                        &mut no_memo,
                    );
                }
                assert_eq!(p.overflowed(), q.overflowed(), "cut {cut}, limit {limit}");
                assert_eq!(states, general_states, "cut {cut}, limit {limit}");
                assert_eq!(
                    format!("{asm:?}"),
                    format!("{general:?}"),
                    "cut {cut}, limit {limit}: {}",
                    String::from_utf8_lossy(body)
                );
            }
        }
    }
    // Most of the adversarial contents above go to the general path; the plain run does not.
    assert!(framed > 60, "{framed} events took the framed read");
}

fn feed(lines: &[&str]) -> (Assembler, Option<LlmError>) {
    let mut asm = Assembler::default();
    for l in lines {
        if let Err(e) = decode_event(l.as_bytes(), &mut asm) {
            return (asm, Some(e));
        }
    }
    (asm, None)
}

/// The body as it was rendered before its static parts were cached: one
/// `serde_json` map in the reference's key order, `extra_body` keys appended and winning.
fn reference_body(b: &OpenAiBackend, req: &ChatRequest<'_>) -> Vec<u8> {
    let extra = &b.extra_body;
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        if !extra.contains_key(k) {
            m.insert(k.to_owned(), v);
        }
    };
    let mut messages = vec![serde_json::json!({"role": "system", "content": req.system})];
    messages.extend(
        req.history
            .iter()
            .chain(req.transcript)
            .map(|m| serde_json::to_value(m).unwrap()),
    );
    if let Some(t) = req.tail {
        messages.push(serde_json::json!({"role": "user", "content": t}));
    }
    put("model", Value::from(b.model.as_str()));
    put("messages", Value::Array(messages));
    put("stream", Value::Bool(true));
    put("stream_options", serde_json::json!({"include_usage": true}));
    if let Some(t) = b
        .temperature
        .filter(|_| !b.drop_temperature.load(Ordering::Relaxed))
    {
        put("temperature", Value::from(t));
    }
    if !req.tools.is_empty() {
        put("tools", Value::Array(req.tools.to_vec()));
        put("tool_choice", Value::from("auto"));
    }
    if b.use_max_completion_tokens.load(Ordering::Relaxed) {
        put("max_completion_tokens", Value::from(b.max_tokens));
    } else {
        put("max_tokens", Value::from(b.max_tokens));
    }
    for (k, v) in extra {
        m.insert(k.clone(), v.clone());
    }
    serde_json::to_vec(&Value::Object(m)).unwrap()
}

fn backend(llm: Value) -> (OpenAiBackend, Arc<Vec<Value>>) {
    let mut llm = llm;
    let o = llm.as_object_mut().unwrap();
    o.insert("provider".into(), "openai".into());
    o.insert("base_url".into(), "http://127.0.0.1:9/v1".into());
    o.insert("api_key".into(), "k".into());
    let config = crate::config::AgentConfig::from_json(
        &serde_json::json!({"working_directory": std::env::temp_dir(), "llm": llm}).to_string(),
    )
    .map_err(|e| e.0)
    .unwrap();
    let crate::config::LlmConfig::OpenAi(c) = &config.llm else {
        panic!("an openai config")
    };
    let tools = crate::tools::ToolRegistry::builtin(&config.tools).unwrap();
    (OpenAiBackend::new(c).unwrap(), tools.schemas())
}

/// Every request of the recorded reference transcripts (their message lists as history),
/// under several configs, with and without tools, across cache hits and changes of the
/// system prompt and the tool list: the spliced body is byte for byte the old rendering.
#[test]
fn body_is_the_old_rendering_for_the_transcripts() {
    let mut histories = Vec::new();
    for t in crate::llm::script::conformance_transcripts() {
        for r in t["turns"][0]["requests"].as_array().unwrap() {
            let messages = r["messages"].as_array().unwrap();
            assert_eq!(messages[0]["role"], "system");
            let typed: Vec<Message> = messages[1..]
                .iter()
                .map(|m| Message::from_host(m.as_object().unwrap().clone()))
                .collect();
            histories.push(typed);
        }
    }
    // The ten transcripts hold 19 requests.
    assert!(histories.len() >= 19, "{} requests", histories.len());

    let configs = [
        serde_json::json!({"model": "mock-model"}),
        serde_json::json!({"model": "m\u{e9}\"q\"", "temperature": 0.2, "max_tokens": 77}),
        serde_json::json!({"model": "m", "temperature": 1.0,
            "extra_body": {"top_p": 0.5, "stream": false, "tools": [], "seed": 7,
                "stream_options": null, "k\"\u{1}\u{e9}y": "v\n"}}),
        serde_json::json!({"model": "m", "extra_body": {"messages": [], "model": "x",
            "tool_choice": "none", "max_tokens": 1}}),
    ];
    let systems = [
        "You are a test.",
        "You are a tesT.",
        "Quotes \" and \\ and\nnew lines, \u{1} control, </script>, \u{2028}, caf\u{e9} \u{1f600}",
    ];
    let mut compared = 0;
    for (n, llm) in configs.iter().enumerate() {
        let (b, schemas) = backend(llm.clone());
        let fewer = Arc::new(schemas[..3].to_vec());
        let none = Arc::new(Vec::new());
        if n == 1 {
            // The latched repairs of spec §4.6.
            b.drop_temperature.store(true, Ordering::Relaxed);
            b.use_max_completion_tokens.store(true, Ordering::Relaxed);
        }
        for history in &histories {
            for system in systems {
                for tools in [&schemas, &fewer, &none, &schemas] {
                    for tail in [None, Some("volatile \"tail\"")] {
                        // The turn's own messages follow the history in the body.
                        let (history, transcript) = history.split_at(history.len() / 2);
                        let req = ChatRequest {
                            system,
                            history,
                            history_version: MessagesVersion::unknown(),
                            transcript_version: MessagesVersion::unknown(),
                            transcript,
                            tail,
                            tools,
                        };
                        let new = b.render_body(&req).to_bytes();
                        assert_eq!(
                            std::str::from_utf8(&new).unwrap(),
                            std::str::from_utf8(&reference_body(&b, &req)).unwrap(),
                            "config {llm}"
                        );
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared >= 4 * 19 * 3 * 4 * 2, "{compared} bodies compared");
}

/// A long conversation goes out as shared chunks: a request deep into it copies no more than
/// one chunk of history (the open one) and shares the rest with the request before, byte for
/// byte the old rendering all along.
#[test]
fn a_long_history_is_shared_not_copied() {
    use crate::llm::appended_chunks::CHUNK;
    let (b, schemas) = backend(serde_json::json!({"model": "m"}));
    let version = MessagesVersion::fresh();
    let mut history = Vec::new();
    let mut before: Vec<bytes::Bytes> = Vec::new();
    let mut largest_copy = 0;
    for i in 0..1000 {
        history.push(Message::User(format!("question {i}: \"why?\"")));
        history.push(Message::assistant_text(format!(
            "answer {i}, at some length"
        )));
        let req = ChatRequest {
            system: "s",
            history: &history,
            history_version: version,
            transcript: &[],
            transcript_version: MessagesVersion::unknown(),
            tail: Some("t"),
            tools: &schemas,
        };
        let body = b.render_body(&req);
        if i % 97 == 0 || i == 999 {
            assert_eq!(body.to_bytes(), reference_body(&b, &req), "request {i}");
        }
        // Bytes this request did not share with the one before.
        let copied: usize = body
            .pieces()
            .iter()
            .filter(|p| !before.iter().any(|q| q.as_ptr() == p.as_ptr()))
            .map(|p| p.len())
            .sum();
        if i > 0 {
            largest_copy = largest_copy.max(copied);
        }
        before = body.pieces().to_vec();
        if i == 999 {
            assert!(body.to_bytes().len() > 5 * CHUNK, "a long history");
        }
    }
    assert!(largest_copy < CHUNK + 1024, "{largest_copy} bytes copied");
}

/// Each message's rendering is kept between requests: a message edited in place (same
/// length), inserted before others or replaced is sent as it is now.
#[test]
fn an_edited_history_is_sent_as_edited() {
    use crate::llm::message::ToolAnswer;
    let (b, schemas) = backend(serde_json::json!({"model": "m"}));
    let check = |history: &[Message], transcript: &[Message]| {
        let req = ChatRequest {
            system: "s",
            history,
            history_version: MessagesVersion::unknown(),
            transcript_version: MessagesVersion::unknown(),
            transcript,
            tail: Some("t"),
            tools: &schemas,
        };
        assert_eq!(
            std::str::from_utf8(&b.render_body(&req).to_bytes()).unwrap(),
            std::str::from_utf8(&reference_body(&b, &req)).unwrap()
        );
    };
    let mut history = vec![
        Message::User("one".into()),
        Message::Tool(ToolAnswer::new("c", "read_file", "abc")),
        Message::assistant_text("two"),
    ];
    let turn = vec![Message::User("three".into())];
    check(&history, &turn);
    check(&history, &turn);
    let Message::Tool(t) = &mut history[1] else {
        unreachable!()
    };
    t.content = "xyz".into();
    check(&history, &turn);
    history.insert(0, Message::User("zero".into()));
    check(&history, &turn);
    check(&history[2..], &[]);
}

#[test]
fn decodes_text_reasoning_tools_usage() {
    let (asm, err) = feed(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}],"usage":null}"#,
        r#"{"choices":[{"delta":{"content":"Hi \"there\"","reasoning_content":"think"}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"x","arguments":{"k":2}}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
        r#"{"choices":null,"usage":null}"#,
        r#"{"id":"x"}"#,
    ]);
    assert!(err.is_none());
    let r = asm.finish();
    assert_eq!(r.content, "Hi \"there\"");
    assert_eq!(r.reasoning, "think");
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].raw_arguments, "{\"a\":1}");
    assert_eq!(r.tool_calls[1].raw_arguments, "{\"k\":2}");
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    let u = r.usage.unwrap();
    assert_eq!(
        (u.prompt_tokens, u.cache_read_tokens, u.reasoning_tokens),
        (5, 2, 1)
    );
}

/// Checking the whole event for UTF-8 first changes nothing: every event decodes as the
/// byte parser alone decoded it, valid or not, whatever the invalid byte's place.
#[test]
fn events_decode_as_the_byte_parser_decoded_them() {
    fn as_before(events: &[&[u8]]) -> (String, String, Option<String>) {
        let mut asm = Assembler::default();
        let mut error = None;
        for data in events {
            let mut de = serde_json::Deserializer::from_slice(data.trim_ascii());
            let seed = ChunkSeed {
                asm: &mut asm,
                error: &mut error,
            };
            let _ = seed.deserialize(&mut de);
        }
        let r = asm.finish();
        (r.content, r.reasoning, error.map(|e| e.message))
    }
    fn now(events: &[&[u8]]) -> (String, String, Option<String>) {
        let mut asm = Assembler::default();
        let mut error = None;
        for data in events {
            if let Err(e) = decode_event(data, &mut asm) {
                error = Some(e.message);
            }
        }
        let r = asm.finish();
        (r.content, r.reasoning, error)
    }
    let cases: [&[&[u8]]; 4] = [
        &[
            b"{\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}",
            b"{\"choices\":[{\"delta\":{\"content\":\"ok\"}}],\"id\":\"\xff\"}",
            b"{\"choices\":[{\"delta\":{\"content\":\"!\"}}]} ",
        ],
        &[
            b"{\"choices\":[{\"delta\":{\"reasoning_content\":\"r\",\"\xfe\":1,\"content\":\"c\"}}]}",
            "{\"choices\":[{\"delta\":{\"content\":\"caf\u{e9} \\u00e9 \u{1f600}\"}}]}".as_bytes(),
        ],
        &[b"{\"error\":{\"message\":\"bad \xff\",\"code\":500}}"],
        &[b"{\"error\":{\"message\":\"bad \\\" x\",\"code\":500}}"],
    ];
    for events in cases {
        assert_eq!(now(events), as_before(events), "{events:?}");
    }
    assert_eq!(now(cases[1]).0, "caf\u{e9} \u{e9} \u{1f600}");
}

#[test]
fn errors_inside_a_200_stream() {
    let (_, e) = feed(&[
        r#"{"error":{"message":"overloaded","type":"server_error","code":"server_error"}}"#,
    ]);
    let e = e.unwrap();
    assert_eq!(e.status, Some(500));
    assert!(e.retryable);
    let (_, e) = feed(&[r#"{"object":"error","message":"bad things","code":400}"#]);
    let e = e.unwrap();
    assert!(e.message.contains("bad things"));
    let (_, e) = feed(&[r#"{"error":{"message":"nope","code":"invalid_request"}}"#]);
    assert!(!e.unwrap().retryable);
}

#[test]
fn malformed_lines_are_skipped() {
    let (asm, err) = feed(&["{not json", r#"{"choices":[{"delta":{"content":"ok"}}]}"#]);
    assert!(err.is_none());
    assert_eq!(asm.finish().content, "ok");
}

#[test]
fn error_body_shapes() {
    let (m, c, t) = parse_error_body(
        br#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
    );
    assert_eq!(
        (m.as_str(), c.as_deref(), t.as_deref()),
        (
            "quota",
            Some("insufficient_quota"),
            Some("insufficient_quota")
        )
    );
    let (m, _, _) = parse_error_body(b"Bad Gateway");
    assert_eq!(m, "Bad Gateway");
}
