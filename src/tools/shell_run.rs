//! A shell run answered from another thread, as a host's executor answers it: output pushed in
//! while the command runs, then exactly one answer. The tool's thread waits in
//! [`RunWaiter::wait`] / [`RunWaiter::wait_background`]: it streams the output as it comes,
//! keeps at most 1 MiB per stream (first and last 512 KiB, as the local executor does), and
//! holds the backstops a host cannot break: a cancelled turn, or a run silent for longer than
//! its inactivity timeout, tells the host through the run's token and ends the wait after
//! [`GRACE`] whatever the host does. An answer or output arriving after that is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::shell_exec::{
    BackgroundError, BackgroundHandle, HeadTailBuffer, ShellRequest, ShellResult, Utf8Stream,
    MAX_RETAINED_BYTES,
};
use crate::cancel::CancelToken;

/// How long a stopped run (turn cancelled, or silent past its timeout) may take to answer.
pub(crate) const GRACE: Duration = Duration::from_secs(2);
/// Streamed text not yet shown beyond this is dropped from the display (the result still has
/// it): a host pushing output faster than the turn drains it cannot grow memory.
const MAX_PENDING_BYTES: usize = 1024 * 1024;
const POLL: Duration = Duration::from_millis(50);

/// Which way the host was asked to run the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunKind {
    Foreground,
    Background,
}

impl RunKind {
    fn as_str(self) -> &'static str {
        match self {
            RunKind::Foreground => "foreground",
            RunKind::Background => "background",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputStream {
    Stdout,
    Stderr,
}

/// The one answer of a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RunAnswer {
    /// A foreground run ended (or was stopped). A negative `returncode` is a signal number.
    Finished {
        returncode: i32,
        timed_out: bool,
        cancelled: bool,
    },
    /// A background run started.
    Started { pid: u32, pgid: Option<u32> },
    /// The command could not be started.
    Failed(String),
}

/// Why a sink call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SinkError {
    /// The answer does not fit the run (`Started` for a foreground run, `Finished` for a
    /// background one). The run has been failed with this message.
    #[error("a {run} run cannot be answered with {answer}; the run was failed")]
    WrongKind {
        run: &'static str,
        answer: &'static str,
    },
}

struct State {
    bufs: [HeadTailBuffer; 2],
    decoders: [Utf8Stream; 2],
    pending: VecDeque<String>,
    pending_bytes: usize,
    answer: Option<RunAnswer>,
    last_activity: Instant,
    /// The waiter has gone: output is dropped and the answer ignored.
    abandoned: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The host's side of one run. Thread-safe; consumed by its answer. Dropped unanswered, it
/// fails the run.
pub(crate) struct RunSink {
    shared: Arc<Shared>,
    kind: RunKind,
    answered: bool,
}

/// The tool's side of one run.
pub(crate) struct RunWaiter {
    shared: Arc<Shared>,
    token: CancelToken,
}

/// A new run of `kind`, and its token: cancelled when the turn is, or when the waiter stops the
/// run; the host watches it.
pub(crate) fn channel(
    kind: RunKind,
    turn: Option<&CancelToken>,
) -> (RunSink, RunWaiter, CancelToken) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            bufs: [
                HeadTailBuffer::new(MAX_RETAINED_BYTES),
                HeadTailBuffer::new(MAX_RETAINED_BYTES),
            ],
            decoders: [Utf8Stream::default(), Utf8Stream::default()],
            pending: VecDeque::new(),
            pending_bytes: 0,
            answer: None,
            last_activity: Instant::now(),
            abandoned: false,
        }),
        wake: Condvar::new(),
    });
    let token = CancelToken::new();
    if let Some(t) = turn {
        t.link_child(&token);
    }
    (
        RunSink {
            shared: shared.clone(),
            kind,
            answered: false,
        },
        RunWaiter {
            shared,
            token: token.clone(),
        },
        token,
    )
}

impl RunSink {
    /// A chunk of the command's output. A background run's output is discarded.
    pub(crate) fn output(&self, stream: OutputStream, bytes: &[u8]) {
        if self.kind == RunKind::Background || bytes.is_empty() {
            return;
        }
        let mut st = self.shared.lock();
        if st.abandoned {
            return;
        }
        let i = stream as usize;
        st.bufs[i].append(bytes);
        st.last_activity = Instant::now();
        if let Some(text) = st.decoders[i].push(bytes) {
            if st.pending_bytes + text.len() <= MAX_PENDING_BYTES {
                st.pending_bytes += text.len();
                st.pending.push_back(text);
            }
        }
        drop(st);
        self.shared.wake.notify_all();
    }

    /// The run's one answer. An answer of the wrong kind fails the run and says so.
    pub(crate) fn answer(mut self, answer: RunAnswer) -> Result<(), SinkError> {
        let wrong = match (&answer, self.kind) {
            (RunAnswer::Started { .. }, RunKind::Foreground) => Some("a background start"),
            (RunAnswer::Finished { .. }, RunKind::Background) => Some("a foreground finish"),
            _ => None,
        };
        let (answer, result) = match wrong {
            Some(what) => {
                let e = SinkError::WrongKind {
                    run: self.kind.as_str(),
                    answer: what,
                };
                (
                    RunAnswer::Failed(format!("the shell executor answered wrongly: {e}")),
                    Err(e),
                )
            }
            None => (answer, Ok(())),
        };
        self.deliver(answer);
        result
    }

