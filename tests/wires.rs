//! The wires' conformance at the level of a whole agent: each recorded transcript's model
//! script, served by `mock-openai` on the Chat Completions, Anthropic Messages and OpenAI
//! Responses wires, gives the same turn (text, status, tools run) on each; the opaque
//! reasoning of the typed wires goes back whole on the next request; usage counts on each.
//!
//! With `AGENTAO_WIRE_BODIES=<dir>`, every request body of the typed wires is written to
//! `<dir>/anthropic.jsonl` and `<dir>/openai-responses.jsonl`, for `scripts/wires_sdk.py`
//! (the official SDKs' request types check them; step `86-wires-sdk`).

use std::io::Write;
use std::sync::Arc;

use agentao::agent::{Agent, TurnOptions};
use agentao::events::transport::{Answer, ConfirmRequest, Confirmation, Reply, Transport};
use mock_openai::MockServer;
use serde_json::{json, Value};

const WIRES: [&str; 3] = ["openai", "anthropic", "openai-responses"];

struct Host {
    approve: bool,
    max_iter: std::sync::Mutex<Vec<Value>>,
}

impl Transport for Host {
    fn emit(&self, _event: &str) {}
    fn confirm_tool(&self, _req: ConfirmRequest, reply: Reply) {
        let c = if self.approve {
            Confirmation::Allow
        } else {
            Confirmation::Deny
        };
        reply.answer(Answer::Confirm(c)).unwrap();
    }
    fn on_max_iterations(&self, _count: u32, _pending: &str, reply: Reply) {
        let mut q = self.max_iter.lock().unwrap();
        let answer = if q.is_empty() {
            json!({"action": "stop"})
        } else {
            q.remove(0)
        };
        reply.answer(Answer::Json(answer.to_string())).unwrap();
    }
}

/// What a turn amounted to, wire-neutrally.
#[derive(Debug, PartialEq)]
struct Seen {
    text: String,
    status: String,
    tool_count: u64,
    history_roles: Vec<String>,
}

