//! The lean HTTP lane of the model request: plain `http://` endpoints with no proxy in the
//! environment, on one kept-alive hyper 1.x `http1` connection per backend, without reqwest's
//! layers (its request future, redirect and retry layers and URL re-parses were ~40k
//! instructions of a tool-loop iteration). Everything else goes to reqwest as before: `https://`,
//! a proxy variable, credentials in the URL. A redirect is the answer on either path: neither
//! follows it (the request carries credentials; `redirect_refused` in `openai/http.rs`).
//!
//! What reqwest did and the lane keeps: `TCP_NODELAY`, its TCP keep-alive, its 90 s idle
//! limit, the connect timeout, the same headers and `Host`, the same body bytes; a kept
//! connection the server closed is replaced silently; errors carry the same source chain.
//!
//! When a lane is dropped (its agent freed), its idle connection goes to a process-wide pool
//! ([`super::lane_pool`]) and the next lane to the same target takes it before connecting: a
//! host that makes an agent per task does not reconnect for every task. A connection whose
//! response end has not arrived yet (a stream read to `[DONE]`, the chunked terminator a
//! moment behind) settles on a task of its runtime first, for at most [`SETTLE_LIMIT`].

use std::error::Error as StdError;
use std::fmt;
use std::future::{poll_fn, Future};
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::header::{HeaderMap, HeaderValue, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use socket2::{SockRef, TcpKeepalive};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::lane_pool::{IdlePool, OVERALL, PER_ENDPOINT};
use super::request_body::{Frames, RequestBody};

/// The proxy variables reqwest reads for an `http://` URL. The lane is used only when none is
/// set at all (reqwest's reading of `NO_PROXY` then does not matter).
const PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/// reqwest's pool drops a connection idle this long; so does the lane.
const IDLE_LIMIT: Duration = Duration::from_secs(90);

/// How long a dropped lane's connection may take to receive the end of its last response
/// before it goes to the pool. Servers write the chunked terminator right after `[DONE]`, often
/// in a write of its own: it is a round trip behind at most, so a second covers any sound
/// server on a loaded machine, and bounds what a server that never ends its body costs (one
/// task and one socket, for this long).
const SETTLE_LIMIT: Duration = Duration::from_secs(1);

/// reqwest's TCP keep-alive (time, interval, probes).
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;

/// The idle connections of dropped lanes, as plain sockets: a socket of hyper's connection is
/// registered with the runtime that drove it, which may be gone or idle when another lane
/// takes it; a plain socket is adopted by whichever runtime takes it.
static POOL: Mutex<IdlePool<Target, std::net::TcpStream>> =
    Mutex::new(IdlePool::new(PER_ENDPOINT, OVERALL, IDLE_LIMIT));

fn pool() -> MutexGuard<'static, IdlePool<Target, std::net::TcpStream>> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// One connection, driven by whoever uses it: the request's future while it is sent and
/// answered, the response's reads, the next request's readiness check. No task of its own, so
/// no thread hand-off per request, and nothing but its owner keeps the socket open.
struct Conn {
    sender: SendRequest<Frames>,
    /// `None` once it ended (closed or failed: its error reached the request or the body).
    driver: Option<Connection<TokioIo<TcpStream>, Frames>>,
    /// The body of the last response when it was dropped before its end and its length is not
    /// known (chunked): hyper closes a connection whose dropped body it cannot drain at once,
    /// so a lane that is dropped keeps it to wait for the end ([`Conn::settle`]).
    unfinished: Option<Incoming>,
    /// The runtime the socket is registered with, which settles the connection when its lane
    /// is dropped on a thread of no runtime (a host's).
    runtime: tokio::runtime::Handle,
}

impl Conn {
    /// Lets the connection read and write what it can.
    fn poll_driver(&mut self, cx: &mut Context<'_>) {
        if let Some(d) = &mut self.driver {
            if Pin::new(d).poll(cx).is_ready() {
                self.driver = None;
            }
        }
    }

    /// Awaits `f` while driving the connection.
    async fn drive<F: Future>(&mut self, f: F) -> F::Output {
        let mut f = pin!(f);
        poll_fn(|cx| self.poll_with(cx, |cx| f.as_mut().poll(cx))).await
    }

    /// Polls `f`, and when it waits, drives the connection and polls `f` again: what the
    /// connection just did (a response parsed, body data handed over) is taken in this poll
    /// rather than at the turn's next wake-up.
    fn poll_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        if let Poll::Ready(v) = f(cx) {
            return Poll::Ready(v);
        }
        self.poll_driver(cx);
        f(cx)
    }

    /// Whether the connection can take a request (an idle one the server closed cannot).
    async fn ready(&mut self) -> bool {
        // Only a dropped lane waits for a body's end; the lane's own next request lets hyper
        // drain what came of it or close the connection, as it always did.
        self.unfinished = None;
        poll_fn(|cx| {
            self.poll_driver(cx);
            self.sender.poll_ready(cx)
        })
        .await
        .is_ok()
    }

    /// The connection once its last response ended and it can take another request; `None`
    /// (and the connection closed) when more data of the response comes (it was dropped
    /// mid-response), or it closed or failed.
    async fn settle(mut self: Box<Self>) -> Option<Box<Self>> {
        if let Some(mut body) = self.unfinished.take() {
            loop {
                let frame = self
                    .drive(poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)))
                    .await;
                match frame {
                    None => break,
                    // Trailers, or an empty chunk.
                    Some(Ok(f)) if f.data_ref().is_none_or(|d| d.is_empty()) => {}
                    // Data nobody reads: the server is still answering; closing tells it.
                    Some(_) => return None,
                }
            }
        }
        if self.ready().await {
            Some(self)
        } else {
            None
        }
    }

    /// The socket of a settled connection, for another lane; `None` (and the connection
    /// closed) when it holds bytes nobody asked for.
    fn into_idle_socket(mut self: Box<Self>) -> Option<std::net::TcpStream> {
        let parts = self.driver.take()?.into_parts();
        if !parts.read_buf.is_empty() {
            return None;
        }
        parts.io.into_inner().into_std().ok()
    }
}

