//! The turn loop through the Rust API on the scripted provider: guards, truncation, failures,
//! cancellation, the iteration budget, and every host event checked against the v3 schema.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentao::agent::{Agent, AgentError, TurnOptions};
use agentao::cancel::CancelToken;
use agentao::events::transport::{Answer, ConfirmRequest, Confirmation, Reply, Transport};
use agentao::turn::{DeltaSink, IncompleteReason, TurnStatus};
use serde_json::{json, Value};

mod common;

type ConfirmFn = dyn Fn(ConfirmRequest, Reply) + Send + Sync;

#[derive(Default)]
struct Host {
    events: Mutex<Vec<Value>>,
    confirm: Option<Box<ConfirmFn>>,
    max_iter: Mutex<Vec<Value>>,
}

impl Transport for Host {
    fn emit(&self, event: &str) {
        self.events
            .lock()
            .unwrap()
            .push(serde_json::from_slice(event.as_bytes()).unwrap());
    }
    fn confirm_tool(&self, req: ConfirmRequest, reply: Reply) {
        match &self.confirm {
            Some(f) => f(req, reply),
            None => reply.answer(Answer::Confirm(Confirmation::Allow)).unwrap(),
        }
    }
    fn on_max_iterations(&self, _count: u32, _pending: &str, reply: Reply) {
        let mut q = self.max_iter.lock().unwrap();
        let a = if q.is_empty() {
            json!({"action": "stop"})
        } else {
            q.remove(0)
        };
        reply.answer(Answer::Json(a.to_string())).unwrap();
    }
}

struct Run {
    agent: Agent,
    host: Arc<Host>,
    host_events: Arc<Mutex<Vec<Value>>>,
    _dir: tempfile::TempDir,
}

fn setup(responses: Value, host: Host, extra: Value) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut config = json!({"working_directory": dir.path(), "llm": {"provider": "scripted", "script": {"responses": responses}}});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            config[k] = v;
        }
    }
    let host = Arc::new(host);
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    let host_events = Arc::new(Mutex::new(Vec::new()));
    let he = host_events.clone();
    agent.host_events().add_observer(Arc::new(move |j: &str| {
        he.lock().unwrap().push(serde_json::from_str(j).unwrap())
    }));
    Run {
        agent,
        host,
        host_events,
        _dir: dir,
    }
}

fn types(run: &Run) -> Vec<String> {
    event_types(&run.host.events)
}

fn event_types(events: &Mutex<Vec<Value>>) -> Vec<String> {
    events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

fn validate_host_events(run: &Run) {
    common::validate_host_events(&run.host_events.lock().unwrap());
}

fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"id": "c", "name": name, "arguments": args}]})
}

/// A call's name loses its Unicode tag characters and a near miss is repaired to the tool it
/// means, before history records it and the call runs; a name that is right stays as it is.
#[test]
fn call_names_are_cleaned_and_repaired_before_they_run() {
    // Different limits: three identical calls would trip the doom-loop guard.
    let args = |limit: u32| json!({"file_path": "a.txt", "limit": limit});
    let r = json!([
        {"tool_calls": [
            {"id": "c1", "name": "read\u{e0041}_file", "arguments": args(10)},
            {"id": "c2", "name": "ReadFile", "arguments": args(11)},
            {"id": "c3", "name": "read_file", "arguments": args(12)},
            {"id": "c4", "name": "launch_rockets", "arguments": args(13)}]},
        {"text": "done"}
    ]);
    let run = setup(r, Host::default(), json!({}));
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.status, TurnStatus::Ok);
    let history: Value = serde_json::from_str(&run.agent.history_json()).unwrap();
    let names: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["read_file", "read_file", "read_file", "launch_rockets"]
    );
    // The unknown tool's answer is recorded before the calls that ran.
    let results = common::tool_results(&run.agent);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(
        results[0].starts_with("Tool 'launch_rockets' not found"),
        "{results:?}"
    );
    for r in &results[1..] {
        assert!(r.contains("alpha"), "{results:?}");
    }
}

