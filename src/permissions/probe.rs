//! What a permission decision needs to know about the machine and must not find out itself.
//!
//! [`decide`](super::decide) starts no process: where a verdict depends on something only a
//! run can tell (where git's repository lies), it returns [`Probing::NeedsProbe`] with a typed
//! [`Probe`]. Its caller answers the probe through its own seams (the turn and the preflight
//! through `ToolServices::answer_probe`, so a host's shell and file system are the ones asked;
//! a test or a fuzz target with a fixed answer) and decides again with the answer in
//! [`Probed`]. [`Probing::resolve`] is that loop, the one path every caller shares.

use std::path::PathBuf;

/// A question about the machine a decision waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Where the repository `git` would use in `cwd` lies, measured against `workspace`: its
    /// git dir, common dir, work tree, object store and the store's alternates (see
    /// `git_launch::repository_outside`).
    GitRepository { cwd: PathBuf, workspace: PathBuf },
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// Every part of the repository lies inside the workspace, or there is no repository (or
    /// no git) there.
    GitRepositoryInside,
    /// A part lies outside the workspace: that path, or why the repository could not be
    /// located.
    GitRepositoryOutside(String),
}

/// The answers a decision has been given so far.
#[derive(Debug, Clone, Default)]
pub struct Probed {
    answers: Vec<(Probe, ProbeAnswer)>,
}

impl Probed {
    /// No answer yet: a decision that needs one says which.
    pub fn none() -> Self {
        Probed::default()
    }

    /// These answers and `probe`'s.
    pub fn with(mut self, probe: Probe, answer: ProbeAnswer) -> Self {
        self.answers.push((probe, answer));
        self
    }

    /// The answer to exactly this probe, if it was given.
    pub fn answer(&self, probe: &Probe) -> Option<&ProbeAnswer> {
        self.answers
            .iter()
            .find(|(p, _)| p == probe)
            .map(|(_, a)| a)
    }
}

/// A decision, or the probe it waits on.
#[derive(Debug, Clone)]
pub enum Probing<T> {
    Decided(T),
    NeedsProbe(Probe),
}

/// How many probes one decision may ask: each kind once per call; a step that asks again what
/// it was told is a defect, stopped here rather than looping.
const MAX_PROBES: usize = 8;

impl<T> Probing<T> {
    /// The decision, when no probe is needed.
    pub fn decided(self) -> Option<T> {
        match self {
            Probing::Decided(t) => Some(t),
            Probing::NeedsProbe(_) => None,
        }
    }

    /// Runs the pure `step` until it decides, answering each probe it needs with `answer`.
    pub fn resolve(
        step: impl Fn(&Probed) -> Probing<T>,
        mut answer: impl FnMut(&Probe) -> ProbeAnswer,
    ) -> T {
        let mut probed = Probed::none();
        for _ in 0..=MAX_PROBES {
            match step(&probed) {
                Probing::Decided(t) => return t,
                Probing::NeedsProbe(probe) => {
                    assert!(
                        probed.answer(&probe).is_none(),
                        "a permission step asked again for {probe:?}"
                    );
                    let a = answer(&probe);
                    probed = probed.with(probe, a);
                }
            }
        }
        panic!("a permission step asked more than {MAX_PROBES} probes")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{json, Map, Value};

    use super::*;
    use crate::permissions::git_launch::{self, LocalGit, SPAWNED};
    use crate::permissions::{
        decide, decide_probing, Decision, Mode, PermissionEngine, ToolFacts, Verdict,
    };

    const SHELL: ToolFacts<'static> = ToolFacts {
        name: "run_shell_command",
        is_read_only: false,
        requires_confirmation: true,
    };

    fn shell(command: &str, wd: &str) -> Map<String, Value> {
        json!({"command": command, "working_directory": wd})
            .as_object()
            .cloned()
            .unwrap()
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir(&ws).unwrap();
        (dir, ws)
    }

    fn spawned() -> usize {
        SPAWNED.with(|n| n.get())
    }

    /// The answer the turn's local executor gives (see `ToolServices::answer_probe`).
    fn local_answer(probe: &Probe) -> ProbeAnswer {
        let Probe::GitRepository { cwd, workspace } = probe;
        let env: Vec<_> = std::env::vars_os().collect();
        match git_launch::repository_outside_from(&LocalGit, cwd, workspace, &env) {
            None => ProbeAnswer::GitRepositoryInside,
            Some(p) => ProbeAnswer::GitRepositoryOutside(p),
        }
    }

