//! Hardline bypass attempts beyond the recorded vectors, the 1 MB timing check, and the
//! engine API (config, files, snapshot cache).

use agentao::config::AgentConfig;
use agentao::permissions::{
    decide_probing, hardline_verdict, ActivePermissions, Decision, Mode, PermissionEngine,
    ToolFacts, Verdict,
};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::time::Instant;

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

const RM: &str = "recursive delete of root / system directory / home";

fn denied(cmd: &str) -> bool {
    hardline_verdict(cmd).is_some()
}

#[test]
fn quoting_tricks_are_denied() {
    for cmd in [
        "'rm' -rf /",
        "r\"m\" -rf /",
        "\\rm -rf /",
        "'r''m' -rf /",
        "rm -rf '/'",
        "rm -rf \"$HOME\"",
        "$'\\x72\\x6d' -rf /",
        "bash -c $'rm\\x20-rf\\x20/'",
        "rm -rf ${HOME:?}",
        "rm -rf /{etc,usr}",
        "rm -r -f /",
        "rm / -rf",
    ] {
        assert!(denied(cmd), "{cmd:?} should be denied");
    }
}

#[test]
fn wrappers_and_env_prefixes_are_denied() {
    for cmd in [
        "FOO=1 BAR=2 rm -rf /",
        "env -i PATH=/bin rm -rf /",
        "command rm -rf /",
        "exec rm -rf /",
        "nice -n 19 rm -rf /",
        "timeout 5 rm -rf /",
        "nohup setsid rm -rf /",
        "sudo -u root -- rm -rf /etc",
        "/usr/bin/sudo /bin/rm -rf /",
        "if true; then rm -rf /; fi",
        "true && { rm -rf /; }",
        "x=$(rm -rf ~)",
        "echo ok\nrm -rf /",
        "busybox rm -rf /",
    ] {
        assert_eq!(hardline_verdict(cmd).as_deref(), Some(RM), "{cmd:?}");
    }
}

#[test]
fn nested_shells_are_denied() {
    for cmd in [
        "sh -c 'echo ok; reboot'",
        "bash -lc \"shutdown -h now\"",
        "echo 'reboot' | bash",
        "bash <<< 'poweroff'",
        "source <(echo halt)",
        "$(echo reboot)",
        "sh -c 'sh -c \"sh -c reboot\"'",
    ] {
        assert!(denied(cmd), "{cmd:?} should be denied");
    }
}

#[test]
fn literal_contexts_are_allowed() {
    for cmd in [
        "echo 'rm -rf /'",
        "echo \"reboot now\"",
        "grep -rn 'mkfs' .",
        "git commit -m 'shutdown handler'",
        "cat <<'EOF'\nrm -rf /\nEOF",
        "echo \\$(reboot)",
        "rm -rf /tmp/build",
        "ls /dev/sda",
        "",
        "   ",
    ] {
        assert!(!denied(cmd), "{cmd:?} should not be on the floor");
    }
}

#[test]
fn line_continuations_and_unicode_lookalikes() {
    // A continuation between arguments still reaches the scanner as whitespace.
    assert!(denied("rm -rf \\\n /"));
    assert!(denied("mkfs.ext4 \\\n /dev/sda1"));
    // Full-width solidus and Cyrillic look-alikes are other programs / paths to the shell.
    assert!(!denied("rm -rf \u{FF0F}"));
    assert!(!denied("r\u{043C} -rf /tmp"));
    // NBSP is whitespace for the scanner (as in the reference).
    assert!(denied("rm -rf /\u{a0}"));
}

