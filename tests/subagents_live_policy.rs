//! Sub-agents decide against the parent's live permission engine: a mode switch, an added
//! rule (user or run scope) or a new source label binds every running child, foreground or
//! background, from its next tool call on, whether it lands before the child's call (when the
//! child is spawned) or while one of the child's calls runs. Children spawned later are bound
//! too, and so is the parent itself.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions, WeakAgent};
use agentao::permissions::Mode;
use serde_json::{json, Value};

mod common;
use common::RecordingHost as Host;

/// How the host tightens the parent's policy.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Change {
    /// `set_permission_mode(read-only)`.
    ReadOnly,
    /// A user-scope deny rule for `write_file` (`add_rules`).
    UserDeny,
    /// A run-scope deny rule for `write_file` (`add_run_rules`).
    RunDeny,
    /// A new source label (no rules): the child's decisions report it.
    Source,
}

/// When the change lands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum When {
    /// As the child is spawned, before its first call.
    AtSpawn,
    /// From inside one of the child's tool calls (a copied host tool), before its next call.
    DuringCall,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Child {
    Foreground,
    Background,
}

const SOURCE: &str = "injected:audit";

fn apply(agent: &Agent, change: Change) {
    match change {
        Change::ReadOnly => {
            agent.set_permission_mode(Mode::ReadOnly).unwrap();
        }
        Change::UserDeny => agent
            .with_engine(|e| {
                e.add_rules(
                    &json!([{"tool": "write_file", "action": "deny"}]),
                    "host-lock",
                )
            })
            .unwrap()
            .unwrap(),
        Change::RunDeny => agent
            .with_engine(|e| {
                e.add_run_rules(
                    &Value::Null,
                    &json!([{"tool": "write_file", "action": "deny"}]),
                    "lockdown",
                )
            })
            .unwrap()
            .unwrap(),
        Change::Source => {
            assert!(agent.with_engine(|e| e.add_loaded_source(SOURCE)).unwrap());
        }
    }
}

/// The reason a tightened policy gives for refusing `write_file`.
fn refusal_reason(change: Change) -> &'static str {
    match change {
        Change::ReadOnly => "mode-preset:read-only",
        Change::UserDeny => "user-rule:write_file",
        Change::RunDeny => "injected:lockdown:write_file",
        Change::Source => unreachable!("a source label refuses nothing"),
    }
}

/// A host tool copied to sub-agents: a call to it applies the change while the call runs.
struct Flip {
    agent: Arc<OnceLock<WeakAgent>>,
    change: Change,
    armed: bool,
}

impl agentao::tools::Tool for Flip {
    fn name(&self) -> &str {
        "flip"
    }
    fn description(&self) -> &str {
        "changes the host's policy while it runs"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn origin(&self) -> agentao::tools::ToolOrigin {
        agentao::tools::ToolOrigin::Host {
            copies_to_subagents: true,
        }
    }
    fn execute(
        &self,
        _args: &serde_json::Map<String, Value>,
        _ctx: &agentao::tools::ToolContext<'_>,
    ) -> Result<String, agentao::tools::ToolError> {
        if self.armed {
            let agent = self.agent.get().and_then(WeakAgent::upgrade).unwrap();
            apply(&agent, self.change);
        }
        Ok("flipped".into())
    }
}

struct Run {
    agent: Agent,
    host: Arc<Host>,
    host_events: Arc<Mutex<Vec<Value>>>,
    dir: tempfile::TempDir,
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"id": id, "name": name, "arguments": arguments}]})
}

fn write(id: &str, file: &str) -> Value {
    call(id, "write_file", json!({"file_path": file, "content": "x"}))
}

/// An agent in workspace-write (where `write_file` is allowed by the preset, so a background
/// child, which is never confirmed, may write) with one sub-agent `w` whose events are relayed.
/// The child calls `flip`, then writes `child.txt`.
fn setup(child: Child, change: Change, when: When, parent: Value) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let child_script =
        json!([call("k1", "flip", json!({})), write("k2", "child.txt"), {"text": "done"}]);
    let config = json!({
        "working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": parent, "subagents": {"w": child_script}}},
        "permissions": {"mode": "workspace-write"},
        "subagents": {"definitions": [{"name": "w", "description": "writes"}],
                      "relay_events": true,
                      "background": {"enabled": child == Child::Background}},
    });
    let host = Arc::new(Host::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    let slot: Arc<OnceLock<WeakAgent>> = Arc::new(OnceLock::new());
    let _ = slot.set(agent.downgrade());
    agent
        .add_tool(
            Arc::new(Flip {
                agent: slot.clone(),
                change,
                armed: when == When::DuringCall,
            }),
            false,
        )
        .unwrap();
    let host_events = Arc::new(Mutex::new(Vec::new()));
    let he = host_events.clone();
    agent.host_events().add_observer(Arc::new(move |j: &str| {
        let v: Value = serde_json::from_str(j).unwrap();
        let spawned = v["event_type"] == "subagent_lifecycle" && v["phase"] == "spawned";
        he.lock().unwrap().push(v);
        if spawned && when == When::AtSpawn {
            apply(&slot.get().and_then(WeakAgent::upgrade).unwrap(), change);
        }
    }));
    Run {
        agent,
        host,
        host_events,
        dir,
    }
}

