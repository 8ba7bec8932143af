//! Conformance: every recorded vector of the reference permission layer.

use serde_json::Value;

/// The reference engine's recorded vectors, carried by the repository (tests/conformance/README.md).
fn dir() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/conformance/permissions/"
    )
    .to_owned()
}

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}{name}", dir());
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("conformance file {path} missing: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("vector is JSON"))
        .collect()
}

const RM_ROW: &str = "recursive delete of root / system directory / home";
const TOO_COMPLEX: &str = "command too complex for the safety floor to inspect";

/// Reference vectors recorded as `allow` that our floor refuses (gaps of the
/// reference closed by `hardline::canon`; docs/deviations.md, "Hardline floor"):
/// (1-based line in hardline.jsonl, our description, why).
const HARDLINE_DEVIATIONS: &[(usize, &str, &str)] = &[
    (
        636,
        "redirect output to raw block device",
        "`>|` is an output redirection like `>`",
    ),
    (643, "fork bomb", "renamed fork bomb"),
    (644, "fork bomb", "renamed fork bomb"),
    (
        769,
        "find -exec rm on root/system path",
        "find runs rm on every file: without -f it deletes as much",
    ),
    (
        772,
        "find -exec rm on root/system path",
        "find runs shred on every file: overwriting destroys as much as deleting",
    ),
    (852, RM_ROW, "doas is a privilege wrapper"),
    (904, RM_ROW, "a shell fed by printf through a pipe"),
    (919, "reboot", "a shell fed by printf through a pipe"),
    (
        943,
        "filesystem creation (mkfs)",
        "a shell fed by printf through a pipe",
    ),
    (
        992,
        RM_ROW,
        "a backslash-newline inside a word joins it (`r\\\nm` is `rm`)",
    ),
    (
        993,
        "shutdown",
        "a backslash-newline inside a word joins it",
    ),
    (
        995,
        "dd write to raw block device",
        "a backslash-newline between words",
    ),
    (
        1029,
        RM_ROW,
        "a command word given as a path is judged by its name",
    ),
    (
        1048,
        RM_ROW,
        "the canonical texts have their own budget beyond the reference's 16",
    ),
    (
        1049,
        TOO_COMPLEX,
        "more nested shells than the floor inspects: refused, not let through",
    ),
    (
        1052,
        TOO_COMPLEX,
        "more nested substitutions than the floor inspects: refused, not let through",
    ),
    (
        1053,
        TOO_COMPLEX,
        "more nested substitutions than the floor inspects: refused, not let through",
    ),
];

#[test]
fn hardline_vectors() {
    let vectors = load("hardline.jsonl");
    let mut failures = Vec::new();
    let mut deviations_seen = 0;
    for (i, v) in vectors.iter().enumerate() {
        let cmd = v["command"].as_str().expect("command");
        let want = match HARDLINE_DEVIATIONS.iter().find(|d| d.0 == i + 1) {
            Some(d) => {
                deviations_seen += 1;
                Some(d.1)
            }
            None => v["description"].as_str(),
        };
        let got = agentao::permissions::hardline_verdict(cmd);
        if got.as_deref() != want {
            failures.push(format!(
                "line {}: {cmd:?}: want {want:?}, got {got:?}",
                i + 1
            ));
        }
    }
    eprintln!(
        "hardline: {} / {} passed ({} expected deviations)",
        vectors.len() - failures.len(),
        vectors.len(),
        deviations_seen
    );
    assert_eq!(deviations_seen, HARDLINE_DEVIATIONS.len());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Our own vectors: gaps the reference's floor shares, closed here (documented in
/// docs/deviations.md, "Hardline floor"), and literal forms that must stay allowed.
#[test]
fn hardline_vectors_of_our_own() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/hardline-ours.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("our vectors");
    let mut failures = Vec::new();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).expect("vector is JSON");
        n += 1;
        let cmd = v["command"].as_str().expect("command");
        let want = v["description"].as_str();
        let got = agentao::permissions::hardline_verdict(cmd);
        if got.as_deref() != want {
            failures.push(format!(
                "{cmd:?} ({}): want {want:?}, got {got:?}",
                v["why"]
            ));
        }
    }
    eprintln!("hardline (ours): {} / {n} passed", n - failures.len());
    assert!(n >= 20);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

use agentao::permissions::{decide_probing, Decision, Mode, PermissionEngine, ToolFacts};
use serde_json::Map;

/// The planner's decision, its probes answered as the turn answers them with the local
/// executor (the one path the turn and the preflight share).
fn decide(
    engine: Option<&PermissionEngine>,
    read_only: bool,
    tool: ToolFacts<'_>,
    args: &Map<String, Value>,
) -> Decision {
    let services = agentao::tools::ToolServices::default();
    decide_probing(engine, read_only, tool, args, |p| services.answer_probe(p))
}

const PROJECT: &str = "/workspace/project";

/// (read-only, requires confirmation) of the built-in tools, from the vectors' README.
fn tool_flags(name: &str) -> (bool, bool) {
    match name {
        "read_file"
        | "list_directory"
        | "glob"
        | "search_file_content"
        | "ask_user"
        | "todo_write"
        | "activate_skill" => (true, false),
        "web_fetch" | "web_search" => (true, true),
        "write_file" | "replace" | "run_shell_command" => (false, true),
        "save_memory" | "plan_save" | "plan_finalize" => (false, false),
        other => panic!("unknown tool in vectors: {other}"),
    }
}

