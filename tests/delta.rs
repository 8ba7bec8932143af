//! Streamed deltas: the fast path of chunk decoding (`llm/text_chunk.rs`) and the
//! general decoder read every event the same way, so the host sees the same deltas.
//!
//! The corpus: every SSE event the mock renders for the reference transcripts' model scripts
//! (under each framing option), the quirks of `openai-wire-and-quirks.md` §4 and the fuzz
//! seeds of `fuzz/corpus/chunk_decoder`; then every truncation of each event and every
//! single-byte change at every position to bytes that matter to a JSON scanner.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use agentao::agent::{Agent, TurnOptions};
use agentao::cancel::CancelToken;
use agentao::events::JsonText;
use agentao::llm::openai::{decode_event_after_for_fuzzing, decode_event_for_fuzzing, DecodePath};
use agentao::llm::sse::SseParser;
use agentao::turn::{DeltaSink, TurnStatus};
use mock_openai::MockServer;
use serde_json::{json, Value};

mod common;

fn sse_events(body: &[u8]) -> Vec<Vec<u8>> {
    let mut p = SseParser::default();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let (n, ready) = p.advance(&body[pos..]);
        pos += n;
        if ready {
            out.push(p.data().to_vec());
        }
    }
    if p.finish() {
        out.push(p.data().to_vec());
    }
    // The whole-event path the library reads with gives the same events, in one read and in
    // reads cut at every 7th byte (events split between reads).
    for cut in [body.len().max(1), 7] {
        let mut p = SseParser::default();
        let mut by_next = Vec::new();
        for part in body.chunks(cut) {
            let mut pos = 0;
            while pos < part.len() {
                let (n, data) = p.next_event(&part[pos..]);
                pos += n;
                by_next.extend(data.map(<[u8]>::to_vec));
            }
        }
        if p.finish() {
            by_next.push(p.data().to_vec());
        }
        assert_eq!(by_next, out, "next_event, reads of {cut} bytes");
    }
    out
}

fn transcript_scripts() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/transcripts");
    let mut scripts = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("the reference transcripts")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    for path in names {
        let t: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut llm = t["model_script"]["llm"].clone();
        llm.as_object_mut().unwrap().remove("exhausted");
        scripts.push(llm);
    }
    assert!(scripts.len() >= 10, "{} transcripts", scripts.len());
    scripts
}

/// What a mock renders for the transcripts, plus a long text stream (the bench's shape), in
/// each framing the mock has.
fn rendered_events() -> Vec<Vec<u8>> {
    let mut scripts = transcript_scripts();
    scripts.push(json!({"responses": [
        {"text": "a \"quoted\"\nline\twith tab, é, 😀, \u{2028} and \\ backslash", "chunk_size": 3,
         "usage": {"prompt_tokens": 2, "completion_tokens": 3}},
        {"reasoning": "think", "text": "answer", "chunk_size": 2},
    ]}));
    let wires = [
        json!({}),
        json!({"crlf": true, "no_space": true, "usage_choices": "null"}),
        json!({"keepalive_comments": true, "usage_choices": "absent"}),
    ];
    let mut events = Vec::new();
    for script in &scripts {
        for wire in &wires {
            let mut s = script.clone();
            s.as_object_mut()
                .unwrap()
                .insert("wire".into(), wire.clone());
            for body in mock_openai::render_sse_all(s).expect("the mock renders the script") {
                events.extend(sse_events(&body));
            }
        }
    }
    events
}

