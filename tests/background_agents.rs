//! Background sub-agents end to end (spec §6.5): `run_in_background` through the spawn tool, the
//! completion notice in the parent's next request body, a background child's confirmations
//! refused, the cap of 6, and closing an agent with running children. The store itself is
//! tested with synthetic runs in `src/subagents/background/tests.rs`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions};
use mock_openai::MockServer;
use serde_json::{json, Value};

mod common;
use common::RecordingHost as Host;

struct Run {
    agent: Agent,
    host: Arc<Host>,
    lifecycle: Arc<Mutex<Vec<Value>>>,
    dir: tempfile::TempDir,
}

/// An agent with one sub-agent `n` and background agents on; `llm` is its `llm` section.
fn setup(llm: impl FnOnce(&std::path::Path) -> Value) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "working_directory": dir.path(),
        "llm": llm(dir.path()),
        "subagents": {"definitions": [{"name": "n", "description": "n helper"}],
                      "background": {"enabled": true}},
    });
    let host = Arc::new(Host::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    let lifecycle = Arc::new(Mutex::new(Vec::new()));
    let l = lifecycle.clone();
    agent.host_events().add_observer(Arc::new(move |j: &str| {
        let v: Value = serde_json::from_str(j).unwrap();
        if v["event_type"] == "subagent_lifecycle" {
            l.lock().unwrap().push(v);
        }
    }));
    Run {
        agent,
        host,
        lifecycle,
        dir,
    }
}

fn bg_call(id: &str, task: &str) -> Value {
    json!({"id": id, "name": "agent_n", "arguments": {"task": task, "run_in_background": true}})
}

/// The 8-hex id in a started text.
fn started_id(text: &str) -> String {
    let re = regex::Regex::new(
        r"^Background agent 'n' started \(ID: ([0-9a-f]{8})\)\. Task: .*\. Continue other work; do not wait with sleep or repeated status checks\. If there is nothing else to do, end this turn\. A background agent update can be read when this session next runs\. If this turn cannot continue without its result, call check_background_agent\(agent_id='([0-9a-f]{8})', wait_seconds=N\) once\.$",
    )
    .unwrap();
    let c = re
        .captures(text)
        .unwrap_or_else(|| panic!("not a started text: {text:?}"));
    assert_eq!(c[1], c[2]);
    c[1].to_owned()
}

/// Waits for `n` terminal lifecycle events (bounded).
fn wait_terminal(run: &Run, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done: Vec<Value> = run
            .lifecycle
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["phase"] != "spawned")
            .cloned()
            .collect();
        if done.len() >= n {
            return done;
        }
        assert!(Instant::now() < deadline, "only {} settled", done.len());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_background_child_completes_and_the_next_request_carries_its_notice() {
    // The child and the parent's second call race for the mock's second and third answers;
    // both are the same text, so either order gives the same result.
    let server = MockServer::start(json!({"responses": [
        {"tool_calls": [bg_call("call_bg", "count the files")]},
        {"text": "Done."},
        {"text": "Done."},
        {"text": "Noted."}
    ]}))
    .unwrap();
    let run = setup(
        |_| json!({"provider": "openai", "base_url": server.base_url(), "api_key": "k", "model": "m"}),
    );
    run.agent
        .run_blocking("Start it.", TurnOptions::default())
        .unwrap();
    let id = started_id(&common::tool_results(&run.agent)[0]);

    // The lifecycle pair carries the task id; the terminal event comes after the notice is
    // queued, so a host may start the next turn on it.
    let done = wait_terminal(&run, 1);
    assert_eq!(done[0]["phase"], "completed");
    assert_eq!(done[0]["parent_task_id"], id.as_str());
    let all = run.lifecycle.lock().unwrap().clone();
    assert_eq!(all[0]["phase"], "spawned");
    assert_eq!(all[0]["parent_task_id"], id.as_str());
    assert_eq!(all[0]["parent_tool_call_id"], "call_bg");
    common::validate_host_events(&all);
    // Nothing of the child reached the parent's transport.
    let forwarded = run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["data"]["child_task_id"].is_string() || e["type"] == "agent_start")
        .count();
    assert_eq!(forwarded, 0);

    run.agent
        .run_blocking("Next.", TurnOptions::default())
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let last = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let n = last.len();
    // The child's request races the parent's second call of the first turn: when the child
    // settles first, that call reads the notice; otherwise "Next." does. Either way the
    // history carries it once, as its own user message.
    let updates: Vec<usize> = (0..n)
        .filter(|&i| {
            last[i]["role"] == "user"
                && last[i]["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("<system-reminder>\nBackground agent update:"))
        })
        .collect();
    assert_eq!(updates.len(), 1, "{last:?}");
    let at = updates[0];
    let next = if at == n - 1 { n - 2 } else { n - 1 };
    assert_eq!(last[next]["role"], "user");
    assert!(last[next]["content"]
        .as_str()
        .unwrap()
        .ends_with("</system-reminder>\nNext."));
    if at != n - 1 {
        assert_eq!(
            last[at - 1]["role"],
            "tool",
            "read by the first turn's second call"
        );
    }
    let reminder = last[at]["content"].as_str().unwrap();
    let re = regex::Regex::new(&format!(
        r"^<system-reminder>\nBackground agent update:\nBackground agent 'n' \(ID: {id}\) completed\.\nDone\.\n\n\[n: 1 turns, 0 tool calls, ~\d+ tokens, \d+ms\]\n</system-reminder>$"
    ))
    .unwrap();
    assert!(re.is_match(reminder), "{reminder:?}");
    let injected: Vec<Value> = run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "background_notification_injected")
        .cloned()
        .collect();
    assert_eq!(injected.len(), 1);
    assert_eq!(injected[0]["data"]["note_count"], 1);
}

