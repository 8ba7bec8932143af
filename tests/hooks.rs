//! Lifecycle hooks (docs/hooks.md) with real shell and Python hook scripts, written to a temp
//! dir and configured in Claude Code's shape, driven through the Rust API on the scripted
//! provider: every point, the precedence against the permission decision, and the bad-input
//! matrix (a hook that hangs, floods its output, fails, prints broken JSON, or rewrites a call
//! into a hardline command).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentao::agent::{Agent, TurnOptions};
use agentao::turn::{IncompleteReason, TurnStatus};
use serde_json::{json, Value};

mod common;
use common::RecordingHost as Host;

impl Host {
    fn fired(&self) -> Vec<Value> {
        self.events_of("plugin_hook_fired")
            .into_iter()
            .map(|e| e["data"].clone())
            .collect()
    }
}

struct Run {
    agent: Agent,
    host: Arc<Host>,
    dir: tempfile::TempDir,
}

/// A hook script written to the run's directory; the command that runs it.
fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    let interpreter = if name.ends_with(".py") {
        "python3"
    } else {
        "sh"
    };
    format!("{interpreter} '{}'", path.display())
}

/// An agent on `responses` whose `hooks` section `hooks` builds from the run's directory.
fn setup(responses: Value, hooks: impl FnOnce(&std::path::Path) -> Value) -> Run {
    setup_with(responses, hooks, json!({}))
}

fn setup_with(
    responses: Value,
    hooks: impl FnOnce(&std::path::Path) -> Value,
    extra: Value,
) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut config = json!({
        "working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": responses}},
        "hooks": hooks(dir.path()),
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        config[k] = v;
    }
    let host = Arc::new(Host::default());
    let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
    Run { agent, host, dir }
}

