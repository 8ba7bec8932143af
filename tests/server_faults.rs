//! Hostile model servers (docs/reliability.md, "Model server"): endless streams, a line that
//! never ends, a JSON body that never ends, keep-alive data without progress, a slowloris.
//! Each test runs a whole turn against the loopback mock and checks that the turn ends with a
//! clear `llm_error` text, that memory stays bounded (resident-set growth sampled from
//! /proc/self/status while the turn runs), and that a cancel ends the turn promptly. The
//! figures are printed as `FIGURE ...` lines.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentao::agent::Agent;
use mock_openai::{Hostile, MockServer};
use serde_json::{json, Value};

mod common;

/// The tests of this file run one at a time: each measures this process's memory and timing,
/// which a flood in a neighbouring test would distort.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Current resident set, in KiB.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Samples the resident set every 5 ms until dropped; `peak_growth_mb` is the largest growth
/// over the value at the start.
struct RssSampler {
    start: u64,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start() -> Self {
        let start = rss_kb();
        let peak = Arc::new(AtomicU64::new(start));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_kb(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        RssSampler {
            start,
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn peak_growth_mb(mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.fetch_max(rss_kb(), Ordering::Relaxed);
        (self.peak.load(Ordering::Relaxed).saturating_sub(self.start)) as f64 / 1024.0
    }
}

fn agent(server: &MockServer, llm: Value) -> (Agent, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut l = json!({"provider": "openai", "base_url": server.base_url(), "api_key": "k",
        "model": "m", "retry_backoff_base_ms": 10, "retry_backoff_cap_ms": 50});
    for (k, v) in llm.as_object().cloned().unwrap_or_default() {
        l[k] = v;
    }
    let config = json!({"working_directory": dir.path(), "llm": l});
    (Agent::new(&config.to_string(), None).unwrap(), dir)
}

/// Runs a turn that must end by itself within `limit` (cancelled after that, so a failing test
/// does not leave a runaway turn); returns its text, time and peak RSS growth.
fn run_until_it_ends(agent: &Agent, limit: Duration) -> (String, Duration, f64) {
    let rss = RssSampler::start();
    let t0 = Instant::now();
    let (token, rx) = common::start_cancellable(agent, "hi");
    let got = rx.recv_timeout(limit);
    if got.is_err() {
        token.cancel("test-gave-up");
        let _ = rx.recv_timeout(Duration::from_secs(60));
    }
    let grew = rss.peak_growth_mb();
    let (at, result) = got.unwrap_or_else(|_| {
        panic!("the turn did not end by itself within {limit:?} (RSS grew {grew:.0} MB)")
    });
    let outcome = result.expect("the turn completes with an outcome");
    assert_eq!(
        outcome.incomplete_reason.map(|r| r.as_str()),
        Some("llm_error"),
        "{}",
        outcome.text
    );
    (outcome.text, at.duration_since(t0), grew)
}

#[test]
fn an_endless_stream_is_cut_at_the_response_bound() {
    let _serial = serial();
    let server = MockServer::builder()
        .start_hostile(Hostile::EndlessText {
            chunk: 1024,
            interval_ms: 0,
        })
        .unwrap();
    let (agent, _dir) = agent(&server, json!({}));
    let (text, took, grew) = run_until_it_ends(&agent, Duration::from_secs(20));
    println!(
        "FIGURE server.endless_stream ended_ms={} rss_growth_mb={grew:.1}",
        took.as_millis()
    );
    assert!(text.starts_with("[LLM API error: "), "{text}");
    assert!(text.contains("llm.max_response_bytes"), "{text}");
    // 16 MiB of text, held a few times over (assembler, history, events): far below the GBs
    // an unbounded stream reaches in the same time.
    assert!(grew < 256.0, "RSS grew {grew:.0} MB");
    assert_eq!(server.request_count(), 1, "a size refusal is not retried");
}

#[test]
fn a_line_that_never_ends_is_cut_at_the_event_bound() {
    let _serial = serial();
    let server = MockServer::builder()
        .start_hostile(Hostile::GiantLine)
        .unwrap();
    let (agent, _dir) = agent(&server, json!({"max_event_bytes": 4 << 20}));
    let (text, took, grew) = run_until_it_ends(&agent, Duration::from_secs(20));
    println!(
        "FIGURE server.giant_line ended_ms={} rss_growth_mb={grew:.1}",
        took.as_millis()
    );
    assert!(
        text.contains("llm.max_event_bytes (4194304 bytes)"),
        "{text}"
    );
    assert!(grew < 128.0, "RSS grew {grew:.0} MB");
}

#[test]
fn a_line_that_never_ends_is_cut_at_the_default_bound() {
    let _serial = serial();
    let server = MockServer::builder()
        .start_hostile(Hostile::GiantLine)
        .unwrap();
    let (agent, _dir) = agent(&server, json!({}));
    let (text, took, grew) = run_until_it_ends(&agent, Duration::from_secs(20));
    println!(
        "FIGURE server.giant_line_default ended_ms={} rss_growth_mb={grew:.1}",
        took.as_millis()
    );
    assert!(
        text.contains("llm.max_event_bytes (16777216 bytes)"),
        "{text}"
    );
    assert!(grew < 256.0, "RSS grew {grew:.0} MB");
}

#[test]
fn a_json_body_that_never_ends_is_cut_at_the_event_bound() {
    let _serial = serial();
    let server = MockServer::builder()
        .start_hostile(Hostile::GiantJson)
        .unwrap();
    let (agent, _dir) = agent(&server, json!({}));
    let (text, took, grew) = run_until_it_ends(&agent, Duration::from_secs(20));
    println!(
        "FIGURE server.giant_json ended_ms={} rss_growth_mb={grew:.1}",
        took.as_millis()
    );
    assert!(
        text.contains("JSON response is larger than llm.max_event_bytes"),
        "{text}"
    );
    assert!(grew < 256.0, "RSS grew {grew:.0} MB");
}

#[test]
fn empty_deltas_and_keepalives_do_not_reset_the_idle_timer() {
    let _serial = serial();
    let server = MockServer::builder()
        .start_hostile(Hostile::EmptyDeltas { interval_ms: 100 })
        .unwrap();
    let (agent, _dir) = agent(&server, json!({"read_timeout_ms": 600, "max_attempts": 1}));
    let (text, took, _) = run_until_it_ends(&agent, Duration::from_secs(15));
    println!("FIGURE server.keepalive_only ended_ms={}", took.as_millis());
    assert!(text.contains("Request timed out"), "{text}");
    assert!(took >= Duration::from_millis(550), "{took:?}");
}

#[test]
fn call_timeout_bounds_a_slowloris() {
    let _serial = serial();
    // One byte of text every 50 ms: progress, so the idle timer never fires.
    let server = MockServer::builder()
        .start_hostile(Hostile::EndlessText {
            chunk: 1,
            interval_ms: 50,
        })
        .unwrap();
    let (agent, _dir) = agent(
        &server,
        json!({"read_timeout_ms": 600, "call_timeout_ms": 1500}),
    );
    let (text, took, grew) = run_until_it_ends(&agent, Duration::from_secs(15));
    println!(
        "FIGURE server.slowloris ended_ms={} rss_growth_mb={grew:.1}",
        took.as_millis()
    );
    assert!(text.contains("llm.call_timeout_ms (1500 ms)"), "{text}");
    assert!(took >= Duration::from_millis(1400), "{took:?}");
    assert_eq!(
        server.request_count(),
        1,
        "the deadline is for the whole call"
    );
}

/// Cancels a turn while `hostile` streams at it; returns the cancel-to-completion time.
fn cancel_during(hostile: Hostile, llm: Value, name: &str) -> Duration {
    cancel_after(Duration::from_millis(300), hostile, llm, name)
}

/// [`cancel_during`], the cancel coming `after` the turn started.
fn cancel_after(after: Duration, hostile: Hostile, llm: Value, name: &str) -> Duration {
    let server = MockServer::builder().start_hostile(hostile).unwrap();
    let (agent, _dir) = agent(&server, llm);
    let rss = RssSampler::start();
    let (token, rx) = common::start_cancellable(&agent, "hi");
    std::thread::sleep(after);
    let cancelled_at = Instant::now();
    token.cancel("test-cancel");
    let (done_at, result) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a cancelled turn completes");
    let grew = rss.peak_growth_mb();
    let lag = done_at.duration_since(cancelled_at);
    println!(
        "FIGURE server.{name}.cancel cancel_to_done_ms={:.1} rss_growth_mb={grew:.1}",
        lag.as_secs_f64() * 1000.0
    );
    let outcome = result.unwrap();
    println!(
        "  (outcome text at the cancel: {} bytes)",
        outcome.text.len()
    );
    assert_eq!(outcome.status.as_str(), "cancelled", "{}", outcome.text);
    lag
}

#[test]
fn cancel_ends_a_turn_under_a_flooding_stream() {
    let _serial = serial();
    // A generous bound, so the flood is still going when the cancel comes. The cancel comes
    // early: what a cancelled turn still does is linear in the text it keeps (its outcome and
    // `turn_end` event), 24–66 ms per MB in a debug build depending on the load, and the flood
    // brings 20–35 MB in 300 ms, which made the bound below a measure of that, not of the
    // cancel (it failed under load).
    let lag = cancel_after(
        Duration::from_millis(60),
        Hostile::EndlessText {
            chunk: 1024,
            interval_ms: 0,
        },
        json!({"max_response_bytes": 1u64 << 30}),
        "endless_stream",
    );
    assert!(lag < Duration::from_millis(1000), "{lag:?}");
}

#[test]
fn cancel_ends_a_turn_under_a_slowloris() {
    let _serial = serial();
    let lag = cancel_during(
        Hostile::EndlessText {
            chunk: 1,
            interval_ms: 20,
        },
        json!({}),
        "slowloris",
    );
    assert!(lag < Duration::from_millis(500), "{lag:?}");
}

#[test]
fn cancel_ends_a_turn_under_keepalives() {
    let _serial = serial();
    let lag = cancel_during(
        Hostile::EmptyDeltas { interval_ms: 20 },
        json!({}),
        "keepalive_only",
    );
    assert!(lag < Duration::from_millis(500), "{lag:?}");
}

/// The scripted faults of the mock (drop, stall, HTTP errors, malformed lines) as whole turns:
/// each ends with a status by itself, and a cancel during the fault ends the turn promptly.
fn scripted(
    script: Value,
    llm: Value,
    cancel_after_ms: Option<u64>,
    name: &str,
) -> (agentao::turn::TurnOutcome, Duration) {
    let server = MockServer::start(script).unwrap();
    let (agent, _dir) = agent(&server, llm);
    let rss = RssSampler::start();
    let t0 = Instant::now();
    let (token, rx) = common::start_cancellable(&agent, "hi");
    let mut from = t0;
    if let Some(ms) = cancel_after_ms {
        std::thread::sleep(Duration::from_millis(ms));
        from = Instant::now();
        token.cancel("test-cancel");
    }
    let (done_at, result) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the turn completes");
    let grew = rss.peak_growth_mb();
    let took = done_at.duration_since(from);
    println!(
        "FIGURE server.{name} {}={:.1} rss_growth_mb={grew:.1}",
        if cancel_after_ms.is_some() {
            "cancel_to_done_ms"
        } else {
            "ended_ms"
        },
        took.as_secs_f64() * 1000.0
    );
    (result.expect("an outcome"), took)
}

#[test]
fn scripted_server_faults_end_the_turn_with_a_status() {
    let _serial = serial();
    let fast = json!({"max_attempts": 3, "read_timeout_ms": 300});
    // Dropped before any byte: retried, then a connection error.
    let (o, _) = scripted(
        json!({"responses": [{"repeat": 5, "text": "x", "fault": {"type": "drop", "after_events": 0}}]}),
        fast.clone(),
        None,
        "drop_before_stream",
    );
    assert_eq!(
        o.incomplete_reason.map(|r| r.as_str()),
        Some("llm_error"),
        "{}",
        o.text
    );
    // Dropped mid-stream, after text: not retried (the text reached the host).
    let (o, _) = scripted(
        json!({"responses": [{"text": "abcdef", "chunk_size": 1, "fault": {"type": "drop", "after_events": 3}}]}),
        fast.clone(),
        None,
        "drop_mid_stream",
    );
    assert!(o.text.starts_with("[LLM API error: "), "{}", o.text);
    // A stall past the idle timeout: timeouts, then an error.
    let (o, took) = scripted(
        json!({"responses": [{"repeat": 5, "text": "x", "fault": {"type": "stall", "ms": 20000}}]}),
        fast.clone(),
        None,
        "stall",
    );
    assert!(o.text.contains("Request timed out"), "{}", o.text);
    assert!(took < Duration::from_secs(10), "{took:?}");
    // 503 on every attempt: retried, then an error naming the status.
    let (o, _) = scripted(
        json!({"responses": [{"repeat": 5, "fault": {"type": "http_error", "status": 503, "message": "busy", "headers": {"Retry-After": "0"}}}]}),
        fast.clone(),
        None,
        "http_503",
    );
    assert!(o.text.contains("503"), "{}", o.text);
    // A malformed line is skipped; the good chunks still make the answer.
    let (o, _) = scripted(
        json!({"responses": [{"text": "fine", "fault": {"type": "malformed", "line": "data: {not json"}}]}),
        fast,
        None,
        "malformed_sse",
    );
    assert_eq!(o.text, "fine");
}

#[test]
fn cancel_during_scripted_server_faults() {
    let _serial = serial();
    let llm = json!({"max_attempts": 5});
    let cases = [
        (
            "stall.cancel",
            json!({"responses": [{"text": "x", "fault": {"type": "stall", "ms": 20000}}]}),
        ),
        (
            "http_429_backoff.cancel",
            json!({"responses": [{"repeat": 5, "fault": {"type": "http_error", "status": 429, "message": "slow down", "headers": {"Retry-After": "20"}}}]}),
        ),
        (
            "slow_stream.cancel",
            json!({"responses": [{"text": "abcdefghijklmnop", "chunk_size": 1, "delay_ms": 200}]}),
        ),
    ];
    for (name, script) in cases {
        let (o, lag) = scripted(script, llm.clone(), Some(300), name);
        assert_eq!(o.status.as_str(), "cancelled", "{name}: {}", o.text);
        assert!(lag < Duration::from_millis(500), "{name}: {lag:?}");
    }
}

/// An SSE body of `chunks` (each a `choices[0].delta`), a `tool_calls` finish and `[DONE]`.
fn tool_call_stream(deltas: impl IntoIterator<Item = Value>) -> bytes::Bytes {
    let mut body = String::new();
    for delta in deltas {
        let chunk = json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    body.push_str(&format!("data: {end}\n\ndata: [DONE]\n\n"));
    body.into()
}

/// `slots` tool-call deltas each opening a new slot (a new `index`, nothing else), 500 to an
/// event: the audit's `manyslots` server.
fn slot_flood(slots: u64) -> bytes::Bytes {
    let starts = (0..slots).step_by(500);
    tool_call_stream(starts.map(|from| {
        let calls: Vec<Value> = (from..(from + 500).min(slots))
            .map(|i| json!({"index": i}))
            .collect();
        json!({"tool_calls": calls})
    }))
}

#[test]
fn a_flood_of_tool_call_slots_is_cut_at_the_call_bound() {
    let _serial = serial();
    // 250,000 slots is the audit's figure (~3 MB, under the 16 MiB response bound): each delta
    // scanned every slot before it, 160 s of a runtime worker in a release build.
    for slots in [2_000, 250_000] {
        let server = MockServer::builder()
            .start_prerendered(slot_flood(slots))
            .unwrap();
        let (agent, _dir) = agent(&server, json!({}));
        let (text, took, grew) = run_until_it_ends(&agent, Duration::from_secs(60));
        println!(
            "FIGURE server.tool_call_slots_{slots} ended_ms={} rss_growth_mb={grew:.1}",
            took.as_millis()
        );
        assert_eq!(
            text,
            "[LLM API error: The model server's response has more than 1024 tool calls; the response was abandoned.]"
        );
        assert_eq!(server.request_count(), 1, "a size refusal is not retried");
    }
}

#[test]
fn a_thousand_parallel_tool_calls_assemble_in_order() {
    let _serial = serial();
    const CALLS: u64 = 1_000;
    // Each call opens with its id, name and half its arguments; the other halves come after
    // all calls are open, last call first, so each continues a slot that is not the latest.
    let opens = (0..CALLS).map(|i| {
        json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function",
            "function": {"name": "no_such_tool_at_all", "arguments": "{\"n\":"}}]})
    });
    let rests = (0..CALLS).rev().map(
        |i| json!({"tool_calls": [{"index": i, "function": {"arguments": format!("{i}}}")}}]}),
    );
    let done = {
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": "stop"}]});
        bytes::Bytes::from(format!("data: {chunk}\n\ndata: [DONE]\n\n"))
    };
    let server = MockServer::builder()
        .record_bodies(true)
        .start_prerendered_many(vec![tool_call_stream(opens.chain(rests)), done])
        .unwrap();
    let (agent, _dir) = agent(&server, json!({}));
    let t0 = Instant::now();
    let (_token, rx) = common::start_cancellable(&agent, "hi");
    let (at, result) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the turn ends");
    println!(
        "FIGURE server.tool_call_slots_1000_valid ended_ms={}",
        at.duration_since(t0).as_millis()
    );
    let outcome = result.expect("an outcome");
    assert_eq!(outcome.text, "done");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().unwrap();
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the assistant message with the calls");
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), CALLS as usize);
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(call["id"], format!("call_{i}"));
        assert_eq!(call["function"]["name"], "no_such_tool_at_all");
        let arguments: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(arguments, json!({"n": i}));
    }
    let answered: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| &m["tool_call_id"])
        .collect();
    assert_eq!(answered.len(), CALLS as usize);
    for (i, id) in answered.iter().enumerate() {
        assert_eq!(**id, format!("call_{i}"));
    }
}

