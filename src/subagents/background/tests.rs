//! The store, its tools and the notice injection, driven with synthetic child runs (futures
//! that settle as told), so every state is reached on purpose.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::record::TaskStatus;
use super::store::CancelResult;
use super::store::{LaunchError, MAX_IN_FLIGHT};
use super::tools::{CancelBackgroundAgent, CheckBackgroundAgent};
use super::*;
use crate::cancel::CancelToken;
use crate::tools::{HostRequests, Tool, ToolContext, ToolServices, ToolsConfig};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn store(rt: &tokio::runtime::Runtime) -> Arc<BackgroundStore> {
    BackgroundStore::new(rt.handle().clone(), None)
}

fn completed(text: &str) -> RunReport {
    RunReport::bare(Settled::Completed {
        result: text.to_owned(),
    })
}

/// A run that ends when told to (`Some(report)`), or reports cancelled when its token is.
fn gated(
    rx: tokio::sync::oneshot::Receiver<RunReport>,
) -> impl FnOnce(
    &str,
    CancelToken,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = RunReport> + Send>> {
    move |_, token| {
        Box::pin(async move {
            tokio::select! {
                r = rx => r.unwrap_or_else(|_| RunReport::bare(Settled::Cancelled { result: None })),
                _ = token.cancelled() => RunReport::bare(Settled::Cancelled {
                    result: Some(format!("[Cancelled: {}]", token.reason())),
                }),
            }
        })
    }
}

fn settle_wait(s: &Arc<BackgroundStore>, id: &str) -> TaskStatus {
    let view = s
        .wait(id, Duration::from_secs(10), &CancelToken::new())
        .expect("known id");
    view.rec.status
}

struct NoHost;
impl HostRequests for NoHost {
    fn ask_user(&self, _q: &str, _h: &Value) -> Result<String, String> {
        Err("no host".into())
    }
}

/// Runs a tool as the executor would; returns its text and the streamed output.
fn run_tool(tool: &dyn Tool, args: Value, cancel: &CancelToken) -> (String, Vec<String>) {
    let out = Mutex::new(Vec::new());
    let output = |s: &str| out.lock().unwrap().push(s.to_owned());
    let services = ToolServices::default();
    let settings = ToolsConfig::default();
    let ctx = ToolContext {
        workspace: Path::new("/"),
        call_id: "c1",
        cancel,
        output: &output,
        host: &NoHost,
        settings: &settings,
        services: &services,
        approval: crate::tools::Approval::Other,
    };
    let Value::Object(args) = args else {
        panic!("args object")
    };
    let text = tool.execute(&args, &ctx).unwrap();
    let streamed = out.lock().unwrap().clone();
    (text, streamed)
}

#[test]
fn ids_are_8_hex_and_the_seventh_launch_is_refused() {
    let rt = runtime();
    let s = store(&rt);
    let mut gates = Vec::new();
    let mut ids = Vec::new();
    for i in 0..MAX_IN_FLIGHT {
        let (tx, rx) = tokio::sync::oneshot::channel();
        gates.push(tx);
        ids.push(s.launch("worker", &format!("task {i}"), gated(rx)).unwrap());
    }
    for id in &ids {
        assert_eq!(id.len(), 8, "{id}");
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), MAX_IN_FLIGHT);

    let mut called = false;
    let err = s
        .launch("worker", "one too many", |_, _| {
            called = true;
            async { completed("never") }
        })
        .unwrap_err();
    assert!(!called, "a refused launch never builds its run");
    assert_eq!(err, LaunchError::AtCapacity(6));
    assert_eq!(
        err.to_string(),
        "Background agent not started: 6 background agents are already running, the most this \
         session allows. Wait for one to finish (check_background_agent with wait_seconds), \
         cancel one, or run this task in the foreground (run_in_background=false)."
    );
    assert_eq!(s.list().len(), MAX_IN_FLIGHT, "the refusal left no record");

    // One settles: a slot is free again. The run is told its own id.
    gates.remove(0).send(completed("done")).unwrap();
    assert_eq!(settle_wait(&s, &ids[0]), TaskStatus::Completed);
    let told = Arc::new(Mutex::new(String::new()));
    let seen = told.clone();
    let id = s
        .launch("worker", "fits now", move |id, _| {
            *seen.lock().unwrap() = id.to_owned();
            async { completed("ok") }
        })
        .unwrap();
    assert_eq!(*told.lock().unwrap(), id);
    assert_eq!(LaunchError::AtCapacity(6).kind(), "BackgroundCapacityError");
    for g in gates {
        let _ = g.send(completed("x"));
    }
}

