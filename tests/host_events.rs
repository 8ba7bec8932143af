//! Host-event streams: back-pressure without loss, no replay, one stream per filter, closing
//! releases a blocked producer, observers in order.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions};
use agentao::events::host::{HostEventReceiver, StreamNext};
use serde_json::{json, Value};

mod common;

/// A turn with `n` parallel read_file calls: 3 host events per call.
fn agent_with_calls(n: usize) -> (Agent, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let calls: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("c{i}"), "name": "read_file", "arguments": {"file_path": "a.txt", "offset": i + 1}}))
        .collect();
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "scripted",
        "script": {"responses": [{"tool_calls": calls}, {"text": "done"}]}}});
    (Agent::new(&config.to_string(), None).unwrap(), dir)
}

#[test]
fn a_slow_consumer_slows_the_turn_and_loses_nothing() {
    let (agent, _dir) = agent_with_calls(40);
    let (_, mut rx) = agent.host_events().open_stream(None).unwrap();
    let observed = Arc::new(Mutex::new(Vec::new()));
    let o = observed.clone();
    agent.host_events().add_observer(Arc::new(move |j: &str| {
        o.lock().unwrap().push(j.to_owned())
    }));
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        while let StreamNext::Event(ev) = rx.blocking_next() {
            std::thread::sleep(Duration::from_micros(300));
            got.push(ev.to_string());
            if got.len() == 120 {
                break;
            }
        }
        got
    });
    let outcome = agent.run_blocking("go", TurnOptions::default()).unwrap();
    assert_eq!(outcome.text, "done");
    let got = reader.join().unwrap();
    assert_eq!(got.len(), 120, "3 events per call, none lost");
    assert_eq!(
        got,
        *observed.lock().unwrap(),
        "stream and observer see the same events in the same order"
    );
    let parsed: Vec<Value> = got
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
    common::validate_host_events(&parsed);
    // Per call: decision, then started, then completed.
    for i in 0..40 {
        let id = format!("c{i}");
        let pos: Vec<usize> = parsed
            .iter()
            .enumerate()
            .filter(|(_, e)| e["tool_call_id"] == id.as_str())
            .map(|(p, _)| p)
            .collect();
        assert_eq!(pos.len(), 3);
        assert_eq!(parsed[pos[0]]["event_type"], "permission_decision");
        assert_eq!(parsed[pos[1]]["phase"], "started");
        assert_eq!(parsed[pos[2]]["phase"], "completed");
    }
}

#[test]
fn no_replay_and_one_stream_per_filter() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let call = json!({"repeat": 2, "tool_calls": [{"id": "c{i}", "name": "read_file", "arguments": {"file_path": "a.txt"}}]});
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "scripted",
        "script": {"responses": [call, {"text": "one"}, {"tool_calls": [{"id": "c3", "name": "list_directory", "arguments": {}}]}, {"text": "two"}]}}});
    let agent = Agent::new(&config.to_string(), None).unwrap();
    // The first call/answer pair is turn one; it runs before any stream exists.
    let first = agent.run_blocking("one", TurnOptions::default()).unwrap();
    assert_eq!(first.tool_count, 2);
    let (_, mut all) = agent.host_events().open_stream(None).unwrap();
    assert!(
        all.try_next().is_none(),
        "events published before the stream opened are not replayed"
    );
    assert!(
        agent.host_events().open_stream(None).is_err(),
        "a second live stream on the same filter"
    );
    let (_, mut mine) = agent
        .host_events()
        .open_stream(Some(agent.session_id().to_owned()))
        .unwrap();
    let (_, mut other) = agent
        .host_events()
        .open_stream(Some("another-session".into()))
        .unwrap();
    let second = agent.run_blocking("two", TurnOptions::default()).unwrap();
    assert_eq!(second.text, "two");
    let drain = |rx: &mut HostEventReceiver| {
        let mut v = Vec::new();
        while let Some(StreamNext::Event(e)) = rx.try_next() {
            v.push(e.to_string());
        }
        v
    };
    let (a, m, o) = (drain(&mut all), drain(&mut mine), drain(&mut other));
    assert_eq!(
        a.len(),
        3,
        "decision, started, completed of the one call: {a:?}"
    );
    assert_eq!(a, m, "every matching stream gets every event");
    assert!(o.is_empty(), "a filter for another session sees nothing");
    assert!(a.iter().all(|e| e.contains("\"c3\"")));
}

