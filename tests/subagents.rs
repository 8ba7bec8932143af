//! Sub-agents through the Rust API on the scripted provider (spec §6): the spawn tool, the
//! child's forwarded events and confirmations, narrowing, classification, usage roll-up,
//! lifecycle events (v3 schema, the reference's example lines), cancellation, parallel runs.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions};
use agentao::cancel::CancelToken;
use agentao::turn::TurnStatus;
use serde_json::{json, Value};

mod common;
use common::RecordingHost as Host;

struct Run {
    agent: Agent,
    host: Arc<Host>,
    /// Each host event with the parent's usage totals read when it arrived.
    host_events: Arc<Mutex<Vec<(Value, u64)>>>,
    dir: tempfile::TempDir,
}

fn setup(parent: Value, subagents: Value, section: Value, host: Host, extra: Value) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut config = json!({
        "working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": parent, "subagents": subagents}},
        "subagents": section,
    });
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            config[k] = v;
        }
    }
    let host = Arc::new(host);
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    let host_events = Arc::new(Mutex::new(Vec::new()));
    let he = host_events.clone();
    let slot: Arc<OnceLock<Agent>> = Arc::new(OnceLock::new());
    let s = slot.clone();
    agent.host_events().add_observer(Arc::new(move |j: &str| {
        let prompt = s.get().map_or(0, |a| a.usage().prompt_tokens);
        he.lock()
            .unwrap()
            .push((serde_json::from_str(j).unwrap(), prompt));
    }));
    // The observer reads the totals through a handle of its own (a cycle this test accepts).
    let _ = slot.set(agent.clone());
    Run {
        agent,
        host,
        host_events,
        dir,
    }
}