/// The servers' shapes of `openai-wire-and-quirks.md`, written out.
fn quirk_events() -> Vec<Vec<u8>> {
    [
        r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1y2"}"#,
        r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt","service_tier":"default","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
        r#"{"choices":null,"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
        r#"{"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
        r#"{"object":"error","message":"bad things","type":"BadRequestError","code":400}"#,
        r#"{"error":{"message":"overloaded","type":"server_error","code":"server_error"}}"#,
        r#"{"error":"plain","choices":[{"delta":{"content":"x"}}]}"#,
        r#"{"error":null,"choices":[{"delta":{"content":"x"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"a","reasoning_content":"b","tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":"r"}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":null,"content":"c","tool_calls":null}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":null,"reasoning":"r"}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":{"k":1}}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"x","id":"old","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"t"},"finish_reason":null}],"timings":{"predicted_ms":1.5}}"#,
        r#"{"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"y"},"content_filter_results":{"hate":{"filtered":false}}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"  stop  "}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":""}]}"#,
        r#"{"choices":[{"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"model":"m"}"#,
        r#"{"choices":[{"delta":{"content":"one"}},{"delta":{"content":"two"}}]}"#,
        r#"{"model":"first","model":"second","choices":[]}"#,
        r#"{"object":"chat.completion.chunk","object":"error","message":"late"}"#,
        r#"{"choices":[{"delta":{"content":"dup"},"delta":{"content":"licate"}}]}"#,
        r#"{"choices":[{"delta":{"content":"\u00e9\ud83d\ude00\n\"\\\/"}}],"model":"\u006d"}"#,
        r#"{"choices":[{"delta":{"content":"lone \ud800"}}]}"#,
        r#"{"created":-0,"choices":[{"index":12345678901234567890123,"delta":{"content":"n"}}]}"#,
        r#"{"created":1e3,"choices":[{"delta":{"content":"n"}}]}"#,
        r#"{"object":"\u0065rror","message":"escaped"}"#,
        r#"{"ch\u006fices":[{"delta":{"content":"escaped key"}}]}"#,
        r#"{"model":5,"choices":[{"delta":{"content":"late type error"}}]}"#,
        r#"{"choices":[{"delta":{"content":"before a type error"}}],"model":5}"#,
        r#"{"choices":[{"delta":{"content":5}}]}"#,
        r#"{"choices":[null]}"#,
        r#"{"choices":[{"delta":null,"finish_reason":"length"}]}"#,
        r#"{}"#,
        "  { \"choices\" : [ { \"delta\" : { \"content\" : \"spaced\" } } ] }\t\r\n",
        "\x0c{\"choices\":[{\"delta\":{\"content\":\"ff\"}}]}\x0c",
        "{\"choices\":[{\"delta\":{\"content\":\"ff inside\"}}]\x0c}",
        r#"[DONE]"#,
        r#" [DONE] "#,
        r#"{not json"#,
        r#""just a string""#,
        r#"[{"choices":[]}]"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn seed_events() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/chunk_decoder");
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("the fuzz seeds") {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        // The target's raw mode: one event per line after a first byte.
        if let Some((_, rest)) = bytes.split_first() {
            for l in rest.split(|b| *b == b'\n') {
                let l = l.strip_suffix(b"\r").unwrap_or(l);
                out.push(l.strip_prefix(b"data:").unwrap_or(l).to_vec());
            }
        }
    }
    out
}

/// Both ways agree on `event`; returns whether the fast path took it.
fn agree(event: &[u8]) -> bool {
    agree_after(&[], event)
}

/// Both ways agree on `event` decoded after `previous` (the fast path remembers the last text
/// chunk); returns whether the fast path took it.
fn agree_after(previous: &[u8], event: &[u8]) -> bool {
    let auto = decode_event_after_for_fuzzing(previous, event, DecodePath::Auto);
    let general = decode_event_for_fuzzing(event, DecodePath::GeneralOnly);
    assert!(!general.fast);
    assert_eq!(
        (&auto.assembler, &auto.error, &auto.done),
        (&general.assembler, &general.error, &general.done),
        "{:?}",
        String::from_utf8_lossy(event)
    );
    auto.fast
}

#[test]
fn fast_and_general_paths_agree() {
    let rendered = rendered_events();
    let mut corpus = rendered.clone();
    corpus.extend(quirk_events());
    corpus.extend(seed_events());
    let fast = corpus.iter().filter(|e| agree(e)).count();
    // Mutated: the quirks, the seeds and one event of each distinct shape the mock renders
    // (its keys, text aside), at every position.
    let mut shapes = std::collections::BTreeMap::new();
    for e in &rendered {
        let shape: Vec<u8> = e.iter().copied().filter(u8::is_ascii_punctuation).collect();
        shapes.entry(shape).or_insert(e);
    }
    let mut targets: Vec<&Vec<u8>> = shapes.into_values().collect();
    let (quirks, seeds) = (quirk_events(), seed_events());
    targets.extend(quirks.iter().chain(&seeds));
    // Bytes that steer a JSON scanner, and a few that never belong.
    let swaps: &[&[u8]] = &[
        b"\"", b"\\", b"}", b"]", b",", b" ", b"\x0c", b"\0", b"0", b"-", b"n", b"\xff",
    ];
    let mut variants = 0;
    for event in &targets {
        for cut in 0..event.len() {
            agree(&event[..cut]);
            agree_after(event, &event[..cut]);
            for swap in swaps {
                let mut v = event[..cut].to_vec();
                v.extend_from_slice(swap);
                v.extend_from_slice(&event[cut + 1..]);
                agree(&v);
                agree_after(event, &v);
                variants += 1;
            }
        }
    }
    println!(
        "{} events ({fast} on the fast path), {} mutated at every byte: {variants} variants",
        corpus.len(),
        targets.len()
    );
    // The path must be taken where it matters: the mock's text chunks.
    let text_chunks = rendered
        .iter()
        .filter(|e| {
            let s = String::from_utf8_lossy(e);
            s.contains("\"content\":\"") && !s.contains("tool_calls") && !s.contains("reasoning")
        })
        .count();
    let fast_rendered = rendered.iter().filter(|e| agree(e)).count();
    assert!(
        text_chunks > 100 && fast_rendered >= text_chunks,
        "{fast_rendered} of {} rendered events on the fast path, {text_chunks} text chunks",
        rendered.len()
    );
}

/// The tool-call chunks of the corpus (the transcripts' calls, the fuzz seeds, the quirks) are
/// read by the tool-call fast path and agree with the general decoder; the mutations of them
/// are in `fast_and_general_paths_agree`.
#[test]
fn tool_call_chunks_take_the_fast_path() {
    let mut corpus = rendered_events();
    corpus.extend(quirk_events());
    corpus.extend(seed_events());
    let calls: Vec<&Vec<u8>> = corpus
        .iter()
        .filter(|e| {
            let s = String::from_utf8_lossy(e);
            s.contains("\"tool_calls\":[{") && !s.contains("reasoning_content\":\"")
        })
        .collect();
    let fast = calls.iter().filter(|e| agree(e)).count();
    println!(
        "{fast} of {} tool-call chunks on the fast path",
        calls.len()
    );
    // The mock's streamed calls (arguments as strings) all; some quirks and seeds are meant
    // for the general decoder (arguments as objects, errors beside calls).
    let streamed = rendered_events()
        .into_iter()
        .filter(|e| String::from_utf8_lossy(e).contains("\"tool_calls\":[{"))
        .collect::<Vec<_>>();
    assert!(streamed.len() >= 10, "{} streamed calls", streamed.len());
    for e in &streamed {
        assert!(
            agree(e),
            "not on the fast path: {}",
            String::from_utf8_lossy(e)
        );
    }
}

/// A turn of [`batch_text`]'s chunks on the mock (`http`; it writes the whole body at once)
/// or the scripted provider, `extra` added to the LLM config, whose deltas go to a callback
/// that cancels the turn after `cancel_after` of them (never with 0): the texts the callback
/// got, the `llm_text` events, and the outcome's status and text.
fn stream_turn(
    http: bool,
    extra: Value,
    cancel_after: usize,
) -> (Vec<String>, Vec<String>, TurnStatus, String) {
    let script = json!({"responses": [{"chunks": batch_text()}]});
    let server = MockServer::start(script.clone()).unwrap();
    let mut llm = match http {
        true => {
            json!({"provider": "openai", "base_url": server.base_url(), "api_key": "k", "model": "m"})
        }
        false => json!({"provider": "scripted", "script": script}),
    };
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        llm[k] = v;
    }
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(common::RecordingHost::default());
    let config = json!({"working_directory": dir.path(), "llm": llm});
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    let token = CancelToken::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, t) = (seen.clone(), token.clone());
    let sink = DeltaSink::Callback(Arc::new(move |item: JsonText<'_>| {
        let item: Value = serde_json::from_str(item.as_str()).unwrap();
        let mut seen = s.lock().unwrap();
        seen.push(item["text"].as_str().unwrap().to_owned());
        if seen.len() == cancel_after {
            t.cancel("host");
        }
    }));
    let (tx, rx) = mpsc::channel();
    let opts = TurnOptions {
        cancel: Some(token),
        ..Default::default()
    };
    agent
        .start_turn("go".into(), opts, sink, move |r| tx.send(r).unwrap())
        .unwrap();
    let outcome = match rx.recv_timeout(Duration::from_secs(30)).unwrap() {
        Ok(o) => o,
        Err((e, o)) => o.unwrap_or_else(|| panic!("{e:?}")),
    };
    let events = host
        .events_of("llm_text")
        .iter()
        .map(|e| e["data"]["chunk"].as_str().unwrap().to_owned())
        .collect();
    let seen = seen.lock().unwrap().clone();
    (seen, events, outcome.status, outcome.text)
}