#[test]
fn a_redirect_to_another_origin_ends_the_turn_and_sends_it_nothing() {
    let _serial = serial();
    // The audit's server: every request answered 307 to another local server.
    let target = MockServer::start(json!({"responses": [{"text": "leaked"}]})).unwrap();
    let location = format!("http://localhost:{}/v1/chat/completions", target.port());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    let asked = Arc::new(AtomicU64::new(0));
    let counted = asked.clone();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            counted.fetch_add(1, Ordering::SeqCst);
            // The head and the body come in a few reads; the answer does not wait for them all.
            let mut buf = [0; 65536];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "openai",
        "base_url": format!("http://127.0.0.1:{port}/v1"), "api_key": "k", "model": "m",
        "headers": {"api-key": "AZURE-SECRET", "x-api-key": "SECRET"}}});
    let agent = Agent::new(&config.to_string(), None).unwrap();
    let (text, took, _) = run_until_it_ends(&agent, Duration::from_secs(20));
    println!("FIGURE server.redirect ended_ms={}", took.as_millis());
    assert_eq!(
        text,
        format!(
            "[LLM API error: Error code: 307 - The endpoint redirected to {location} (HTTP 307); \
             redirects are not followed, the request carries the conversation and credentials: \
             set llm.base_url to the final URL.]"
        )
    );
    assert_eq!(asked.load(Ordering::SeqCst), 1, "a redirect is not retried");
    assert_eq!(target.request_count(), 0, "the other origin got nothing");
}
