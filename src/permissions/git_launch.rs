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
//!
//! It lives with the permissions because it is the read-only set's promise kept at launch, and
//! the answer to the engine's [`Probe::GitRepository`](super::probe::Probe) (where the
//! repository lies): the engine never runs it itself; whoever decides answers the probe
//! through its own seams ([`GitHost`]: this machine, or a host's shell and file system).

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::path_policy;
use super::presets::is_read_only_shell;

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

/// How long a git run of the launch's own (listing the config, locating the repository) may
/// take (a config `include` of a FIFO would block forever).
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// What a git run of the launch's own printed.
pub(crate) enum GitRun {
    /// git is not installed (the command itself then fails the same way).
    NoGit,
    /// Its standard output (at most 1 MiB), whatever its exit status.
    Printed(String),
}

/// Where the repository probe runs git and reads the object store's alternates: this machine
/// ([`LocalGit`]) or a host's shell and file system.
pub(crate) trait GitHost {
    /// Whether `cwd` is a directory there (no command can run elsewhere).
    fn is_dir(&self, cwd: &Path) -> bool;
    /// `git <args>` in `cwd` under exactly `env`, bounded by [`LIST_TIMEOUT`].
    fn run_git(
        &self,
        args: &[&str],
        cwd: &Path,
        env: &[(OsString, OsString)],
    ) -> Result<GitRun, String>;
    /// A small text file there (`objects/info/alternates`), `None` when it cannot be read.
    fn read_text(&self, path: &Path) -> Option<String>;
}

/// This machine: git as a child process, files through `std::fs`.
pub(crate) struct LocalGit;

impl GitHost for LocalGit {
    fn is_dir(&self, cwd: &Path) -> bool {
        cwd.is_dir()
    }

    fn run_git(
        &self,
        args: &[&str],
        cwd: &Path,
        env: &[(OsString, OsString)],
    ) -> Result<GitRun, String> {
        run_git(args, cwd, env)
    }

    fn read_text(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

#[cfg(test)]
thread_local! {
    /// Processes this thread started through [`run_git`]: the permission tests prove with it
    /// that deciding starts none.
    pub(crate) static SPAWNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `git <args>` in `cwd` under `env`, with the standard streams closed but stdout.
fn run_git(args: &[&str], cwd: &Path, env: &[(OsString, OsString)]) -> Result<GitRun, String> {
    let spawned = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    #[cfg(test)]
    SPAWNED.with(|n| n.set(n.get() + 1));
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GitRun::NoGit),
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
                return Err("git did not finish".to_owned());
            }
        }
    }
    reader
        .join()
        .map(GitRun::Printed)
        .map_err(|_| "git output unreadable".to_owned())
}

/// `git config --name-only --list` in `cwd` (runs no program from the config). `Ok("")` when
/// git is not installed.
fn list_config_names(
    cwd: &Path,
    env: &[(OsString, OsString)],
    params: &str,
) -> Result<String, String> {
    let mut env = env.to_vec();
    env.push((
        OsString::from("GIT_CONFIG_PARAMETERS"),
        OsString::from(params),
    ));
    match run_git(&["config", "--name-only", "--list"], cwd, &env)? {
        GitRun::NoGit => Ok(String::new()),
        GitRun::Printed(text) => Ok(text),
    }
}

/// The environment of a hardened launch before its command-line config: no `GIT_*` variable
/// of the caller, no system or global config, no pager.
fn scrubbed_env(env: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(k, _)| !k.to_string_lossy().starts_with("GIT_") && k != "PAGER")
        .cloned()
        .collect();
    out.extend(
        FIXED_ENV
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    out
}

/// `GIT_CEILING_DIRECTORIES` for `workspace`: git looks for a repository in the working
/// directory and its parents up to the workspace, never above it.
fn ceiling(workspace: &Path) -> Option<(OsString, OsString)> {
    let parent = workspace.parent()?;
    Some((
        OsString::from("GIT_CEILING_DIRECTORIES"),
        parent.as_os_str().to_owned(),
    ))
}

/// How deep `objects/info/alternates` chains are followed before the check gives up (git
/// itself stops at 5).
const ALTERNATES_DEPTH: usize = 5;

