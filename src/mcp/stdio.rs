//! A stdio server's transport: rmcp's line transport over the child's pipes, with the child's
//! stdout read through [`LimitedReader`].
//!
//! rmcp's own child transport (`TokioChildProcess`) drops a line over its 16 MiB bound, logs
//! it and reads on: when that line was an answer, its call waits forever (the request timeout
//! is unbounded by default). Its bound cannot be set and its stdout cannot be wrapped, so the
//! child is spawned here, and an oversized line ends the connection instead.
//!
//! Under rmcp's line reading sits [`AnswerReader`]: tool call answers of the common shape are
//! decoded there with one typed pass (`fast_answer.rs`) and handed to rmcp's service by
//! `receive` directly; rmcp reads every other line as before. The child's stdin is shared
//! (`shared_stdin.rs`) with the calls written by their own task (`direct_call.rs`), whose answers
//! `receive` hands to them instead of to rmcp.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use super::direct_call::DirectCalls;
use super::fast_answer::{AnswerReader, DecodedAnswer};
use super::limits::{Breach, Tripwire, MAX_MESSAGE_BYTES};
use super::shared_stdin::{RmcpStdin, SharedStdin};

/// How long a server whose stdin was closed has to exit before it is killed (the MCP stdio
/// shutdown; rmcp's child transport waits as long before its SIGTERM).
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A server's stdout that fails, as an I/O error (which ends rmcp's read loop and so the
/// connection), at the first line longer than `limit` bytes, and trips the connection's
/// tripwire with the reason. What came before the excess is still delivered, so rmcp holds at
/// most `limit` bytes of the line.
pub(crate) struct LimitedReader<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line so far (at most `limit`).
    line: usize,
    tripwire: Tripwire,
    over: bool,
}

impl<R> LimitedReader<R> {
    pub(crate) fn new(inner: R, limit: usize, tripwire: Tripwire) -> Self {
        LimitedReader {
            inner,
            limit,
            line: 0,
            tripwire,
            over: false,
        }
    }

    /// Advances the line count over `bytes`; the offset of the first byte past the limit.
    fn scan(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut at = 0;
        loop {
            let rest = &bytes[at..];
            let (len, newline) = match rest.iter().position(|b| *b == b'\n') {
                Some(p) => (p, true),
                None => (rest.len(), false),
            };
            if self.line + len > self.limit {
                return Some(at + (self.limit - self.line));
            }
            if !newline {
                self.line += len;
                return None;
            }
            self.line = 0;
            at += len + 1;
        }
    }
}

fn oversized() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        Breach::OversizedMessage.to_string(),
    )
}

impl<R: AsyncRead + Unpin> AsyncRead for LimitedReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.over {
            return Poll::Ready(Err(oversized()));
        }
        let start = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let Some(excess) = this.scan(&buf.filled()[start..]) else {
            return Poll::Ready(Ok(()));
        };
        this.over = true;
        this.tripwire.trip(Breach::OversizedMessage);
        buf.set_filled(start + excess);
        if excess == 0 {
            // Nothing left to deliver, and an empty read would mean end of file.
            return Poll::Ready(Err(oversized()));
        }
        Poll::Ready(Ok(()))
    }
}

/// A spawned stdio server and the transport over its pipes.
pub(crate) struct StdioTransport {
    io: AsyncRwTransport<RoleClient, AnswerReader<LimitedReader<ChildStdout>>, RmcpStdin>,
    decoded: DecodedAnswer,
    direct: DirectCalls,
    child: Child,
}

impl StdioTransport {
    /// Spawns `cmd` with piped stdio; the child's stderr is returned for the caller to drain.
    pub(crate) fn spawn(
        mut cmd: tokio::process::Command,
        tripwire: Tripwire,
    ) -> io::Result<(StdioTransport, Option<ChildStderr>)> {
        let (mut child, stdin, stdout) = spawn_piped(&mut cmd)?;
        let stderr = child.stderr.take();
        let decoded = DecodedAnswer::default();
        let reader = AnswerReader::new(
            LimitedReader::new(stdout, MAX_MESSAGE_BYTES, tripwire),
            decoded.clone(),
        );
        // The reader fails a longer line first; rmcp's own bound counts the newline too.
        let (stdin, rmcp_stdin) = SharedStdin::new(stdin);
        let io = AsyncRwTransport::new_client(reader, rmcp_stdin)
            .with_max_line_length(MAX_MESSAGE_BYTES + 1);
        let direct = DirectCalls::new(stdin);
        Ok((
            StdioTransport {
                io,
                decoded,
                direct,
                child,
            },
            stderr,
        ))
    }

    /// The calls written to this server by their own task.
    pub(crate) fn direct_calls(&self) -> DirectCalls {
        self.direct.clone()
    }

    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Spawns `cmd` with its stdio piped.
fn spawn_piped(cmd: &mut tokio::process::Command) -> io::Result<(Child, ChildStdin, ChildStdout)> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other(
            "the server's stdin and stdout are not pipes",
        ));
    };
    Ok((child, stdin, stdout))
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // Calls still waiting learn that no answer will come.
        self.direct.close();
    }
}

impl StdioTransport {
    /// The next message for rmcp: a decoded answer first (the reader reads nothing past it
    /// until it is taken), then what rmcp's line reader gives.
    async fn next_message(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let decoded = &self.decoded;
        let mut rest = std::pin::pin!(self.io.receive());
        std::future::poll_fn(|cx| {
            if let Some(msg) = decoded.take() {
                return Poll::Ready(Some(msg));
            }
            match rest.as_mut().poll(cx) {
                Poll::Ready(msg) => Poll::Ready(msg),
                Poll::Pending => decoded
                    .take()
                    .map_or(Poll::Pending, |m| Poll::Ready(Some(m))),
            }
        })
        .await
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let Some(msg) = self.next_message().await else {
                self.direct.close();
                return None;
            };
            // An answer to a directly written call goes to it; rmcp never knew the call.
            if let Some(msg) = self.direct.deliver(msg) {
                return Some(msg);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.direct.close();
        self.io.close().await?;
        if tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Reads `input` through a reader limited to 4 bytes a line, in `chunk`-byte reads.
    fn read_limited(input: &[u8], chunk: usize) -> (Vec<u8>, Option<io::Error>, Tripwire) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let wire = Tripwire::default();
        let mut reader = LimitedReader::new(input, 4, wire.clone());
        let mut got = Vec::new();
        let err = rt.block_on(async {
            let mut buf = vec![0; chunk];
            loop {
                match reader.read(&mut buf).await {
                    Ok(0) => return None,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => return Some(e),
                }
            }
        });
        (got, err, wire)
    }

    #[test]
    fn lines_up_to_the_limit_pass_and_a_longer_one_fails_after_the_limit() {
        for chunk in [1, 3, 64] {
            let (got, err, wire) = read_limited(b"abcd\n\nab\nabcd", chunk);
            assert_eq!(got, b"abcd\n\nab\nabcd", "chunk {chunk}");
            assert!(err.is_none());
            assert_eq!(wire.tripped(), None);

            let (got, err, wire) = read_limited(b"ab\nabcde\nok\n", chunk);
            assert_eq!(got, b"ab\nabcd", "chunk {chunk}");
            let err = err.expect("an oversized line is an error");
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert_eq!(wire.tripped(), Some(Breach::OversizedMessage));
        }
    }
}