fn one(event: &str, matcher: &str, command: String, timeout: f64) -> Value {
    json!({event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": timeout}]}]})
}

fn shell_call(command: &str) -> Value {
    json!([
        {"tool_calls": [{"id": "c1", "name": "run_shell_command", "arguments": {"command": command}}]},
        {"text": "done"}
    ])
}

fn go(run: &Run) -> agentao::turn::TurnOutcome {
    run.agent
        .run_blocking("go", TurnOptions::default())
        .unwrap()
}

fn history(run: &Run) -> Vec<Value> {
    serde_json::from_str::<Value>(&run.agent.history_json())
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

const DENY_BY_EXIT_2: &str = "cat >/dev/null\necho 'no shell in this repository' >&2\nexit 2\n";

#[test]
fn exit_2_from_a_pre_tool_hook_denies_the_call_with_its_stderr() {
    let run = setup(shell_call("echo hi > made.txt"), |d| {
        one(
            "PreToolUse",
            "Bash",
            script(d, "deny.sh", DENY_BY_EXIT_2),
            10.0,
        )
    });
    let o = go(&run);
    assert_eq!(o.status, TurnStatus::Ok);
    let results = common::tool_results(&run.agent);
    assert!(
        results[0].starts_with("Tool execution blocked by a PreToolUse hook: 'run_shell_command'."),
        "{results:?}"
    );
    assert!(results[0].contains("Hook reason: no shell in this repository"));
    assert!(!run.dir.path().join("made.txt").exists(), "the call ran");
    assert!(
        run.host.confirms.lock().unwrap().is_empty(),
        "a denied call is not confirmed"
    );
    let fired = run.host.fired();
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["hook_name"], "PreToolUse");
    assert_eq!(fired[0]["tool_name"], "run_shell_command");
    assert_eq!(fired[0]["outcome"], "deny");
    let complete: Vec<Value> = run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "tool_complete")
        .cloned()
        .collect();
    assert_eq!(complete[0]["data"]["error"], "denied by pre-tool-use hook");
}

const PY_GUARD: &str = r#"
import json, sys
event = json.load(sys.stdin)
command = event["tool_input"].get("command", "")
if "curl" in command:
    out = {"permissionDecision": "deny", "permissionDecisionReason": "no network"}
else:
    out = {"permissionDecision": "allow", "permissionDecisionReason": "looks fine"}
out["hookEventName"] = event["hook_event_name"]
print(json.dumps({"hookSpecificOutput": out}))
"#;

#[test]
fn a_python_hook_denies_by_json_and_its_allow_skips_the_confirmation() {
    let run = setup(shell_call("curl http://example.invalid"), |d| {
        one("PreToolUse", "Bash", script(d, "guard.py", PY_GUARD), 10.0)
    });
    go(&run);
    let results = common::tool_results(&run.agent);
    assert!(
        results[0].contains("Hook reason: no network"),
        "{results:?}"
    );

    let run = setup(shell_call("echo allowed > made.txt"), |d| {
        one("PreToolUse", "Bash", script(d, "guard.py", PY_GUARD), 10.0)
    });
    go(&run);
    assert!(run.dir.path().join("made.txt").exists());
    assert!(
        run.host.confirms.lock().unwrap().is_empty(),
        "a hook's allow skips the confirmation the tool asks for by default"
    );
}

#[test]
fn a_hook_allow_does_not_skip_a_rule_that_asks_nor_one_that_denies() {
    let allow =
        "cat >/dev/null; echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"allow\"}}'";
    let rules = json!({"permissions": {"mode": "workspace-write", "rules": [
        {"tool": "run_shell_command", "args": {"command": "^echo ask"}, "action": "ask"},
        {"tool": "run_shell_command", "args": {"command": "^echo deny"}, "action": "deny"}
    ]}});
    let run = setup_with(
        shell_call("echo ask > made.txt"),
        |d| one("PreToolUse", "*", script(d, "allow.sh", allow), 10.0),
        rules.clone(),
    );
    go(&run);
    assert_eq!(
        *run.host.confirms.lock().unwrap(),
        vec!["run_shell_command"]
    );
    let run = setup_with(
        shell_call("echo deny > made.txt"),
        |d| one("PreToolUse", "*", script(d, "allow.sh", allow), 10.0),
        rules,
    );
    go(&run);
    assert!(!run.dir.path().join("made.txt").exists());
    assert!(
        run.host.fired().is_empty(),
        "hooks do not run for a call the rules refused"
    );
}

#[test]
fn a_hook_ask_makes_a_read_ask_the_host() {
    let ask = "cat >/dev/null; echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"sensitive\"}}'";
    let run = setup(
        json!([{"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"file_path": "a.txt"}}]}, {"text": "ok"}]),
        |d| one("PreToolUse", "Read", script(d, "ask.sh", ask), 10.0),
    );
    go(&run);
    assert_eq!(*run.host.confirms.lock().unwrap(), vec!["read_file"]);
    assert!(common::tool_results(&run.agent)[0].contains("alpha"));
}

#[test]
fn hooks_that_disagree_resolve_deny_over_ask_over_allow() {
    let say = |d: &str| {
        format!("cat >/dev/null; echo '{{\"hookSpecificOutput\":{{\"permissionDecision\":\"{d}\",\"permissionDecisionReason\":\"{d} said\"}}}}'")
    };
    let group = |cmds: Vec<String>| json!({"PreToolUse": [{"matcher": "Read", "hooks": cmds.into_iter().map(|c| json!({"type": "command", "command": c})).collect::<Vec<_>>()}]});
    let read = json!([{"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"file_path": "a.txt"}}]}, {"text": "ok"}]);
    let run = setup(read.clone(), |_| {
        group(vec![say("allow"), say("deny"), say("ask")])
    });
    go(&run);
    assert!(common::tool_results(&run.agent)[0].contains("Hook reason: deny said"));
    let run = setup(read, |_| group(vec![say("allow"), say("ask")]));
    go(&run);
    assert_eq!(run.host.confirms.lock().unwrap().len(), 1);
    assert_eq!(run.host.fired()[0]["reason"], "ask said");
}

const REWRITE: &str = r#"
import json, sys
event = json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
    "updatedInput": {"command": sys.argv[1]}}}))
"#;

#[test]
fn a_hook_rewrites_the_input_and_the_new_input_is_decided_again() {
    let run = setup(shell_call("echo original"), |d| {
        one(
            "PreToolUse",
            "Bash",
            format!("{} 'echo rewritten'", script(d, "rewrite.py", REWRITE)),
            10.0,
        )
    });
    go(&run);
    let results = common::tool_results(&run.agent);
    assert!(
        results[0].contains("rewritten") && !results[0].contains("original"),
        "{results:?}"
    );
    let start: Vec<Value> = run
        .host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "tool_start")
        .cloned()
        .collect();
    assert_eq!(
        start[0]["data"]["args"]["command"], "echo rewritten",
        "{start:?}"
    );
}

#[test]
fn a_rewrite_into_a_hardline_command_is_refused() {
    for extra in [json!({}), json!({"permissions": {"mode": "full-access"}})] {
        let run = setup_with(
            shell_call("echo harmless"),
            |d| {
                one(
                    "PreToolUse",
                    "Bash",
                    format!("{} 'rm -rf /'", script(d, "rewrite.py", REWRITE)),
                    10.0,
                )
            },
            extra,
        );
        go(&run);
        let results = common::tool_results(&run.agent);
        assert!(
            results[0].starts_with("Tool execution denied: 'run_shell_command' is not permitted"),
            "{results:?}"
        );
        assert!(run.host.confirms.lock().unwrap().is_empty());
    }
}

/// Every way a `PreToolUse` hook can fail denies the call (fail closed), quickly and without
/// holding its output.
#[test]
fn a_failing_pre_tool_hook_denies_the_call() {
    let cases: [(&str, &str, &str); 5] = [
        ("hang.sh", "cat >/dev/null; sleep 30", "timed out after 1 s"),
        (
            "flood.sh",
            "cat >/dev/null; head -c 100000000 /dev/zero",
            "more than 1048576 bytes",
        ),
        (
            "exit1.sh",
            "cat >/dev/null; echo broken >&2; exit 1",
            "exited with code 1: broken",
        ),
        (
            "badjson.sh",
            "cat >/dev/null; echo '{\"hookSpecificOutput\": '",
            "invalid JSON",
        ),
        (
            "badvalue.sh",
            "cat >/dev/null; echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"maybe\"}}'",
            "is not allow, deny or ask",
        ),
    ];
    for (name, body, why) in cases {
        let started = Instant::now();
        let run = setup(shell_call("echo ran > made.txt"), |d| {
            one("PreToolUse", "*", script(d, name, body), 1.0)
        });
        go(&run);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} held the turn"
        );
        let results = common::tool_results(&run.agent);
        assert!(
            results[0].starts_with("Tool execution blocked by a PreToolUse hook"),
            "{name}: {results:?}"
        );
        assert!(results[0].contains(why), "{name}: {results:?}");
        assert!(
            !run.dir.path().join("made.txt").exists(),
            "{name}: the call ran"
        );
        assert_eq!(run.host.fired()[0]["failed"], 1, "{name}");
    }
}