fn spawn(id: &str, agent: &str, task: &str) -> Value {
    json!({"tool_calls": [{"id": id, "name": agent, "arguments": {"task": task}}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
}

fn events(run: &Run) -> Vec<Value> {
    run.host.events.lock().unwrap().clone()
}

fn host_events(run: &Run) -> Vec<Value> {
    let evs: Vec<Value> = run
        .host_events
        .lock()
        .unwrap()
        .iter()
        .map(|(e, _)| e.clone())
        .collect();
    common::validate_host_events(&evs);
    evs
}

fn lifecycle(run: &Run) -> Vec<Value> {
    host_events(run)
        .into_iter()
        .filter(|e| e["event_type"] == "subagent_lifecycle")
        .collect()
}

/// `<text>\n\n[<name>: T turns, C tool calls, ~K tokens, Dms]` split into text and counters.
fn footer(result: &str, name: &str) -> (String, u64, u64) {
    let at = result
        .rfind(&format!("\n\n[{name}: "))
        .unwrap_or_else(|| panic!("no footer in {result:?}"));
    let f = &result[at + 2..];
    let re =
        regex::Regex::new(r"^\[[\w-]+: (\d+) turns, (\d+) tool calls, ~[\d,]+ tokens, \d+ms\]$")
            .unwrap();
    let c = re.captures(f).unwrap_or_else(|| panic!("bad footer {f:?}"));
    (
        result[..at].to_owned(),
        c[1].parse().unwrap(),
        c[2].parse().unwrap(),
    )
}

fn investigator() -> Value {
    json!({"definitions": [{"name": "investigator", "description": "Looks around.",
                            "tools": ["read_file", "glob"], "max_turns": 5}]})
}

#[test]
fn a_completed_run_reports_its_result_events_and_usage() {
    let child = json!([
        {"tool_calls": [{"id": "k1", "name": "read_file", "arguments": {"file_path": "a.txt"}}],
         "usage": {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 40}}},
        {"tool_calls": [{"id": "k2", "name": "complete_task", "arguments": {"result": "alpha is in a.txt"}}],
         "usage": {"prompt_tokens": 120, "completion_tokens": 7}},
        {"text": "", "usage": {"prompt_tokens": 130, "completion_tokens": 1}},
    ]);
    let parent = json!([
        spawn("call_05", "agent_investigator", "find alpha"),
        {"text": "done", "usage": {"prompt_tokens": 20, "completion_tokens": 3}},
    ]);
    let run = setup(
        parent,
        json!({"investigator": child}),
        investigator(),
        Host::default(),
        json!({}),
    );
    let o = run
        .agent
        .run_blocking("where is alpha?", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "done");

    let results = common::tool_results(&run.agent);
    let (text, turns, calls) = footer(&results[0], "investigator");
    assert_eq!(text, "alpha is in a.txt");
    assert_eq!((turns, calls), (3, 2));

    // Usage: the parent's two calls plus the child's three.
    let u = run.agent.usage();
    assert_eq!(u.prompt_tokens, 10 + 20 + 100 + 120 + 130);
    assert_eq!(u.completion_tokens, 2 + 3 + 5 + 7 + 1);

    let lc = lifecycle(&run);
    assert_eq!(lc.len(), 2, "{lc:?}");
    let (spawned, done) = (&lc[0], &lc[1]);
    assert_eq!(spawned["phase"], "spawned");
    assert_eq!(done["phase"], "completed");
    let sid = run.agent.session_id();
    for e in &lc {
        assert_eq!(e["session_id"], sid);
        assert_eq!(e["parent_session_id"], sid);
        assert_eq!(e["parent_tool_call_id"], "call_05");
        assert_eq!(e["task_summary"], "sub-agent: investigator");
        assert_eq!(e["parent_task_id"], Value::Null);
        assert_eq!(e["child_task_id"], spawned["child_task_id"]);
        assert_eq!(e["child_session_id"], spawned["child_session_id"]);
    }
    assert_ne!(spawned["child_session_id"], sid);
    assert_eq!(
        done["usage"],
        json!({"prompt_tokens": 350, "completion_tokens": 13, "cache_read_tokens": 40,
               "cache_creation_tokens": 0, "reasoning_tokens": 0})
    );
    // The roll-up happened before the terminal event was published.
    let seen: Vec<(Value, u64)> = run.host_events.lock().unwrap().clone();
    let at_terminal = seen
        .iter()
        .find(|(e, _)| e["phase"] == "completed" && e["event_type"] == "subagent_lifecycle")
        .unwrap()
        .1;
    assert_eq!(at_terminal, 10 + 350);

    // Parent host-event order for the agent_* call; the child's own events stay private.
    let order: Vec<String> = host_events(&run)
        .iter()
        .map(|e| {
            format!(
                "{}:{}:{}",
                e["event_type"].as_str().unwrap(),
                e.get("tool_name").and_then(Value::as_str).unwrap_or("-"),
                e["phase"].as_str().or(e["outcome"].as_str()).unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            "permission_decision:agent_investigator:allow",
            "tool_lifecycle:agent_investigator:started",
            "subagent_lifecycle:-:spawned",
            "subagent_lifecycle:-:completed",
            "tool_lifecycle:agent_investigator:completed",
        ],
        "{order:?}"
    );

    // Forwarded transport events: the whitelist, relabelled, stamped with the run's id.
    let ctid = spawned["child_task_id"].as_str().unwrap();
    let evs = events(&run);
    let fwd: Vec<&Value> = evs
        .iter()
        .filter(|e| e["data"].get("child_task_id").is_some())
        .collect();
    let kinds: Vec<&str> = fwd.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "agent_start",
            "turn_start",
            "tool_start",
            "tool_complete",
            "turn_start",
            "tool_start",
            "tool_complete",
            "turn_start",
            "agent_end",
        ],
        "{kinds:?}"
    );
    for e in &fwd {
        assert_eq!(e["data"]["child_task_id"], ctid);
    }
    assert_eq!(
        fwd[0]["data"],
        json!({"agent": "investigator", "task": "find alpha", "max_turns": 5, "child_task_id": ctid})
    );
    assert_eq!(fwd[1]["data"], json!({"child_task_id": ctid}));
    assert_eq!(fwd[2]["data"]["tool"], "[investigator 1/5] read_file");
    assert_eq!(fwd[2]["data"]["call_id"], "k1");
    assert_eq!(fwd[3]["data"]["tool"], "read_file");
    assert_eq!(fwd[3]["data"]["status"], "ok");
    assert_eq!(fwd[5]["data"]["tool"], "[investigator 2/5] complete_task");
    let end = &fwd[8]["data"];
    assert_eq!(end["state"], "completed");
    assert_eq!(
        (end["turns"].as_u64(), end["tool_calls"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(end["error"], Value::Null);
    // The child's text, reasoning, LLM calls and turn end never reach the parent.
    assert!(!evs
        .iter()
        .any(|e| e["type"] == "turn_end" && e["data"].get("child_task_id").is_some()));
    assert_eq!(evs.iter().filter(|e| e["type"] == "turn_end").count(), 1);
    assert_eq!(evs.iter().filter(|e| e["type"] == "turn_begin").count(), 1);
}

/// The reference's three example lines, field for field, with ids, times and usage figures
/// taken from our events.
#[test]
fn lifecycle_events_match_the_reference_examples() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/host-event-examples.jsonl"
    ))
    .unwrap();
    let examples: Vec<Value> = text
        .lines()
        .filter(|l| l.contains("subagent_lifecycle"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(examples.len(), 3);

    let parent = json!([
        spawn("call_05", "agent_codebase_investigator", "map the repo"),
        spawn("call_06", "agent_generalist", "fix everything"),
        {"text": "ok"},
    ]);
    let subs = json!({
        "codebase-investigator": [
            {"tool_calls": [{"id": "i1", "name": "complete_task", "arguments": {"result": "mapped"}}],
             "usage": {"prompt_tokens": 48210, "completion_tokens": 2315,
                       "prompt_tokens_details": {"cached_tokens": 30720},
                       "completion_tokens_details": {"reasoning_tokens": 812}}},
            {"text": ""}],
        "generalist": [{"repeat": 2, "tool_calls": [{"id": "g{i}", "name": "glob", "arguments": {"pattern": "*{i}"}}],
                        "usage": {"prompt_tokens": 40000, "completion_tokens": 2040}},
                       {"tool_calls": [{"id": "g3", "name": "glob", "arguments": {"pattern": "*3"}}],
                        "usage": {"prompt_tokens": 40044, "completion_tokens": 2040}}],
    });
    // The generalist's budget is the built-in 100; the config narrows it to 3 here.
    let section = json!({"builtin": true, "definitions": [
        {"name": "generalist", "description": "General-purpose agent.", "max_turns": 3}]});
    let run = setup(parent, subs, section, Host::default(), json!({}));
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let ours = lifecycle(&run);
    assert_eq!(ours.len(), 4);
    let ours = [&ours[0], &ours[1], &ours[3]];
    for (ex, got) in examples.iter().zip(ours) {
        let mut expected = ex.clone();
        for k in [
            "session_id",
            "parent_session_id",
            "child_session_id",
            "child_task_id",
            "started_at",
            "completed_at",
        ] {
            if !ex[k].is_null() {
                expected[k] = got[k].clone();
            }
        }
        assert_eq!(got, &expected, "ours {got}\nreference {ex}");
        assert_eq!(
            got.as_object().unwrap().keys().collect::<Vec<_>>(),
            ex.as_object().unwrap().keys().collect::<Vec<_>>(),
            "field order"
        );
    }
    let results = common::tool_results(&run.agent);
    assert!(
        results[1].starts_with("[generalist did not finish: it used its entire 3-turn budget without finishing]\n\n[generalist: "),
        "{}",
        results[1]
    );
}

fn one(name: &str, extra: Value) -> Value {
    let mut d = json!({"name": name, "description": format!("{name} helper")});
    if let (Value::Object(d), Value::Object(extra)) = (&mut d, extra) {
        d.extend(extra);
    }
    json!({"definitions": [d]})
}

#[test]
fn confirmations_and_questions_reach_the_parent_host_labelled() {
    let child = json!([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"file_path": "b.txt", "content": "x"}}]},
        {"tool_calls": [{"id": "q1", "name": "ask_user", "arguments": {"question": "Which colour?"}}]},
        {"text": "wrote b.txt; the user said blue"},
    ]);
    let parent = json!([spawn("c1", "agent_writer", "write b"), {"text": "ok"}]);
    let run = setup(
        parent,
        json!({"writer": child}),
        one("writer", json!({})),
        Host::default(),
        json!({}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(*run.host.confirms.lock().unwrap(), ["[writer] write_file"]);
    assert_eq!(*run.host.questions.lock().unwrap(), ["Which colour?"]);
    assert_eq!(
        std::fs::read_to_string(run.dir.path().join("b.txt")).unwrap(),
        "x"
    );
    let evs = events(&run);
    let conf = evs
        .iter()
        .find(|e| e["type"] == "tool_confirmation")
        .unwrap();
    assert_eq!(conf["data"]["tool"], "[writer 1/15] write_file");
    assert!(conf["data"]["child_task_id"].is_string());
    let outputs: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "tool_output" && e["data"].get("child_task_id").is_some())
        .collect();
    for o in outputs {
        assert!(o["data"]["chunk"].is_string() && o["data"]["call_id"].is_string());
    }
    let (text, _, _) = footer(&common::tool_results(&run.agent)[0], "writer");
    assert_eq!(text, "wrote b.txt; the user said blue");
    assert_eq!(lifecycle(&run)[1]["phase"], "completed");
}