/// Where the repository git uses in `cwd` lies, if any part of it is outside `workspace`: its
/// git dir, common dir (`commondir`, a `.git` gitfile), work tree (`core.worktree`), object
/// store and its `objects/info/alternates`. `None` when every part is inside or there is no
/// repository. `env` is the launch's (scrubbed) environment, without the caller's `GIT_*`.
/// One `git rev-parse`, which runs no program from the repository.
pub(crate) fn repository_outside(
    host: &dyn GitHost,
    cwd: &Path,
    workspace: &Path,
    env: &[(OsString, OsString)],
) -> Option<String> {
    if !host.is_dir(cwd) {
        // No command can run there now; the launch checks again.
        return None;
    }
    let mut env = env.to_vec();
    let fixed: Vec<String> = FIXED_OVERRIDES
        .iter()
        .map(|(k, v)| sq(&format!("{k}={v}")))
        .collect();
    env.push((
        OsString::from("GIT_CONFIG_PARAMETERS"),
        OsString::from(fixed.join(" ")),
    ));
    let args = [
        "rev-parse",
        "--absolute-git-dir",
        "--git-common-dir",
        "--show-toplevel",
    ];
    let printed = match host.run_git(&args, cwd, &env) {
        Ok(GitRun::NoGit) => return None,
        Ok(GitRun::Printed(text)) => text,
        Err(why) => return Some(format!("the repository's location ({why})")),
    };
    // A bare repository prints no top level (git stops at `--show-toplevel`); no repository
    // prints nothing.
    let located: Vec<PathBuf> = printed
        .lines()
        .map(|line| path_policy::resolve(&cwd.join(line)))
        .collect();
    if let Some(outside) = located.iter().find(|p| !p.starts_with(workspace)) {
        return Some(outside.display().to_string());
    }
    let common = located.get(1)?;
    let mut objects = vec![common.join("objects")];
    for _ in 0..=ALTERNATES_DEPTH {
        let mut next = Vec::new();
        for dir in &objects {
            let dir = path_policy::resolve(dir);
            if !dir.starts_with(workspace) {
                return Some(dir.display().to_string());
            }
            let Some(text) = host.read_text(&dir.join("info/alternates")) else {
                continue;
            };
            for line in text
                .lines()
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
            {
                if line.starts_with('"') {
                    // A C-quoted path: not unquoted here, so not trusted.
                    return Some(line.to_owned());
                }
                next.push(dir.join(line));
            }
        }
        if next.is_empty() {
            return None;
        }
        objects = next;
    }
    Some("objects/info/alternates (chained too deep)".to_owned())
}

/// [`repository_outside`] under the environment a hardened launch would get from `env`.
pub(crate) fn repository_outside_from(
    host: &dyn GitHost,
    cwd: &Path,
    workspace: &Path,
    env: &[(OsString, OsString)],
) -> Option<String> {
    repository_outside(host, cwd, workspace, &scrubbed_env(env))
}

/// Git's `sq_quote` form of one `key=value` parameter.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// How to launch `command` in `cwd` with `env` (see the module doc). `local`: the command runs
/// on this machine, so the repository's drivers can be listed here first (an injected
/// executor gets the fixed overrides and flags only). `contain`: the workspace, when the
/// command runs without the host's yes on the promise that it reads only inside it; git then
/// finds no repository above it, and a repository that lies (partly) outside is refused.
pub(crate) fn harden(
    command: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
    local: bool,
    contain: Option<&Path>,
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
    let mut child_env = scrubbed_env(env);
    if let Some(workspace) = contain {
        child_env.extend(ceiling(workspace));
        // The permission check looked before any earlier call of the same batch ran (one of
        // them may have written `commondir`): look again, now, under the launch's environment.
        if let Some(outside) = local
            .then(|| repository_outside(&LocalGit, cwd, workspace, &child_env))
            .flatten()
        {
            return GitLaunch::Refused(format!(
                "Error: refused to run '{command}': git would read a repository outside the \
                 workspace ({outside}); ask the user to run it"
            ));
        }
    }
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
        match harden(cmd, Path::new("/"), &[], true, None) {
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
            harden("git commit -m x", Path::new("/"), &[], true, None),
            GitLaunch::Unchanged
        );
        assert_eq!(
            harden("ls -la", Path::new("/"), &[], true, None),
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
        let GitLaunch::Hardened { env, .. } =
            harden("git status", Path::new("/"), &env, true, None)
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
