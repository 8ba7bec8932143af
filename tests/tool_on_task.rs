//! Tools that run on the turn's task (`Tool::runs_on_task`): the
//! turn awaits their future instead of handing the call to a blocking thread, and keeps what
//! the blocking path guarantees: a panic is "the tool panicked", a cancel ends the call,
//! streamed output comes before the call's end, results stay in call order, and calls to one
//! non-re-entrant tool still run one at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions};
use agentao::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolServices};
use agentao::turn::TurnStatus;
use serde_json::{json, Map, Value};

mod common;

/// A task-run tool. Its blocking `execute` panics, so a call that reaches it fails loudly.
/// Arguments: `text` (the result), `sleep_ms` (awaited first), `panic` (`"poll"`: after an
/// await; `"build"`: before the future exists), `wait_cancel` (awaits the turn's cancel),
/// `meet` (awaits until that many calls run at once, 5 s at most).
struct OnTask {
    name: &'static str,
    reentrant: bool,
    running: AtomicUsize,
    most: AtomicUsize,
}

impl OnTask {
    fn new(name: &'static str, reentrant: bool) -> Arc<Self> {
        Arc::new(OnTask {
            name,
            reentrant,
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        })
    }
}

impl Tool for OnTask {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "test tool run on the turn's task"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "text": {"type": "string"}, "sleep_ms": {"type": "integer"},
            "panic": {"type": "string"}, "wait_cancel": {"type": "boolean"},
            "meet": {"type": "integer"}}})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn is_reentrant(&self) -> bool {
        self.reentrant
    }
    fn runs_on_task(&self, _: &ToolServices) -> bool {
        true
    }
    fn execute(&self, _: &Map<String, Value>, _: &ToolContext<'_>) -> Result<String, ToolError> {
        panic!("a task-run tool was run on a blocking thread");
    }
    fn execute_async<'a>(
        &'a self,
        args: &'a Map<String, Value>,
        ctx: &'a ToolContext<'a>,
    ) -> ToolFuture<'a> {
        if args.get("panic") == Some(&json!("build")) {
            panic!("building the future");
        }
        Box::pin(async move {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            let text = args["text"].as_str().unwrap_or("").to_owned();
            (ctx.output)(&format!("progress {text}"));
            if let Some(ms) = args.get("sleep_ms").and_then(Value::as_u64) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if let Some(n) = args.get("meet").and_then(Value::as_u64) {
                let t0 = Instant::now();
                // `most` never falls, so the first to see all of them does not strand the rest.
                while (self.most.load(Ordering::SeqCst) as u64) < n
                    && t0.elapsed() < Duration::from_secs(5)
                {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            if args.get("panic") == Some(&json!("poll")) {
                tokio::task::yield_now().await;
                panic!("polling the future");
            }
            if args.get("wait_cancel") == Some(&json!(true)) {
                tokio::select! {
                    _ = ctx.cancel.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
                self.running.fetch_sub(1, Ordering::SeqCst);
                return Ok(format!("stopped: {}", ctx.cancel.reason()));
            }
            self.running.fetch_sub(1, Ordering::SeqCst);
            Ok(text)
        })
    }
}

struct Run {
    agent: Agent,
    host: Arc<common::RecordingHost>,
    _dir: tempfile::TempDir,
}

/// An agent on the scripted provider playing `responses`, with `tools` added.
fn agent(responses: Vec<Value>, tools: &[Arc<OnTask>]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let config = json!({"working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": responses}}});
    let host = Arc::new(common::RecordingHost::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    for t in tools {
        agent.add_tool(t.clone(), false).unwrap();
    }
    Run {
        agent,
        host,
        _dir: dir,
    }
}

/// One response calling each `(name, args)` in one batch, then the answer "done".
fn batch(calls: &[(&str, Value)]) -> Vec<Value> {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
        .collect();
    vec![json!({"tool_calls": calls}), json!({"text": "done"})]
}

fn events_of(run: &Run, ty: &str) -> Vec<Value> {
    run.host.events_of(ty)
}

/// Runs the scripted turn to its end and checks that it ended well.
fn run_turn(run: &Run) -> agentao::turn::TurnOutcome {
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.status, TurnStatus::Ok);
    o
}

#[test]
fn a_task_run_tool_is_awaited_and_its_output_comes_before_its_end() {
    let tool = OnTask::new("on_task", false);
    let run = agent(
        batch(&[("on_task", json!({"text": "hello", "sleep_ms": 5}))]),
        &[tool],
    );
    run_turn(&run);
    assert_eq!(common::tool_results(&run.agent), ["hello"]);
    let events = run.host.events.lock().unwrap().clone();
    let pos = |ty: &str| {
        events
            .iter()
            .position(|e| e["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty} event"))
    };
    assert!(pos("tool_start") < pos("tool_output"));
    assert!(pos("tool_output") < pos("tool_complete"));
    let out = &events[pos("tool_output")];
    assert_eq!(out["data"]["chunk"], "progress hello", "{out}");
}