fn transcript(name: &str) -> Value {
    let path = format!(
        "{}/tests/conformance/transcripts/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn record(wire: &str, bodies: &[Value]) {
    let Some(dir) = std::env::var_os("AGENTAO_WIRE_BODIES") else {
        return;
    };
    if wire == "openai" {
        return;
    }
    record_in(std::path::Path::new(&dir), wire, bodies);
}

/// Appends `bodies` to `<dir>/<wire>.jsonl`, one line each; the tests of this file call it at once.
fn record_in(dir: &std::path::Path, wire: &str, bodies: &[Value]) {
    // `writeln!` on a `File` makes a write per formatted piece, and the tests' pieces
    // interleaved: the lines are written whole, one writer at a time.
    static WRITER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let mut lines = String::new();
    for b in bodies {
        lines.push_str(&b.to_string());
        lines.push('\n');
    }
    let _one_writer = WRITER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    std::fs::create_dir_all(dir).unwrap();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{wire}.jsonl")))
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
}

/// Runs the transcript's turn on `wire`; returns what it amounted to and the request bodies.
fn run(t: &Value, wire: &str) -> (Seen, Vec<Value>, agentao::llm::Usage) {
    let script = &t["model_script"];
    let mut llm = script["llm"].clone();
    llm.as_object_mut().unwrap().remove("exhausted");
    let server = MockServer::builder()
        .record_bodies(true)
        .start(llm)
        .expect("mock starts");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("notes.txt"),
        "Project notes\nline 2: the build uses make\nline 3: tests live in tests/\n",
    )
    .unwrap();
    let base = match wire {
        // The Anthropic SDK's base URL has no `/v1`.
        "anthropic" => server.base_url().trim_end_matches("/v1").to_owned(),
        _ => server.base_url(),
    };
    let config = json!({"working_directory": dir.path(), "llm": {"provider": wire,
        "base_url": base, "api_key": "k", "model": "m", "max_attempts": 3,
        "retry_backoff_base_ms": 1, "retry_backoff_cap_ms": 5}});
    let host = Arc::new(Host {
        approve: script["host"]["confirm_tool"].as_str() == Some("approve"),
        max_iter: std::sync::Mutex::new(
            script["host"]["on_max_iterations"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        ),
    });
    let agent = Agent::new(&config.to_string(), Some(host)).unwrap();
    let opts = TurnOptions {
        max_iterations: script["turn"]["max_iterations"].as_u64().map(|m| m as u32),
        ..TurnOptions::default()
    };
    let out = agent
        .run_blocking(t["turns"][0]["user_message"].as_str().unwrap(), opts)
        .map_err(|e| format!("{:?}", e.0))
        .unwrap();
    let history: Vec<Value> = serde_json::from_str(&agent.history_json()).unwrap();
    let seen = Seen {
        text: out.text,
        status: format!("{:?}", out.status),
        tool_count: out.tool_count,
        history_roles: history
            .iter()
            .map(|m| m["role"].as_str().unwrap_or("?").to_owned())
            .collect(),
    };
    let bodies = server.requests();
    record(wire, &bodies);
    (seen, bodies, agent.usage())
}

const TRANSCRIPTS: [&str; 10] = [
    "empty_response",
    "llm_retry_429_500_then_success",
    "max_iterations_stop",
    "plain_stream_chunks",
    "read_file_then_answer",
    "reasoning_only",
    "two_tool_calls_one_message",
    "unknown_tool",
    "write_file_approved",
    "write_file_declined",
];

#[test]
fn bodies_recorded_by_tests_at_once_stay_one_per_line() {
    // CI's step 86 once read a line with another test's body spliced into it.
    let dir = tempfile::tempdir().unwrap();
    let body = json!({"model": "m", "messages": (0..200).map(|i| json!({"role": "user", "content": format!("message {i}")})).collect::<Vec<_>>()});
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..20 {
                    record_in(dir.path(), "anthropic", std::slice::from_ref(&body));
                }
            });
        }
    });
    let text = std::fs::read_to_string(dir.path().join("anthropic.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 160);
    for line in lines {
        assert_eq!(serde_json::from_str::<Value>(line).unwrap(), body);
    }
}

#[test]
fn every_transcript_gives_the_same_turn_on_every_wire() {
    for name in TRANSCRIPTS {
        let t = transcript(name);
        let (chat, chat_bodies, chat_usage) = run(&t, "openai");
        for wire in &WIRES[1..] {
            let (seen, bodies, usage) = run(&t, wire);
            assert_eq!(seen, chat, "{name} on {wire}");
            assert_eq!(
                bodies.len(),
                chat_bodies.len(),
                "{name} on {wire}: requests"
            );
            assert_eq!(
                (usage.prompt_tokens, usage.completion_tokens),
                (chat_usage.prompt_tokens, chat_usage.completion_tokens),
                "{name} on {wire}: usage"
            );
        }
    }
}

/// A reasoning model's turn with a tool call: the thinking blocks (Anthropic) and reasoning
/// items (Responses) of the first answer are in the second request, whole, and in history.
#[test]
fn opaque_reasoning_goes_back_whole_on_the_next_request() {
    let script = json!({"model": "m", "responses": [
        {"reasoning": "I should read it.", "tool_calls": [{"id": "call_r1", "name": "read_file",
            "arguments": {"file_path": "notes.txt"}}], "finish_reason": "tool_calls"},
        {"text": "Done.", "finish_reason": "stop"}]});
    for wire in ["anthropic", "openai-responses"] {
        let t = json!({"model_script": {"llm": script, "host": {"confirm_tool": "approve"},
            "turn": {}}, "turns": [{"user_message": "Read notes.txt."}]});
        let (seen, bodies, _) = run(&t, wire);
        assert_eq!(seen.text, "Done.", "{wire}");
        assert_eq!(bodies.len(), 2);
        let second = bodies[1].to_string();
        let (opaque, signed) = match wire {
            "anthropic" => (
                json!({"type": "thinking", "thinking": "I should read it.", "signature": "mock-signature-0"}),
                "mock-signature-0",
            ),
            _ => (
                json!({"type": "reasoning", "id": "rs_mock_0",
                    "summary": [{"type": "summary_text", "text": "I should read it."}],
                    "encrypted_content": "mock-encrypted-0"}),
                "mock-encrypted-0",
            ),
        };
        assert!(second.contains(signed), "{wire}: {second}");
        let carried = match wire {
            "anthropic" => bodies[1]["messages"][1]["content"][0].clone(),
            _ => bodies[1]["input"][1].clone(),
        };
        assert_eq!(carried, opaque, "{wire}: whole, in place");
    }
}

/// The price table gives the session's cost, on every wire, from the five counters.
#[test]
fn the_price_table_gives_the_session_cost_on_every_wire() {
    let script = json!({"model": "m", "responses": [{"text": "hi", "usage": {
        "prompt_tokens": 1000, "completion_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 400}}}]});
    for wire in WIRES {
        let server = MockServer::start(script.clone()).expect("mock starts");
        let base = match wire {
            "anthropic" => server.base_url().trim_end_matches("/v1").to_owned(),
            _ => server.base_url(),
        };
        let dir = tempfile::tempdir().unwrap();
        let config = json!({"working_directory": dir.path(), "llm": {"provider": wire,
            "base_url": base, "api_key": "k", "model": "m",
            "prices": {"m": {"input": 3.0, "output": 15.0, "cache_read": 0.3}}}});
        let agent = Agent::new(&config.to_string(), None).unwrap();
        assert_eq!(
            agent.cost_usd(),
            Some(0.0),
            "{wire}: priced, nothing spent yet"
        );
        agent.run_blocking("hi", TurnOptions::default()).unwrap();
        let u = agent.usage();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cache_read_tokens),
            (1000, 100, 400),
            "{wire}"
        );
        // 600 × $3 + 400 × $0.30 + 100 × $15, per million.
        let cost = agent.cost_usd().unwrap();
        assert!((cost - 0.00342).abs() < 1e-12, "{wire}: {cost}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = json!({"working_directory": dir.path(), "llm": {"provider": "openai",
        "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m",
        "prices": {"m": {"input": -1.0, "output": 1.0}}}});
    let e = Agent::new(&bad.to_string(), None).err().expect("refused");
    assert!(format!("{e:?}").contains("llm.prices.m.input"), "{e:?}");
}

/// A turn past its token budget ends as a cancellation whose reason names the budget; the
/// session's budget stops the next turn before it calls the model.
#[test]
fn a_budget_ends_the_turn_as_a_cancellation_naming_it() {
    let call = json!({"tool_calls": [{"id": "c1", "name": "read_file",
        "arguments": {"file_path": "notes.txt"}}],
        "usage": {"prompt_tokens": 600, "completion_tokens": 10}});
    let script = json!({"model": "m", "responses": [call, call, {"text": "done",
        "usage": {"prompt_tokens": 10, "completion_tokens": 1}}]});
    let server = MockServer::start(script).expect("mock starts");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "x\n").unwrap();
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "anthropic",
        "base_url": server.base_url().trim_end_matches("/v1"), "api_key": "k", "model": "m",
        "budgets": {"turn_tokens": 1000, "session_tokens": 1200}},
        "permissions": {"mode": "full-access"}});
    let agent = Agent::new(&config.to_string(), None).unwrap();
    let out = agent.run_blocking("go", TurnOptions::default()).unwrap();
    assert_eq!(format!("{:?}", out.status), "Cancelled", "{out:?}");
    assert_eq!(server.request_count(), 2, "stopped before the third call");
    let history = agent.history_json();
    assert!(
        history.contains("llm.budgets.turn_tokens"),
        "the reason names the budget: {history}"
    );
    let out = agent.run_blocking("again", TurnOptions::default()).unwrap();
    assert_eq!(format!("{:?}", out.status), "Cancelled");
    assert_eq!(server.request_count(), 2, "the session budget is spent");
}