#[test]
fn a_background_child_never_asks_and_runs_nothing_that_needs_confirmation() {
    let run = setup(|_| {
        json!({"provider": "scripted", "script": {
        "responses": [{"tool_calls": [bg_call("c1", "write it")]}, {"text": "Started."}],
        "subagents": {"n": [
            {"tool_calls": [{"id": "w1", "name": "write_file",
                "arguments": {"file_path": "out.txt", "content": "x"}}]},
            {"text": "Could not write."}
        ]}}})
    });
    run.agent
        .run_blocking("Go.", TurnOptions::default())
        .unwrap();
    let id = started_id(&common::tool_results(&run.agent)[0]);
    let done = wait_terminal(&run, 1);
    assert_eq!(done[0]["parent_task_id"], id.as_str());
    assert!(
        run.host.confirms.lock().unwrap().is_empty(),
        "the host was asked: {:?}",
        run.host.confirms.lock().unwrap()
    );
    assert!(
        !run.dir.path().join("out.txt").exists(),
        "a refused call ran"
    );
}

#[test]
fn the_seventh_launch_is_refused_and_closing_cancels_the_six() {
    let calls: Vec<Value> = (1..=7)
        .map(|i| bg_call(&format!("c{i}"), &format!("task {i}")))
        .collect();
    let run = setup(|_| {
        json!({"provider": "scripted", "script": {
            "responses": [{"tool_calls": calls}, {"text": "Launched."}],
            // Each child stalls: they are all still running when the agent closes.
            "subagents": {"n": [{"fault": {"type": "stall", "ms": 60000}, "text": "late"}]}}})
    });
    run.agent
        .run_blocking("Go.", TurnOptions::default())
        .unwrap();
    let results = common::tool_results(&run.agent);
    assert_eq!(results.len(), 7);
    let refused: Vec<&String> = results
        .iter()
        .filter(|r| r.starts_with("Error executing agent_n: "))
        .collect();
    assert_eq!(refused.len(), 1, "{results:#?}");
    assert_eq!(
        refused[0].as_str(),
        "Error executing agent_n: Background agent not started: 6 background agents are already \
         running, the most this session allows. Wait for one to finish (check_background_agent \
         with wait_seconds), cancel one, or run this task in the foreground \
         (run_in_background=false)."
    );
    let ids: std::collections::HashSet<String> = results
        .iter()
        .filter(|r| !r.starts_with("Error"))
        .map(|r| started_id(r))
        .collect();
    assert_eq!(ids.len(), 6);
    // Each launch published its `spawned` before its call ended.
    let spawned = run
        .lifecycle
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["phase"] == "spawned")
        .count();
    assert_eq!(spawned, 6, "a refused launch leaves no event");

    let started = Instant::now();
    let left = run.agent.close_background();
    let took = started.elapsed();
    println!("closing with 6 running background children took {took:?}");
    assert_eq!(left, 0, "every child stopped on its token");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let done = wait_terminal(&run, 6);
    assert!(done.iter().all(|e| e["phase"] == "cancelled"), "{done:#?}");
    let settled: std::collections::HashSet<String> = done
        .iter()
        .map(|e| e["parent_task_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(settled, ids);
}

/// Spec §3.7: a host joining on `parent_tool_call_id` sees the child's `spawned` between the
/// spawn call's `started` and its terminal event, and the child's terminal event after it,
/// for every launch (the reference publishes `spawned` before the child's thread starts).
#[test]
fn every_background_launch_publishes_spawned_before_its_call_ends() {
    const TURNS: usize = 50;
    const PER_TURN: usize = 4;
    let mut responses = Vec::new();
    for t in 0..TURNS {
        let calls: Vec<Value> = (0..PER_TURN)
            .map(|i| bg_call(&format!("c{t}_{i}"), &format!("quick {t} {i}")))
            .collect();
        responses.push(json!({"tool_calls": calls}));
        responses.push(json!({"text": "Launched."}));
    }
    let run = setup(|_| {
        json!({"provider": "scripted", "script": {"responses": responses,
            "subagents": {"n": [{"text": "done"}]}}})
    });
    let all = Arc::new(Mutex::new(Vec::<Value>::new()));
    let a = all.clone();
    run.agent
        .host_events()
        .add_observer(Arc::new(move |j: &str| {
            a.lock().unwrap().push(serde_json::from_str(j).unwrap());
        }));
    for t in 0..TURNS {
        run.agent
            .run_blocking("Go.", TurnOptions::default())
            .unwrap();
        wait_terminal(&run, (t + 1) * PER_TURN);
    }
    let events = all.lock().unwrap().clone();
    let at = |pred: &dyn Fn(&Value) -> bool, what: &str| -> usize {
        let found: Vec<usize> = (0..events.len()).filter(|&i| pred(&events[i])).collect();
        assert_eq!(found.len(), 1, "{what}: {found:?}");
        found[0]
    };
    let mut bad = Vec::new();
    for t in 0..TURNS {
        for i in 0..PER_TURN {
            let call = format!("c{t}_{i}");
            let tool = |phase: &'static str| {
                let call = call.clone();
                move |e: &Value| {
                    e["event_type"] == "tool_lifecycle"
                        && e["tool_call_id"] == call.as_str()
                        && e["phase"] == phase
                }
            };
            let child = |spawned: bool| {
                let call = call.clone();
                move |e: &Value| {
                    e["event_type"] == "subagent_lifecycle"
                        && e["parent_tool_call_id"] == call.as_str()
                        && (e["phase"] == "spawned") == spawned
                }
            };
            let started = at(&tool("started"), "tool started");
            let completed = at(&tool("completed"), "tool completed");
            let spawned = at(&child(true), "spawned");
            let terminal = at(&child(false), "child terminal");
            if !(started < spawned && spawned < completed && spawned < terminal) {
                bad.push(format!(
                    "{call}: started {started}, spawned {spawned}, completed {completed}, terminal {terminal}"
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} launches out of order:\n{}",
        bad.len(),
        TURNS * PER_TURN,
        bad.join("\n")
    );
}

/// What the model is told about background agents' behaviour: every status a check reports
/// (spec §6.5 lists `cancelled`), what a cancel does to a settled one, and the cap of 6.
#[test]
fn the_tools_tell_the_model_every_status_and_the_cap() {
    let server = MockServer::start(json!({"responses": [{"text": "Hi."}]})).unwrap();
    let run = setup(
        |_| json!({"provider": "openai", "base_url": server.base_url(), "api_key": "k", "model": "m"}),
    );
    run.agent
        .run_blocking("Hello.", TurnOptions::default())
        .unwrap();
    let tools = server.requests()[0]["tools"].as_array().unwrap().clone();
    let function = |name: &str| {
        tools
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))["function"]
            .clone()
    };
    let check = function("check_background_agent")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        check.contains("'completed' (with result), 'failed' (with error), or 'cancelled'"),
        "{check}"
    );
    let cancel = function("cancel_background_agent")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        cancel.contains("Completed, failed or already cancelled agents cannot be cancelled."),
        "{cancel}"
    );
    let flag = function("agent_n")["parameters"]["properties"]["run_in_background"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        flag.contains("At most 6 background agents may be pending or running at once"),
        "{flag}"
    );
}