/// Whether a pooled socket is still open with nothing to read: not closed by the server
/// while it was pooled, and no stray bytes (some servers write a `408` before they close).
fn open_and_quiet(socket: &std::net::TcpStream) -> bool {
    // The socket is non-blocking, as tokio left it.
    matches!(socket.peek(&mut [0]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A new hyper connection over `stream`.
async fn handshake(stream: TcpStream) -> Result<Box<Conn>, hyper::Error> {
    let (sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    Ok(Box::new(Conn {
        sender,
        driver: Some(driver),
        unfinished: None,
        runtime: tokio::runtime::Handle::current(),
    }))
}

/// A lane's kept connection, shared with its response in flight: whichever of the two is
/// dropped last (an agent freed while its turn's task still drops the response is common) gives
/// the connection to the pool.
struct IdleSlot {
    target: Target,
    /// The connection, with when it was last given back. Boxed: an agent without a
    /// connection holds only the empty slot (an unboxed one made every idle agent ~0.9 KiB
    /// larger).
    kept: Mutex<Option<(Box<Conn>, Instant)>>,
}

impl IdleSlot {
    fn take(&self) -> Option<(Box<Conn>, Instant)> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn give_back(&self, conn: Box<Conn>) {
        *self.kept.lock().unwrap_or_else(|e| e.into_inner()) = Some((conn, Instant::now()));
    }
}

/// Where the lane connects: an address, or a name resolved at each connect (as reqwest does).
/// Two lanes with equal targets can use each other's connections (the scheme is always
/// `http`; the API key and the path travel with each request, not with the connection).
#[derive(Clone, PartialEq, Eq)]
enum Target {
    Addr(SocketAddr),
    Name(String, u16),
}

/// The lane of one backend: its endpoint, prepared once, and its kept connection.
pub(crate) struct Lane {
    /// Origin-form path and query.
    path: Uri,
    /// Every request's headers, `Host` first (`host[:port]`, the port only when it is not 80,
    /// as reqwest writes it): a request copies them, where building them hashed each name.
    headers: HeaderMap,
    connect_timeout: Duration,
    idle: Arc<IdleSlot>,
}

impl Lane {
    /// The lane for `url`, or `None` when the request must go through reqwest.
    pub(crate) fn for_url(
        url: &url::Url,
        connect_timeout: Duration,
        headers: &HeaderMap,
    ) -> Option<Lane> {
        let proxied = PROXY_VARIABLES
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if proxied
            || url.scheme() != "http"
            || !url.username().is_empty()
            || url.password().is_some()
            || url.fragment().is_some()
        {
            return None;
        }
        let port = url.port_or_known_default()?;
        let target = match url.host()? {
            url::Host::Ipv4(a) => Target::Addr(SocketAddr::new(IpAddr::V4(a), port)),
            url::Host::Ipv6(a) => Target::Addr(SocketAddr::new(IpAddr::V6(a), port)),
            url::Host::Domain(d) => Target::Name(d.to_owned(), port),
        };
        let host = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str()?),
            None => url.host_str()?.to_owned(),
        };
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let mut all = HeaderMap::with_capacity(headers.len() + 1);
        all.insert(HOST, HeaderValue::try_from(host).ok()?);
        for (k, v) in headers {
            all.append(k, v.clone());
        }
        Some(Lane {
            path: Uri::try_from(path).ok()?,
            headers: all,
            connect_timeout,
            idle: Arc::new(IdleSlot {
                target,
                kept: Mutex::default(),
            }),
        })
    }

    /// Sends `body` with the lane's headers as a POST, on the kept connection when it is
    /// still open, else on a pooled one, else on a new one.
    pub(crate) async fn post(&self, body: RequestBody) -> Result<LaneResponse, LaneError> {
        let kept = self
            .idle
            .take()
            .filter(|(_, since)| since.elapsed() < IDLE_LIMIT);
        if let Some((conn, _)) = kept {
            if let Some(r) = self.send_on_idle(conn, &body).await {
                return r;
            }
        }
        if let Some(conn) = self.pooled().await {
            if let Some(r) = self.send_on_idle(conn, &body).await {
                return r;
            }
        }
        let mut conn = self.connect().await?;
        let sent = conn.sender.send_request(self.request(body));
        let resp = conn.drive(sent).await.map_err(LaneError::Http)?;
        Ok(self.response(resp, conn))
    }

    /// Sends on a connection that was idle; `None` when it turned out closed before the
    /// request went out.
    async fn send_on_idle(
        &self,
        mut conn: Box<Conn>,
        body: &RequestBody,
    ) -> Option<Result<LaneResponse, LaneError>> {
        // A connection the server closed while it was idle fails here or gives the request
        // back unsent: either way it goes to another connection, not to a retry.
        if !conn.ready().await {
            return None;
        }
        let sent = conn.sender.try_send_request(self.request(body.clone()));
        match conn.drive(sent).await {
            Ok(resp) => Some(Ok(self.response(resp, conn))),
            Err(e) if e.message().is_none() => Some(Err(LaneError::Http(e.into_error()))),
            Err(_) => None,
        }
    }

    /// An idle connection a dropped lane left to this target, adopted by this runtime.
    async fn pooled(&self) -> Option<Box<Conn>> {
        let socket = loop {
            // The lock is released at the end of the statement, before anything is closed.
            let (found, gone) = pool().take(&self.idle.target, std::time::Instant::now());
            drop(gone);
            let socket = found?;
            if open_and_quiet(&socket) {
                break socket;
            }
        };
        handshake(TcpStream::from_std(socket).ok()?).await.ok()
    }

    fn request(&self, body: RequestBody) -> Request<Frames> {
        let mut req = Request::new(body.into_frames());
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.path.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    fn response(&self, resp: hyper::Response<Incoming>, conn: Box<Conn>) -> LaneResponse {
        let (head, body) = resp.into_parts();
        LaneResponse {
            head,
            body: Some(body),
            conn: Some(conn),
            slot: self.idle.clone(),
        }
    }

    async fn connect(&self) -> Result<Box<Conn>, LaneError> {
        let connecting = async {
            match &self.idle.target {
                Target::Addr(a) => TcpStream::connect(a).await,
                Target::Name(n, p) => TcpStream::connect((n.as_str(), *p)).await,
            }
        };
        let stream = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Err(_) => return Err(LaneError::ConnectTimeout),
            Ok(r) => r.map_err(LaneError::Connect)?,
        };
        stream.set_nodelay(true).map_err(LaneError::Connect)?;
        let keepalive = TcpKeepalive::new()
            .with_time(KEEPALIVE)
            .with_interval(KEEPALIVE)
            .with_retries(KEEPALIVE_RETRIES);
        SockRef::from(&stream)
            .set_tcp_keepalive(&keepalive)
            .map_err(LaneError::Connect)?;
        handshake(stream).await.map_err(LaneError::Http)
    }
}

impl Drop for IdleSlot {
    /// The idle connection goes to the pool for the next lane to the same target: at once when
    /// its last response has ended (one poll lets hyper take an end that already arrived),
    /// else from a task of its runtime when the end comes within [`SETTLE_LIMIT`]. Never
    /// waits: the task owns the connection, and closes it when the limit passes; a runtime
    /// that is shut down drops the task, and the connection with it.
    fn drop(&mut self) {
        let kept = self
            .kept
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some((conn, since)) = kept else { return };
        let (target, since) = (self.target.clone(), since.into_std());
        let runtime = conn.runtime.clone();
        let mut settling = Box::pin(conn.settle());
        match settling
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(settled) => pool_idle(target, settled, since),
            Poll::Pending => {
                runtime.spawn(async move {
                    let settled = tokio::time::timeout(SETTLE_LIMIT, settling).await;
                    pool_idle(target, settled.ok().flatten(), since);
                });
            }
        }
    }
}

/// Gives a settled connection's socket to the pool; a connection that did not settle, or
/// could not leave hyper quiet, is closed.
fn pool_idle(target: Target, settled: Option<Box<Conn>>, since: std::time::Instant) {
    let Some(socket) = settled.and_then(Conn::into_idle_socket) else {
        return;
    };
    let gone = pool().put(target, socket, since, std::time::Instant::now());
    drop(gone);
}

/// A response of the lane. Its connection goes back to the backend's slot when it is dropped,
/// read to its end or not: the next request's readiness check lets hyper read what is left of
/// an unread body (or close the connection when it cannot).
pub(crate) struct LaneResponse {
    head: hyper::http::response::Parts,
    /// Taken only by the drop, which may leave it to the connection.
    body: Option<Incoming>,
    conn: Option<Box<Conn>>,
    slot: Arc<IdleSlot>,
}

impl Drop for LaneResponse {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            // A body with a length left is mid-response: hyper closes its connection, as
            // before. One of unknown length (chunked) may lack only its terminator.
            conn.unfinished = self
                .body
                .take()
                .filter(|b| !b.is_end_stream() && b.size_hint().exact().is_none());
            self.slot.give_back(conn);
        }
    }
}

