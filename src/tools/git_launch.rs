//! Launch hardening for the read-only `git` commands of the presets' read-only shell set.
//!
//! Those commands run without a confirmation in `workspace-write` and `plan`, but git runs
//! programs named by repository files: `core.fsmonitor`, hooks, `filter.<d>.clean/smudge/
//! process`, `diff.<d>.textconv/command`, `diff.external`, pagers, signature programs, lazy
//! fetches of partial clones. A repository is content the model can write (or an untrusted
//! checkout), so every launch of a command of that set switches config-driven execution off:
//!
//! - the environment loses every `GIT_*` variable, system and global config are not read
//!   (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), the pager is `cat`, optional
//!   index writes (which fire `post-index-change`) are off;
//! - `GIT_CONFIG_PARAMETERS` (command-line config, which outranks every file) turns off
//!   fsmonitor, hooks, signature programs, submodule recursion and every transport, and
//!   empties each filter and diff driver the repository's config defines (listed first by
//!   `git config --name-only --list` under the same environment, which runs nothing);
//! - `diff`, `log`, `show`, `stash list` get `--no-ext-diff --no-textconv`; `blame` gets
//!   `--no-textconv`; `config` gets `--no-includes` (an `include.path` or `includeIf` of the
//!   repository's config, or of a `--file`, would print a file outside the workspace).
//!
//! The command text of the set has no quotes or metacharacters (the preset's pattern refuses
//! them), so inserting words keeps its meaning.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::permissions::presets::is_read_only_shell;

/// Command-line config applied to every hardened launch.
const FIXED_OVERRIDES: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "false"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
];

/// Environment set on every hardened launch (after every `GIT_*` variable is removed).
const FIXED_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// How a command is launched.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GitLaunch {
    /// Not a command of the read-only git set: launch as asked.
    Unchanged,
    /// Launch this command with this environment instead.
    Hardened {
        command: String,
        env: Vec<(OsString, OsString)>,
    },
    /// The repository cannot be neutralised (a driver name we cannot pass safely): refuse.
    Refused(String),
}

/// Driver keys whose values are programs, per section.
fn driver_program(section: &str, var: &str) -> bool {
    matches!(
        (section, var),
        ("filter", "clean" | "smudge" | "process")
            | ("diff", "textconv" | "command")
            | ("merge", "driver")
    )
}

/// `git config --name-only --list` names that define a driver program, as `(key, driver)`.
fn driver_keys(names: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in names.lines() {
        let Some((section, rest)) = name.split_once('.') else {
            continue;
        };
        let Some((driver, var)) = rest.rsplit_once('.') else {
            continue;
        };
        if driver_program(&section.to_ascii_lowercase(), &var.to_ascii_lowercase()) {
            out.push((name.to_owned(), driver.to_owned()));
        }
    }
    out
}

/// How long listing the repository's config may take (a config `include` of a FIFO would
/// block forever).
const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// `git config --name-only --list` in `cwd` (runs no program from the config). `Ok("")` when
/// git is not installed (the command itself then fails the same way).
fn list_config_names(
    cwd: &Path,
    env: &[(OsString, OsString)],
    params: &str,
) -> Result<String, String> {
    let spawned = Command::new("git")
        .args(["config", "--name-only", "--list"])
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("GIT_CONFIG_PARAMETERS", params)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(e.to_string()),
    };
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.take(1 << 20).read_to_string(&mut text);
        }
        text
    });
    let deadline = Instant::now() + LIST_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("git config did not finish".to_owned());
            }
        }
    }
    reader
        .join()
        .map_err(|_| "git config output unreadable".to_owned())
}

