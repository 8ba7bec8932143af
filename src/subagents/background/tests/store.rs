//! The store's states and its two tools: launch, settle, cancel, check, close.

use super::*;

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
