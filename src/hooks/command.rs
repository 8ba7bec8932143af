//! Running one command hook: `<shell> -c <command>` in the working directory, the event's JSON
//! on stdin, stdout and stderr read back.
//!
//! A hook runs under the shell tool's governance (docs/security.md): the same interpreter, the
//! same child environment (provider credentials removed), its own process group, which is
//! killed when the hook exits (nothing it forked outlives it), on its timeout, on the turn's
//! cancel and when either stream passes [`MAX_OUTPUT_BYTES`] (a hook that floods its output is
//! stopped at once, not read to the end).

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::config::CommandHook;
use crate::cancel::CancelToken;

/// The most a hook may write to stdout or to stderr.
pub(crate) const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// After the hook exited and its group was killed: how long its pipes may take to close (a
/// process that left the group can hold them open).
const DRAIN: Duration = Duration::from_secs(2);

/// A hook that ran to its exit.
#[derive(Debug)]
pub(crate) struct Exited {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Why a hook gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunFailure {
    /// It could not be started.
    Spawn(String),
    /// It ran past its timeout and was killed.
    Timeout(Duration),
    /// It wrote more than [`MAX_OUTPUT_BYTES`] to one stream and was killed.
    OutputTooLarge,
    /// It was ended by a signal.
    Signal(i32),
    /// The turn was cancelled while it ran; it was killed.
    Cancelled,
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::Spawn(e) => write!(f, "could not start: {e}"),
            RunFailure::Timeout(t) => write!(f, "timed out after {} s", t.as_secs_f64()),
            RunFailure::OutputTooLarge => {
                write!(f, "wrote more than {MAX_OUTPUT_BYTES} bytes of output")
            }
            RunFailure::Signal(s) => write!(f, "killed by signal {s}"),
            RunFailure::Cancelled => write!(f, "cancelled"),
        }
    }
}

fn kill_group(pgid: Option<u32>) {
    if let Some(raw) = pgid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(raw),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Reads `pipe` to its end; `Err` (after killing the group) once it passes the bound.
async fn read_bounded(
    pipe: Option<impl AsyncRead + Unpin>,
    pgid: Option<u32>,
) -> Result<Vec<u8>, RunFailure> {
    let mut out = Vec::new();
    let Some(mut pipe) = pipe else {
        return Ok(out);
    };
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return Ok(out),
            Ok(n) => {
                if out.len() + n > MAX_OUTPUT_BYTES {
                    kill_group(pgid);
                    return Err(RunFailure::OutputTooLarge);
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// Runs `hook` with `input` on its stdin, in `cwd`, with exactly `env`.
pub(crate) async fn run(
    hook: &CommandHook,
    interpreter: &Path,
    input: &[u8],
    cwd: &Path,
    env: &[(OsString, OsString)],
    cancel: &CancelToken,
) -> Result<Exited, RunFailure> {
    let mut cmd = Command::new(interpreter);
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        // Claude Code's hook scripts find the project through this variable.
        .env("CLAUDE_PROJECT_DIR", cwd)
        .env("AGENTAO_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| RunFailure::Spawn(e.to_string()))?;
    let pgid = child.id();
    let stdin = child.stdin.take();
    let input = input.to_vec();
    // A hook that never reads its input must not hold the run up: the write happens beside it.
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&input).await;
        }
    });
    let out = tokio::spawn(read_bounded(child.stdout.take(), pgid));
    let err = tokio::spawn(read_bounded(child.stderr.take(), pgid));
    let status = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(RunFailure::Cancelled),
        _ = tokio::time::sleep(hook.timeout) => Err(RunFailure::Timeout(hook.timeout)),
        s = child.wait() => s.map_err(|e| RunFailure::Spawn(e.to_string())),
    };
    // Whatever it left running goes with it, whether it finished or not.
    kill_group(pgid);
    writer.abort();
    let status = match status {
        Ok(s) => s,
        Err(failure) => {
            let _ = child.wait().await;
            out.abort();
            err.abort();
            return Err(failure);
        }
    };
    let drained = tokio::time::timeout(DRAIN, async { (out.await, err.await) }).await;
    let (stdout, stderr) = match drained {
        Ok((Ok(o), Ok(e))) => (o?, e?),
        _ => (Vec::new(), Vec::new()),
    };
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => return Err(RunFailure::Signal(sig)),
        (None, None) => -1,
    };
    Ok(Exited {
        code,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}