#[test]
fn identical_calls_trip_the_doom_loop() {
    let r = json!([{"repeat": 3, "tool_calls": [{"id": "c{i}", "name": "read_file", "arguments": "{\"file_path\": \"a.txt\"}"}]}]);
    let run = setup(r, Host::default(), json!({}));
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::DoomLoop));
    assert_eq!(o.text, "Tool execution halted by doom-loop detection.");
    assert_eq!(o.tool_count, 3);
    let msgs = common::tool_results(&run.agent);
    assert!(
        msgs[2].starts_with("[Doom-loop detected] Tool 'read_file' was called 3 times"),
        "{msgs:?}"
    );
    validate_host_events(&run);
}

#[test]
fn unparseable_arguments_three_times_stop() {
    let r = json!([{"repeat": 3, "tool_calls": [{"id": "c{i}", "name": "read_file", "arguments": "{\"file_path\": {i}x"}]}]);
    let run = setup(r, Host::default(), json!({}));
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::DoomLoop));
    let msgs = common::tool_results(&run.agent);
    assert!(
        msgs[0].starts_with("Error: could not parse arguments for 'read_file': "),
        "{msgs:?}"
    );
    assert!(msgs[0].ends_with(". Please retry with valid JSON."));
    assert!(msgs[2].starts_with("[Parse-failure doom-loop] Tool 'read_file'"));
    // Early-rejected calls produce no host events.
    assert!(run.host_events.lock().unwrap().is_empty());
}

#[test]
fn blank_names_three_times_stop() {
    let r = json!([{"repeat": 3, "text": "hm", "tool_calls": [{"id": "c{i}", "name": "", "arguments": "{}"}]}]);
    let run = setup(r, Host::default(), json!({}));
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::DoomLoop));
    assert_eq!(o.text, "hm");
    let msgs = common::tool_results(&run.agent);
    assert!(
        msgs[2].ends_with(" Repeated empty-name tool calls detected; stopping to prevent a loop.")
    );
}

#[test]
fn tool_calls_cut_off_at_the_limit_never_run() {
    let r = json!([{"repeat": 3, "finish_reason": "length", "tool_calls": [{"id": "c{i}", "name": "write_file", "arguments": "{\"file_path\": \"x\", \"content\": \"y{i}\"}"}]}]);
    let run = setup(r, Host::default(), json!({}));
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::LengthTruncated));
    assert_eq!(
        o.text,
        "Tool calls were repeatedly cut off at the output-token limit and could not be completed."
    );
    assert!(!run._dir.path().join("x").exists());
    assert!(!types(&run).iter().any(|t| t.starts_with("tool_")));
    assert!(common::tool_results(&run.agent)[0]
        .starts_with("Tool call not executed: the assistant message was cut off"));
}

#[test]
fn truncated_and_missing_finish_reasons() {
    let run = setup(
        json!([{"text": "partial", "finish_reason": "length"}]),
        Host::default(),
        json!({}),
    );
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(
        (o.text.as_str(), o.incomplete_reason),
        ("partial", Some(IncompleteReason::LengthTruncated))
    );
    let run = setup(
        json!([{"text": "done", "finish_reason": null}]),
        Host::default(),
        json!({}),
    );
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert!(o.finish_reason_missing);
    assert!(o.is_answer());
    let completed = run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "llm_call_completed")
        .cloned()
        .unwrap();
    assert_eq!(completed["data"]["finish_reason"], "stop");
    assert_eq!(completed["data"]["finish_reason_reported"], false);
}

#[test]
fn a_failed_confirmation_ends_the_turn_in_error() {
    let host = Host {
        confirm: Some(Box::new(|_, reply| {
            reply.answer(Answer::Fail("UI crashed".into())).unwrap()
        })),
        ..Default::default()
    };
    let run = setup(
        json!([call("write_file", json!({"file_path": "o.txt", "content": "x"})), {"text": "never"}]),
        host,
        json!({}),
    );
    let err = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap_err();
    assert!(
        matches!(err.0, AgentError::HostError(ref m) if m == "UI crashed"),
        "{:?}",
        err.0
    );
    let last = run.agent.last_turn().unwrap();
    assert_eq!(
        (last.status, last.text.as_str(), last.error.as_deref()),
        (TurnStatus::Error, "", Some("UI crashed"))
    );
    // The unanswered call was backfilled, so history stays valid for the next turn.
    assert!(common::tool_results(&run.agent)[0].starts_with("Tool call interrupted"));
    assert_eq!(types(&run).last().unwrap(), "turn_end");
}