#[test]
fn every_terminal_state_is_recorded_with_its_notice() {
    let rt = runtime();
    let s = store(&rt);
    let long = "r".repeat(350);
    let done = {
        let long = long.clone();
        s.launch(
            "alpha",
            "summarise",
            move |_, _| async move { completed(&long) },
        )
        .unwrap()
    };
    let failed = s
        .launch("beta", "count", |_, _| async {
            RunReport {
                settled: Settled::Failed {
                    error: "the model stopped before answering".into(),
                    incomplete_reason: Some("max_iterations".into()),
                    result: Some("partial work".into()),
                },
                turns: 15,
                tool_calls: 4,
                tokens: 1200,
                duration_ms: 42,
            }
        })
        .unwrap();
    let panicked = s
        .launch("gamma", "explode", |_, _| async { panic!("child blew up") })
        .unwrap();
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let cancelled = s.launch("delta", "wait", gated(rx)).unwrap();
    assert_eq!(settle_wait(&s, &done), TaskStatus::Completed);
    assert_eq!(settle_wait(&s, &failed), TaskStatus::Failed);
    assert_eq!(settle_wait(&s, &panicked), TaskStatus::Failed);
    // Running by now? It may still be pending; either way cancel settles it.
    let r = s.cancel(&cancelled, "user-cancel");
    assert!(matches!(
        r,
        CancelResult::Signalled { .. } | CancelResult::BeforeStart { .. }
    ));
    assert_eq!(settle_wait(&s, &cancelled), TaskStatus::Cancelled);

    let rec = s.get(&failed).unwrap().rec;
    assert_eq!(rec.incomplete_reason.as_deref(), Some("max_iterations"));
    assert_eq!(rec.result.as_deref(), Some("partial work"));
    assert_eq!((rec.turns, rec.tool_calls, rec.tokens), (15, 4, 1200));
    let rec = s.get(&panicked).unwrap().rec;
    assert_eq!(
        rec.error.as_deref(),
        Some("the background agent panicked: child blew up")
    );

    let mut notes = s.drain_notices();
    notes.sort();
    let mut want = vec![
        format!(
            "Background agent 'alpha' (ID: {done}) completed.\n{}…",
            "r".repeat(300)
        ),
        format!(
            "Background agent 'beta' (ID: {failed}) failed: the model stopped before answering"
        ),
        format!(
            "Background agent 'gamma' (ID: {panicked}) failed: the background agent panicked: child blew up"
        ),
        format!("Background agent 'delta' (ID: {cancelled}) was cancelled."),
    ];
    want.sort();
    assert_eq!(notes, want);
    assert!(s.drain_notices().is_empty(), "drained once");
}

#[test]
fn a_pending_task_cancels_before_it_starts() {
    // A current-thread runtime that nobody drives: the launch stays pending.
    let idle = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = BackgroundStore::new(idle.handle().clone(), None);
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    let id = s
        .launch("slow", "later", move |_, _| async move {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            completed("ran")
        })
        .unwrap();
    let check = CheckBackgroundAgent { store: s.clone() };
    let none = CancelToken::new();
    assert_eq!(
        run_tool(&check, json!({"agent_id": id}), &none).0,
        format!("Agent 'slow' ({id}) is queued, not yet started.")
    );
    let cancel = CancelBackgroundAgent { store: s.clone() };
    assert_eq!(
        run_tool(&cancel, json!({"agent_id": id}), &none).0,
        format!("Agent 'slow' ({id}) cancelled before it started.")
    );
    assert_eq!(
        run_tool(&cancel, json!({"agent_id": id}), &none).0,
        format!("Agent 'slow' ({id}) is already cancelled — nothing to cancel.")
    );
    assert_eq!(
        run_tool(&check, json!({"agent_id": ""}), &none).0,
        format!("Background agents:\n  [{id}] slow — cancelled (cancelled before start): later")
    );
    // Driving the runtime now runs the supervisor, which finds the task no longer pending.
    idle.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(
        s.drain_notices(),
        vec![format!("Background agent 'slow' (ID: {id}) was cancelled.")]
    );
}

