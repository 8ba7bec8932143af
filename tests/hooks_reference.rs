//! Our lifecycle hooks side by side with the reference runtime's (agentao 0.5.17): the same
//! hook script (tests/conformance/hooks/hook.py) runs at the same point through our agent on
//! the scripted provider, and what it read on stdin and what the agent did with its answer
//! are compared with the recording tests/conformance/hooks/reference.json (record.py there).
//! Every difference that remains is a documented deviation (docs/hooks.md, docs/deviations.md)
//! and is asserted as such, so a change on either side shows up here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentao::agent::{Agent, TurnOptions};
use agentao::turn::{IncompleteReason, TurnOutcome};
use serde_json::{json, Value};

mod common;
use common::RecordingHost as Host;

fn reference(case: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/hooks/reference.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(all["reference"], "agentao 0.5.17");
    all["cases"][case].clone()
}

/// Our side of one recorded case: an agent whose only hook is the case's, run on `responses`.
struct Side {
    agent: Agent,
    host: Arc<Host>,
    dir: tempfile::TempDir,
    capture: PathBuf,
}

impl Side {
    /// The case's event, matcher and hook mode, as the recording ran them.
    fn new(case: &Value, responses: Value) -> Side {
        let dir = tempfile::tempdir().unwrap();
        let capture = dir.path().join("stdin.jsonl");
        let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/hooks/hook.py");
        let command = format!(
            "python3 '{}' {} '{}'",
            hook.display(),
            case["mode"].as_str().unwrap(),
            capture.display()
        );
        let mut group = json!({"hooks": [{"type": "command", "command": command, "timeout": 10}]});
        if let Some(m) = case["matcher"].as_str() {
            group["matcher"] = m.into();
        }
        let config = json!({
            "working_directory": dir.path(),
            "llm": {"provider": "scripted", "script": {"responses": responses}},
            "hooks": {case["event"].as_str().unwrap(): [group]},
        });
        let host = Arc::new(Host::default());
        let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
        Side {
            agent,
            host,
            dir,
            capture,
        }
    }

    fn go(&self) -> TurnOutcome {
        self.agent
            .run_blocking("go", TurnOptions::default())
            .unwrap()
    }

    /// What the hook read on stdin, each run, with the recording's normalisation.
    fn stdin(&self) -> Vec<Value> {
        let cwd = self
            .dir
            .path()
            .canonicalize()
            .unwrap()
            .display()
            .to_string();
        let session = self.agent.session_id().to_string();
        std::fs::read_to_string(&self.capture)
            .unwrap_or_default()
            .lines()
            .map(|line| {
                let mut v: Value = serde_json::from_str(line).unwrap();
                for (key, from, to) in [
                    ("cwd", cwd.as_str(), "<cwd>"),
                    ("session_id", session.as_str(), "<session>"),
                    ("tool_use_id", "c1", "<call>"),
                ] {
                    if v[key] == from {
                        v[key] = to.into();
                    }
                }
                v
            })
            .collect()
    }

    fn fired(&self) -> Vec<Value> {
        self.host
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "plugin_hook_fired")
            .map(|e| e["data"].clone())
            .collect()
    }

    fn history(&self) -> Vec<Value> {
        serde_json::from_str::<Value>(&self.agent.history_json())
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

/// How our stdin differs from the reference's at one point, as docs/hooks.md documents it.
struct StdinDifference<'a> {
    /// Keys we send that the reference does not.
    added: &'a [&'a str],
    /// Keys the reference sends that we do not.
    missing: &'a [&'a str],
    /// Shared keys whose value differs, with our value.
    values: &'a [(&'a str, Value)],
}

/// Shared keys whose value is measured (a duration): compared by JSON type only.
const MEASURED: &[&str] = &["duration_ms"];