#[test]
fn an_unanswered_confirmation_times_out_when_configured() {
    let held: Arc<Mutex<Vec<Reply>>> = Arc::default();
    let h = held.clone();
    let host = Host {
        confirm: Some(Box::new(move |_, reply| h.lock().unwrap().push(reply))),
        ..Default::default()
    };
    let run = setup(
        json!([call(
            "write_file",
            json!({"file_path": "o.txt", "content": "x"})
        )]),
        host,
        json!({"reply_timeout_ms": 100}),
    );
    let t0 = Instant::now();
    let err = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap_err();
    assert!(matches!(err.0, AgentError::Timeout(_)));
    assert!(t0.elapsed() < Duration::from_secs(5));
    // Answering late is harmless.
    for r in held.lock().unwrap().drain(..) {
        let _ = r.answer(Answer::Confirm(Confirmation::Allow));
    }
    assert!(!run._dir.path().join("o.txt").exists());
}

#[test]
fn cancel_during_a_pending_confirmation_wakes_at_once() {
    // The host keeps the reply and never answers.
    let held: Arc<Mutex<Vec<Reply>>> = Arc::default();
    let h = held.clone();
    let host = Host {
        confirm: Some(Box::new(move |_, reply| h.lock().unwrap().push(reply))),
        ..Default::default()
    };
    let run = setup(
        json!([call(
            "write_file",
            json!({"file_path": "o.txt", "content": "x"})
        )]),
        host,
        json!({}),
    );
    let token = CancelToken::new();
    let t2 = token.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        t2.cancel("user-cancel");
    });
    let t0 = Instant::now();
    let o = run
        .agent
        .run_blocking(
            "go",
            TurnOptions {
                cancel: Some(token),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(o.status, TurnStatus::Cancelled);
    assert_eq!(o.text, "[Cancelled: user-cancel]");
    assert_eq!(o.error.as_deref(), Some("user-cancel"));
    assert!(!run._dir.path().join("o.txt").exists());
}

#[test]
fn cancel_mid_stream_keeps_the_partial_text() {
    // Chunks at 300, 600, 900 ms; the cancel at 750 ms lands mid-wait for the third.
    let r = json!([{"chunks": ["one ", "two ", "three ", "four "], "delay_ms": 300}]);
    let run = setup(r, Host::default(), json!({}));
    let token = CancelToken::new();
    let t2 = token.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(750));
        t2.cancel("stop-now");
    });
    let t0 = Instant::now();
    let o = run
        .agent
        .run_blocking(
            "go",
            TurnOptions {
                cancel: Some(token),
                ..Default::default()
            },
        )
        .unwrap();
    // Without the cancel the turn would run to 1.2 s.
    assert!(
        t0.elapsed() < Duration::from_millis(1050),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(o.status, TurnStatus::Cancelled);
    assert_eq!(o.text, "one two ");
    assert!(!o.finish_reason_missing);
    assert_eq!(o.error.as_deref(), Some("stop-now"));
}

#[test]
fn iteration_budget_continue_and_new_instruction() {
    let step = json!({"repeat": 4, "text": "step {i}", "tool_calls": [{"id": "c{i}", "name": "read_file", "arguments": "{\"file_path\": \"a.txt\", \"offset\": {i}}"}]});
    let host = Host {
        max_iter: Mutex::new(vec![
            json!({"action": "new_instruction", "message": "keep going"}),
            json!({"action": "continue"}),
        ]),
        ..Default::default()
    };
    let run = setup(json!([step, {"text": "finished"}]), host, json!({}));
    let o = run
        .agent
        .run_blocking(
            "go",
            TurnOptions {
                max_iterations: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(o.text, "finished");
    assert!(o.is_answer());
    let h: Value = serde_json::from_str(&run.agent.history_json()).unwrap();
    assert!(h
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "user" && m["content"] == "keep going"));

    let run = setup(json!([{"text": "never"}]), Host::default(), json!({}));
    let o = run
        .agent
        .run_blocking(
            "go",
            TurnOptions {
                max_iterations: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(o.text, "Maximum tool call iterations reached.");
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::MaxIterations));
    assert!(!types(&run).contains(&"llm_call_started".to_owned()));
}

#[test]
fn a_400_is_an_llm_error_not_retried() {
    let r = json!([{"fault": {"type": "http_error", "status": 400, "message": "bad request body"}}, {"text": "unreached"}]);
    let run = setup(r, Host::default(), json!({}));
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::LlmError));
    assert_eq!(
        o.text,
        "[LLM API error: Error code: 400 - bad request body]"
    );
    assert_eq!(o.status, TurnStatus::Ok);
    assert!(o.error.is_none());
    assert!(!types(&run).contains(&"llm_retry".to_owned()));
}