#[test]
fn check_reports_each_state_and_waits() {
    let rt = runtime();
    let s = store(&rt);
    let check = CheckBackgroundAgent { store: s.clone() };
    let none = CancelToken::new();
    assert_eq!(
        run_tool(&check, json!({"agent_id": ""}), &none).0,
        "No background agents in this conversation."
    );
    assert_eq!(
        run_tool(&check, json!({"agent_id": "ffffffff"}), &none).0,
        "No background agent found with ID: ffffffff"
    );
    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = s.launch("scout", "look around", gated(rx)).unwrap();
    // Running once the runtime picked it up.
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.get(&id).unwrap().rec.status != TaskStatus::Running {
        assert!(Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let text = run_tool(&check, json!({"agent_id": id}), &none).0;
    assert!(
        text.starts_with(&format!("Agent 'scout' ({id}) is still running… (")),
        "{text}"
    );
    let list = run_tool(&check, json!({"agent_id": ""}), &none).0;
    assert!(
        list.starts_with(&format!("Background agents:\n  [{id}] scout — running (")),
        "{list}"
    );
    assert!(list.ends_with("s running): look around"), "{list}");

    // A timed-out wait says so and how not to repeat it.
    let (text, _) = run_tool(&check, json!({"agent_id": id, "wait_seconds": 1}), &none);
    assert!(text.ends_with("\nWaited 1s without it finishing. Do not repeat the same wait: end this turn (its update is delivered when this session next runs), or stop it with cancel_background_agent."), "{text}");

    // A wait the turn cancels stops at once; the agent keeps running.
    let turn = CancelToken::new();
    let t2 = turn.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        t2.cancel("user-cancel");
    });
    let started = Instant::now();
    let (text, _) = run_tool(&check, json!({"agent_id": id, "wait_seconds": 1800}), &turn);
    let took = started.elapsed();
    canceller.join().unwrap();
    println!("cancelled wait returned after {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(text, format!("Stopped waiting for agent 'scout' ({id}): this turn was cancelled. The agent itself was not cancelled and is still running."));
    assert_eq!(s.get(&id).unwrap().rec.status, TaskStatus::Running);

    // A wait that the completion ends returns the result.
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        tx.send(completed("found three files")).unwrap();
    });
    let (text, _) = run_tool(&check, json!({"agent_id": id, "wait_seconds": "30"}), &none);
    sender.join().unwrap();
    let head = format!("Agent 'scout' ({id}) completed (");
    assert!(text.starts_with(&head), "{text}");
    assert!(text.ends_with("s):\n\nfound three files"), "{text}");

    assert_eq!(
        run_tool(
            &check,
            json!({"agent_id": id, "wait_seconds": "soon"}),
            &none
        )
        .0,
        "Invalid wait_seconds 'soon': expected an integer from 0 to 1800."
    );
}