/// The pieces of the 400-character text of [`read_batches`], 4 characters each.
fn batch_text() -> Vec<String> {
    (0..100).map(|i| format!("{i:03} ")).collect()
}

/// The turn hands the deltas already read (one network read holds many) to the host without
/// an await each: each still reaches the host as its own delta and event, in order, and a
/// cancel from the host's callback stops the deltas after it within the same read, on the
/// HTTP path (the mock writes the whole body at once) and on the scripted provider.
#[test]
fn a_cancel_in_a_delta_callback_stops_the_rest_of_the_read() {
    let chunks = batch_text();
    for http in [true, false] {
        let (seen, events, status, text) = stream_turn(http, json!({}), 0);
        assert_eq!(seen, chunks);
        assert_eq!(events, chunks);
        assert_eq!((status, text), (TurnStatus::Ok, chunks.concat()));
        for cancel_after in [1, 2, 31, 32, 33, 64, 99] {
            let (seen, events, status, text) = stream_turn(http, json!({}), cancel_after);
            assert_eq!(seen, chunks[..cancel_after], "cancel after {cancel_after}");
            assert_eq!(events, chunks[..cancel_after]);
            assert_eq!(status, TurnStatus::Cancelled);
            assert_eq!(text, chunks[..cancel_after].concat());
        }
    }
}

/// `max_response_bytes` reached in the middle of a read: the deltas before the bound reach the
/// host one by one, the one past it does not, and the turn ends with the size error.
#[test]
fn the_response_bound_cuts_a_read_where_it_is_reached() {
    let chunks = batch_text();
    for bound in [1, 4, 5, 130, 399] {
        let (seen, events, _, text) = stream_turn(true, json!({"max_response_bytes": bound}), 0);
        let kept = bound / 4;
        assert_eq!(seen, chunks[..kept], "bound {bound}");
        assert_eq!(events, chunks[..kept]);
        assert!(text.contains("llm.max_response_bytes"), "{text}");
    }
}
