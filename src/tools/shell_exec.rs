//! The `ShellExecutor` seam (spec §5.2) and its local POSIX default.
//!
//! A launch is one `{command, cwd, env}` run through the executor's interpreter as
//! `<interpreter> -c <command>`; the executor declares its dialect (only `posix` in v1). The
//! local executor starts the child in its own process group with stdin on `/dev/null`, reads
//! both pipes in 4096-byte chunks (each chunk restarts the inactivity clock and is streamed to
//! `on_chunk`), keeps at most 1 MiB per stream (first and last 512 KiB), and kills the whole
//! group on inactivity timeout, on cancel, and after the command exits (so nothing it forked
//! outlives the call).

use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::background_processes::OwnedGroup;
use super::fs::os_error;
use crate::cancel::CancelToken;

/// How much of each stream the local executor keeps (half head, half tail).
pub(crate) const MAX_RETAINED_BYTES: usize = 1024 * 1024;
const CHUNK: usize = 4096;
const POLL: Duration = Duration::from_millis(50);
/// After the command ended (or timed out), how long to wait for the pipes to close.
const DRAIN: Duration = Duration::from_secs(2);
/// After a cancel: the turn is waiting, and a process that left the group may hold the pipes
/// open for ever; its reader thread ends when it does.
const CANCEL_DRAIN: Duration = Duration::from_millis(50);
/// Chunks a reader thread may get ahead of the supervisor; then it waits, and the pipe pushes
/// back on the command.
const READ_AHEAD_CHUNKS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShellDialect {
    Posix,
}

/// What interprets an executor's commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShellSpec {
    pub(crate) dialect: ShellDialect,
    pub(crate) interpreter: PathBuf,
}

/// One launch: `<interpreter> -c <command>` in `cwd` with exactly `env`.
pub(crate) struct ShellRequest<'a> {
    pub(crate) command: &'a str,
    pub(crate) cwd: &'a Path,
    pub(crate) env: &'a [(OsString, OsString)],
    /// Inactivity timeout.
    pub(crate) timeout: Duration,
    pub(crate) on_chunk: Option<&'a (dyn Fn(&str) + Sync)>,
    pub(crate) cancel: Option<&'a CancelToken>,
}

/// A finished (or stopped) foreground run. A negative `returncode` is a signal number.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ShellResult {
    pub(crate) returncode: i32,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    pub(crate) timed_out: bool,
    pub(crate) cancelled: bool,
    /// Bytes not kept, and the offset in `stdout`/`stderr` where the gap is.
    pub(crate) stdout_omitted_bytes: u64,
    pub(crate) stderr_omitted_bytes: u64,
    pub(crate) stdout_omitted_at: usize,
    pub(crate) stderr_omitted_at: usize,
}

