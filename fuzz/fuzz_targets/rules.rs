//! Permission rules and the engine: rule validation, Python-regex translation and matching,
//! and the engine's decision for one call.
//!
//! Input: a JSON object shaped like a line of `tests/conformance/permissions/decisions.jsonl`
//! (`mode`, `tool`, `args`, `user_rules`), or any other text as `pattern\nvalue`.
//!
//! Asserts: no panic; the decision is a function of its inputs; the hardline floor refuses a
//! floored shell command whatever the rules say; a host's leading `{"tool": "*", "action":
//! "deny"}` is never overridden (every mode but plan, whose presets come first); a pattern
//! without regex metacharacters matches exactly as a substring (args) or the whole name (tool);
//! deciding runs nothing (probes are answered here, through the loop the turn uses), and a
//! repository found outside the workspace turns an allow into an ask, never anything else.
#![no_main]

use std::path::Path;

use agentao::permissions::rules::{CallCtx, Rule};
use agentao::pycompat::python_str;
use agentao::permissions::{
    hardline, EngineAction, EngineMatch, Mode, PermissionEngine, ProbeAnswer, Probing,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

const WORKSPACE: &str = "/tmp/agentao-fuzz-rules/ws";

const OUTSIDE: &str = "/tmp/agentao-fuzz-rules/outside/.git";

/// The engine's match, every probe answered with `answer`.
fn detail(
    engine: &PermissionEngine,
    tool: &str,
    args: &Map<String, Value>,
    answer: &ProbeAnswer,
) -> Option<EngineMatch> {
    Probing::resolve(
        |probed| engine.decide_detail(tool, args, probed),
        |_| answer.clone(),
    )
}

fn inside(engine: &PermissionEngine, tool: &str, args: &Map<String, Value>) -> Option<EngineMatch> {
    detail(engine, tool, args, &ProbeAnswer::GitRepositoryInside)
}

fn decide(engine: &PermissionEngine, tool: &str, args: &Map<String, Value>) -> Option<String> {
    inside(engine, tool, args).map(|m| format!("{:?} {} {:?}", m.action, m.reason, m.rule))
}

fn engine_case(v: &Value) {
    let mode = v
        .get("mode")
        .and_then(Value::as_str)
        .and_then(Mode::parse)
        .unwrap_or(Mode::WorkspaceWrite);
    let tool = v
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or("run_shell_command");
    let args = v
        .get("args")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let rules = v.get("user_rules").cloned().unwrap_or_else(|| json!([]));
    let ws = Path::new(WORKSPACE);

    let mut engine = PermissionEngine::new(mode, ws);
    if engine.add_rules(&rules, "fuzz").is_err() {
        return;
    }
    let first = decide(&engine, tool, &args);
    assert_eq!(first, decide(&engine, tool, &args), "decision changed");
    let _ = engine.active_permissions();

    let outside = detail(
        &engine,
        tool,
        &args,
        &ProbeAnswer::GitRepositoryOutside(OUTSIDE.to_owned()),
    );
    let found = inside(&engine, tool, &args);
    if let (Some(i), Some(o)) = (&found, &outside) {
        if i.reason != o.reason {
            assert_eq!(i.action, EngineAction::Allow, "{} became {}", i.reason, o.reason);
            assert_eq!(o.action, EngineAction::Ask, "{}", o.reason);
            assert_eq!(o.reason, format!("outside-workspace-read:{OUTSIDE}"));
        }
    } else {
        assert_eq!(found.is_some(), outside.is_some(), "a probe answer removed the match");
    }

    if tool == "run_shell_command" {
        let cmd = args.get("command").map(python_str).unwrap_or_default();
        if hardline::check(&cmd).is_some() {
            let m = inside(&engine, tool, &args).expect("floored command decided");
            assert_eq!(m.action, EngineAction::Deny, "floored command not denied");
            assert!(m.reason.starts_with("hardline:"), "{}", m.reason);
        }
    }

    if mode != Mode::Plan {
        let mut with_deny = vec![json!({"tool": "*", "action": "deny"})];
        with_deny.extend(rules.as_array().cloned().unwrap_or_default());
        let mut denying = PermissionEngine::new(mode, ws);
        denying
            .add_rules(&Value::Array(with_deny), "fuzz")
            .expect("rules that loaded once load again");
        let m = inside(&denying, tool, &args).expect("a deny-all rule matches every call");
        assert_eq!(
            m.action,
            EngineAction::Deny,
            "deny-all overridden: {}",
            m.reason
        );
    }
}

fn is_plain(p: &str) -> bool {
    !p.is_empty()
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ')
}

fn pattern_case(text: &str) {
    let (pattern, value) = text.split_once('\n').unwrap_or((text, ""));
    let args: Map<String, Value> = [("command".to_owned(), json!(value))].into_iter().collect();
    let ws = Path::new(WORKSPACE);
    let call = |tool| CallCtx::new(tool, &args, Some("posix"), ws);
    if let Ok(rule) = Rule::parse(
        &json!({"tool": "run_shell_command", "action": "deny", "args": {"command": pattern}}),
    ) {
        let hit = rule.matches(&call("run_shell_command"));
        if is_plain(pattern) {
            assert_eq!(
                hit,
                value.contains(pattern),
                "args search {pattern:?} in {value:?}"
            );
        }
    }
    if let Ok(rule) = Rule::parse(&json!({"tool": pattern, "action": "allow"})) {
        let hit = rule.matches(&call(value));
        if is_plain(pattern) {
            assert_eq!(
                hit,
                value == pattern,
                "tool fullmatch {pattern:?} on {value:?}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match serde_json::from_str::<Value>(text) {
        Ok(v) if v.is_object() => engine_case(&v),
        _ => pattern_case(text),
    }
});