#[test]
fn a_hook_gets_claude_codes_input_on_stdin() {
    let run = setup(shell_call("echo hi"), |d| {
        let dump = d.join("input.json");
        one(
            "PreToolUse",
            "",
            format!("cat > '{}'", dump.display()),
            10.0,
        )
    });
    go(&run);
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(run.dir.path().join("input.json")).unwrap())
            .unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    // Claude Code's name, as the reference sends it: pasted guard scripts test for it.
    assert_eq!(input["tool_name"], "Bash");
    assert_eq!(input["tool_input"], json!({"command": "echo hi"}));
    assert_eq!(input["tool_use_id"], "c1");
    assert_eq!(input["session_id"], run.agent.session_id());
    assert_eq!(
        input["cwd"],
        run.dir.path().canonicalize().unwrap().display().to_string()
    );
    assert!(input["transcript_path"].is_null());
}

const POST: &str = r#"
import json, sys
event = json.load(sys.stdin)
key = "tool_response" if event["hook_event_name"] == "PostToolUse" else "error"
print(json.dumps({"hookSpecificOutput": {"hookEventName": event["hook_event_name"],
    "additionalContext": "%s saw %d chars" % (event["hook_event_name"], len(event[key]))}}))
"#;

#[test]
fn post_tool_hooks_add_context_to_the_result() {
    let run = setup(
        json!([{"tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"file_path": "a.txt"}},
            {"id": "c2", "name": "read_file", "arguments": {"file_path": 5}}
        ]}, {"text": "ok"}]),
        |d| {
            let cmd = script(d, "post.py", POST);
            json!({
                "PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": cmd}]}],
                "PostToolUseFailure": [{"matcher": "read_file", "hooks": [{"type": "command", "command": cmd}]}]
            })
        },
    );
    go(&run);
    let results = common::tool_results(&run.agent);
    assert!(results[0].contains("alpha"), "{results:?}");
    assert!(
        results[0]
            .ends_with("alpha\n\n<system-reminder>\nPostToolUse saw 52 chars\n</system-reminder>"),
        "{results:?}"
    );
    assert!(
        results[1].starts_with("Error executing read_file"),
        "{results:?}"
    );
    assert!(
        results[1].contains("<system-reminder>\nPostToolUseFailure saw"),
        "{results:?}"
    );
}

