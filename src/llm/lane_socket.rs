//! The lane's TCP socket: connected and written without waiting for the runtime's I/O driver
//! when the socket is already able.
//!
//! tokio learns that a socket is connected or writable only from its I/O driver, which sits in
//! `epoll_wait` on another worker: a fresh connection's connect and its first write each waited
//! for that worker to wake the turn's (a thread hand-off). On loopback the handshake is done
//! before `connect` returns, so a fresh agent's first turn paid the hand-off for nothing. Here
//! the connect is checked at once (`getpeername`), and a write is tried on the socket before
//! asking tokio whether it may write; only a write that would block waits for the driver.
//! The socket options (`TCP_NODELAY`, reqwest's keep-alive) are set before the connect, as
//! reqwest and the lane set them after it: the connection carries the same ones.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use tokio::net::TcpStream;

/// reqwest's TCP keep-alive (time, interval, probes).
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;

/// Connects to the first address of `addrs` that accepts, as `TcpStream::connect` does: the
/// last address's error when none does.
pub(super) async fn connect_any(
    addrs: impl IntoIterator<Item = SocketAddr>,
) -> io::Result<TcpStream> {
    let mut last = None;
    for addr in addrs {
        match connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}

/// A connection to `addr` with the lane's socket options; it waits for the runtime only when
/// the handshake is still under way.
pub(super) async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )?;
    socket.set_tcp_nodelay(true)?;
    socket.set_tcp_keepalive(
        &TcpKeepalive::new()
            .with_time(KEEPALIVE)
            .with_interval(KEEPALIVE)
            .with_retries(KEEPALIVE_RETRIES),
    )?;
    let done = match socket.connect(&addr.into()) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
        Err(e) => return Err(e),
    };
    let done = done || socket.peer_addr().is_ok();
    let stream = TcpStream::from_std(socket.into())?;
    if !done {
        // What tokio's own connect does: writable once the handshake ended, then its outcome.
        stream.writable().await?;
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
    }
    Ok(stream)
}

/// The connection's I/O: reads through tokio; writes tried on the socket first.
pub(super) struct LaneIo(TokioIo<TcpStream>);

impl LaneIo {
    pub(super) fn new(stream: TcpStream) -> LaneIo {
        LaneIo(TokioIo::new(stream))
    }

    /// A write on the socket itself (with the flags of the call tokio would make: `send` with
    /// `MSG_NOSIGNAL` as std writes one buffer, `sendmsg` without as `writev` has none);
    /// `None` when it would block, and tokio then waits for it.
    fn try_direct(&self, bufs: &[IoSlice<'_>]) -> Option<io::Result<usize>> {
        let socket = SockRef::from(self.0.inner());
        let sent = match bufs {
            [one] => socket.send_with_flags(one, libc::MSG_NOSIGNAL),
            _ => socket.send_vectored(bufs),
        };
        match sent {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                None
            }
            r => Some(r),
        }
    }
}

impl hyper::rt::Read for LaneIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for LaneIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.try_direct(&[IoSlice::new(buf)]) {
            Some(r) => Poll::Ready(r),
            None => Pin::new(&mut self.0).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.try_direct(bufs) {
            Some(r) => Poll::Ready(r),
            None => Pin::new(&mut self.0).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::io::Read;
    use std::net::TcpListener;

    /// What the lane's connection carried when tokio connected it and the lane set the options.
    #[tokio::test]
    async fn the_connection_has_reqwests_options() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = connect(listener.local_addr().unwrap()).await.unwrap();
        let s = SockRef::from(&stream);
        assert!(s.tcp_nodelay().unwrap());
        assert!(s.keepalive().unwrap());
        assert_eq!(s.tcp_keepalive_time().unwrap(), KEEPALIVE);
        assert_eq!(s.tcp_keepalive_interval().unwrap(), KEEPALIVE);
        assert_eq!(s.tcp_keepalive_retries().unwrap(), KEEPALIVE_RETRIES);
        assert_eq!(stream.peer_addr().unwrap(), listener.local_addr().unwrap());
    }

    #[tokio::test]
    async fn a_refused_connect_fails_as_tokios_does() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let ours = connect(addr).await.unwrap_err();
        let tokios = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(ours.kind(), tokios.kind());
        assert_eq!(ours.raw_os_error(), tokios.raw_os_error());
        assert_eq!(ours.to_string(), tokios.to_string());
    }

    #[tokio::test]
    async fn a_name_is_tried_address_by_address_as_tokio_does() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let refused = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let good = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = connect_any([refused, good]).await.unwrap();
        assert_eq!(stream.peer_addr().unwrap(), good);
        let last = connect_any([good, refused]).await.unwrap();
        assert_eq!(last.peer_addr().unwrap(), good);
        let none = connect_any([]).await.unwrap_err();
        let tokios = TcpStream::connect(&[][..] as &[SocketAddr])
            .await
            .unwrap_err();
        assert_eq!(none.kind(), tokios.kind());
        assert_eq!(none.to_string(), tokios.to_string());
    }

    /// Writes far beyond the socket's buffer, while the reader is slow: the direct writes
    /// that would block go to tokio, and every byte arrives once, in order.
    #[tokio::test]
    async fn writes_beyond_the_socket_buffer_arrive_whole() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                std::thread::sleep(Duration::from_micros(50));
                match s.read(&mut buf).unwrap() {
                    0 => return got,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        let data: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
        let mut io = LaneIo::new(connect(addr).await.unwrap());
        let mut at = 0;
        while at < data.len() {
            let (a, b) = data[at..].split_at((data.len() - at) / 2);
            let slices = [IoSlice::new(a), IoSlice::new(b)];
            let single = at % 3 == 0;
            at += poll_fn(|cx| {
                let io = Pin::new(&mut io);
                if single {
                    hyper::rt::Write::poll_write(io, cx, a)
                } else {
                    hyper::rt::Write::poll_write_vectored(io, cx, &slices)
                }
            })
            .await
            .unwrap();
        }
        drop(io);
        assert!(reader.join().unwrap() == data);
    }
}
