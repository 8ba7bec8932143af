//! A stdio server's stdin, written by rmcp and by the tasks that make tool calls.
//!
//! rmcp writes through [`RmcpStdin`] (its `AsyncWrite`) as it always did; a calling task writes
//! a whole request line with [`SharedStdin::try_write_line`] (`direct_call.rs`). The two never
//! interleave inside a line: a line is written directly only while rmcp's last write ended at a
//! line end and rmcp is not waiting for the pipe, and what the pipe did not take of it (the
//! pipe was nearly full) is written before any more of rmcp's bytes.
//!
//! The pipe has one slot for the task waiting to write to it, so two waiters would lose a
//! wake-up. A direct write never waits: it is tried with a no-op waker, only when rmcp is not
//! waiting, and when the pipe takes nothing it is not made (the call goes through rmcp). The
//! rest of a line the pipe took only part of is written by a task of its own
//! ([`SharedStdin::write_tail`]); whoever empties that rest wakes whoever waited for it.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::process::ChildStdin;

/// What became of a line offered by [`SharedStdin::try_write_line`].
#[derive(Debug)]
pub(crate) enum LineWrite {
    /// The pipe took all of it.
    Written,
    /// The pipe took part of it; the rest must be written by [`SharedStdin::write_tail`]
    /// before anything else is.
    Partly,
    /// Nothing was written: rmcp is mid-line or waiting for the pipe, or the pipe is full.
    Busy,
}

struct State {
    /// `None` once rmcp closed its writer (the server's stdin is closed).
    pipe: Option<ChildStdin>,
    /// rmcp's last write ended inside a line.
    rmcp_mid_line: bool,
    /// rmcp's last write found the pipe full: its waker is the pipe's.
    rmcp_waiting: bool,
    /// The part of a direct line the pipe has not taken yet.
    tail: Vec<u8>,
    /// Tasks waiting for `tail` to be written (rmcp's, the tail writer's).
    tail_waiters: Vec<Waker>,
}

/// The pipe, or the error of writing to a closed one.
fn open(pipe: &mut Option<ChildStdin>) -> io::Result<Pin<&mut ChildStdin>> {
    match pipe.as_mut() {
        Some(p) => Ok(Pin::new(p)),
        None => Err(io::Error::new(
            io::ErrorKind::BrokenPipe,
            "the server's stdin is closed",
        )),
    }
}

impl State {
    fn pipe(&mut self) -> io::Result<Pin<&mut ChildStdin>> {
        open(&mut self.pipe)
    }

    /// Writes what it can of `tail`; ready once it is empty (waking its waiters).
    fn poll_tail(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.tail.is_empty() {
            let n = match open(&mut self.pipe)?.poll_write(cx, &self.tail) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    if !self.tail_waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        self.tail_waiters.push(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            };
            self.tail.drain(..n);
        }
        // Whoever waited may have lost the pipe's wake-up to this task.
        for w in self.tail_waiters.drain(..) {
            w.wake();
        }
        Poll::Ready(Ok(()))
    }
}

/// The server's stdin (see the module doc).
#[derive(Clone)]
pub(crate) struct SharedStdin(Arc<Mutex<State>>);