#[test]
fn continue_false_ends_the_turn_after_the_batch() {
    let halt = "cat >/dev/null; echo '{\"continue\": false, \"stopReason\": \"enough for today\"}'";
    let run = setup(shell_call("echo hi"), |d| {
        one("PostToolUse", "*", script(d, "halt.sh", halt), 10.0)
    });
    let o = go(&run);
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::HookStop));
    assert_eq!(o.text, "enough for today");
    assert!(common::tool_results(&run.agent)[0].contains("hi"));
}

#[test]
fn user_prompt_submit_adds_context_or_blocks_the_prompt() {
    let ctx = "cat >/dev/null; echo 'the build is red'";
    let run = setup(json!([{"text": "ok"}]), |d| {
        one("UserPromptSubmit", "", script(d, "ctx.sh", ctx), 10.0)
    });
    go(&run);
    let h = history(&run);
    let user = h[0]["content"].as_str().unwrap();
    assert!(
        user.ends_with("go\n\n<system-reminder>\nthe build is red\n</system-reminder>"),
        "{user}"
    );

    let block = "python3 -c 'import json,sys; e=json.load(sys.stdin); print(json.dumps({\"decision\":\"block\",\"reason\":\"no prompts about \" + e[\"prompt\"]}))'";
    let run = setup(json!([{"text": "never"}]), |_| {
        one("UserPromptSubmit", "", block.to_owned(), 10.0)
    });
    let o = go(&run);
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::HookStop));
    assert_eq!(
        o.text,
        "Prompt blocked by a UserPromptSubmit hook: no prompts about go"
    );
    assert!(history(&run).is_empty(), "a blocked prompt is not recorded");
    let run = setup(json!([{"text": "never"}]), |d| {
        one(
            "UserPromptSubmit",
            "",
            script(d, "deny.sh", DENY_BY_EXIT_2),
            10.0,
        )
    });
    assert_eq!(go(&run).incomplete_reason, Some(IncompleteReason::HookStop));
}

const STOP_ONCE: &str = r#"
import json, sys
event = json.load(sys.stdin)
if event["stop_hook_active"]:
    sys.exit(0)
print(json.dumps({"decision": "block", "reason": "run the tests first"}))
"#;