const SAME_STDIN: StdinDifference = StdinDifference {
    added: &[],
    missing: &[],
    values: &[],
};

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// Our first stdin against the recording's: the keys and values, with exactly the documented
/// differences.
fn assert_stdin(name: &str, ours: &[Value], recorded: &Value, diff: &StdinDifference) {
    assert!(!ours.is_empty(), "{name}: our hook never ran");
    let ours = &ours[0];
    let theirs = &recorded["stdin"][0];
    let added: BTreeSet<String> = keys(ours).difference(&keys(theirs)).cloned().collect();
    let missing: BTreeSet<String> = keys(theirs).difference(&keys(ours)).cloned().collect();
    let want_added: BTreeSet<String> = diff.added.iter().map(|s| s.to_string()).collect();
    let want_missing: BTreeSet<String> = diff.missing.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        added, want_added,
        "{name}: keys only we send\nours {ours}\nreference {theirs}"
    );
    assert_eq!(
        missing, want_missing,
        "{name}: keys only the reference sends\nours {ours}\nreference {theirs}"
    );
    for key in keys(ours).intersection(&keys(theirs)) {
        if MEASURED.contains(&key.as_str()) {
            assert!(
                ours[key].is_u64() && theirs[key].is_u64(),
                "{name}: {key} is whole milliseconds\nours {ours}\nreference {theirs}"
            );
            continue;
        }
        match diff.values.iter().find(|(k, _)| k == key) {
            Some((_, value)) => {
                assert_eq!(&ours[key], value, "{name}: our {key}");
                assert_ne!(
                    &theirs[key], value,
                    "{name}: {key} no longer differs; update the docs"
                );
            }
            None => assert_eq!(
                ours[key], theirs[key],
                "{name}: {key}\nours {ours}\nreference {theirs}"
            ),
        }
    }
}

/// PreToolUse: we send our tool name and the permission mode (docs/hooks.md, "Differences").
const PRE_TOOL_STDIN: StdinDifference = StdinDifference {
    added: &["permission_mode"],
    missing: &[],
    values: &[],
};

/// The permission reason both sides give a hook's deny or ask: `pre-tool-hook[: <reason>]`.
fn permission_reason(fired: &Value) -> String {
    match fired["reason"].as_str() {
        Some(r) if !r.is_empty() => format!("pre-tool-hook: {r}"),
        _ => "pre-tool-hook".to_owned(),
    }
}

fn shell_call() -> Value {
    json!([
        {"tool_calls": [{"id": "c1", "name": "run_shell_command", "arguments": {"command": "echo hi"}}]},
        {"text": "done"}
    ])
}

fn pre_tool_side(case: &str) -> (Value, Side) {
    let recorded = reference(case);
    let side = Side::new(&recorded, shell_call());
    side.go();
    assert_stdin(case, &side.stdin(), &recorded, &PRE_TOOL_STDIN);
    (recorded, side)
}

#[test]
fn pre_tool_use_deny_matches_the_reference_decision_and_text() {
    for case in [
        "pre_tool_deny",
        "pre_tool_exit_2",
        "pre_tool_deny_without_reason",
    ] {
        let (recorded, side) = pre_tool_side(case);
        assert_eq!(recorded["result"]["decision"], "deny");
        let results = common::tool_results(&side.agent);
        assert_eq!(
            results[0],
            recorded["model_text"].as_str().unwrap(),
            "{case}"
        );
        let fired = side.fired();
        assert_eq!(
            fired[0]["outcome"], recorded["plugin_hook_fired"]["outcome"],
            "{case}"
        );
        assert_eq!(fired[0]["hook_name"], "PreToolUse");
        // The reference's `tool` is our `tool_name`; its `matched_rule_count` our `hooks`.
        assert_eq!(fired[0]["tool_name"], recorded["plugin_hook_fired"]["tool"]);
        assert_eq!(
            fired[0]["hooks"],
            recorded["plugin_hook_fired"]["matched_rule_count"]
        );
        assert_eq!(
            permission_reason(&fired[0]),
            recorded["permission_reason"].as_str().unwrap(),
            "{case}"
        );
        assert!(side.host.confirms.lock().unwrap().is_empty());
    }
}

#[test]
fn pre_tool_use_allow_lets_the_call_run_and_skips_the_default_confirmation() {
    let (recorded, side) = pre_tool_side("pre_tool_allow");
    // The reference records an allow as no decision at all (a no-op: the shell still asks);
    // ours skips the confirmation the tool asks for by default, as Claude Code does
    // (docs/deviations.md).
    assert!(recorded["result"]["decision"].is_null());
    assert!(side.host.confirms.lock().unwrap().is_empty());
    assert!(common::tool_results(&side.agent)[0].contains("hi"));
    assert_eq!(
        side.fired()[0]["outcome"],
        recorded["plugin_hook_fired"]["outcome"]
    );
}