    fn deliver(&mut self, answer: RunAnswer) {
        self.answered = true;
        let mut st = self.shared.lock();
        if st.abandoned || st.answer.is_some() {
            return;
        }
        for i in 0..2 {
            if let Some(text) = st.decoders[i].finish() {
                st.pending.push_back(text);
            }
        }
        st.answer = Some(answer);
        drop(st);
        self.shared.wake.notify_all();
    }
}

impl Drop for RunSink {
    fn drop(&mut self) {
        if !self.answered {
            self.deliver(RunAnswer::Failed(
                "the shell executor let go of the run without answering it".into(),
            ));
        }
    }
}

/// Why the waiter stopped a run itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Cancelled,
    TimedOut,
}

impl RunWaiter {
    /// Waits for a foreground run, streaming its output to `request.on_chunk`. `Err` is a run
    /// that could not start.
    pub(crate) fn wait(self, request: &ShellRequest<'_>) -> Result<ShellResult, String> {
        let (answer, stopped) = self.wait_answer(request, true);
        let bufs = std::mem::replace(
            &mut self.shared.lock().bufs,
            [HeadTailBuffer::new(0), HeadTailBuffer::new(0)],
        );
        let (returncode, mut timed_out, mut cancelled) = match answer {
            Some(RunAnswer::Failed(e)) => return Err(e),
            Some(RunAnswer::Finished {
                returncode,
                timed_out,
                cancelled,
            }) => (returncode, timed_out, cancelled),
            // Refused by `answer`; kept total for the compiler.
            Some(RunAnswer::Started { .. }) => return Err("the run was not started".into()),
            None => (-1, false, false),
        };
        // What the library stopped the run for wins over how the host reports the stop.
        match stopped {
            Some(Stop::Cancelled) => (cancelled, timed_out) = (true, false),
            Some(Stop::TimedOut) => (cancelled, timed_out) = (false, true),
            None => {}
        }
        Ok(ShellResult::captured(
            returncode, &bufs, timed_out, cancelled,
        ))
    }

    /// Waits for a background run to start.
    pub(crate) fn wait_background(
        self,
        request: &ShellRequest<'_>,
    ) -> Result<BackgroundHandle, BackgroundError> {
        match self.wait_answer(request, false).0 {
            Some(RunAnswer::Started { pid, pgid }) => Ok(BackgroundHandle {
                pid,
                pgid,
                command: request.command.to_owned(),
                cwd: request.cwd.to_path_buf(),
                owned: None,
            }),
            Some(RunAnswer::Failed(e)) => Err(BackgroundError::Failed(e)),
            Some(RunAnswer::Finished { .. }) => {
                Err(BackgroundError::Failed("the run was not started".into()))
            }
            None => Err(BackgroundError::Failed(
                "the shell executor did not say whether the command started".into(),
            )),
        }
    }