#[test]
fn cancel_tool_signals_a_running_task_which_keeps_its_partial_result() {
    let rt = runtime();
    let s = store(&rt);
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let id = s.launch("digger", "dig", gated(rx)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.get(&id).unwrap().rec.status != TaskStatus::Running {
        assert!(Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let cancel = CancelBackgroundAgent { store: s.clone() };
    let none = CancelToken::new();
    assert_eq!(
        run_tool(&cancel, json!({"agent_id": id}), &none).0,
        format!("Cancellation signal sent to agent 'digger' ({id}). It will stop at the next safe point.")
    );
    assert_eq!(settle_wait(&s, &id), TaskStatus::Cancelled);
    let check = CheckBackgroundAgent { store: s.clone() };
    assert_eq!(
        run_tool(&check, json!({"agent_id": id}), &none).0,
        format!("Agent 'digger' ({id}) was cancelled.\n\n[Cancelled: user-cancel]")
    );
    assert_eq!(
        run_tool(&cancel, json!({"agent_id": "00000000"}), &none).0,
        "No background agent found with ID: 00000000"
    );
    assert!(!cancel.is_read_only() && !cancel.requires_confirmation());
    assert!(check.is_read_only());
}

#[test]
fn close_cancels_waits_bounded_and_aborts_what_ignores_its_token() {
    let rt = runtime();
    let s = store(&rt);
    // Honours its token.
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let polite = s.launch("polite", "p", gated(rx)).unwrap();
    // Ignores its token: only an abort stops it. Its drop is observed.
    struct Dropped(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let guard = Dropped(dropped.clone());
    let stubborn = s
        .launch("stubborn", "s", move |_, _| async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            completed("never")
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while [&polite, &stubborn]
        .iter()
        .any(|id| s.get(id).unwrap().rec.status != TaskStatus::Running)
    {
        assert!(Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    let left = s.close("session-closed", Duration::from_millis(300));
    let took = started.elapsed();
    println!("close with one stubborn child took {took:?}");
    assert_eq!(left, 1, "only the stubborn one was still running");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(settle_wait(&s, &polite), TaskStatus::Cancelled);
    // The abort drops the stubborn run's future and settles it.
    assert_eq!(settle_wait(&s, &stubborn), TaskStatus::Cancelled);
    assert!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        "the aborted run was dropped"
    );
    assert_eq!(
        s.get(&polite).unwrap().rec.result.as_deref(),
        Some("[Cancelled: session-closed]")
    );
    assert_eq!(
        s.launch("late", "x", |_, _| async { completed("no") })
            .unwrap_err(),
        LaunchError::Closed
    );

    // With nothing in flight, close returns at once.
    let s2 = store(&rt);
    let started = Instant::now();
    assert_eq!(s2.close("session-closed", CLOSE_TIMEOUT), 0);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn persistence_writes_merges_and_recovers() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".agentao/background_tasks.json");
    // A sibling's record already on disk, and an earlier process's running task.
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let orphan = json!({"agent_name": "old", "task": "t", "status": "running", "result": null,
        "error": null, "incomplete_reason": null, "created_at": 1.0, "started_at": 2.0,
        "finished_at": null, "turns": 0, "tool_calls": 0, "tokens": 0, "duration_ms": 0});
    std::fs::write(
        &file,
        json!({"version": 1, "tasks": {"0badc0de": orphan, "bad": "not a record"}}).to_string(),
    )
    .unwrap();
    let s = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
    let rec = s.get("0badc0de").expect("recovered").rec;
    assert_eq!(rec.status, TaskStatus::Failed);
    assert_eq!(
        rec.error.as_deref(),
        Some("process exited before task finished")
    );
    assert!(
        s.list().is_empty(),
        "recovered records are history, not this session's"
    );

    let id = s
        .launch("writer", "persist me", |_, _| async {
            completed("secret result")
        })
        .unwrap();
    assert_eq!(settle_wait(&s, &id), TaskStatus::Completed);
    // The flush after settling runs right after the wake-up: poll for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let doc = loop {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        if doc["tasks"][&id]["status"] == "completed" {
            break doc;
        }
        assert!(Instant::now() < deadline, "never flushed: {doc}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["tasks"][&id]["result"], "secret result");
    assert_eq!(doc["tasks"]["0badc0de"]["status"], "failed");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "unredacted: owner only");
    }

    // A second store on the same file in this process does not take the records over, and
    // its flush keeps them.
    let s2 = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
    assert!(s2.get(&id).is_none());
    let id2 = s2
        .launch("other", "o", |_, _| async { completed("two") })
        .unwrap();
    assert_eq!(settle_wait(&s2, &id2), TaskStatus::Completed);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let tasks = doc["tasks"].as_object().unwrap();
        if tasks.get(&id2).is_some_and(|t| t["status"] == "completed") {
            assert!(tasks.contains_key(&id) && tasks.contains_key("0badc0de"));
            break;
        }
        assert!(Instant::now() < deadline, "never flushed: {doc}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(unix)]
#[test]
fn persistence_never_writes_through_a_planted_symlink() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".agentao")).unwrap();
    let s = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
    let id = s.launch("w", "t", |_, _| async { completed("r") }).unwrap();
    assert_eq!(settle_wait(&s, &id), TaskStatus::Completed);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "nothing written through the symlink"
    );
}

#[test]
fn persistence_never_replaces_a_file_it_cannot_read() {
    // A file over the read bound (or of another version) held records this store could not
    // see; merging into "nothing" and writing replaced them all.
    let rt = runtime();
    for (name, text) in [
        (
            "too big",
            format!(
                "{{\"version\": 1, \"tasks\": {{}}, \"pad\": \"{}\"}}",
                "x".repeat(17 << 20)
            ),
        ),
        (
            "another version",
            "{\"version\": 2, \"tasks\": {\"keep\": {}}}".to_owned(),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".agentao")).unwrap();
        let file = dir.path().join(".agentao/background_tasks.json");
        std::fs::write(&file, &text).unwrap();
        let s = BackgroundStore::new(rt.handle().clone(), Some(dir.path().to_owned()));
        let id = s.launch("w", "t", |_, _| async { completed("r") }).unwrap();
        assert_eq!(settle_wait(&s, &id), TaskStatus::Completed);
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            std::fs::read_to_string(&file).unwrap() == text,
            "{name}: the file was replaced"
        );
    }
}