#[test]
fn a_stop_hook_sends_the_agent_back_to_work_once() {
    let run = setup(json!([{"text": "first"}, {"text": "second"}]), |d| {
        one("Stop", "", script(d, "stop.py", STOP_ONCE), 10.0)
    });
    let o = go(&run);
    assert_eq!(o.text, "second");
    let h = history(&run);
    let contents: Vec<&str> = h
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(contents[1..], ["first", "run the tests first", "second"]);
    assert_eq!(run.host.fired().len(), 2);
}

#[test]
fn a_stop_hook_that_always_blocks_is_bounded() {
    let always = "cat >/dev/null; echo 'again' >&2; exit 2";
    let run = setup(json!([{"repeat": 20, "text": "answer"}]), |d| {
        one("Stop", "", script(d, "always.sh", always), 10.0)
    });
    let o = go(&run);
    assert_eq!(o.text, "answer");
    assert_eq!(
        run.host.fired().len(),
        9,
        "eight re-entries, then the stop stands"
    );
}

#[test]
fn session_start_context_reaches_the_first_turn_only() {
    let run = setup(json!([{"text": "a"}, {"text": "b"}]), |d| {
        one(
            "SessionStart",
            "startup",
            script(d, "start.sh", "cat >/dev/null; echo 'on branch main'"),
            10.0,
        )
    });
    go(&run);
    go(&run);
    let h = history(&run);
    assert!(h[0]["content"].as_str().unwrap().contains("on branch main"));
    assert!(!h[2]["content"].as_str().unwrap().contains("on branch main"));
}

#[test]
fn a_cancel_reaches_a_running_hook() {
    let run = setup(json!([{"text": "never"}]), |d| {
        let pid = d.join("pid");
        one(
            "UserPromptSubmit",
            "",
            format!("echo $$ > '{}'; sleep 30", pid.display()),
            60.0,
        )
    });
    let (token, done) = common::start_cancellable(&run.agent, "go");
    let pid_file = run.dir.path().join("pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pid_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    token.cancel("stop");
    let (_, result) = done
        .recv_timeout(Duration::from_secs(10))
        .expect("the turn ended");
    let outcome = match result {
        Ok(o) | Err((_, Some(o))) => o,
        Err((e, None)) => panic!("{e}"),
    };
    assert_eq!(outcome.status, TurnStatus::Cancelled);
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    std::thread::sleep(Duration::from_millis(200));
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.contains(") Z"),
        "the hook outlived the cancel: {stat}"
    );
}

#[test]
fn a_bad_hooks_section_is_refused_with_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (hooks, words) in [
        (
            json!({"PreTooluse": []}),
            "`hooks.PreTooluse`: unknown hook event",
        ),
        (
            json!({"Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}),
            "`hooks.Stop[0].hooks[0].prompt`",
        ),
        (
            json!({"Stop": [{"hooks": [{"type": "command", "command": ""}]}]}),
            "`hooks.Stop[0].hooks[0].command`",
        ),
        (
            json!({"PreToolUse": [{"matcher": "(", "hooks": []}]}),
            "`hooks.PreToolUse[0].matcher`",
        ),
        (json!([]), "`hooks`: must be an object"),
    ] {
        let config = json!({"working_directory": dir.path(), "llm": {"provider": "scripted", "script": {"responses": []}}, "hooks": hooks});
        let e = Agent::new(&config.to_string(), None)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains(words), "{e}");
    }
}

