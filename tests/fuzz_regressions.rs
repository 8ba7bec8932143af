//! What fuzzing found (fuzz/, run by scripts/fuzz.sh), kept as ordinary tests. Each test names
//! the fuzz target and the input that found the defect.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use agentao::permissions::path_policy::{contain_directory, contain_file};

fn workspace_with_link_out() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    symlink("../outside", root.join("link_out")).unwrap();
    symlink("..", root.join("up")).unwrap();
    (dir, root, outside)
}

/// path_policy target, input `missing/../link_out/x`: once a component was missing, the rest
/// of the path was appended without resolution, so the `..` popped back into the workspace
/// and the symlink after it was never followed. `contain_file` accepted a path whose parent
/// directory is a link out of the workspace, and `write_file` (which creates the missing
/// directory) wrote through it.
#[test]
fn path_policy_missing_directory_then_dotdot_still_follows_symlinks() {
    let (_dir, root, _outside) = workspace_with_link_out();
    for raw in [
        "missing/../link_out/x",
        "a/b/../../link_out/x",
        "missing/../link_out",
    ] {
        if let Ok(p) = contain_file(&root, raw) {
            // What write_file does with an accepted path: create the parent, then write.
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "planted").unwrap();
            let inside = std::fs::canonicalize(&p).unwrap().starts_with(&root);
            panic!("contain_file accepted {raw:?} as {p:?}; the write landed inside: {inside}");
        }
        assert!(
            contain_directory(&root, raw).is_err(),
            "contain_directory {raw:?}"
        );
    }
    // Paths that stay inside are still accepted.
    assert_eq!(contain_file(&root, "missing/../x").unwrap(), root.join("x"));
    assert_eq!(
        contain_file(&root, "a/b/../c/y").unwrap(),
        root.join("a/c/y")
    );
}

/// config target (what `agentao_agent_new` builds from a config): `permissions.rules_file`
/// naming something that is not a regular file was read with `std::fs::read`, so a FIFO hung
/// agent creation forever and `/dev/zero` grew memory until the process died. Found while
/// writing the target, whose inputs may name any path.
#[test]
fn config_rules_file_must_be_a_small_regular_file() {
    use agentao::permissions::{PermissionEngine, PermissionsConfig};
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let fifo = ws.join("rules.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let big = ws.join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    for (file, what) in [
        (fifo.display().to_string(), "not a regular file"),
        ("/dev/zero".to_owned(), "not a regular file"),
        (big.display().to_string(), "larger than"),
    ] {
        let (tx, rx) = std::sync::mpsc::channel();
        let ws2 = ws.clone();
        let cfg = PermissionsConfig {
            rules_file: Some(file.clone()),
            ..PermissionsConfig::default()
        };
        std::thread::spawn(move || {
            let r = PermissionEngine::from_config(Some(&cfg), &ws2).map(|_| ());
            let _ = tx.send(r);
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("rules_file {file}: no answer within 10 s"));
        let e = r.expect_err("refused");
        assert!(e.contains(what), "{file}: {e}");
    }
}

/// path_policy target (found by the 10 s smoke run), input `up/ws/up/ws/…` with `up -> ..`:
/// after 40 links the resolver gave up and kept the rest of the path lexical, with its links
/// unfollowed, so the accepted path still held `up` links; the kernel, with a fresh budget on
/// that shorter path, followed them out of the workspace.
#[test]
fn path_policy_long_link_chains_are_resolved_to_the_end() {
    let (_dir, root, _outside) = workspace_with_link_out();
    let chain = "up/ws/".repeat(41);
    for raw in [format!("{chain}up/x"), format!("{chain}link_out/x")] {
        assert!(
            contain_file(&root, &raw).is_err(),
            "contain_file accepted {raw:?}"
        );
        assert!(
            contain_directory(&root, &raw).is_err(),
            "contain_directory {raw:?}"
        );
    }
    assert_eq!(
        contain_file(&root, &format!("{chain}x")).unwrap(),
        root.join("x")
    );
    // A real loop still ends (the OS call fails with ELOOP later).
    symlink("loop", root.join("loop")).unwrap();
    assert!(contain_file(&root, "loop/x").is_ok());
}

/// Found by the `hardline` target: a privilege wrapper whose last word is an option that takes
/// a value (`-m` here, after `sudo -n`) made the canonical rewrite slice past the end and panic.
#[test]
fn hardline_wrapper_option_with_its_value_missing_does_not_panic() {
    assert_eq!(
        agentao::permissions::hardline::check("sudo -n -m-sudo -n "),
        None
    );
    assert!(agentao::permissions::hardline::check("sudo -n -m").is_none());
}

/// Found by the `hardline` target: a command whose canonical rewrites (each word a substitution
/// echoes, the `-c` scripts, the pipes into a shell) fill the rewrite budget is refused as too
/// complex; with a trailing newline its unclosed quote yielded one text fewer, the budget held,
/// and the whole command was inspected and allowed. Trailing blanks no longer reach the judgement
/// (so both are refused alike); a budget's refusal is conservative, not a pattern's, so the fuzz
/// target does not demand that it survive every wrapping, while a pattern's refusal must.
#[test]
fn hardline_a_budget_refusal_may_give_way_to_a_whole_inspection() {
    use agentao::permissions::hardline::{check, TOO_COMPLEX};
    let cmd = "bash -c \"$(echo rm 2m  -c \"$(echo rm 2m $ eYh\"om -rf /dev\0\0\0\u{3}| bash$ eYh\"om -rf /dev\0\0\0\u{3}| bash\"";
    assert_eq!(check(cmd), Some(TOO_COMPLEX));
    assert_eq!(check(&format!("{cmd}\n")), Some(TOO_COMPLEX));
    // The dangerous spelling inside, made whole, is refused by its pattern however wrapped.
    let dangerous = "bash -c \"$(echo rm -rf /etc)\"";
    for wrapped in [
        dangerous.to_owned(),
        format!("{dangerous}\n"),
        format!("true; {dangerous}"),
        format!("true && {dangerous}"),
    ] {
        let verdict = check(&wrapped);
        assert!(
            verdict.is_some() && verdict != Some(TOO_COMPLEX),
            "{wrapped:?}: {verdict:?}"
        );
    }
}

/// Found by the `hardline` target: `rm -r\m ~'` is refused (a recursive delete of the home
/// directory), but with a trailing newline the newline fell inside the unclosed quote, the
/// operand was no longer `~`, and the command was allowed. Whitespace after the last word never
/// changes what a shell runs (inside an unclosed quote the command is a syntax error and runs
/// nothing), so it never changes the verdict.
#[test]
fn hardline_trailing_whitespace_never_changes_the_verdict() {
    use agentao::permissions::hardline::check;
    for cmd in [
        "rm -r\\m ~'",
        "rm -r ~",
        "rm -rf /",
        "ls -la",
        "echo 'unclosed",
    ] {
        let verdict = check(cmd);
        for tail in ["\n", "\n\n", " ", "\t", "\r\n", " \n "] {
            assert_eq!(
                check(&format!("{cmd}{tail}")),
                verdict,
                "{cmd:?} + {tail:?}"
            );
        }
    }
    assert!(check("rm -r\\m ~'").is_some());
}