#[test]
fn a_declined_confirmation_is_the_childs_not_the_parents() {
    let child = json!([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"file_path": "b.txt", "content": "x"}}]},
        {"text": "could not write"},
    ]);
    let parent = json!([spawn("c1", "agent_writer", "write b"), {"text": "ok"}]);
    let host = Host {
        deny: true,
        ..Host::default()
    };
    let run = setup(
        parent,
        json!({"writer": child}),
        one("writer", json!({})),
        host,
        json!({}),
    );
    let o = run
        .agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(o.status, TurnStatus::Ok);
    assert!(!run.dir.path().join("b.txt").exists());
    let (text, _, _) = footer(&common::tool_results(&run.agent)[0], "writer");
    assert_eq!(text, "could not write");
}

/// A test host tool with a chosen origin.
struct HostTool {
    name: &'static str,
    copies: bool,
}

impl agentao::tools::Tool for HostTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "host tool"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn origin(&self) -> agentao::tools::ToolOrigin {
        agentao::tools::ToolOrigin::Host {
            copies_to_subagents: self.copies,
        }
    }
    fn execute(
        &self,
        _args: &serde_json::Map<String, Value>,
        _ctx: &agentao::tools::ToolContext<'_>,
    ) -> Result<String, agentao::tools::ToolError> {
        Ok(format!("{} ran", self.name))
    }
}

