//! Permission probes answered through the tools' seams: what a decision waits on (see
//! `permissions::probe`) is asked of the shell executor and file system the tools use, so a
//! host's executor is asked where its commands run rather than this machine.

use std::ffi::OsString;
use std::path::Path;

use super::shell_exec::build_child_env;
use super::{FileSystem, ShellExecutor, ShellRequest, ToolServices};
use crate::permissions::git_launch::{self, GitHost, GitRun, LocalGit, LIST_TIMEOUT};
use crate::permissions::{Probe, ProbeAnswer};

/// A host's executor and file system, as the repository probe's [`GitHost`].
struct HostGit<'a> {
    shell: &'a dyn ShellExecutor,
    fs: &'a dyn FileSystem,
}

/// The exit status of a POSIX shell that found no such command.
const COMMAND_NOT_FOUND: i32 = 127;

impl GitHost for HostGit<'_> {
    fn is_dir(&self, cwd: &Path) -> bool {
        self.fs.is_dir(cwd)
    }

    fn run_git(
        &self,
        args: &[&str],
        cwd: &Path,
        env: &[(OsString, OsString)],
    ) -> Result<GitRun, String> {
        // The arguments are the probe's own fixed words: nothing to quote.
        let command = format!("git {}", args.join(" "));
        let request = ShellRequest {
            command: &command,
            cwd,
            env,
            timeout: LIST_TIMEOUT,
            on_chunk: None,
            cancel: None,
        };
        let r = self.shell.run(&request)?;
        if r.timed_out || r.cancelled {
            return Err("git did not finish".to_owned());
        }
        if r.returncode == COMMAND_NOT_FOUND {
            return Ok(GitRun::NoGit);
        }
        Ok(GitRun::Printed(
            String::from_utf8_lossy(&r.stdout).into_owned(),
        ))
    }

    fn read_text(&self, path: &Path) -> Option<String> {
        let bytes = self.fs.read_partial(path, 1 << 20).ok()?;
        String::from_utf8(bytes).ok()
    }
}

impl ToolServices {
    /// Answers a permission probe through these services: with the local executor on this
    /// machine (git as a child process); with a host's executor, by running the probe's git
    /// command through it and reading through the file system seam. Blocks for as long as git
    /// runs (bounded): call it off the async workers.
    pub fn answer_probe(&self, probe: &Probe) -> ProbeAnswer {
        match probe {
            Probe::GitRepository { cwd, workspace } => {
                let shell = self.shell();
                let outside = if shell.is_local() {
                    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
                    git_launch::repository_outside_from(&LocalGit, cwd, workspace, &env)
                } else {
                    let fs = self.fs();
                    let host = HostGit {
                        shell: &*shell,
                        fs: &*fs,
                    };
                    let env = build_child_env(self.shell_settings.scrub_env);
                    git_launch::repository_outside_from(&host, cwd, workspace, &env)
                };
                match outside {
                    None => ProbeAnswer::GitRepositoryInside,
                    Some(path) => ProbeAnswer::GitRepositoryOutside(path),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::permissions::git_launch::SPAWNED;
    use crate::tools::ShellResult;
    use crate::tools::ShellSpec;

    /// One command a host executor was given, with its environment.
    struct Seen {
        command: String,
        env: Vec<(OsString, OsString)>,
    }

    /// A host executor that prints what it was given and records each command.
    struct Recorder {
        stdout: &'static str,
        returncode: i32,
        seen: Mutex<Vec<Seen>>,
    }

    impl ShellExecutor for Recorder {
        fn shell_spec(&self) -> Result<ShellSpec, String> {
            Err("not asked".into())
        }

        fn run(&self, request: &ShellRequest<'_>) -> Result<ShellResult, String> {
            self.seen.lock().unwrap().push(Seen {
                command: request.command.to_owned(),
                env: request.env.to_vec(),
            });
            Ok(ShellResult {
                returncode: self.returncode,
                stdout: self.stdout.as_bytes().to_vec(),
                ..ShellResult::default()
            })
        }
    }

    fn host_answer(stdout: &'static str, returncode: i32) -> (ProbeAnswer, Vec<String>, usize) {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let recorder = Arc::new(Recorder {
            stdout,
            returncode,
            seen: Mutex::default(),
        });
        let services = ToolServices::default();
        services.set_shell(Some(recorder.clone()));
        let before = SPAWNED.with(|n| n.get());
        let answer = services.answer_probe(&Probe::GitRepository {
            cwd: ws.clone(),
            workspace: ws,
        });
        let spawned = SPAWNED.with(|n| n.get()) - before;
        let seen = recorder.seen.lock().unwrap();
        for s in seen.iter() {
            assert!(s.env.iter().any(|(k, _)| k == "GIT_CONFIG_PARAMETERS"));
            assert!(s
                .env
                .iter()
                .any(|(k, v)| k == "GIT_CONFIG_GLOBAL" && v == "/dev/null"));
        }
        let commands = seen.iter().map(|s| s.command.clone()).collect();
        (answer, commands, spawned)
    }

    #[test]
    fn a_host_executor_is_asked_where_the_repository_lies() {
        let (answer, commands, spawned) = host_answer(
            "/elsewhere/repo/.git\n/elsewhere/repo/.git\n/elsewhere/repo\n",
            0,
        );
        assert_eq!(
            answer,
            ProbeAnswer::GitRepositoryOutside("/elsewhere/repo/.git".into())
        );
        assert_eq!(
            commands,
            ["git rev-parse --absolute-git-dir --git-common-dir --show-toplevel"]
        );
        assert_eq!(spawned, 0, "the probe ran git on this machine");
    }

    #[test]
    fn a_host_without_git_or_a_repository_answers_inside() {
        let (answer, commands, _) = host_answer("", COMMAND_NOT_FOUND);
        assert_eq!(answer, ProbeAnswer::GitRepositoryInside);
        assert_eq!(commands.len(), 1);
        let (answer, _, _) = host_answer("", 128);
        assert_eq!(answer, ProbeAnswer::GitRepositoryInside);
    }
}