/// Our decision for one decisions.jsonl line: (outcome, reason, matched_rule).
fn run_decision(v: &Value) -> (String, String, Value) {
    let mode = Mode::parse(v["mode"].as_str().expect("mode")).expect("known mode");
    let mut engine = PermissionEngine::new(mode, std::path::Path::new(PROJECT));
    let user_rules = &v["user_rules"];
    if user_rules.as_array().is_some_and(|a| !a.is_empty()) {
        engine
            .add_rules(user_rules, "vectors")
            .expect("valid user rules");
    }
    if let Some(run) = v.get("run_rules") {
        engine
            .add_run_rules(&run["allow"], &run["deny"], "run-spec")
            .expect("valid run rules");
    }
    let name = v["tool"].as_str().expect("tool");
    let (ro, confirm) = tool_flags(name);
    let args: Map<String, Value> = v["args"].as_object().cloned().unwrap_or_default();
    let d = decide(
        Some(&engine),
        mode == Mode::ReadOnly,
        ToolFacts {
            name,
            is_read_only: ro,
            requires_confirmation: confirm,
        },
        &args,
    );
    (
        d.verdict.outcome().to_owned(),
        d.reason,
        d.matched_rule.unwrap_or(Value::Null),
    )
}

/// Where we deliberately differ from the reference (docs/deviations.md, "Permissions"):
/// (1-based line in decisions.jsonl, our outcome, our reason, why).
const DECISION_DEVIATIONS: &[(usize, &str, &str, &str)] = &[
    (
        396,
        "prompt",
        "outside-workspace-read:~/.bashrc",
        OUTSIDE_READ_ASKS,
    ),
    (
        761,
        "deny",
        "user-rule:run_shell_command",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (
        764,
        "deny",
        "user-rule:run_shell_command",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (799, "prompt", "user-rule:read_file", ASK_PROMPTS),
    (801, "prompt", "user-rule:read_file", ASK_PROMPTS),
    (802, "prompt", "user-rule:read_file", ASK_PROMPTS),
    (803, "prompt", "user-rule:read_file", ASK_PROMPTS),
    (
        809,
        "deny",
        "user-rule:web_fetch",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (
        812,
        "deny",
        "user-rule:web_fetch",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (830, "deny", "user-rule:*", USER_DENY_BEATS_FULL_ACCESS),
    (833, "deny", "user-rule:*", USER_DENY_BEATS_FULL_ACCESS),
    (837, "deny", "user-rule:*", USER_DENY_BEATS_FULL_ACCESS),
    (841, "deny", "user-rule:*", USER_DENY_BEATS_FULL_ACCESS),
    (847, "deny", "user-rule:*", USER_DENY_BEATS_FULL_ACCESS),
    (853, "deny", "user-rule:*", USER_DENY_BEATS_FULL_ACCESS),
    (
        889,
        "deny",
        "user-rule:write_file",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (
        893,
        "deny",
        "user-rule:write_file",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (
        897,
        "deny",
        "user-rule:write_file",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (
        900,
        "deny",
        "user-rule:write_file",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (
        922,
        "deny",
        "user-rule:run_shell_command",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
    (929, "deny", "user-rule:web_.*", USER_DENY_BEATS_FULL_ACCESS),
    (
        970,
        "deny",
        "user-rule:web_fetch",
        USER_DENY_BEATS_FULL_ACCESS,
    ),
];

/// Deviation (c): a read-only shell command whose path operand resolves outside the
/// workspace is asked while outside reads are refused (the reference allows it).
const OUTSIDE_READ_ASKS: &str = "read-only shell command reading outside the workspace prompts";
/// Deviation (a): an explicit `ask` rule prompts even when the tool itself needs no
/// confirmation (the reference reports `allow` with the ask rule as the matched rule).
const ASK_PROMPTS: &str = "explicit ask rule prompts (reference: allow)";
/// Deviation (b): in full-access, a user deny rule that is the first matching user rule
/// denies (the reference evaluates the allow-everything preset first, so it never matches).
const USER_DENY_BEATS_FULL_ACCESS: &str = "user deny rule beats the full-access preset";

#[test]
fn decision_vectors() {
    let vectors = load("decisions.jsonl");
    let mut failures = Vec::new();
    let mut deviations_seen = 0;
    for (i, v) in vectors.iter().enumerate() {
        let line = i + 1;
        let (outcome, reason, rule) = run_decision(v);
        if let Some(dev) = DECISION_DEVIATIONS.iter().find(|d| d.0 == line) {
            deviations_seen += 1;
            if outcome != dev.1 || reason != dev.2 {
                failures.push(format!(
                    "line {line} (expected deviation: {}): want {} / {}, got {outcome} / {reason}",
                    dev.3, dev.1, dev.2
                ));
            }
            continue;
        }
        if outcome != v["outcome"] || reason != v["reason"] || rule != v["matched_rule"] {
            failures.push(format!(
                "line {line}: {} {} {} rules={} run={}: want {} / {} / {}, got {outcome} / {reason} / {rule}",
                v["mode"], v["tool"], v["args"], v["user_rules"],
                v.get("run_rules").unwrap_or(&Value::Null),
                v["outcome"], v["reason"], v["matched_rule"]
            ));
        }
    }
    eprintln!(
        "decisions: {} / {} match the reference, {} expected deviations",
        vectors.len() - failures.len() - deviations_seen,
        vectors.len(),
        deviations_seen
    );
    assert_eq!(deviations_seen, DECISION_DEVIATIONS.len());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
