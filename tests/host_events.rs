//! Host-event streams: back-pressure without loss, no replay, one stream per filter, closing
//! releases a blocked producer, observers in order.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions};
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
        while let Some(ev) = rx.blocking_recv() {
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
        all.try_recv().is_err(),
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
    let drain = |rx: &mut tokio::sync::mpsc::Receiver<Arc<str>>| {
        let mut v = Vec::new();
        while let Ok(e) = rx.try_recv() {
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