#[test]
fn a_second_turn_is_refused_while_one_runs() {
    let run = setup(
        json!([{"chunks": ["a", "b"], "delay_ms": 200}]),
        Host::default(),
        json!({}),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    run.agent
        .start_turn(
            "one".into(),
            TurnOptions::default(),
            DeltaSink::None,
            move |r| tx.send(r).unwrap(),
        )
        .unwrap();
    let second = run.agent.run_blocking("two", TurnOptions::default());
    assert!(matches!(second, Err((AgentError::TurnInProgress, None))));
    let first = rx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(first.text, "ab");
}

#[test]
fn orphaned_tool_calls_are_backfilled() {
    let run = setup(json!([{"text": "ok"}]), Host::default(), json!({}));
    run.agent
        .set_history_json(r#"[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"old","type":"function","function":{"name":"read_file","arguments":"{}"}}]}]"#)
        .unwrap();
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let h: Value = serde_json::from_str(&run.agent.history_json()).unwrap();
    assert_eq!(h[2]["role"], "tool");
    assert_eq!(h[2]["tool_call_id"], "old");
    assert!(h[2]["content"]
        .as_str()
        .unwrap()
        .starts_with("Tool call interrupted: the turn ended"));
}

#[test]
fn tool_errors_and_read_only_denials_are_reported() {
    let r = json!([
        {"tool_calls": [
            {"id": "bad", "name": "read_file", "arguments": {"file_path": 5}},
            {"id": "w", "name": "write_file", "arguments": {"file_path": "o.txt", "content": "x"}}]},
        {"text": "done"}]);
    let run = setup(
        r,
        Host::default(),
        json!({"permissions": {"mode": "read-only"}}),
    );
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "done");
    let msgs = common::tool_results(&run.agent);
    assert!(
        msgs[0].starts_with("Error executing read_file: argument 'file_path' must be a string"),
        "{msgs:?}"
    );
    assert_eq!(msgs[1], "[Readonly mode] Tool 'write_file' is blocked — only read-only tools are permitted in readonly mode. Do not retry this call, rephrase its arguments, or use a different tool to achieve the same outcome.");
    let host = run.host_events.lock().unwrap().clone();
    let failed_error = host
        .iter()
        .find(|e| e["tool_call_id"] == "bad" && e["phase"] == "failed")
        .unwrap();
    assert_eq!(failed_error["outcome"], "error");
    assert_eq!(failed_error["summary"], "read_file failed");
    assert_eq!(failed_error["error_type"], "TypeError");
    let deny = host
        .iter()
        .find(|e| e["tool_call_id"] == "w" && e["event_type"] == "permission_decision")
        .unwrap();
    assert_eq!(
        (
            deny["outcome"].as_str(),
            deny["reason"].as_str(),
            deny["mode"].as_str()
        ),
        (
            Some("deny"),
            Some("mode-preset:read-only"),
            Some("read-only")
        )
    );
    let denied = host
        .iter()
        .find(|e| e["tool_call_id"] == "w" && e["event_type"] == "tool_lifecycle")
        .unwrap();
    assert_eq!(
        (
            denied["phase"].as_str(),
            denied["outcome"].as_str(),
            denied["summary"].as_str()
        ),
        (
            Some("failed"),
            Some("cancelled"),
            Some("denied by permission engine")
        )
    );
    // Permission decisions of a batch come before any started.
    let first_started = host.iter().position(|e| e["phase"] == "started").unwrap();
    let last_decision = host
        .iter()
        .rposition(|e| e["event_type"] == "permission_decision")
        .unwrap();
    assert!(last_decision < first_started);
    validate_host_events(&run);
    assert!(!run._dir.path().join("o.txt").exists());
}

#[test]
fn permission_mode_switch_emits_events() {
    let run = setup(
        json!([]),
        Host::default(),
        json!({"permissions": {"mode": "workspace-write"}}),
    );
    let prev = run
        .agent
        .set_permission_mode(agentao::permissions::Mode::ReadOnly)
        .unwrap();
    assert_eq!(prev, agentao::permissions::Mode::WorkspaceWrite);
    let ev = run.host.events.lock().unwrap().clone();
    assert_eq!(ev[0]["type"], "readonly_mode_changed");
    assert_eq!(
        ev[1]["data"],
        json!({"previous": "workspace-write", "current": "read-only", "cause": "host"})
    );
    let none = setup(json!([]), Host::default(), json!({}));
    assert!(matches!(
        none.agent
            .set_permission_mode(agentao::permissions::Mode::ReadOnly),
        Err(AgentError::NoEngine(_))
    ));
    assert_eq!(
        serde_json::to_value(none.agent.active_permissions()).unwrap(),
        json!({"mode": "workspace-write", "rules": [], "loaded_sources": ["default:no-engine"]})
    );
}

#[test]
fn host_event_examples_validate_and_round_trip() {
    let schema: Value = serde_json::from_str(agentao::events::host::HOST_EVENTS_SCHEMA_V3).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/host-event-examples.jsonl"
    ))
    .unwrap();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(validator.is_valid(&v), "{line}");
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            line,
            "round trip keeps bytes"
        );
        n += 1;
    }
    assert_eq!(n, 10);
}