#[test]
fn pre_tool_use_ask_asks_the_host_with_the_hooks_reason() {
    let (recorded, side) = pre_tool_side("pre_tool_ask");
    assert_eq!(recorded["result"]["decision"], "ask");
    assert_eq!(*side.host.confirms.lock().unwrap(), ["run_shell_command"]);
    let fired = side.fired();
    assert_eq!(
        fired[0]["outcome"],
        recorded["plugin_hook_fired"]["outcome"]
    );
    assert_eq!(
        permission_reason(&fired[0]),
        recorded["permission_reason"].as_str().unwrap()
    );
}

#[test]
fn pre_tool_use_updated_input_replaces_the_arguments() {
    let (recorded, side) = pre_tool_side("pre_tool_updated_input");
    assert_eq!(
        recorded["result"]["updated_tool_input"],
        json!({"command": "echo rewritten"})
    );
    let results = common::tool_results(&side.agent);
    assert!(results[0].contains("rewritten"), "{results:?}");
    assert!(
        side.host.confirms.lock().unwrap().is_empty(),
        "the hook allowed it"
    );
}

#[test]
fn post_tool_use_context_rides_after_the_result_in_the_reference_frame() {
    let recorded = reference("post_tool_context");
    let side = Side::new(&recorded, shell_call());
    side.go();
    let results = common::tool_results(&side.agent);
    let suffix = recorded["result_suffix"].as_str().unwrap();
    assert!(results[0].ends_with(suffix), "{results:?}");
    let ours_response = results[0].strip_suffix(suffix).unwrap();
    let values = [("tool_response", ours_response.into())];
    assert_stdin(
        "post_tool_context",
        &side.stdin(),
        &recorded,
        &StdinDifference {
            added: &["permission_mode"],
            missing: &[],
            values: &values,
        },
    );
}

#[test]
fn user_prompt_submit_context_reaches_the_model() {
    let recorded = reference("prompt_context");
    let side = Side::new(&recorded, json!([{"text": "ok"}]));
    side.go();
    assert_stdin(
        "prompt_context",
        &side.stdin(),
        &recorded,
        &StdinDifference {
            added: &["permission_mode"],
            ..SAME_STDIN
        },
    );
    let context = recorded["result"]["additional_contexts"][0]
        .as_str()
        .unwrap();
    let user = side.history()[0]["content"].as_str().unwrap().to_owned();
    // Documented deviation: the reference puts the context before the prompt in a
    // `<user-prompt-submit-hook>` frame; ours follows it in a `<system-reminder>`, the frame
    // of every other hook context (and Claude Code's).
    assert_eq!(
        recorded["user_message"],
        format!("<user-prompt-submit-hook>\n{context}\n</user-prompt-submit-hook>\ngo")
    );
    assert!(
        user.ends_with(&format!(
            "go\n\n<system-reminder>\n{context}\n</system-reminder>"
        )),
        "{user}"
    );
    // The event: the reference's `modify` is our `context`.
    let fired = side.fired();
    assert_eq!(recorded["plugin_hook_fired"]["outcome"], "modify");
    assert_eq!(fired[0]["outcome"], "context");
    assert_eq!(
        fired[0]["hooks"],
        recorded["plugin_hook_fired"]["rule_count"]
    );
}

#[test]
fn user_prompt_submit_block_ends_the_turn_before_the_model() {
    let recorded = reference("prompt_block");
    let side = Side::new(&recorded, json!([{"text": "never"}]));
    let o = side.go();
    assert_stdin(
        "prompt_block",
        &side.stdin(),
        &recorded,
        &StdinDifference {
            added: &["permission_mode"],
            ..SAME_STDIN
        },
    );
    assert_eq!(o.incomplete_reason, Some(IncompleteReason::HookStop));
    let why = recorded["result"]["blocking_error"].as_str().unwrap();
    // Documented deviation: the same reason under our notice's wording, with the turn's
    // `incomplete_reason` saying it was a hook.
    assert_eq!(recorded["turn_text"], format!("[Blocked by hook] {why}"));
    assert_eq!(
        o.text,
        format!("Prompt blocked by a UserPromptSubmit hook: {why}")
    );
    assert!(
        side.history().is_empty(),
        "a blocked prompt is not recorded"
    );
    let fired = side.fired();
    assert_eq!(
        fired[0]["outcome"],
        recorded["plugin_hook_fired"]["outcome"]
    );
    assert_eq!(
        fired[0]["reason"],
        recorded["plugin_hook_fired"]["blocking_error"]
    );
}