impl LaneResponse {
    pub(crate) fn status(&self) -> hyper::StatusCode {
        self.head.status
    }

    /// The next data of the body; `None` at its end.
    async fn chunk(&mut self) -> Result<Option<Bytes>, hyper::Error> {
        let (Some(body), conn) = (&mut self.body, &mut self.conn) else {
            return Ok(None);
        };
        loop {
            let frame = poll_fn(|cx| match conn.as_mut() {
                Some(c) => c.poll_with(cx, |cx| Pin::new(&mut *body).poll_frame(cx)),
                None => Pin::new(&mut *body).poll_frame(cx),
            })
            .await;
            match frame {
                None => return Ok(None),
                Some(frame) => {
                    if let Ok(data) = frame?.into_data() {
                        if !data.is_empty() {
                            return Ok(Some(data));
                        }
                    }
                }
            }
        }
    }
}

/// A failure of the lane. Never transparent: [`super::openai`]'s message walks from its
/// source to the deepest one, which must be hyper's or the socket's error itself (hyper's
/// "connection closed before message completed" has no source below it).
#[derive(Debug)]
pub(crate) enum LaneError {
    ConnectTimeout,
    Connect(std::io::Error),
    Http(hyper::Error),
}

impl fmt::Display for LaneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaneError::ConnectTimeout => f.write_str("connect timed out"),
            LaneError::Connect(_) => f.write_str("connect failed"),
            LaneError::Http(_) => f.write_str("request failed"),
        }
    }
}