#[test]
fn the_hardline_floor_holds_with_and_without_an_engine() {
    let rm = || json!([call("run_shell_command", json!({"command": "rm -rf /"})), {"text": "ok"}]);
    // No engine: the call prompts (and the null-like host approves), the floor refuses at launch.
    let run = setup(rm(), Host::default(), json!({}));
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let msgs = common::tool_results(&run.agent);
    assert!(msgs[0].contains("Error: hardline:"), "{msgs:?}");
    let decision = run.host_events.lock().unwrap()[0].clone();
    assert_eq!(decision["outcome"], "prompt");
    // Full access with an engine: denied while planning, never prompted.
    let run = setup(
        rm(),
        Host::default(),
        json!({"permissions": {"mode": "full-access"}}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let decision = run.host_events.lock().unwrap()[0].clone();
    assert_eq!(decision["outcome"], "deny");
    assert!(
        decision["reason"]
            .as_str()
            .unwrap()
            .starts_with("hardline:"),
        "{decision}"
    );
    assert!(common::tool_results(&run.agent)[0]
        .starts_with("Tool execution denied: 'run_shell_command'"));
    validate_host_events(&run);
}

/// Reads the agent from inside its own events: during the turn the history is the one before
/// it, and by `turn_end` the turn's messages and outcome are committed.
#[derive(Default)]
struct Observer {
    agent: Mutex<Option<Agent>>,
    seen: Mutex<Vec<(String, usize, bool)>>,
}

impl Transport for Observer {
    fn emit(&self, event: &str) {
        let e: Value = serde_json::from_str(event).unwrap();
        let ty = e["type"].as_str().unwrap().to_owned();
        if ty != "tool_start" && ty != "turn_end" {
            return;
        }
        let Some(agent) = self.agent.lock().unwrap().clone() else {
            return;
        };
        let history: Value = serde_json::from_str(&agent.history_json()).unwrap();
        let n = history.as_array().unwrap().len();
        self.seen
            .lock()
            .unwrap()
            .push((ty, n, agent.last_turn().is_some()));
    }
}

#[test]
fn the_transcript_is_committed_once_before_turn_end() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let responses = json!([call("read_file", json!({"file_path": "a.txt"})), {"text": "done"}]);
    let config = json!({"working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": responses}}});
    let obs = Arc::new(Observer::default());
    let agent = Agent::new(&config.to_string(), Some(obs.clone())).unwrap();
    *obs.agent.lock().unwrap() = Some(agent.clone());
    let o = agent.run_blocking("go", TurnOptions::default()).unwrap();
    // The agent holds the observer and the observer the agent: break the cycle.
    obs.agent.lock().unwrap().take();
    assert_eq!(o.text, "done");
    let seen = obs.seen.lock().unwrap().clone();
    // user, assistant with the call, tool answer, final answer.
    assert_eq!(
        seen,
        vec![
            ("tool_start".to_owned(), 0, false),
            ("turn_end".to_owned(), 4, true)
        ]
    );
}