#[test]
fn closing_a_stream_releases_a_blocked_producer() {
    let (agent, _dir) = agent_with_calls(40);
    let (id, rx) = agent.host_events().open_stream(None).unwrap();
    let a = agent.clone();
    let t0 = Instant::now();
    let turn = std::thread::spawn(move || a.run_blocking("go", TurnOptions::default()));
    std::thread::sleep(Duration::from_millis(200));
    assert!(agent.is_busy(), "the turn waits for room in the full queue");
    agent.host_events().close_stream(id);
    drop(rx);
    let outcome = turn.join().unwrap().unwrap();
    assert_eq!(outcome.text, "done");
    assert!(t0.elapsed() < Duration::from_secs(10));
    // Closed: the filter is free again.
    assert!(agent.host_events().open_stream(None).is_ok());
}

/// A turn of `n` glob calls (3 host events each) in a fresh workspace.
fn agent_with_globs(n: usize) -> (Agent, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let calls: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("g{i}"), "name": "glob", "arguments": {"pattern": format!("*{i}.txt")}}))
        .collect();
    let config = json!({"working_directory": dir.path(), "llm": {"provider": "scripted",
        "script": {"responses": [{"tool_calls": calls}, {"text": "done"}, {"text": "next turn"}]}}});
    (Agent::new(&config.to_string(), None).unwrap(), dir)
}

/// A stream nobody reads fills up; the turn blocked on it must still end
/// promptly when it is cancelled, and the next turn must start.
#[test]
fn an_unread_stream_does_not_block_cancel() {
    let (agent, _dir) = agent_with_globs(100);
    let (_id, mut rx) = agent.host_events().open_stream(None).unwrap();
    let published = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let p = published.clone();
    agent.host_events().add_observer(Arc::new(move |_: &str| {
        p.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    let (token, done_rx) = common::start_cancellable(&agent, "go");
    // 64 queued + the one the producer waits on.
    let t0 = Instant::now();
    while published.load(std::sync::atomic::Ordering::SeqCst) < 65 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the turn never filled the queue: {} events, busy {}",
            published.load(std::sync::atomic::Ordering::SeqCst),
            agent.is_busy()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(agent.is_busy(), "the producer waits for room");
    let cancelled_at = Instant::now();
    token.cancel("test-cancel");
    let (done_at, result) = done_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the cancelled turn must complete while its stream stays unread");
    let lag = done_at.duration_since(cancelled_at);
    println!("cancel -> completion with an unread host-event stream: {lag:?}");
    assert!(lag < Duration::from_millis(500), "{lag:?}");
    let outcome = result.unwrap();
    assert_eq!(outcome.status.as_str(), "cancelled");
    assert!(!agent.is_busy());
    // Nothing is lost silently: the 64 queued events, then the gap with its exact size, in
    // order with what the observer saw.
    let total = published.load(std::sync::atomic::Ordering::SeqCst);
    let mut events = 0;
    let mut dropped = 0;
    loop {
        match rx.try_next() {
            Some(StreamNext::Event(_)) => {
                assert_eq!(dropped, 0, "events after the gap in this turn");
                events += 1;
            }
            Some(StreamNext::Dropped(n)) => dropped += n,
            Some(StreamNext::Closed) | None => break,
        }
    }
    assert_eq!(events, 64);
    assert_eq!(
        events + dropped as usize,
        total,
        "every event delivered or counted"
    );
    // The stream goes on: the next turn's events arrive normally, and the turn starts.
    let next = agent.run_blocking("again", TurnOptions::default()).unwrap();
    assert_eq!(next.text, "done");
}

/// Test binaries validate host events at the same time (the test command runs two at once) and
/// each counts them in one log: every count stays a line of its own.
#[test]
fn counts_recorded_at_once_stay_one_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("validated.log");
    std::thread::scope(|s| {
        for t in 0..8 {
            let log = &log;
            s.spawn(move || {
                for i in 0..500 {
                    common::record_validated(log, 1000 * t + i);
                }
            });
        }
    });
    let text = std::fs::read_to_string(&log).unwrap();
    let mut counts: Vec<usize> = text.lines().map(|l| l.parse().unwrap()).collect();
    counts.sort_unstable();
    let want: Vec<usize> = (0..8)
        .flat_map(|t| (0..500).map(move |i| 1000 * t + i))
        .collect();
    assert_eq!(counts, want);
}