#[test]
fn one_megabyte_inputs_are_linear() {
    let mut worst = 0.0f64;
    // 1 MB for the plain and the realistic shapes; adversarial shapes at 256 KB (debug
    // builds are ~5x slower than release; the bound below is generous on purpose).
    const MB: usize = 1 << 20;
    const Q: usize = MB / 4;
    let cases: Vec<(String, bool)> = vec![
        ("a".repeat(MB), false),
        (format!("{}rm -rf /", "echo x; ".repeat(MB / 8)), true),
        ("rm ".repeat(Q / 3), false),
        (format!("{}x", "A=( ".repeat(Q / 4)), false),
        (format!("echo '{}'", "rm -rf / ; ".repeat(Q / 11)), false),
        // More nested texts than the floor inspects: refused as too complex.
        ("$(".repeat(Q / 2), true),
        (format!("sudo {}rm -rf /", "-x ".repeat(Q / 3)), true),
        ("\"".repeat(Q), false),
        (format!("find / {} -delete", "-name x ".repeat(Q / 8)), true),
        (
            format!("bash -c '{}'", "echo 'x' | sh; ".repeat(Q / 16)),
            true,
        ),
        // Each `eval` runs the rest: judged once per text, so the nested texts are too many.
        (format!("{}x", "eval ".repeat(Q / 5)), true),
        (format!("{}x", "eval \"$(printf x) ".repeat(Q / 20)), true),
    ];
    for (cmd, expect) in &cases {
        let t = Instant::now();
        let got = denied(cmd);
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "hardline on {} chars ({}...): {:.3}s",
            cmd.len(),
            &cmd.chars().take(12).collect::<String>().escape_debug(),
            secs
        );
        worst = worst.max(secs);
        assert_eq!(
            got,
            *expect,
            "verdict for the long input starting {:?}",
            &cmd[..12]
        );
        // Speed is measured by the printed figure; this bound only catches a super-linear
        // blow-up (quadratic on 1 MB would take hours), robust to a loaded 2-core CI machine.
        assert!(secs < 30.0, "too slow: {secs}s");
    }
    eprintln!("worst 1 MB hardline time: {worst:.3}s");
}

fn facts(name: &str, ro: bool, confirm: bool) -> ToolFacts<'_> {
    ToolFacts {
        name,
        is_read_only: ro,
        requires_confirmation: confirm,
    }
}

/// The engine a config's `permissions` section builds; errors come from the config parse or
/// from the engine (reading `rules_file`).
fn engine_from(permissions: Value, ws: &Path) -> Result<Option<PermissionEngine>, String> {
    let doc = json!({
        "working_directory": std::env::temp_dir(),
        "llm": {"provider": "scripted", "script": []},
        "permissions": permissions,
    });
    let config = AgentConfig::from_json(&doc.to_string()).map_err(|e| e.0)?;
    PermissionEngine::from_config(config.permissions.as_ref(), ws)
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn config_keys_and_errors() {
    let ws = Path::new("/workspace/project");
    assert!(PermissionEngine::from_config(None, ws).unwrap().is_none());
    let e = engine_from(json!({"mode": "full-access"}), ws)
        .unwrap()
        .unwrap();
    assert_eq!(e.mode(), Mode::FullAccess);
    for (bad, needle) in [
        (json!({"mode": "plan"}), "permissions.mode"),
        (json!({"mode": "root"}), "permissions.mode"),
        (json!({"bogus": 1}), "unknown key `bogus`"),
        (json!({"hardline": "yes"}), "permissions.hardline"),
        (
            json!({"rules": [{"tool": "x", "action": "allow"}, {"tool": "y", "action": "allow", "foo": 1}]}),
            "permissions.rules`[1]: unknown key `foo`",
        ),
        (
            json!({"rules": [{"tool": "x", "action": "maybe"}]}),
            "rules`[0]",
        ),
        (
            json!({"rules": [{"tool": "x", "action": "deny", "args": {"command": "(?=x)"}}]}),
            "look-around",
        ),
    ] {
        let err = engine_from(bad, ws).unwrap_err();
        assert!(err.contains(needle), "{err} should contain {needle}");
    }
}

#[test]
fn rules_file_with_bom_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("permissions.json");
    std::fs::write(
        &good,
        "\u{feff}{\"rules\": [{\"tool\": \"run_shell_command\", \"args\": {\"command\": \"^npm\"}, \"action\": \"deny\"}], \"shell\": {}}",
    )
    .unwrap();
    let e = engine_from(json!({"rules_file": good.to_str().unwrap()}), dir.path())
        .unwrap()
        .unwrap();
    let snap = e.active_permissions();
    assert_eq!(snap.loaded_sources[0], "preset:workspace-write");
    assert_eq!(snap.loaded_sources[1], format!("user:{}", good.display()));
    let d = decide(
        Some(&e),
        false,
        facts("run_shell_command", false, true),
        &args(json!({"command": "npm test"})),
    );
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(d.reason, "user-rule:run_shell_command");

    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"rules": [{"tool": "a", "action": "allow"}, {"tool": "b", "action": "allow"}, {"tool": "c", "action": "deny", "foo": 1}]}"#,
    )
    .unwrap();
    let err = engine_from(json!({"rules_file": "bad.json"}), dir.path()).unwrap_err();
    assert_eq!(
        err,
        format!(
            "permissions file '{}': rules[2]: unknown key `foo`",
            bad.display()
        )
    );
}