/// The tools a child ran, from its forwarded `tool_start` events (a call to a tool it does not
/// have is rejected before it starts, so it has none).
fn child_tools_started(run: &Run) -> Vec<String> {
    events(run)
        .iter()
        .filter(|e| e["type"] == "tool_start" && e["data"].get("child_task_id").is_some())
        .map(|e| e["data"]["tool"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn narrowing_by_origin_and_by_list() {
    let calls = |names: &[&str]| {
        let tc: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(i, n)| json!({"id": format!("n{i}"), "name": n, "arguments": {}}))
            .collect();
        json!([{"tool_calls": tc}, {"text": "done"}])
    };
    let all = [
        "host_copied",
        "host_kept",
        "agent_n",
        "list_directory",
        "glob",
    ];
    // No list: built-ins and copied host tools; not a host tool that does not copy, not a
    // spawn tool (depth one).
    let parent = json!([spawn("c1", "agent_n", "look"), {"text": "ok"}]);
    let run = setup(
        parent,
        json!({"n": calls(&all)}),
        one("n", json!({})),
        Host::default(),
        json!({}),
    );
    for (name, copies) in [("host_copied", true), ("host_kept", false)] {
        run.agent
            .add_tool(Arc::new(HostTool { name, copies }), false)
            .unwrap();
    }
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(
        child_tools_started(&run),
        [
            "[n 1/15] host_copied",
            "[n 1/15] list_directory",
            "[n 1/15] glob"
        ]
    );
    // A list narrows further; complete_task is always there.
    let parent = json!([spawn("c1", "agent_n", "look"), {"text": "ok"}]);
    let mut list = all.to_vec();
    list.push("complete_task");
    let run = setup(
        parent,
        json!({"n": calls(&list)}),
        one("n", json!({"tools": ["glob", "host_kept"]})),
        Host::default(),
        json!({}),
    );
    for (name, copies) in [("host_copied", true), ("host_kept", false)] {
        run.agent
            .add_tool(Arc::new(HostTool { name, copies }), false)
            .unwrap();
    }
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(
        child_tools_started(&run),
        ["[n 1/15] glob", "[n 1/15] complete_task"]
    );
}

#[test]
fn each_classification_path() {
    struct Case {
        child: Value,
        max_turns: u32,
        phase: &'static str,
        error_type: Value,
        head: &'static str,
    }
    let cases = [
        // complete_task wins over an empty answer.
        Case {
            child: json!([{"tool_calls": [{"id": "t", "name": "complete_task", "arguments": {"result": "R"}}]}, {"text": ""}]),
            max_turns: 5,
            phase: "completed",
            error_type: Value::Null,
            head: "R",
        },
        // A plain answer.
        Case {
            child: json!([{"text": "plain"}]),
            max_turns: 5,
            phase: "completed",
            error_type: Value::Null,
            head: "plain",
        },
        // The budget.
        Case {
            child: json!([{"repeat": 2, "tool_calls": [{"id": "g{i}", "name": "glob", "arguments": {"pattern": "{i}*"}}]}]),
            max_turns: 2,
            phase: "failed",
            error_type: json!("incomplete:max_iterations"),
            head: "[n did not finish: it used its entire 2-turn budget without finishing]",
        },
        // No output: the harness's placeholder is not shown as a partial result.
        Case {
            child: json!([{"text": ""}]),
            max_turns: 5,
            phase: "failed",
            error_type: json!("incomplete:no_output"),
            head: "[n did not finish: it produced no output]",
        },
        // A cut-off answer is shown as a partial result.
        Case {
            child: json!([{"text": "half an ans", "finish_reason": "length"}]),
            max_turns: 5,
            phase: "failed",
            error_type: json!("incomplete:length_truncated"),
            head: "[n did not finish: its answer was cut off by the model's output-length limit]\nPartial result:\nhalf an ans",
        },
        // The model API failed.
        Case {
            child: json!([{"fault": {"type": "http_error", "status": 400, "message": "bad"}}]),
            max_turns: 5,
            phase: "failed",
            error_type: json!("incomplete:llm_error"),
            head: "[n did not finish: the LLM API call failed]",
        },
    ];
    for c in cases {
        let parent = json!([spawn("c1", "agent_n", "t"), {"text": "ok"}]);
        let run = setup(
            parent,
            json!({"n": c.child}),
            one("n", json!({"max_turns": c.max_turns})),
            Host::default(),
            json!({}),
        );
        let o = run
            .agent
            .run_blocking("go", TurnOptions::default())
            .unwrap();
        assert!(
            o.is_answer(),
            "a child's failure never fails the parent turn"
        );
        let lc = lifecycle(&run);
        assert_eq!(lc[1]["phase"], c.phase, "{}", c.head);
        assert_eq!(lc[1]["error_type"], c.error_type, "{}", c.head);
        let (text, _, _) = footer(&common::tool_results(&run.agent)[0], "n");
        assert_eq!(text, c.head);
        let end = events(&run)
            .into_iter()
            .find(|e| e["type"] == "agent_end")
            .unwrap();
        assert_eq!(end["data"]["state"], c.phase);
    }
}

#[test]
fn relay_events_republish_the_childs_own_events_under_its_session() {
    let child = json!([{"tool_calls": [{"id": "g", "name": "glob", "arguments": {"pattern": "*"}}]}, {"text": "done"}]);
    for relay in [false, true] {
        let parent = json!([spawn("c1", "agent_n", "t"), {"text": "ok"}]);
        let mut section = one("n", json!({}));
        section["relay_events"] = json!(relay);
        let run = setup(
            parent,
            json!({"n": child.clone()}),
            section,
            Host::default(),
            json!({}),
        );
        run.agent
            .run_blocking("go", TurnOptions::default())
            .unwrap();
        let evs = host_events(&run);
        let child_sid = lifecycle(&run)[0]["child_session_id"].clone();
        let relayed: Vec<&Value> = evs
            .iter()
            .filter(|e| e["session_id"] == child_sid)
            .collect();
        if relay {
            let names: Vec<String> = relayed
                .iter()
                .map(|e| {
                    format!(
                        "{}:{}",
                        e["event_type"].as_str().unwrap(),
                        e["tool_name"].as_str().unwrap()
                    )
                })
                .collect();
            assert_eq!(
                names,
                [
                    "permission_decision:glob",
                    "tool_lifecycle:glob",
                    "tool_lifecycle:glob"
                ]
            );
            // Nothing relayed after the terminal event.
            let last_relayed = evs
                .iter()
                .rposition(|e| e["session_id"] == child_sid)
                .unwrap();
            let terminal = evs
                .iter()
                .position(|e| e["phase"] == "completed" && e["event_type"] == "subagent_lifecycle")
                .unwrap();
            assert!(last_relayed < terminal);
        } else {
            assert!(relayed.is_empty());
        }
    }
}

#[test]
fn run_in_background_is_offered_only_when_enabled() {
    let bg = json!({"tool_calls": [{"id": "b", "name": "agent_n", "arguments": {"task": "t", "run_in_background": true}}]});
    // Enabled, the launch succeeds: tests/background_agents.rs.
    {
        let mut section = one("n", json!({}));
        section["background"] = json!({"enabled": false});
        let run = setup(
            json!([bg.clone(), {"text": "ok"}]),
            json!({}),
            section,
            Host::default(),
            json!({}),
        );
        run.agent
            .run_blocking("go", TurnOptions::default())
            .unwrap();
        let r = &common::tool_results(&run.agent)[0];
        assert!(r.starts_with("Error executing agent_n: "), "{r}");
        assert!(lifecycle(&run).is_empty(), "nothing was spawned");
    }
}

#[test]
fn parent_cancel_cancels_the_running_child_at_once() {
    let child = json!([{"fault": {"type": "stall", "ms": 30000}, "text": "late"}]);
    let parent = json!([spawn("c1", "agent_n", "t"), {"text": "never"}]);
    let run = setup(
        parent,
        json!({"n": child}),
        one("n", json!({})),
        Host::default(),
        json!({}),
    );
    let token = CancelToken::new();
    let (tx, rx) = std::sync::mpsc::channel();
    run.agent
        .start_turn(
            "go".into(),
            TurnOptions {
                cancel: Some(token.clone()),
                ..TurnOptions::default()
            },
            agentao::turn::DeltaSink::None,
            move |r| {
                let _ = tx.send((r, Instant::now()));
            },
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "turn_start" && e["data"].get("child_task_id").is_some())
    {
        assert!(Instant::now() < deadline, "the child never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    token.cancel("user-cancel");
    let (r, ended) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let ms = ended.duration_since(t0).as_secs_f64() * 1000.0;
    println!("parent cancel -> turn end with a child running: {ms:.1} ms");
    // The contract is 100 ms; the margin is for a loaded 2-core machine.
    assert!(ms < 500.0, "took {ms} ms");
    assert_eq!(r.unwrap().status, TurnStatus::Cancelled);
    let lc = lifecycle(&run);
    assert_eq!(lc[1]["phase"], "cancelled");
    assert_eq!(lc[1]["error_type"], Value::Null);
    let end = events(&run)
        .into_iter()
        .find(|e| e["type"] == "agent_end")
        .unwrap();
    assert_eq!(end["data"]["state"], "cancelled");
    // The spawn call itself ends failed/cancelled, after the child's `cancelled`, as any
    // blocking call a cancel reaches (spec §4.6's table); the reference reports it
    // completed/ok (docs/deviations.md, Sub-agents).
    let host = host_events(&run);
    let tool_end = host
        .iter()
        .position(|e| {
            e["event_type"] == "tool_lifecycle"
                && e["tool_call_id"] == "c1"
                && e["phase"] != "started"
        })
        .expect("the spawn call's terminal event");
    assert_eq!(host[tool_end]["phase"], "failed");
    assert_eq!(host[tool_end]["outcome"], "cancelled");
    let child_end = host
        .iter()
        .position(|e| e["event_type"] == "subagent_lifecycle" && e["phase"] == "cancelled")
        .unwrap();
    assert!(child_end < tool_end);
    let complete = events(&run)
        .into_iter()
        .find(|e| e["type"] == "tool_complete" && e["data"]["call_id"] == "c1")
        .unwrap();
    assert_eq!(complete["data"]["status"], "cancelled");
}

#[test]
fn freeing_the_agent_during_a_child_turn_is_safe() {
    let child = json!([{"fault": {"type": "stall", "ms": 30000}, "text": "late"}]);
    let parent = json!([spawn("c1", "agent_n", "t"), {"text": "never"}]);
    let run = setup(
        parent,
        json!({"n": child}),
        one("n", json!({})),
        Host::default(),
        json!({}),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    run.agent
        .start_turn(
            "go".into(),
            TurnOptions::default(),
            agentao::turn::DeltaSink::None,
            move |r| {
                let _ = tx.send(r.map(|o| o.status).map_err(|e| e.0.to_string()));
            },
        )
        .unwrap();
    while !run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "agent_start")
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    // What agentao_agent_free does: cancel the turn, drop the handle.
    run.agent.cancel_active("agent freed");
    let Run { agent, host, .. } = run;
    drop(agent);
    let status = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(status, Ok(TurnStatus::Cancelled));
    assert!(host
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "agent_end"));
}

#[test]
fn sub_agents_in_one_read_only_batch_run_in_parallel() {
    let names = ["a", "b", "c"];
    let calls: Vec<Value> = names
        .iter()
        .map(|n| json!({"id": format!("s_{n}"), "name": format!("agent_{n}"), "arguments": {"task": "t"}}))
        .collect();
    let parent = json!([{"tool_calls": calls}, {"text": "ok"}]);
    let mut subs = serde_json::Map::new();
    let mut defs = Vec::new();
    for n in names {
        subs.insert(
            n.into(),
            json!([{"text": format!("{n} done"), "delay_ms": 150}]),
        );
        defs.push(json!({"name": n, "description": "d"}));
    }
    let run = setup(
        parent,
        Value::Object(subs),
        json!({"definitions": defs}),
        Host::default(),
        json!({}),
    );
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let lc = lifecycle(&run);
    let phases: Vec<&str> = lc.iter().map(|e| e["phase"].as_str().unwrap()).collect();
    // Every child was spawned before any finished: they ran at the same time.
    assert_eq!(&phases[..3], ["spawned"; 3], "{phases:?}");
    assert_eq!(&phases[3..], ["completed"; 3], "{phases:?}");
    let results = common::tool_results(&run.agent);
    for (n, r) in names.iter().zip(&results) {
        assert_eq!(footer(r, n).0, format!("{n} done"));
    }
}

#[test]
fn definitions_added_between_turns_and_refused_during_one() {
    let parent = json!([spawn("c1", "agent_late", "t"), {"text": "ok"}]);
    let run = setup(
        parent,
        json!({"late": [{"text": "hi"}]}),
        json!(null),
        Host::default(),
        json!({}),
    );
    assert!(run.agent.add_subagent("{").is_err());
    assert!(run.agent.add_subagent(r#"{"name": "bad name"}"#).is_err());
    assert!(run
        .agent
        .add_subagent(r#"{"name": "read-file", "tools": 1}"#)
        .is_err());
    run.agent
        .add_subagent(r#"{"name": "late", "description": "added later", "max_turns": 3}"#)
        .unwrap();
    assert_eq!(run.agent.subagent_definitions()[0].max_turns, 3);
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert_eq!(footer(&common::tool_results(&run.agent)[0], "late").0, "hi");
}

/// The child's first request over the OpenAI wire: its model settings, its tools, and its one
/// user message (the context block of the parent's last 10 messages, then the task) exactly.
#[test]
fn the_childs_request_over_the_wire() {
    let server = mock_openai::MockServer::start(json!({"responses": [
        {"tool_calls": [{"id": "call_9", "name": "agent_n", "arguments": {"task": "find alpha\nquickly"}}]},
        {"text": "child done"},
        {"text": "parent done"},
    ]}))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"working_directory": dir.path(),
        "llm": {"provider": "openai", "base_url": server.base_url(), "api_key": "k", "model": "m",
                "temperature": 0.9, "max_attempts": 1},
        "subagents": {"definitions": [{"name": "n", "description": "d", "model": "openai/child-model",
                                        "temperature": 0.25, "tools": ["read_file", "agent_n"],
                                        "instructions": "Be brief."}]}});
    let agent = Agent::new(&config.to_string(), None).unwrap();
    let mut history = Vec::new();
    for i in 0..12 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        history.push(json!({"role": role, "content": format!("m{i}")}));
    }
    history[11] =
        json!({"role": "assistant", "content": format!("{}\n{}", "x".repeat(398), "tail")});
    agent
        .set_history_json(&Value::Array(history).to_string())
        .unwrap();
    let o = agent
        .run_blocking("look for alpha", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "parent done");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let child = &reqs[1];
    assert_eq!(child["model"], "child-model");
    assert_eq!(child["temperature"], 0.25);
    let tools: Vec<&str> = child["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["complete_task", "read_file"]);
    let msgs = child["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert!(msgs[0]["content"]
        .as_str()
        .unwrap()
        .ends_with("\n\nBe brief."));
    let parent_user = reqs[0]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let indented = parent_user.replace('\n', "\n    ");
    let expected_block = format!(
        "[Parent conversation context (last 10 messages)]\n[user]: m4\n[assistant]: m5\n[user]: m6\n[assistant]: m7\n[user]: m8\n[assistant]: m9\n[user]: m10\n[assistant]: {}\n    t\n[user]: {indented}\n[assistant called: agent_n]\n\n[Your Task]\nfind alpha\nquickly",
        "x".repeat(398)
    );
    let child_user = msgs[1]["content"].as_str().unwrap();
    let body = child_user
        .split_once("</system-reminder>\n")
        .map(|(_, b)| b)
        .unwrap_or_else(|| panic!("no reminder: {child_user}"));
    assert_eq!(body, expected_block);
}

#[test]
fn markdown_definitions_only_from_a_named_directory() {
    let child = json!([{"text": "md child"}]);
    let parent = json!([spawn("c1", "agent_md_helper", "t"), {"text": "ok"}]);
    // In the reference's place: not read unless named.
    let run = setup(
        parent.clone(),
        json!({"md-helper": child.clone()}),
        json!(null),
        Host::default(),
        json!({}),
    );
    let agents = run.dir.path().join(".agentao/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("md-helper.md"),
        "---\ndescription: From markdown.\ntools: read_file, glob\nmax_turns: 4\n---\nBe brief.\n",
    )
    .unwrap();
    std::fs::write(agents.join("broken.md"), "no front matter\n").unwrap();
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    assert!(lifecycle(&run).is_empty());
    assert!(run.agent.subagent_definitions().is_empty());
    // Named: read, broken files skipped.
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("agents");
    std::fs::create_dir_all(&md).unwrap();
    std::fs::copy(agents.join("md-helper.md"), md.join("md-helper.md")).unwrap();
    std::fs::copy(agents.join("broken.md"), md.join("broken.md")).unwrap();
    let config = json!({"working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": parent, "subagents": {"md-helper": child}}},
        "subagents": {"directory": "agents"}});
    let agent = Agent::new(&config.to_string(), None).unwrap();
    let defs = agent.subagent_definitions();
    assert_eq!(defs.len(), 1);
    assert_eq!(defs[0].name, "md-helper");
    assert_eq!(defs[0].max_turns, 4);
    assert_eq!(defs[0].instructions.as_deref(), Some("Be brief."));
    agent.run_blocking("go", TurnOptions::default()).unwrap();
    let h: Value = serde_json::from_str(&agent.history_json()).unwrap();
    let result = h
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(result["content"]
        .as_str()
        .unwrap()
        .starts_with("md child\n\n[md-helper: 1 turns"));
    // A directory that cannot be read is a config error.
    let bad = json!({"working_directory": dir.path(), "llm": {"provider": "scripted", "script": []},
                     "subagents": {"directory": "missing"}});
    let e = Agent::new(&bad.to_string(), None).err().unwrap();
    assert!(e.to_string().contains("subagents.directory"), "{e}");
}

#[test]
fn a_host_tool_with_a_spawn_tools_name_wins() {
    let parent = json!([spawn("c1", "agent_late", "t"), {"text": "ok"}]);
    let run = setup(
        parent,
        json!({"late": [{"text": "child"}]}),
        one("late", json!({})),
        Host::default(),
        json!({}),
    );
    run.agent
        .add_tool(
            Arc::new(HostTool {
                name: "agent_late",
                copies: false,
            }),
            false,
        )
        .unwrap();
    // And the other way round: a definition whose tool name a tool has is refused.
    assert!(run.agent.add_subagent(r#"{"name": "late"}"#).is_err());
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    // The host tool's own schema has no `task`: its check, not a spawn, answered.
    assert_eq!(
        common::tool_results(&run.agent),
        ["Error executing agent_late: agent_late() got an unexpected keyword argument 'task'"]
    );
    assert!(lifecycle(&run).is_empty());
}

/// A child's usage and its cost by the `llm.prices` table roll up into the parent's totals (the
/// figures `agentao_agent_usage` reports) on each HTTP wire, the child priced by its own model:
/// the parent's two calls at `m`'s prices, the child's two at `small`'s.
#[test]
fn a_childs_usage_and_cost_roll_up_into_the_parents_on_every_wire() {
    let script = json!({"responses": [
        {"tool_calls": [{"id": "call_1", "name": "agent_n", "arguments": {"task": "count"}}],
         "usage": {"prompt_tokens": 1000, "completion_tokens": 10}},
        {"tool_calls": [{"id": "k1", "name": "read_file", "arguments": {"file_path": "a.txt"}}],
         "usage": {"prompt_tokens": 2000, "completion_tokens": 20,
                   "prompt_tokens_details": {"cached_tokens": 500}}},
        {"text": "child done", "usage": {"prompt_tokens": 3000, "completion_tokens": 30}},
        {"text": "parent done", "usage": {"prompt_tokens": 4000, "completion_tokens": 40}},
    ]});
    for wire in ["openai", "anthropic", "openai-responses"] {
        let server = mock_openai::MockServer::start(script.clone()).unwrap();
        let base = match wire {
            "anthropic" => server.base_url().trim_end_matches("/v1").to_owned(),
            _ => server.base_url(),
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
        let config = json!({"working_directory": dir.path(),
            "llm": {"provider": wire, "base_url": base, "api_key": "k", "model": "m",
                    "max_attempts": 1,
                    "prices": {"m": {"input": 3.0, "output": 15.0},
                               "small": {"input": 0.5, "output": 2.0, "cache_read": 0.05}}},
            "subagents": {"definitions": [{"name": "n", "description": "d",
                                            "model": "small", "tools": ["read_file"]}]}});
        let agent = Agent::new(&config.to_string(), None).unwrap();
        let o = agent.run_blocking("count", TurnOptions::default()).unwrap();
        assert_eq!(o.text, "parent done", "{wire}");
        assert_eq!(server.request_count(), 4, "{wire}");
        let results = common::tool_results(&agent);
        assert_eq!(footer(&results[0], "n").0, "child done", "{wire}");

        let u = agent.usage();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cache_read_tokens),
            (1000 + 2000 + 3000 + 4000, 10 + 20 + 30 + 40, 500),
            "{wire}"
        );
        // Parent (m): 5000 × $3 + 50 × $15; child (small): 4500 × $0.50 + 500 × $0.05 +
        // 50 × $2; per million.
        let expected =
            (5000.0 * 3.0 + 50.0 * 15.0 + 4500.0 * 0.5 + 500.0 * 0.05 + 50.0 * 2.0) / 1e6;
        let cost = agent.cost_usd().expect("priced");
        assert!(
            (cost - expected).abs() < 1e-12,
            "{wire}: {cost} != {expected}"
        );
    }
}