impl SharedStdin {
    /// The shared stdin, and the writer rmcp is given (dropping it closes the pipe).
    pub(crate) fn new(pipe: ChildStdin) -> (SharedStdin, RmcpStdin) {
        let shared = SharedStdin(Arc::new(Mutex::new(State {
            pipe: Some(pipe),
            rmcp_mid_line: false,
            rmcp_waiting: false,
            tail: Vec::new(),
            tail_waiters: Vec::new(),
        })));
        (shared.clone(), RmcpStdin(shared))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `line` (a whole message and its newline) now, without waiting, if it can be
    /// written between two of rmcp's messages.
    pub(crate) fn try_write_line(&self, line: &[u8]) -> io::Result<LineWrite> {
        let mut state = self.lock();
        if state.rmcp_mid_line || state.rmcp_waiting || !state.tail.is_empty() {
            return Ok(LineWrite::Busy);
        }
        // Nobody else waits for the pipe (rmcp is not waiting and there is no tail), so a
        // no-op waker left in its slot costs no one a wake-up.
        let mut cx = Context::from_waker(Waker::noop());
        let mut done = 0;
        while done < line.len() {
            match state.pipe()?.poll_write(&mut cx, &line[done..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => done += n,
                Poll::Ready(Err(e)) if done == 0 => return Err(e),
                Poll::Ready(Err(e)) => {
                    // Half a line is on the pipe: nothing more can be written after it.
                    state.pipe = None;
                    return Err(e);
                }
                Poll::Pending if done == 0 => return Ok(LineWrite::Busy),
                Poll::Pending => {
                    state.tail.extend_from_slice(&line[done..]);
                    return Ok(LineWrite::Partly);
                }
            }
        }
        Ok(LineWrite::Written)
    }

    /// Writes the rest of a line [`try_write_line`](Self::try_write_line) wrote `Partly`.
    pub(crate) async fn write_tail(self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.lock().poll_tail(cx)).await
    }
}

/// rmcp's writer: the shared stdin, tracking where rmcp's lines end.
pub(crate) struct RmcpStdin(SharedStdin);

impl AsyncWrite for RmcpStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.0.lock();
        std::task::ready!(state.poll_tail(cx))?;
        match state.pipe()?.poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                state.rmcp_waiting = false;
                if n > 0 {
                    state.rmcp_mid_line = buf[n - 1] != b'\n';
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => {
                state.rmcp_waiting = false;
                Poll::Ready(Err(e))
            }
            Poll::Pending => {
                state.rmcp_waiting = true;
                Poll::Pending
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut state = self.0.lock();
        std::task::ready!(state.poll_tail(cx))?;
        state.pipe()?.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut state = self.0.lock();
        std::task::ready!(state.poll_tail(cx))?;
        state.pipe()?.poll_shutdown(cx)
    }
}

impl Drop for RmcpStdin {
    /// rmcp drops its writer to close the connection: the server reads the end of its input.
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.pipe = None;
        state.tail.clear();
        for w in state.tail_waiters.drain(..) {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A line `<who><n>:` and filler, `len` bytes and its newline.
    fn line(who: char, n: usize, len: usize) -> Vec<u8> {
        let mut l = format!("{who}{n}:").into_bytes();
        l.resize(len, b'a' + (n % 26) as u8);
        l.push(b'\n');
        l
    }

    /// rmcp writing its lines in two halves (a yield between) and a caller writing whole lines
    /// directly, both as fast as they can, through `cat`, whose output is read slowly enough
    /// that the pipe fills: every line comes out whole, each writer's in its order, and some
    /// direct lines were written partly, some refused (`Busy`).
    #[test]
    fn rmcp_and_direct_lines_never_interleave_when_the_pipe_fills() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        const LINES: usize = 300;
        let sizes = |n: usize| 100 + (n * 7919) % 20_000;
        let (partly, busy) = rt.block_on(async {
            let mut child = tokio::process::Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let (shared, mut rmcp) = SharedStdin::new(child.stdin.take().unwrap());
            let stdout = child.stdout.take().unwrap();
            let reader = tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                let mut got = Vec::new();
                while let Ok(Some(l)) = lines.next_line().await {
                    if got.len() % 16 == 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    }
                    got.push(l);
                }
                got
            });
            let rmcp_writer = tokio::spawn(async move {
                for n in 0..LINES {
                    let l = line('r', n, sizes(n));
                    let (a, b) = l.split_at(l.len() / 2);
                    rmcp.write_all(a).await.unwrap();
                    tokio::task::yield_now().await;
                    rmcp.write_all(b).await.unwrap();
                }
                rmcp.flush().await.unwrap();
                rmcp
            });
            let direct = shared.clone();
            let direct_writer = tokio::spawn(async move {
                let (mut partly, mut busy) = (0, 0);
                for n in 0..LINES {
                    let l = line('d', n, sizes(n + 1));
                    loop {
                        match direct.try_write_line(&l).unwrap() {
                            LineWrite::Written => break,
                            LineWrite::Partly => {
                                partly += 1;
                                tokio::spawn(direct.clone().write_tail());
                                break;
                            }
                            LineWrite::Busy => {
                                busy += 1;
                                tokio::task::yield_now().await;
                            }
                        }
                    }
                }
                (partly, busy)
            });
            let counts = direct_writer.await.unwrap();
            let rmcp = rmcp_writer.await.unwrap();
            // The last direct tail is written before the pipe is closed (rmcp's flush waits).
            let mut rmcp = rmcp;
            rmcp.flush().await.unwrap();
            drop(rmcp);
            let got = reader.await.unwrap();
            let (mut r, mut d) = (0, 0);
            for l in &got {
                let (who, n) = match l.as_bytes()[0] {
                    b'r' => ('r', &mut r),
                    b'd' => ('d', &mut d),
                    _ => panic!("a garbled line: {:.60}", l),
                };
                let size = if who == 'r' { sizes(*n) } else { sizes(*n + 1) };
                let want = line(who, *n, size);
                assert_eq!(l.as_bytes(), &want[..want.len() - 1], "{who}{n}");
                *n += 1;
            }
            assert_eq!((r, d), (LINES, LINES));
            counts
        });
        println!("direct lines written partly: {partly}; refused while busy: {busy}");
        assert!(partly + busy > 0, "the pipe never filled");
    }
}