fn events(run: &Run) -> Vec<Value> {
    run.host_events.lock().unwrap().clone()
}

/// The relayed (child) or own (parent) `permission_decision` event for `write_file` of each
/// session other than / equal to the parent's.
fn write_decisions(run: &Run, of_child: bool) -> Vec<Value> {
    let parent = run.agent.session_id().to_owned();
    events(run)
        .into_iter()
        .filter(|e| e["event_type"] == "permission_decision" && e["tool_name"] == "write_file")
        .filter(|e| (e["session_id"] != parent.as_str()) == of_child)
        .collect()
}

/// Waits (bounded) for the background child's terminal lifecycle event.
fn wait_settled(run: &Run) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !events(run)
        .iter()
        .any(|e| e["event_type"] == "subagent_lifecycle" && e["phase"] != "spawned")
    {
        assert!(
            Instant::now() < deadline,
            "the background child never settled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs one case and checks the child's write, and the parent's own write after it.
fn case(child: Child, change: Change, when: When) {
    let what = format!("{child:?} child, {change:?} {when:?}");
    let spawn_args = match child {
        Child::Foreground => json!({"task": "write"}),
        Child::Background => json!({"task": "write", "run_in_background": true}),
    };
    let parent =
        json!([call("p1", "agent_w", spawn_args), write("p2", "parent.txt"), {"text": "ok"}]);
    let run = setup(child, change, when, parent);
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    if child == Child::Background {
        wait_settled(&run);
    }
    let decided = write_decisions(&run, true);
    assert_eq!(decided.len(), 1, "{what}: {decided:?}");
    let d = &decided[0];
    if change == Change::Source {
        assert_eq!(d["outcome"], "allow", "{what}: {d}");
        let sources: Vec<&str> = d["loaded_sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert!(sources.contains(&SOURCE), "{what}: {d}");
        return;
    }
    assert_eq!(d["outcome"], "deny", "{what}: {d}");
    assert_eq!(d["reason"], refusal_reason(change), "{what}: {d}");
    if change == Change::ReadOnly {
        assert_eq!(d["mode"], "read-only", "{what}: {d}");
    }
    assert!(
        !run.dir.path().join("child.txt").exists(),
        "{what}: the child wrote after the host tightened the policy"
    );
    // The parent's own write after the change is refused as well (in the background case it
    // may be planned before the child starts; then only a change already made counts).
    if child == Child::Foreground {
        let own = write_decisions(&run, false);
        assert_eq!(own.len(), 1, "{what}: {own:?}");
        assert_eq!(own[0]["outcome"], "deny", "{what}: {}", own[0]);
        assert!(!run.dir.path().join("parent.txt").exists(), "{what}");
    }
    assert!(run.host.confirms.lock().unwrap().is_empty(), "{what}");
}

#[test]
fn a_foreground_child_obeys_a_change_made_when_it_is_spawned() {
    for change in [
        Change::ReadOnly,
        Change::UserDeny,
        Change::RunDeny,
        Change::Source,
    ] {
        case(Child::Foreground, change, When::AtSpawn);
    }
}

#[test]
fn a_foreground_child_obeys_a_change_made_during_its_call() {
    for change in [
        Change::ReadOnly,
        Change::UserDeny,
        Change::RunDeny,
        Change::Source,
    ] {
        case(Child::Foreground, change, When::DuringCall);
    }
}

#[test]
fn a_background_child_obeys_a_change_made_when_it_is_spawned() {
    for change in [
        Change::ReadOnly,
        Change::UserDeny,
        Change::RunDeny,
        Change::Source,
    ] {
        case(Child::Background, change, When::AtSpawn);
    }
}

#[test]
fn a_background_child_obeys_a_change_made_during_its_call() {
    for change in [
        Change::ReadOnly,
        Change::UserDeny,
        Change::RunDeny,
        Change::Source,
    ] {
        case(Child::Background, change, When::DuringCall);
    }
}

/// A child spawned after the switch is bound by it too, and so is one spawned in a later turn
/// (no definition of the parent's policy is kept past the switch).
#[test]
fn children_spawned_after_a_switch_are_bound_by_it() {
    let parent = json!([
        call("p1", "agent_w", json!({"task": "write"})), {"text": "ok"},
    ]);
    let run = setup(
        Child::Foreground,
        Change::ReadOnly,
        When::DuringCall,
        parent,
    );
    run.agent.set_permission_mode(Mode::ReadOnly).unwrap();
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap();
    let decided = write_decisions(&run, true);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["outcome"], "deny");
    assert!(!run.dir.path().join("child.txt").exists());
}