impl StdError for LaneError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            LaneError::ConnectTimeout => None,
            LaneError::Connect(e) => Some(e),
            LaneError::Http(e) => Some(e),
        }
    }
}

/// The response of a model request, from the lane or from reqwest.
pub(crate) enum Response {
    Lane(LaneResponse),
    Reqwest(reqwest::Response),
}

impl Response {
    pub(crate) fn status(&self) -> hyper::StatusCode {
        match self {
            Response::Lane(r) => r.status(),
            Response::Reqwest(r) => r.status(),
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&HeaderValue> {
        match self {
            Response::Lane(r) => r.head.headers.get(name),
            Response::Reqwest(r) => r.headers().get(name),
        }
    }

    /// The next data of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        match self {
            Response::Lane(r) => r
                .chunk()
                .await
                .map_err(|e| BodyError::Lane(LaneError::Http(e))),
            Response::Reqwest(r) => r.chunk().await.map_err(BodyError::Reqwest),
        }
    }
}

/// A failure reading a body. Its sources are those of the error it holds, so the message
/// built from the deepest one reads as it did with reqwest alone.
#[derive(Debug)]
pub(crate) enum BodyError {
    Lane(LaneError),
    Reqwest(reqwest::Error),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Lane(e) => e.fmt(f),
            BodyError::Reqwest(e) => e.fmt(f),
        }
    }
}

impl StdError for BodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BodyError::Lane(e) => e.source(),
            BodyError::Reqwest(e) => e.source(),
        }
    }
}

#[cfg(test)]
mod tests;