/// `llm_call_started` counts the request's tool messages and `<system-reminder>` blocks over
/// the history and the turn's messages so far (kept as the turn grows, not recounted).
#[test]
fn llm_call_started_counts_tool_messages_and_reminders() {
    let run = setup(
        json!([
            call("read_file", json!({"file_path": "a.txt"})),
            call("read_file", json!({"file_path": "a.txt", "limit": 1})),
            {"text": "done"}
        ]),
        Host::default(),
        json!({}),
    );
    let history = json!([
        {"role": "user", "content": "<system-reminder>\nx\n</system-reminder>\nfirst"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "h", "type": "function",
            "function": {"name": "read_file", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "h", "name": "read_file", "content": "old"},
        {"role": "assistant", "content": "ok"}
    ]);
    run.agent.set_history_json(&history.to_string()).unwrap();
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "done");
    let started: Vec<(u64, u64, u64)> = run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "llm_call_started")
        .map(|e| {
            let d = &e["data"];
            let n = |k: &str| d[k].as_u64().unwrap();
            (
                n("n_messages"),
                n("n_tool_messages"),
                n("n_system_reminder_blocks"),
            )
        })
        .collect();
    // System + 4 history messages + the turn's user message (with its date reminder), then
    // one assistant call and its answer per iteration.
    assert_eq!(started, [(6, 1, 2), (8, 2, 2), (10, 3, 2)]);
}

/// Panics in `emit` on the next `turn_begin` while armed.
#[derive(Default)]
struct PanicsOnTurnBegin {
    armed: std::sync::atomic::AtomicBool,
}

impl Transport for PanicsOnTurnBegin {
    fn emit(&self, event: &str) {
        if event.contains("\"turn_begin\"") && self.armed.swap(false, Ordering::SeqCst) {
            panic!("emit broke on purpose");
        }
    }
}

#[test]
fn a_panic_in_the_turn_is_its_error_and_the_agent_is_free_before_it_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "scripted",
        "script": {"responses": [{"repeat": 10, "text": "fine"}]}}});
    let host = Arc::new(PanicsOnTurnBegin::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();

    // Blocking: the panic is the turn's error, and the turn lock is already free when the
    // caller has it, so the next turn starts at once.
    host.armed.store(true, Ordering::SeqCst);
    match agent.run_blocking("go", TurnOptions::default()) {
        Err((AgentError::Panic(m), None)) => assert_eq!(m, "emit broke on purpose"),
        other => panic!("expected the panic, got {:?}", other.map(|o| o.text)),
    }
    assert!(!agent.is_busy());
    let o = agent.run_blocking("again", TurnOptions::default()).unwrap();
    assert_eq!(o.text, "fine");

    // With a completion: `done` runs once, with the panic, after the lock was let go. A fresh
    // agent: a panic inside `emit` leaves the first agent's emitter owned, so it delivers no
    // event any more.
    let host = Arc::new(PanicsOnTurnBegin::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    host.armed.store(true, Ordering::SeqCst);
    let (tx, rx) = std::sync::mpsc::channel();
    let probe = agent.clone();
    agent
        .start_turn(
            "go".into(),
            TurnOptions::default(),
            DeltaSink::None,
            move |r| {
                let busy = probe.is_busy();
                tx.send((r.map(|o| o.text).map_err(|(e, o)| (e, o.is_some())), busy))
                    .unwrap();
            },
        )
        .unwrap();
    let (r, busy) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    match r {
        Err((AgentError::Panic(m), false)) => assert_eq!(m, "emit broke on purpose"),
        other => panic!("expected the panic, got {other:?}"),
    }
    assert!(
        !busy,
        "the completion ran while the turn still held the agent"
    );
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "done ran twice"
    );
    let o = agent.run_blocking("after", TurnOptions::default()).unwrap();
    assert_eq!(o.text, "fine");
}