#[test]
fn started_text_is_the_references() {
    let task = "x".repeat(81);
    assert_eq!(
        started_text("scout", "1234abcd", &task),
        format!(
            "Background agent 'scout' started (ID: 1234abcd). Task: {}…. Continue other work; do \
             not wait with sleep or repeated status checks. If there is nothing else to do, end \
             this turn. A background agent update can be read when this session next runs. If \
             this turn cannot continue without its result, call \
             check_background_agent(agent_id='1234abcd', wait_seconds=N) once.",
            "x".repeat(80)
        )
    );
}

// ---------------------------------------------------------------------------------------------
// Injection into the parent's next LLM iteration, through a real agent and the loopback mock.

/// Records events; on the first `tool_start` it holds the turn until the background task has
/// settled, so the notice is queued between the first and the second LLM request.
struct Recorder {
    events: Mutex<Vec<Value>>,
    hold: Mutex<Option<(Arc<BackgroundStore>, String)>>,
}

impl crate::events::transport::Transport for Recorder {
    fn emit(&self, event: &str) {
        let v: Value = serde_json::from_str(event).unwrap();
        if v["type"] == "tool_start" {
            if let Some((s, id)) = self.hold.lock().unwrap().take() {
                let _ = s.wait(&id, Duration::from_secs(10), &CancelToken::new());
            }
        }
        self.events.lock().unwrap().push(v);
    }
}

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A loopback chat-completions server: answers each request with the next delta (one SSE
/// chunk, then the finish chunk) and keeps every request body. The crate's own tests cannot link
/// `mock-openai` (it links this crate again), so this is the minimum of it.
struct Loopback {
    base_url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Loopback {
    fn start(deltas: Vec<Value>) -> Self {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for (stream, delta) in listener.incoming().zip(deltas) {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                kept.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                let finish = if delta.get("tool_calls").is_some() {
                    "tool_calls"
                } else {
                    "stop"
                };
                let chunk = |d: Value, f: Value| {
                    format!(
                        "data: {}\n\n",
                        json!({"id": "x", "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": d, "finish_reason": f}]})
                    )
                };
                let sse = format!(
                    "{}{}data: [DONE]\n\n",
                    chunk(delta, Value::Null),
                    chunk(json!({}), json!(finish))
                );
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{sse}",
                    sse.len()
                );
            }
        });
        Loopback { base_url, bodies }
    }

    fn requests(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

#[test]
fn a_notice_reaches_the_parents_next_llm_iteration_as_a_system_reminder() {
    let server = Loopback::start(vec![
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "list_directory", "arguments": "{\"path\": \".\"}"}}]}),
        json!({"content": "Noted."}),
        json!({"content": "Still noted."}),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "openai",
        "base_url": server.base_url, "api_key": "k", "model": "m"}});
    let recorder = Arc::new(Recorder {
        events: Mutex::new(Vec::new()),
        hold: Mutex::new(None),
    });
    let agent = crate::agent::Agent::new(&config.to_string(), Some(recorder.clone())).unwrap();
    let store = agent.background().clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = store.launch("scout", "look", gated(rx)).unwrap();
    *recorder.hold.lock().unwrap() = Some((store.clone(), id.clone()));
    // Settles while the turn waits in its first tool_start.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let _ = tx.send(completed("three files found"));
    });
    agent
        .run_blocking("Go.", crate::agent::TurnOptions::default())
        .unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let reminder = format!(
        "<system-reminder>\nBackground agent update:\nBackground agent 'scout' (ID: {id}) completed.\nthree files found\n</system-reminder>"
    );
    assert!(
        !user_texts(&requests[0]).contains(&reminder),
        "not before it settled"
    );
    // The second request carries it as the last message: a user message after the tool result.
    let messages = requests[1]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"], reminder.as_str());
    assert_eq!(messages[messages.len() - 2]["role"], "tool");

    // Its event comes before that iteration's turn_start, with the reference's fields.
    let events = recorder.events.lock().unwrap().clone();
    let at = events
        .iter()
        .position(|e| e["type"] == "background_notification_injected")
        .expect("the injection event");
    assert_eq!(events[at]["data"]["note_count"], 1);
    assert_eq!(
        events[at]["data"]["content"],
        format!("Background agent 'scout' (ID: {id}) completed.\nthree files found")
    );
    assert_eq!(events[at + 1]["type"], "turn_start");

    // Stored in the history once: the next turn sends it again as history, not a second time.
    agent
        .run_blocking("Again.", crate::agent::TurnOptions::default())
        .unwrap();
    let third = &server.requests()[2];
    let count = user_texts(third).iter().filter(|t| **t == reminder).count();
    assert_eq!(count, 1);
    assert_eq!(
        recorder
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "background_notification_injected")
            .count(),
        1
    );
}