impl ShellResult {
    /// A finished run whose output is what `bufs` (stdout, stderr) kept.
    pub(crate) fn captured(
        returncode: i32,
        bufs: &[HeadTailBuffer; 2],
        timed_out: bool,
        cancelled: bool,
    ) -> Self {
        let (stdout, stdout_omitted_bytes, stdout_omitted_at) = bufs[0].snapshot();
        let (stderr, stderr_omitted_bytes, stderr_omitted_at) = bufs[1].snapshot();
        ShellResult {
            returncode,
            stdout,
            stderr,
            timed_out,
            cancelled,
            stdout_omitted_bytes,
            stderr_omitted_bytes,
            stdout_omitted_at,
            stderr_omitted_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BackgroundHandle {
    pub(crate) pid: u32,
    pub(crate) pgid: Option<u32>,
    pub(crate) command: String,
    pub(crate) cwd: PathBuf,
    /// The group, when this process started it: it ends with the agent. A host executor's
    /// processes are the host's (their pids may not even be on this machine).
    pub(crate) owned: Option<Arc<OwnedGroup>>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BackgroundError {
    /// The executor cannot run commands in the background.
    Unsupported,
    /// The process could not be started.
    Failed(String),
}

pub(crate) trait ShellExecutor: Send + Sync {
    /// The interpreter and dialect, or why none can be resolved.
    fn shell_spec(&self) -> Result<ShellSpec, String>;
    /// Runs in the foreground. `Err` means the process could not be started.
    fn run(&self, request: &ShellRequest<'_>) -> Result<ShellResult, String>;
    fn run_background(
        &self,
        request: &ShellRequest<'_>,
    ) -> Result<BackgroundHandle, BackgroundError> {
        let _ = request;
        Err(BackgroundError::Unsupported)
    }
    /// True for the local executor: the tool then checks that the working directory exists on
    /// this machine (an injected executor validates it itself).
    fn is_local(&self) -> bool {
        false
    }
}

/// `/bin/bash` if present, else `bash` on PATH, else `/bin/sh`.
pub(crate) fn default_interpreter() -> PathBuf {
    // Looked up once per process: agents are created by the thousand.
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND.get_or_init(find_interpreter).clone()
}

fn find_interpreter() -> PathBuf {
    let bash = Path::new("/bin/bash");
    if is_executable(bash) {
        return bash.to_path_buf();
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("bash");
            if is_executable(&candidate) {
                return candidate;
            }
        }
    }
    PathBuf::from("/bin/sh")
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The default executor: local processes through a POSIX shell.
#[derive(Debug, Clone)]
pub(crate) struct LocalShellExecutor {
    pub(crate) interpreter: PathBuf,
}

impl Default for LocalShellExecutor {
    fn default() -> Self {
        LocalShellExecutor {
            interpreter: default_interpreter(),
        }
    }
}

fn kill_group(pgid: u32) {
    if let Ok(raw) = i32::try_from(pgid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(raw),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

fn returncode(status: std::process::ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => -sig,
        (None, None) => -1,
    }
}

impl LocalShellExecutor {
    fn command(&self, request: &ShellRequest<'_>) -> Command {
        let mut cmd = Command::new(&self.interpreter);
        cmd.arg("-c")
            .arg(request.command)
            .current_dir(request.cwd)
            .env_clear()
            .envs(request.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .process_group(0);
        cmd
    }

    fn spawn_error(&self, e: &std::io::Error, request: &ShellRequest<'_>) -> String {
        if request.command.contains('\0')
            || request.cwd.as_os_str().to_string_lossy().contains('\0')
        {
            return "embedded null byte".to_owned();
        }
        os_error(e, &self.interpreter)
    }
}

impl ShellExecutor for LocalShellExecutor {
    fn shell_spec(&self) -> Result<ShellSpec, String> {
        Ok(ShellSpec {
            dialect: ShellDialect::Posix,
            interpreter: self.interpreter.clone(),
        })
    }

    fn run(&self, request: &ShellRequest<'_>) -> Result<ShellResult, String> {
        let mut cmd = self.command(request);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| self.spawn_error(&e, request))?;
        let pgid = child.id();
        let (tx, rx) = mpsc::sync_channel::<(usize, Option<Vec<u8>>)>(READ_AHEAD_CHUNKS);
        spawn_reader(child.stdout.take(), 0, tx.clone());
        spawn_reader(child.stderr.take(), 1, tx);
        Ok(supervise(&mut child, pgid, rx, request))
    }

    fn run_background(
        &self,
        request: &ShellRequest<'_>,
    ) -> Result<BackgroundHandle, BackgroundError> {
        let mut cmd = self.command(request);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| BackgroundError::Failed(self.spawn_error(&e, request)))?;
        let pid = child.id();
        Ok(BackgroundHandle {
            pid,
            pgid: Some(pid),
            command: request.command.to_owned(),
            cwd: request.cwd.to_path_buf(),
            owned: Some(OwnedGroup::adopt(child)),
        })
    }

    fn is_local(&self) -> bool {
        true
    }
}

fn spawn_reader(
    pipe: Option<impl Read + Send + 'static>,
    idx: usize,
    tx: mpsc::SyncSender<(usize, Option<Vec<u8>>)>,
) {
    let Some(mut pipe) = pipe else {
        let _ = tx.send((idx, None));
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("agentao-shell-reader".into())
        .spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tx.send((idx, Some(buf[..n].to_vec()))).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = tx.send((idx, None));
        });
    if spawned.is_err() {
        // No thread: the stream is lost; the run still ends on exit or timeout.
    }
}

fn supervise(
    child: &mut Child,
    pgid: u32,
    rx: mpsc::Receiver<(usize, Option<Vec<u8>>)>,
    request: &ShellRequest<'_>,
) -> ShellResult {
    let mut bufs = [
        HeadTailBuffer::new(MAX_RETAINED_BYTES),
        HeadTailBuffer::new(MAX_RETAINED_BYTES),
    ];
    let mut decoders = [Utf8Stream::default(), Utf8Stream::default()];
    let mut eof = [false, false];
    let mut last_activity = Instant::now();
    let mut status = None;
    let mut drain_until = None;
    let (mut timed_out, mut cancelled) = (false, false);
    loop {
        match rx.recv_timeout(POLL) {
            Ok((i, Some(chunk))) => {
                bufs[i].append(&chunk);
                last_activity = Instant::now();
                if let Some(cb) = request.on_chunk {
                    if let Some(text) = decoders[i].push(&chunk) {
                        cb(&text);
                    }
                }
            }
            Ok((i, None)) => {
                eof[i] = true;
                if let (Some(cb), Some(text)) = (request.on_chunk, decoders[i].finish()) {
                    cb(&text);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => eof = [true, true],
        }
        if status.is_none() {
            let mut stop = false;
            if let Ok(Some(st)) = child.try_wait() {
                status = Some(st);
            } else if request.cancel.is_some_and(CancelToken::is_cancelled) {
                cancelled = true;
                stop = true;
            } else if last_activity.elapsed() > request.timeout {
                timed_out = true;
                stop = true;
            }
            if stop {
                kill_group(pgid);
                status = child.wait().ok();
                if status.is_none() {
                    status = Some(std::process::ExitStatus::from_raw(9));
                }
            } else if status.is_some() {
                // The command ended: whatever it left running in its group goes too.
                kill_group(pgid);
            }
            if status.is_some() {
                let drain = if cancelled { CANCEL_DRAIN } else { DRAIN };
                drain_until = Some(Instant::now() + drain);
            }
        }
        if status.is_some()
            && (eof == [true, true] || drain_until.is_some_and(|d| Instant::now() > d))
        {
            break;
        }
    }
    ShellResult::captured(
        status.map(returncode).unwrap_or(-1),
        &bufs,
        timed_out,
        cancelled,
    )
}

/// Incremental lossy UTF-8 decoding for streamed chunks; chunks with a NUL are not shown.
#[derive(Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Option<String> {
        if chunk[..chunk.len().min(8192)].contains(&0) {
            self.pending.clear();
            return None;
        }
        self.pending.extend_from_slice(chunk);
        let cut = self.pending.len() - utf8_incomplete_suffix(&self.pending);
        let text = String::from_utf8_lossy(&self.pending[..cut]).into_owned();
        self.pending.drain(..cut);
        (!text.is_empty()).then_some(text)
    }

    pub(crate) fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        Some(text)
    }
}

/// How many bytes at the end of `data` are a character cut short.
fn utf8_incomplete_suffix(data: &[u8]) -> usize {
    for back in 1..=data.len().min(4) {
        let byte = data[data.len() - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        if byte < 0x80 {
            return 0;
        }
        let need = if (0xC0..0xE0).contains(&byte) {
            2
        } else if byte < 0xF0 {
            3
        } else {
            4
        };
        return if back < need { back } else { 0 };
    }
    0
}

/// The first and last bytes of a stream, and a count of the bytes dropped between.
pub(crate) struct HeadTailBuffer {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    chunks: VecDeque<Vec<u8>>,
    size: usize,
    dropped: u64,
}

impl HeadTailBuffer {
    pub(crate) fn new(limit: usize) -> Self {
        HeadTailBuffer {
            head_limit: limit / 2,
            tail_limit: limit - limit / 2,
            head: Vec::new(),
            chunks: VecDeque::new(),
            size: 0,
            dropped: 0,
        }
    }

    pub(crate) fn append(&mut self, mut chunk: &[u8]) {
        let room = self.head_limit.saturating_sub(self.head.len());
        if room > 0 {
            let take = room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if chunk.is_empty() {
                return;
            }
        }
        self.chunks.push_back(chunk.to_vec());
        self.size += chunk.len();
        while let Some(front) = self.chunks.front() {
            if self.size - front.len() < self.tail_limit {
                break;
            }
            self.size -= front.len();
            self.dropped += front.len() as u64;
            self.chunks.pop_front();
        }
    }

    /// `(data, omitted, at)`: the bytes kept, how many were not, and where the gap is. Both
    /// edges of a gap sit on UTF-8 character boundaries.
    pub(crate) fn snapshot(&self) -> (Vec<u8>, u64, usize) {
        let mut head = self.head.clone();
        let mut tail: Vec<u8> = self.chunks.iter().flatten().copied().collect();
        let mut omitted = self.dropped;
        if tail.len() > self.tail_limit {
            let excess = tail.len() - self.tail_limit;
            omitted += excess as u64;
            tail.drain(..excess);
        }
        if omitted == 0 {
            head.extend_from_slice(&tail);
            return (head, 0, 0);
        }
        let cut = utf8_incomplete_suffix(&head);
        if cut > 0 {
            head.truncate(head.len() - cut);
            omitted += cut as u64;
        }
        let mut skip = 0;
        while skip < tail.len().min(3) && tail[skip] & 0xC0 == 0x80 {
            skip += 1;
        }
        omitted += skip as u64;
        let at = head.len();
        head.extend_from_slice(&tail[skip..]);
        (head, omitted, at)
    }
}

/// The provider-credential variables removed from a child's environment (spec §3.10).
pub(crate) const HARNESS_ENV_KEYS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "MOONSHOT_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "XAI_API_KEY",
    "LLM_API_KEY",
    "LLM_EXTRA_BODY",
];

/// Values shorter than this are not treated as credentials.
const MIN_CREDENTIAL_LEN: usize = 16;

static USED_CREDENTIALS: LazyLock<Mutex<HashSet<String>>> =
    LazyLock::new(|| Mutex::new(HashSet::new()));

/// Records that `value` is an LLM credential this process uses: every variable holding it is
/// removed from shell children's environments, whatever its name. Creating an agent calls this
/// with its provider's API key.
pub fn note_credential_value(value: &str) {
    if value.chars().count() < MIN_CREDENTIAL_LEN {
        return;
    }
    if let Ok(mut set) = USED_CREDENTIALS.lock() {
        set.insert(value.to_owned());
    }
}

/// The environment for a child: this process's, minus provider credentials unless `scrub` is
/// false or `AGENTAO_SCRUB_CHILD_ENV` is `0/false/no/off`.
pub(crate) fn build_child_env(scrub: bool) -> Vec<(OsString, OsString)> {
    let source: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let opt_out = std::env::var("AGENTAO_SCRUB_CHILD_ENV")
        .map(|v| {
            matches!(
                v.trim().to_lowercase().as_str(),
                "0" | "false" | "no" | "off"
            )
        })
        .unwrap_or(false);
    if !scrub || opt_out {
        return source;
    }
    let used: HashSet<String> = USED_CREDENTIALS
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    let mut drop: HashSet<String> = HARNESS_ENV_KEYS.iter().map(|s| (*s).to_owned()).collect();
    if let Ok(provider) = std::env::var("LLM_PROVIDER") {
        let p = provider.trim().to_uppercase();
        if !p.is_empty() && p.replace('_', "").chars().all(|c| c.is_alphanumeric()) {
            drop.insert(format!("{p}_API_KEY"));
        }
    }
    source
        .into_iter()
        .filter(|(k, v)| {
            !k.to_str().is_some_and(|k| drop.contains(k))
                && !v.to_str().is_some_and(|v| used.contains(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_keeps_edges() {
        let mut b = HeadTailBuffer::new(10);
        b.append(b"0123456789abcdef");
        let (data, omitted, at) = b.snapshot();
        assert_eq!((data.as_slice(), omitted, at), (&b"01234bcdef"[..], 6, 5));
        let mut b = HeadTailBuffer::new(10);
        b.append(b"abc");
        assert_eq!(b.snapshot(), (b"abc".to_vec(), 0, 0));
    }

    #[test]
    fn utf8_stream_holds_partial_chars() {
        let mut d = Utf8Stream::default();
        let bytes = "é".as_bytes();
        assert_eq!(d.push(&bytes[..1]), None);
        assert_eq!(d.push(&bytes[1..]).as_deref(), Some("é"));
        assert_eq!(d.push(b"a\0b"), None);
    }
}
