//! Through a real agent: a notice in the parent's next LLM iteration, the agent's close, and a
//! run cancelled before it starts.

use super::*;

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