    /// The answer (`None` when the wait gave up), and why the waiter stopped the run, if it did.
    fn wait_answer(
        &self,
        request: &ShellRequest<'_>,
        stream: bool,
    ) -> (Option<RunAnswer>, Option<Stop>) {
        let mut stopped: Option<(Stop, Instant)> = None;
        let mut st = self.shared.lock();
        loop {
            if !st.pending.is_empty() {
                let texts: Vec<String> = st.pending.drain(..).collect();
                st.pending_bytes = 0;
                drop(st);
                if let (true, Some(cb)) = (stream, request.on_chunk) {
                    for t in &texts {
                        cb(t);
                    }
                }
                st = self.shared.lock();
                continue;
            }
            if let Some(answer) = st.answer.take() {
                // A host that sees the turn's cancel through the token may answer before this
                // loop has looked at the cancel: the run was still stopped for it. (One that
                // ended on its own just before the cancel reads as cancelled too; its turn is.)
                let stopped = stopped.map(|s| s.0).or_else(|| {
                    request
                        .cancel
                        .is_some_and(CancelToken::is_cancelled)
                        .then_some(Stop::Cancelled)
                });
                return (Some(answer), stopped);
            }
            if stopped.is_none() {
                if request.cancel.is_some_and(CancelToken::is_cancelled) {
                    stopped = Some((Stop::Cancelled, Instant::now()));
                } else if st.last_activity.elapsed() > request.timeout {
                    stopped = Some((Stop::TimedOut, Instant::now()));
                    // Outside the lock: a host's watch of the token runs inside the cancel and
                    // may answer the run, which takes this lock.
                    drop(st);
                    self.token.cancel("timeout");
                    st = self.shared.lock();
                    continue;
                }
            }
            if let Some((why, at)) = stopped {
                if at.elapsed() > GRACE {
                    st.abandoned = true;
                    return (None, Some(why));
                }
            }
            st = self
                .shared
                .wake
                .wait_timeout(st, POLL)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

impl Drop for RunWaiter {
    fn drop(&mut self) {
        self.shared.lock().abandoned = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::Mutex as StdMutex;

    fn request<'a>(
        on_chunk: &'a (dyn Fn(&str) + Sync),
        cancel: &'a CancelToken,
        timeout: Duration,
    ) -> ShellRequest<'a> {
        ShellRequest {
            command: "echo hi",
            cwd: Path::new("/virtual"),
            env: &[],
            timeout,
            on_chunk: Some(on_chunk),
            cancel: Some(cancel),
        }
    }

    #[test]
    fn output_streams_and_answer_ends_the_wait() {
        let seen = StdMutex::new(String::new());
        let on_chunk = |t: &str| seen.lock().unwrap().push_str(t);
        let turn = CancelToken::new();
        let (sink, waiter, _token) = channel(RunKind::Foreground, Some(&turn));
        let host = std::thread::spawn(move || {
            sink.output(OutputStream::Stdout, "h\u{e9}".as_bytes());
            sink.output(OutputStream::Stderr, b"oops");
            sink.answer(RunAnswer::Finished {
                returncode: 3,
                timed_out: false,
                cancelled: false,
            })
        });
        let r = waiter
            .wait(&request(&on_chunk, &turn, Duration::from_secs(60)))
            .unwrap();
        assert_eq!(host.join().unwrap(), Ok(()));
        assert_eq!(r.returncode, 3);
        assert_eq!(r.stdout, "h\u{e9}".as_bytes());
        assert_eq!(r.stderr, b"oops");
        let seen = seen.lock().unwrap().clone();
        assert!(seen.contains("h\u{e9}") && seen.contains("oops"), "{seen}");
    }

    #[test]
    fn wrong_kind_fails_the_run() {
        let turn = CancelToken::new();
        let (sink, waiter, _) = channel(RunKind::Foreground, Some(&turn));
        let e = sink.answer(RunAnswer::Started { pid: 1, pgid: None });
        assert!(matches!(e, Err(SinkError::WrongKind { .. })));
        let r = waiter.wait(&request(&|_| {}, &turn, Duration::from_secs(60)));
        assert!(r.unwrap_err().contains("answered wrongly"));
    }

    #[test]
    fn dropped_sink_fails_the_run() {
        let turn = CancelToken::new();
        let (sink, waiter, _) = channel(RunKind::Background, Some(&turn));
        drop(sink);
        let r = waiter.wait_background(&request(&|_| {}, &turn, Duration::from_secs(60)));
        assert!(matches!(r, Err(BackgroundError::Failed(m)) if m.contains("without answering")));
    }

    #[test]
    fn a_silent_host_is_stopped_and_abandoned() {
        let turn = CancelToken::new();
        let (sink, waiter, token) = channel(RunKind::Foreground, Some(&turn));
        let t0 = Instant::now();
        let r = waiter
            .wait(&request(&|_| {}, &turn, Duration::from_millis(100)))
            .unwrap();
        assert!(r.timed_out && !r.cancelled);
        assert!(token.is_cancelled(), "the host is told through the token");
        assert!(t0.elapsed() >= GRACE);
        // A late answer is ignored, not an error.
        assert_eq!(
            sink.answer(RunAnswer::Finished {
                returncode: 0,
                timed_out: false,
                cancelled: false
            }),
            Ok(())
        );
    }

    /// The host may see the cancel and answer before the waiter looks (the test above raced
    /// on it): the run was still stopped for the turn's cancel, and says so.
    #[test]
    fn a_cancelled_run_answered_before_the_wait_reads_as_cancelled() {
        let turn = CancelToken::new();
        let (sink, waiter, token) = channel(RunKind::Foreground, Some(&turn));
        turn.cancel("user-cancel");
        assert!(
            token.is_cancelled(),
            "the turn's cancel reaches the run's token"
        );
        assert_eq!(
            sink.answer(RunAnswer::Finished {
                returncode: -9,
                timed_out: false,
                cancelled: false,
            }),
            Ok(())
        );
        let r = waiter
            .wait(&request(&|_| {}, &turn, Duration::from_secs(60)))
            .unwrap();
        assert!(r.cancelled && !r.timed_out && r.returncode == -9);
    }

    #[test]
    fn turn_cancel_reaches_the_token_and_wins() {
        let turn = CancelToken::new();
        let (sink, waiter, token) = channel(RunKind::Foreground, Some(&turn));
        let host = std::thread::spawn(move || {
            while !token.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            sink.answer(RunAnswer::Finished {
                returncode: -9,
                timed_out: false,
                cancelled: false,
            })
        });
        turn.cancel("user-cancel");
        let r = waiter
            .wait(&request(&|_| {}, &turn, Duration::from_secs(60)))
            .unwrap();
        assert_eq!(host.join().unwrap(), Ok(()));
        assert!(r.cancelled && r.returncode == -9);
    }
}