/// A [`Host`] that listens only once it has been asked to confirm a call: it says so through
/// `Transport::listens`, and records what `emit` still gets.
#[derive(Default)]
struct ListensFromConfirm {
    listening: std::sync::atomic::AtomicBool,
    host: Host,
}

impl Transport for ListensFromConfirm {
    fn emit(&self, event: &str) {
        self.host.emit(event);
    }
    fn listens(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }
    fn confirm_tool(&self, req: ConfirmRequest, reply: Reply) {
        self.listening.store(true, Ordering::SeqCst);
        self.host.confirm_tool(req, reply);
    }
}

#[test]
fn events_nobody_listens_to_are_not_emitted_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let script = json!({"responses": [
        {"text": "reading", "tool_calls": [{"id": "r", "name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"file_path": "o.txt", "content": "x"}}]},
        {"text": "done"}]});
    let config = json!({"working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": script}});
    let run_with = |host: Arc<dyn Transport>| {
        std::fs::remove_file(dir.path().join("o.txt")).ok();
        let agent = Agent::new(&config.to_string(), Some(host)).unwrap();
        let o = agent.run_blocking("go", TurnOptions::default()).unwrap();
        // The user message's date reminder holds the second the turn began.
        let mut history: Value = serde_json::from_str(&agent.history_json()).unwrap();
        let first = history[0]["content"].as_str().unwrap();
        let (reminder, typed) = first.split_once("</system-reminder>\n").unwrap();
        assert!(reminder.contains("Current Date/Time: "), "{first}");
        history[0]["content"] = Value::from(typed);
        (o.text, history)
    };
    let quiet = Arc::new(ListensFromConfirm::default());
    let (text, history) = run_with(quiet.clone());
    let loud = Arc::new(Host::default());
    let (loud_text, loud_history) = run_with(loud.clone());
    // The same answer and the same history, whether anyone listened or not.
    assert_eq!(
        (text.as_str(), &history),
        (loud_text.as_str(), &loud_history)
    );
    assert_eq!(text, "done");
    let got = event_types(&quiet.host.events);
    // Nothing before the confirmation (no `turn_begin`, no first call's events); from it on,
    // every event, as the host that always listens got them.
    let all = event_types(&loud.events);
    let from = all.iter().position(|t| t == "tool_confirmation").unwrap();
    assert_eq!(got, all[from + 1..], "quiet host got {got:?}");
    assert!(all.starts_with(&["turn_begin".to_owned()]), "{all:?}");
    assert!(got.contains(&"tool_result".to_owned()) && got.ends_with(&["turn_end".to_owned()]));
}

/// What a model switch does to the history (`Agent::strip_reasoning`): the assistant
/// messages lose their reasoning and the wires' carriers, and nothing else changes.
#[test]
fn stripping_the_reasoning_leaves_the_rest_of_the_history() {
    let run = setup(json!([{"text": "ok"}]), Host::default(), json!({}));
    let history = json!([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "thought"},
        {"role": "assistant", "content": "b", "anthropic_thinking_blocks": [
            {"type": "thinking", "thinking": "t", "signature": "s"}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "read_file", "arguments": "{}"}}],
            "openai_reasoning_items": [{"type": "reasoning", "id": "r", "summary": []}]},
        {"role": "tool", "tool_call_id": "c", "name": "read_file", "content": "x"},
        {"role": "user", "content": "reasoning_content stays in a user's text"}
    ]);
    run.agent.set_history_json(&history.to_string()).unwrap();
    run.agent.strip_reasoning().unwrap();
    let after: Value = serde_json::from_str(&run.agent.history_json()).unwrap();
    let mut want = history.clone();
    for i in [1, 2, 3] {
        let m = want[i].as_object_mut().unwrap();
        m.remove("reasoning_content");
        m.remove("anthropic_thinking_blocks");
        m.remove("openai_reasoning_items");
    }
    assert_eq!(after, want);
}