#[test]
fn stop_block_sends_the_agent_back_with_the_reason() {
    let recorded = reference("stop_block");
    let side = Side::new(&recorded, json!([{"text": "done"}, {"text": "tests pass"}]));
    let o = side.go();
    assert_stdin(
        "stop_block",
        &side.stdin(),
        &recorded,
        &StdinDifference {
            added: &["permission_mode"],
            ..SAME_STDIN
        },
    );
    assert_eq!(recorded["result"]["force_continue"], true);
    assert_eq!(o.text, "tests pass");
    let h = side.history();
    assert_eq!(h[2]["role"], "user");
    assert_eq!(h[2]["content"], recorded["result"]["follow_up_message"]);
    assert_eq!(side.stdin().len(), 2, "the second stop runs the hook again");
    assert_eq!(side.stdin()[1]["stop_hook_active"], true);
}

#[test]
fn session_start_context_reaches_the_first_message() {
    let recorded = reference("session_start_context");
    let side = Side::new(&recorded, json!([{"text": "ok"}]));
    side.go();
    assert_stdin(
        "session_start_context",
        &side.stdin(),
        &recorded,
        // `model` is Claude Code's; the reference's entry point passes none.
        &StdinDifference {
            added: &["permission_mode", "model"],
            missing: &[],
            values: &[],
        },
    );
    assert_eq!(side.stdin()[0]["model"], "scripted");
    // Documented deviation: the reference adds the context to the history as a user message
    // of its own, `[hook_additional_context] context: <text>`; ours appends it to the first
    // user message in a `<system-reminder>` (no extra user message before the user's own).
    let context = "the project uses tabs";
    assert_eq!(
        recorded["history_added"],
        json!([{"role": "user", "content": format!("[hook_additional_context] context: {context}")}])
    );
    let h = side.history();
    let user = h[0]["content"].as_str().unwrap();
    assert!(
        user.ends_with(&format!(
            "go\n\n<system-reminder>\n{context}\n</system-reminder>"
        )),
        "{user}"
    );
    assert_eq!(h.iter().filter(|m| m["role"] == "user").count(), 1);
}

#[test]
fn pre_compact_observes_a_manual_compaction() {
    let recorded = reference("pre_compact_observe");
    let side = Side::new(
        &recorded,
        json!([{"text": "S1 summary of the older messages"}]),
    );
    let filler = "x".repeat(400);
    let mut h = Vec::new();
    for i in 0..6 {
        h.push(json!({"role": "user", "content": format!("request {i} {filler}")}));
        h.push(json!({"role": "assistant", "content": format!("answer {i} {filler}")}));
    }
    side.agent
        .set_history_json(&Value::Array(h).to_string())
        .unwrap();
    let report = side.agent.compact("", None).unwrap();
    assert_eq!(report.status.as_str(), "success", "{report:?}");
    assert_stdin(
        "pre_compact_observe",
        &side.stdin(),
        &recorded,
        &StdinDifference {
            added: &["permission_mode"],
            ..SAME_STDIN
        },
    );
}

#[test]
fn post_tool_use_failure_context_rides_after_the_error() {
    let recorded = reference("post_tool_failure_context");
    let side = Side::new(
        &recorded,
        json!([
            {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"file_path": 5}}]},
            {"text": "done"}
        ]),
    );
    side.go();
    let results = common::tool_results(&side.agent);
    let suffix = recorded["result_suffix"].as_str().unwrap();
    assert!(results[0].ends_with(suffix), "{results:?}");
    let ours = side.stdin();
    // A missing file is a result here, not a failure (its text says so), so ours fails on a
    // bad argument; the error is each side's own message.
    let values = [
        ("tool_input", json!({"file_path": 5})),
        ("error", ours[0]["error"].clone()),
    ];
    assert_stdin(
        "post_tool_failure_context",
        &ours,
        &recorded,
        &StdinDifference {
            added: &["permission_mode"],
            missing: &[],
            values: &values,
        },
    );
}