#[test]
fn a_sub_agents_tool_calls_pass_the_same_pre_tool_hooks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let seen = dir.path().join("seen.txt");
    let hook = format!(
        "python3 -c 'import json,sys; e=json.load(sys.stdin); open(\"{}\", \"a\").write(e[\"hook_event_name\"] + \" \" + e.get(\"tool_name\", \"-\") + \"\\n\"); print(json.dumps({{\"hookSpecificOutput\": {{\"permissionDecision\": \"deny\", \"permissionDecisionReason\": \"no reads in children\"}}}}) if e.get(\"tool_name\") == \"Read\" else \"\")'",
        seen.display()
    );
    let child = json!([
        {"tool_calls": [{"id": "k1", "name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"tool_calls": [{"id": "k2", "name": "complete_task", "arguments": {"result": "gave up"}}]},
        {"text": ""},
    ]);
    let parent = json!([
        {"tool_calls": [{"id": "p1", "name": "agent_investigator", "arguments": {"task": "find alpha"}}]},
        {"text": "done"},
    ]);
    let config = json!({
        "working_directory": dir.path(),
        "llm": {"provider": "scripted", "script": {"responses": parent, "subagents": {"investigator": child}}},
        "subagents": {"definitions": [{"name": "investigator", "description": "Looks around.",
                                       "tools": ["read_file"], "max_turns": 5}]},
        "hooks": {
            "PreToolUse": [{"hooks": [{"type": "command", "command": hook}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": hook}]}],
        },
    });
    let agent = Agent::new(&config.to_string(), None).unwrap();
    let o = agent
        .run_blocking("where is alpha?", TurnOptions::default())
        .unwrap();
    assert_eq!(o.text, "done");
    let log = std::fs::read_to_string(&seen).unwrap();
    // The parent's prompt and its spawn call, then the child's read (denied); the child's own
    // prompt fires nothing.
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "UserPromptSubmit -",
            "PreToolUse agent_investigator",
            "PreToolUse Read",
            "PreToolUse complete_task"
        ]
    );
    let results = common::tool_results(&agent);
    assert!(!results[0].contains("alpha\n"), "{results:?}");
}

/// Twelve long messages: enough for a full compaction to summarise some and keep the rest.
fn long_history() -> String {
    let filler = "x".repeat(400);
    let mut h = Vec::new();
    for i in 0..6 {
        h.push(json!({"role": "user", "content": format!("request {i} {filler}")}));
        h.push(json!({"role": "assistant", "content": format!("answer {i} {filler}")}));
    }
    Value::Array(h).to_string()
}

#[test]
fn pre_compact_hooks_run_before_a_full_compaction_with_its_trigger() {
    // Claude Code's PreCompact: matcher `manual` or `auto`, the trigger and the custom
    // instructions on stdin; it observes (a snapshot before the history is summarised).
    let run = setup(json!([{"text": "S1 summary of the older messages"}]), |d| {
        let manual = script(d, "manual.sh", "cat > manual-input.json\n");
        let auto = script(d, "auto.sh", "cat > auto-input.json\n");
        json!({"PreCompact": [
            {"matcher": "manual", "hooks": [{"type": "command", "command": manual}]},
            {"matcher": "auto", "hooks": [{"type": "command", "command": auto}]},
        ]})
    });
    run.agent.set_history_json(&long_history()).unwrap();
    let report = run.agent.compact("keep the port numbers", None).unwrap();
    assert_eq!(report.status.as_str(), "success", "{report:?}");
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(run.dir.path().join("manual-input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "manual");
    assert_eq!(input["custom_instructions"], "keep the port numbers");
    assert!(input["session_id"].is_string());
    assert!(!run.dir.path().join("auto-input.json").exists());
    let fired = run.host.fired();
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["hook_name"], "PreCompact");
    assert!(history(&run).iter().any(|m| m["content"]
        .as_str()
        .is_some_and(|c| c.contains("S1 summary"))));
}

#[test]
fn a_failing_pre_compact_hook_does_not_stop_the_compaction() {
    let run = setup(json!([{"text": "S1 summary of the older messages"}]), |d| {
        one(
            "PreCompact",
            "",
            script(d, "fail.sh", "echo broken >&2\nexit 1\n"),
            5.0,
        )
    });
    run.agent.set_history_json(&long_history()).unwrap();
    let report = run.agent.compact("host", None).unwrap();
    assert_eq!(report.status.as_str(), "success", "{report:?}");
    let fired = run.host.fired();
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["failed"], 1);
}