/// Git's `sq_quote` form of one `key=value` parameter.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// How to launch `command` in `cwd` with `env` (see the module doc). `local`: the command runs
/// on this machine, so the repository's drivers can be listed here first (an injected
/// executor gets the fixed overrides and flags only).
pub(crate) fn harden(
    command: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
    local: bool,
) -> GitLaunch {
    if !is_read_only_shell(command) {
        return GitLaunch::Unchanged;
    }
    let words: Vec<&str> = command
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    if words.first() != Some(&"git") {
        return GitLaunch::Unchanged;
    }
    let mut child_env: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(k, _)| !k.to_string_lossy().starts_with("GIT_") && k != "PAGER")
        .cloned()
        .collect();
    child_env.extend(
        FIXED_ENV
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    let mut params: Vec<String> = FIXED_OVERRIDES
        .iter()
        .map(|(k, v)| sq(&format!("{k}={v}")))
        .collect();
    if local {
        let names = match list_config_names(cwd, &child_env, &params.join(" ")) {
            Ok(names) => names,
            Err(why) => {
                return GitLaunch::Refused(format!(
                    "Error: refused to run '{command}': the repository config could not be \
                     inspected ({why}); ask the user to run it"
                ))
            }
        };
        for (key, driver) in driver_keys(&names) {
            // Old gits split a parameter at its first `=`; a driver name must not hold one.
            if driver.contains(['=', '\n', '\0']) {
                return GitLaunch::Refused(format!(
                    "Error: refused to run '{command}': the repository config defines a driver \
                     named {driver:?} that cannot be switched off safely; ask the user to run it"
                ));
            }
            params.push(sq(&format!("{key}=")));
        }
    }
    child_env.push((
        OsString::from("GIT_CONFIG_PARAMETERS"),
        OsString::from(params.join(" ")),
    ));
    let mut rewritten: Vec<&str> = Vec::with_capacity(words.len() + 2);
    let at = match words.get(1) {
        Some(&"stash") => 3,
        _ => 2,
    };
    for (i, w) in words.iter().enumerate() {
        if i == at {
            push_flags(&mut rewritten, words[1]);
        }
        rewritten.push(w);
    }
    if words.len() == at {
        push_flags(&mut rewritten, words[1]);
    }
    GitLaunch::Hardened {
        command: rewritten.join(" "),
        env: child_env,
    }
}

fn push_flags(out: &mut Vec<&str>, sub: &str) {
    match sub {
        "diff" | "log" | "show" | "stash" => out.extend(["--no-ext-diff", "--no-textconv"]),
        "blame" => out.push("--no-textconv"),
        // An include names a file outside every operand (even outside the workspace), and
        // `git config` prints what it reads; the permission check asks for `--includes`.
        "config" => out.push("--no-includes"),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hardened(cmd: &str) -> String {
        match harden(cmd, Path::new("/"), &[], true) {
            GitLaunch::Hardened { command, .. } => command,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_are_inserted_after_the_subcommand() {
        assert_eq!(
            hardened("git diff --no-index a b"),
            "git diff --no-ext-diff --no-textconv --no-index a b"
        );
        assert_eq!(hardened("git log"), "git log --no-ext-diff --no-textconv");
        assert_eq!(
            hardened("git stash list"),
            "git stash list --no-ext-diff --no-textconv"
        );
        assert_eq!(hardened("git blame a"), "git blame --no-textconv a");
        assert_eq!(hardened("git status"), "git status");
        assert_eq!(
            hardened("git config --get-regexp pypi"),
            "git config --no-includes --get-regexp pypi"
        );
        assert_eq!(
            harden("git commit -m x", Path::new("/"), &[], true),
            GitLaunch::Unchanged
        );
        assert_eq!(
            harden("ls -la", Path::new("/"), &[], true),
            GitLaunch::Unchanged
        );
    }

    #[test]
    fn git_environment_is_scrubbed() {
        let env = vec![
            (OsString::from("GIT_EXTERNAL_DIFF"), OsString::from("x")),
            (OsString::from("GIT_DIR"), OsString::from("/elsewhere")),
            (OsString::from("PATH"), OsString::from("/bin")),
        ];
        let GitLaunch::Hardened { env, .. } = harden("git status", Path::new("/"), &env, true)
        else {
            panic!()
        };
        assert!(!env
            .iter()
            .any(|(k, _)| k == "GIT_EXTERNAL_DIFF" || k == "GIT_DIR"));
        assert!(env.iter().any(|(k, _)| k == "PATH"));
        assert!(env
            .iter()
            .any(|(k, v)| k == "GIT_CONFIG_GLOBAL" && v == "/dev/null"));
    }

    #[test]
    fn driver_keys_are_found() {
        let keys =
            driver_keys("core.bare\nfilter.f.clean\nDiff.My.Driver.textconv\ndiff.x.wordregex\n");
        assert_eq!(
            keys,
            vec![
                ("filter.f.clean".to_owned(), "f".to_owned()),
                ("Diff.My.Driver.textconv".to_owned(), "My.Driver".to_owned())
            ]
        );
    }
}