#[test]
fn a_panicking_task_run_tool_fails_the_call_not_the_turn() {
    let tool = OnTask::new("on_task", false);
    let mut responses = batch(&[("on_task", json!({"text": "a", "panic": "poll"}))]);
    responses.pop();
    responses.extend(batch(&[(
        "on_task",
        json!({"text": "b", "panic": "build"}),
    )]));
    let run = agent(responses, &[tool]);
    let o = run_turn(&run);
    assert_eq!(o.text, "done");
    let panicked = "Error executing on_task: the tool panicked";
    assert_eq!(common::tool_results(&run.agent), [panicked, panicked]);
    for c in events_of(&run, "tool_complete") {
        assert_eq!(c["data"]["status"], "error", "{c}");
    }
}

#[test]
fn a_parallel_batch_keeps_call_order_and_one_tool_runs_one_call_at_a_time() {
    let serial = OnTask::new("on_task", false);
    let many = OnTask::new("on_task_reentrant", true);
    // The first calls sleep longest, so finishing order is the reverse of call order.
    let run = agent(
        batch(&[
            ("on_task", json!({"text": "s1", "sleep_ms": 40})),
            ("on_task_reentrant", json!({"text": "r1", "meet": 3})),
            ("read_file", json!({"file_path": "a.txt"})),
            ("on_task", json!({"text": "s2", "sleep_ms": 20})),
            ("on_task_reentrant", json!({"text": "r2", "meet": 3})),
            ("on_task", json!({"text": "s3", "sleep_ms": 1})),
            ("on_task_reentrant", json!({"text": "r3", "meet": 3})),
        ]),
        &[serial.clone(), many.clone()],
    );
    run_turn(&run);
    let results = common::tool_results(&run.agent);
    assert_eq!(results.len(), 7, "{results:?}");
    assert_eq!(
        [
            &results[0],
            &results[1],
            &results[3],
            &results[4],
            &results[5],
            &results[6]
        ],
        ["s1", "r1", "s2", "r2", "s3", "r3"]
    );
    assert!(results[2].contains("alpha"), "{}", results[2]);
    assert_eq!(
        serial.most.load(Ordering::SeqCst),
        1,
        "non-re-entrant calls overlapped"
    );
    assert_eq!(
        many.most.load(Ordering::SeqCst),
        3,
        "re-entrant calls did not run at once"
    );
    // Results reach the host in call order too.
    let ids: Vec<String> = events_of(&run, "tool_result")
        .iter()
        .map(|e| e["data"]["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
}

/// Calls on blocking threads (`glob`) and on the turn's task in one batch: every end is
/// reported, each after its start, the results in call order.
#[test]
fn a_batch_mixing_blocking_and_task_run_calls_reports_every_end() {
    let serial = OnTask::new("on_task", false);
    let run = agent(
        batch(&[
            ("glob", json!({"pattern": "*.txt"})),
            ("on_task", json!({"text": "t1", "sleep_ms": 20})),
            ("glob", json!({"pattern": "a.*"})),
            ("on_task", json!({"text": "t2"})),
        ]),
        &[serial],
    );
    run_turn(&run);
    let results = common::tool_results(&run.agent);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].contains("a.txt"), "{}", results[0]);
    assert_eq!(results[1], "t1");
    assert!(results[2].contains("a.txt"), "{}", results[2]);
    assert_eq!(results[3], "t2");
    let events = run.host.events.lock().unwrap().clone();
    for id in ["c0", "c1", "c2", "c3"] {
        let at = |ty: &str| {
            let found = events
                .iter()
                .position(|e| e["type"] == ty && e["data"]["call_id"] == id);
            found.unwrap_or_else(|| panic!("no {ty} for {id}"))
        };
        assert!(at("tool_start") < at("tool_complete"), "{id}");
        assert!(at("tool_complete") < at("tool_result"), "{id}");
    }
}