    #[test]
    fn deciding_a_git_command_asks_for_a_probe_and_runs_nothing() {
        let (_dir, ws) = workspace();
        let engine = PermissionEngine::new(Mode::WorkspaceWrite, &ws);
        let before = spawned();
        let step = decide(
            Some(&engine),
            false,
            SHELL,
            &shell("git status", "."),
            &Probed::none(),
        );
        let Probing::NeedsProbe(probe) = step else {
            panic!("decided without the repository's location: {step:?}")
        };
        assert_eq!(
            probe,
            Probe::GitRepository {
                cwd: ws.clone(),
                workspace: ws.clone()
            }
        );
        // Every other read of the set, and the engine-level step, decide at once.
        let ls = decide(
            Some(&engine),
            false,
            SHELL,
            &shell("ls -la", "."),
            &Probed::none(),
        );
        assert_eq!(ls.decided().map(|d| d.verdict), Some(Verdict::Allow));
        assert!(matches!(
            engine.decide_detail("run_shell_command", &shell("git log", "."), &Probed::none()),
            Probing::NeedsProbe(Probe::GitRepository { .. })
        ));
        assert_eq!(spawned(), before, "deciding started a process");
    }

    #[test]
    fn the_probe_answer_gives_the_verdicts() {
        let (_dir, ws) = workspace();
        let engine = PermissionEngine::new(Mode::WorkspaceWrite, &ws);
        let probe = Probe::GitRepository {
            cwd: ws.clone(),
            workspace: ws.clone(),
        };
        let with = |answer: ProbeAnswer| -> Decision {
            let probed = Probed::none().with(probe.clone(), answer);
            decide(
                Some(&engine),
                false,
                SHELL,
                &shell("git status", "."),
                &probed,
            )
            .decided()
            .expect("answered")
        };
        let inside = with(ProbeAnswer::GitRepositoryInside);
        assert_eq!(inside.verdict, Verdict::Allow);
        assert_eq!(inside.reason, "mode-preset:run_shell_command");
        let outside = with(ProbeAnswer::GitRepositoryOutside("/x/repo/.git".into()));
        assert_eq!(outside.verdict, Verdict::Ask);
        assert_eq!(outside.reason, "outside-workspace-read:/x/repo/.git");
        assert_eq!(outside.matched_rule, inside.matched_rule);
        // An answer to another directory's probe is not this one's.
        let other = Probed::none().with(
            Probe::GitRepository {
                cwd: ws.join("sub"),
                workspace: ws.clone(),
            },
            ProbeAnswer::GitRepositoryInside,
        );
        assert!(decide(
            Some(&engine),
            false,
            SHELL,
            &shell("git status", "."),
            &other
        )
        .decided()
        .is_none());
        // Outside reads allowed, a background run, plan's preset: no probe is needed.
        let mut open = engine.clone();
        open.set_outside_reads_allowed(true);
        let d = decide(
            Some(&open),
            false,
            SHELL,
            &shell("git status", "."),
            &Probed::none(),
        );
        assert_eq!(d.decided().map(|d| d.verdict), Some(Verdict::Allow));
        let mut bg = shell("git status", ".");
        bg.insert("is_background".into(), Value::Bool(true));
        let d = decide(Some(&engine), false, SHELL, &bg, &Probed::none());
        assert_eq!(
            d.decided().map(|d| d.reason),
            Some("background-process".to_owned())
        );
    }

    #[test]
    fn resolving_asks_each_probe_once() {
        let (_dir, ws) = workspace();
        let engine = PermissionEngine::new(Mode::WorkspaceWrite, &ws);
        let mut asked = Vec::new();
        let d = decide_probing(
            Some(&engine),
            false,
            SHELL,
            &shell("git status", "."),
            |p| {
                asked.push(p.clone());
                ProbeAnswer::GitRepositoryInside
            },
        );
        assert_eq!(d.verdict, Verdict::Allow);
        assert_eq!(asked.len(), 1);
    }

    fn have_git() -> bool {
        std::process::Command::new("git")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    /// The local answer, through the shared path, gives the verdicts the engine gave when it
    /// ran git itself: a `commondir` leading outside is asked, a repository inside allowed.
    #[test]
    fn the_local_answer_finds_a_repository_outside_the_workspace() {
        if !have_git() {
            eprintln!("SKIPPED: git is not installed");
            return;
        }
        let (dir, ws) = workspace();
        let outside = dir.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir(&outside).unwrap();
        git(&outside, &["init", "-q", "."]);
        std::fs::create_dir(ws.join("x")).unwrap();
        std::fs::write(ws.join("x/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            ws.join("x/commondir"),
            format!("{}/.git\n", outside.display()),
        )
        .unwrap();
        let engine = PermissionEngine::new(Mode::WorkspaceWrite, &ws);
        let d = decide_probing(
            Some(&engine),
            false,
            SHELL,
            &shell("git show HEAD:prod.env", "x"),
            local_answer,
        );
        assert_eq!(d.verdict, Verdict::Ask);
        assert!(
            d.reason.starts_with("outside-workspace-read:")
                && d.reason.contains(&*outside.to_string_lossy()),
            "{}",
            d.reason
        );
        git(&ws, &["init", "-q", "."]);
        let d = decide_probing(
            Some(&engine),
            false,
            SHELL,
            &shell("git status", "."),
            local_answer,
        );
        assert_eq!(d.verdict, Verdict::Allow, "{}", d.reason);
    }
}