#[test]
fn agent_close_background_cancels_and_refuses_new_launches() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        json!({"working_directory": dir.path(), "llm": {"provider": "scripted", "script": []}});
    let agent = crate::agent::Agent::new(&config.to_string(), None).unwrap();
    let store = agent.background().clone();
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let id = store.launch("w", "t", gated(rx)).unwrap();
    let started = Instant::now();
    assert_eq!(agent.close_background(), 0);
    println!(
        "agent close with one running child took {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < CLOSE_TIMEOUT);
    assert_eq!(store.get(&id).unwrap().rec.status, TaskStatus::Cancelled);
    assert_eq!(
        store
            .launch("w", "t", |_, _| async { completed("x") })
            .unwrap_err(),
        LaunchError::Closed
    );
    // Nothing keeps the store alive once the agent is gone: the supervisors have ended.
    drop(agent);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Arc::strong_count(&store) > 1 {
        assert!(
            Instant::now() < deadline,
            "a supervisor still holds the store"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A task cancelled while pending drops its run unpolled, on the runtime: the spawn tool's
/// guard in that run publishes the child's `cancelled` from its drop.
#[test]
fn a_run_cancelled_before_it_starts_is_dropped_unpolled_on_the_runtime() {
    struct Probe(Arc<Mutex<Option<bool>>>);
    impl Drop for Probe {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(tokio::runtime::Handle::try_current().is_ok());
        }
    }
    // Not driven until `block_on`: the task stays pending.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = store(&rt);
    let dropped = Arc::new(Mutex::new(None));
    let polled = Arc::new(Mutex::new(false));
    let (probe, p) = (Probe(dropped.clone()), polled.clone());
    let id = s
        .launch("n", "t", move |_, _| async move {
            let _probe = probe;
            *p.lock().unwrap() = true;
            completed("ran")
        })
        .unwrap();
    assert!(matches!(
        s.cancel(&id, "x"),
        CancelResult::BeforeStart { .. }
    ));
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
    assert_eq!(
        *dropped.lock().unwrap(),
        Some(true),
        "dropped on the runtime"
    );
    assert!(!*polled.lock().unwrap());
    assert_eq!(settle_wait(&s, &id), TaskStatus::Cancelled);
}