#[test]
fn a_cancel_ends_a_task_run_call() {
    let tool = OnTask::new("on_task", false);
    let run = agent(
        batch(&[("on_task", json!({"text": "x", "wait_cancel": true}))]),
        std::slice::from_ref(&tool),
    );
    let (token, done) = common::start_cancellable(&run.agent, "go");
    let t0 = Instant::now();
    while tool.running.load(Ordering::SeqCst) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let cancelled_at = Instant::now();
    token.cancel("stop-now");
    let (at, result) = done.recv_timeout(Duration::from_secs(10)).unwrap();
    let took = at - cancelled_at;
    println!("cancel to turn end: {took:?}");
    // The call wakes on the token at once; 2 s allows for a loaded machine.
    assert!(took < Duration::from_secs(2), "{took:?}");
    let o = result.unwrap();
    assert_eq!(o.status, TurnStatus::Cancelled);
    let complete = events_of(&run, "tool_complete");
    assert_eq!(complete.len(), 1);
    assert_eq!(
        complete[0]["data"]["status"], "cancelled",
        "{}",
        complete[0]
    );
    let result = events_of(&run, "tool_result");
    assert_eq!(
        result[0]["data"]["content"], "stopped: stop-now",
        "{}",
        result[0]
    );
}

/// `read_file` reads a small local file on the turn's task and a big one through
/// `block_in_place`: both read the same way, in one batch and in call order.
#[test]
fn read_file_reads_small_and_big_files_alike_on_either_path() {
    let big: String = (1..=3000)
        .map(|i| format!("line {i} {}\n", "x".repeat(40)))
        .collect();
    assert!(big.len() > 64 * 1024);
    let run = agent(
        batch(&[
            ("read_file", json!({"file_path": "big.txt", "offset": 2990})),
            ("read_file", json!({"file_path": "a.txt"})),
            ("read_file", json!({"file_path": "missing.txt"})),
        ]),
        &[],
    );
    std::fs::write(run._dir.path().join("big.txt"), &big).unwrap();
    run_turn(&run);
    let results = common::tool_results(&run.agent);
    assert!(
        results[0].starts_with("File: big.txt (3000 lines)\nShowing lines 2990-3000\n"),
        "{}",
        &results[0][..200.min(results[0].len())]
    );
    assert!(results[0].contains("  3000\tline 3000 "), "{}", results[0]);
    assert!(results[1].contains("alpha"), "{}", results[1]);
    assert_eq!(results[2], "Error: File missing.txt does not exist");
}

/// A tool on a blocking thread (the default) whose `execute` panics.
struct PanicsOnThread;

impl Tool for PanicsOnThread {
    fn name(&self) -> &str {
        "on_thread"
    }
    fn description(&self) -> &str {
        "panics on a blocking thread"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn execute(&self, _: &Map<String, Value>, _: &ToolContext<'_>) -> Result<String, ToolError> {
        panic!("a blocking tool panicked");
    }
}

#[test]
fn a_panicking_blocking_tool_fails_the_call_not_the_turn() {
    let run = agent(batch(&[("on_thread", json!({}))]), &[]);
    run.agent.add_tool(Arc::new(PanicsOnThread), false).unwrap();
    let o = run_turn(&run);
    assert_eq!(o.text, "done");
    assert_eq!(
        common::tool_results(&run.agent),
        ["Error executing on_thread: the tool panicked"]
    );
}

/// A blocking-thread tool that ignores the cancel: it sleeps its whole `ms` and then answers.
struct DeafOnThread;

impl Tool for DeafOnThread {
    fn name(&self) -> &str {
        "deaf"
    }
    fn description(&self) -> &str {
        "test tool that ignores cancellation"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}})
    }
    fn execute(&self, args: &Map<String, Value>, _: &ToolContext<'_>) -> Result<String, ToolError> {
        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
        std::thread::sleep(Duration::from_millis(ms));
        Ok("finally".into())
    }
}

/// A call that does not end after a cancel (host code that never returns, a tool that does not
/// watch the token) holds the cancelled turn for the grace of 2 s, then is left behind: the
/// turn ends cancelled, and the call is answered and reported as cancelled.
#[test]
fn a_call_deaf_to_the_cancel_is_left_behind_after_the_grace() {
    let run = agent(batch(&[("deaf", json!({"ms": 6000}))]), &[]);
    run.agent.add_tool(Arc::new(DeafOnThread), false).unwrap();
    let (token, rx) = common::start_cancellable(&run.agent, "go");
    std::thread::sleep(Duration::from_millis(200));
    let fired = Instant::now();
    token.cancel("host gave up");
    let (done_at, result) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the cancelled turn waited for the call to end");
    let waited = done_at.saturating_duration_since(fired);
    assert!(
        waited >= Duration::from_millis(1900) && waited < Duration::from_millis(4500),
        "the turn ended {waited:?} after the cancel"
    );
    let outcome = result.unwrap();
    assert_eq!(outcome.status, TurnStatus::Cancelled);
    assert_eq!(
        common::tool_results(&run.agent),
        ["[Operation Cancelled] host gave up (the call did not end within 2 s of the cancel and was left behind)"]
    );
    let complete = events_of(&run, "tool_complete");
    assert_eq!(complete.len(), 1, "{complete:?}");
    assert_eq!(complete[0]["data"]["status"], "cancelled");
}