#[test]
fn snapshot_cache_and_sources() {
    let mut e = PermissionEngine::new(Mode::WorkspaceWrite, Path::new("/w"));
    let s1 = e.active_permissions();
    assert_eq!(s1.loaded_sources, vec!["preset:workspace-write"]);
    assert!(e.add_loaded_source("injected:host"));
    assert!(!e.add_loaded_source("injected:host"));
    assert!(!e.add_loaded_source(""));
    let s2 = e.active_permissions();
    assert_eq!(
        s2.loaded_sources,
        vec!["preset:workspace-write", "injected:host"]
    );
    e.add_run_rules(
        &json!([]),
        &json!([{"tool": "write_file", "action": "deny"}]),
        "run-spec",
    )
    .unwrap();
    let s3 = e.active_permissions();
    assert_eq!(s3.rules[0], json!({"tool": "write_file", "action": "deny"}));
    assert!(s3.loaded_sources.contains(&"injected:run-spec".to_owned()));
    assert_eq!(e.set_mode(Mode::FullAccess), Mode::WorkspaceWrite);
    let s4 = e.active_permissions();
    assert_eq!(s4.mode, "full-access");
    assert_eq!(s4.loaded_sources[0], "preset:full-access");
    let d = decide(
        Some(&e),
        false,
        facts("write_file", false, true),
        &args(json!({"file_path": "a"})),
    );
    assert_eq!(d.reason, "injected:run-spec:write_file");
    assert_eq!(
        ActivePermissions::no_engine().loaded_sources,
        vec!["default:no-engine"]
    );
}

#[test]
fn host_tools_and_ask_rules() {
    let mut e = PermissionEngine::new(Mode::WorkspaceWrite, Path::new("/w"));
    // a host tool without confirmation is allowed; with an explicit ask rule it prompts
    let d = decide(
        Some(&e),
        false,
        facts("host_tool", false, false),
        &Map::new(),
    );
    assert_eq!(d.verdict, Verdict::Allow);
    e.add_rules(&json!([{"tool": "host_.*", "action": "ask"}]), "host")
        .unwrap();
    let d = decide(
        Some(&e),
        false,
        facts("host_tool", false, false),
        &Map::new(),
    );
    assert_eq!(d.verdict, Verdict::Ask);
    assert_eq!(d.reason, "user-rule:host_.*");
    // no engine: the floor is not consulted by decide (it applies at launch)
    let d = decide(
        None,
        false,
        facts("run_shell_command", false, true),
        &args(json!({"command": "rm -rf /"})),
    );
    assert_eq!(d.verdict, Verdict::Ask);
    assert_eq!(d.reason, "tool requires_confirmation fallback");
}

#[test]
fn hardline_can_be_disabled() {
    let e = engine_from(
        json!({"mode": "full-access", "hardline": false}),
        Path::new("/w"),
    )
    .unwrap()
    .unwrap();
    let d = decide(
        Some(&e),
        false,
        facts("run_shell_command", false, true),
        &args(json!({"command": "rm -rf /"})),
    );
    assert_eq!(d.verdict, Verdict::Allow);
}

/// Neighbours of the review's gaps (their refusals are in `tests/vectors/hardline-ours.jsonl`:
/// a shell fed through an output process substitution, `find -exec shred`, `xargs rm -r`, `rm`
/// operands hiding `/` behind `..` or naming a kernel file system) that stay allowed.
#[test]
fn review_gap_neighbours_are_allowed() {
    for cmd in [
        "rm -rf /opt",
        "echo hi | tee >(cat) out.txt",
        "echo hi | tee >(wc -c)",
        "find . -name '*.tmp' -exec shred {} +",
        "rm -rf /tmp/build",
        "rm -rf ./dev",
        "rm -rf build/..",
        "xargs echo rm -r",
    ] {
        assert!(!denied(cmd), "{cmd:?} should be allowed");
    }
}
