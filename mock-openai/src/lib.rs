//! A loopback mock of the OpenAI chat-completions streaming wire.
//!
//! [`MockServer`] binds `127.0.0.1:0` and serves `POST /v1/chat/completions` from an agentao
//! script (the vocabulary of `shared/conformance/transcripts`, parsed by
//! [`agentao::llm::script::Script::from_value`]): each request consumes the next scripted response
//! and gets it as a real `text/event-stream`, one `data:` chunk per [`ScriptEvent`], then
//! `data: [DONE]`. The script's faults become real wire faults: an HTTP error status with an
//! OpenAI error body, a TCP close in the middle of a chunked body, a raw malformed line, silence,
//! or an error object inside the 200 stream.
//!
//! The server runs on its own thread with its own tokio runtime, so sync tests, async tests and
//! other processes (through the `mock-openai` binary) can all use it. Dropping it stops it.
//!
//! Wire options (the script's top-level `"wire"` key, or [`MockBuilder::wire`]) reproduce the
//! framing quirks of real servers: CRLF line ends, `: keep-alive` comments, no `[DONE]`,
//! `data:` without a space, and a usage chunk whose `choices` is `null` or absent.
//!
//! For benchmarks, [`MockServer::start_prerendered`] answers every request with the same bytes
//! and [`MockServer::server_busy_nanos`] tells how long the server worked, so it can be subtracted.
//! The same figures are served as `GET /v1/_stats` (`{"busy_nanos": N, "requests": N}`) for
//! clients in another process (the `mock-openai` binary run by `bench/`).

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentao::llm::script::{Fault, Script, ScriptArgs, ScriptEvent, ScriptResponse};
use bytes::{Buf, Bytes, BytesMut};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Requests larger than this (head or body) are refused.
const MAX_REQUEST: usize = 64 * 1024 * 1024;
const MAX_HEAD: usize = 64 * 1024;

/// How the `choices` key of the trailing usage chunk is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageChoices {
    /// `"choices": []` (OpenAI).
    #[default]
    Empty,
    /// `"choices": null` (some vLLM versions).
    Null,
    /// No `choices` key at all.
    Absent,
}

/// Framing options of the rendered stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireOptions {
    /// End lines with CRLF instead of LF.
    pub crlf: bool,
    /// Send a `: keep-alive` comment before every event, and every `keepalive_interval_ms`
    /// during a stall.
    pub keepalive_comments: bool,
    pub keepalive_interval_ms: u64,
    /// Do not send `data: [DONE]`.
    pub omit_done: bool,
    /// Write `data:` without the space.
    pub no_space: bool,
    /// A `stall` fault happens before the response head instead of after it.
    pub stall_before_headers: bool,
    pub usage_choices: UsageChoices,
}

impl Default for WireOptions {
    fn default() -> Self {
        WireOptions {
            crlf: false,
            keepalive_comments: false,
            keepalive_interval_ms: 50,
            omit_done: false,
            no_space: false,
            stall_before_headers: false,
            usage_choices: UsageChoices::Empty,
        }
    }
}

impl WireOptions {
    /// Reads `{"crlf": bool, "keepalive_comments": bool, "keepalive_interval_ms": n,
    /// "omit_done": bool, "no_space": bool, "stall_before_headers": bool,
    /// "usage_choices": "empty"|"null"|"absent"}`.
    pub fn from_value(v: &Value) -> Result<WireOptions, String> {
        let o = v.as_object().ok_or("`wire` must be an object")?;
        let mut w = WireOptions::default();
        for (k, val) in o {
            let flag = || {
                val.as_bool()
                    .ok_or_else(|| format!("wire.{k} must be a boolean"))
            };
            match k.as_str() {
                "crlf" => w.crlf = flag()?,
                "keepalive_comments" => w.keepalive_comments = flag()?,
                "omit_done" => w.omit_done = flag()?,
                "no_space" => w.no_space = flag()?,
                "stall_before_headers" => w.stall_before_headers = flag()?,
                "keepalive_interval_ms" => {
                    w.keepalive_interval_ms = val
                        .as_u64()
                        .filter(|n| *n > 0)
                        .ok_or("wire.keepalive_interval_ms must be a positive integer")?
                }
                "usage_choices" => {
                    w.usage_choices = match val.as_str() {
                        Some("empty") => UsageChoices::Empty,
                        Some("null") => UsageChoices::Null,
                        Some("absent") => UsageChoices::Absent,
                        _ => return Err("wire.usage_choices must be empty, null or absent".into()),
                    }
                }
                other => return Err(format!("unknown wire option `{other}`")),
            }
        }
        Ok(w)
    }

    fn eol(&self) -> &'static [u8] {
        if self.crlf {
            b"\r\n"
        } else {
            b"\n"
        }
    }

    fn data_prefix(&self) -> &'static [u8] {
        if self.no_space {
            b"data:"
        } else {
            b"data: "
        }
    }
}

/// Splits a script document into its `wire` options and the part [`Script::from_value`] reads.
fn split_wire(script: Value) -> Result<(Value, Option<WireOptions>), String> {
    match script {
        Value::Object(mut o) => {
            let wire = match o.remove("wire") {
                Some(w) => Some(WireOptions::from_value(&w)?),
                None => None,
            };
            Ok((Value::Object(o), wire))
        }
        other => Ok((other, None)),
    }
}

/// Renders the first response of a script as the SSE body a server sends (no delays, no
/// faults): the input of [`MockServer::start_prerendered`]. The script's `wire` key applies.
pub fn render_sse(script: Value) -> Result<Bytes, String> {
    let (v, wire) = split_wire(script)?;
    let script = Script::from_value(v)?;
    Ok(render_one(&script, 0, wire.as_ref()))
}

/// Renders every listed response of a script (at least one) the way [`render_sse`] renders
/// the first: the input of [`MockBuilder::start_prerendered_many`].
pub fn render_sse_all(script: Value) -> Result<Vec<Bytes>, String> {
    let (v, wire) = split_wire(script)?;
    let script = Script::from_value(v)?;
    let n = script.responses.len().max(1);
    Ok((0..n)
        .map(|i| render_one(&script, i, wire.as_ref()))
        .collect())
}

fn render_one(script: &Script, n: usize, wire: Option<&WireOptions>) -> Bytes {
    let resp = script.response(n);
    let model = script.model.as_deref().unwrap_or("mock-model");
    let ctx = Ctx {
        id: format!("chatcmpl-mock-{}", n + 1),
        model: model.into(),
        created: unix_now(),
        wire: wire.cloned().unwrap_or_default(),
    };
    let mut out = Vec::new();
    for (i, ev) in resp.events().iter().enumerate() {
        if ctx.wire.keepalive_comments {
            ctx.comment(&mut out);
        }
        ctx.event(&mut out, ev, i == 0);
    }
    if !ctx.wire.omit_done {
        ctx.data(&mut out, b"[DONE]");
    }
    Bytes::from(out)
}

/// A hostile server for the fault matrix (`docs/reliability.md`): every chat request gets the
/// same misbehaving answer, which goes on until the client hangs up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// An endless SSE stream of text deltas of `chunk` bytes, one every `interval_ms` (0: as
    /// fast as the socket takes them). With a small chunk and an interval, a slowloris.
    EndlessText { chunk: usize, interval_ms: u64 },
    /// One `data:` line that never ends (no newline), written as fast as the socket takes it.
    GiantLine,
    /// A 200 `application/json` body that never ends (chunked), inside one string value.
    GiantJson,
    /// Deltas without content (`{"delta":{}}`) and `: keep-alive` comments every
    /// `interval_ms`, forever: a server that looks alive and makes no progress.
    EmptyDeltas { interval_ms: u64 },
}

/// Configures a [`MockServer`] before it starts.
#[derive(Debug, Clone, Default)]
pub struct MockBuilder {
    wire: Option<WireOptions>,
    record_bodies: Option<bool>,
}

impl MockBuilder {
    /// Starts a hostile server (see [`Hostile`]).
    pub fn start_hostile(self, hostile: Hostile) -> io::Result<MockServer> {
        MockServer::spawn(Mode::Hostile(hostile), self.record_bodies.unwrap_or(false))
    }

    /// Framing options; they override the script's `wire` key.
    pub fn wire(mut self, wire: WireOptions) -> Self {
        self.wire = Some(wire);
        self
    }

    /// Whether request bodies are kept for [`MockServer::requests`] (default: yes for scripted
    /// servers, no for pre-rendered ones). Requests are counted either way.
    pub fn record_bodies(mut self, yes: bool) -> Self {
        self.record_bodies = Some(yes);
        self
    }

    /// Starts a scripted server. A script that does not parse is an `InvalidInput` error.
    pub fn start(self, script: Value) -> io::Result<MockServer> {
        let bad = |e: String| io::Error::new(io::ErrorKind::InvalidInput, format!("script: {e}"));
        let (v, wire) = split_wire(script).map_err(bad)?;
        let script = Script::from_value(v).map_err(bad)?;
        let wire = self.wire.or(wire).unwrap_or_default();
        MockServer::spawn(
            Mode::Scripted {
                script: Box::new(script),
                wire,
            },
            self.record_bodies.unwrap_or(true),
        )
    }

    /// Starts a server that answers every chat request with `body` (a complete SSE body).
    pub fn start_prerendered(self, body: Bytes) -> io::Result<MockServer> {
        self.start_prerendered_many(vec![body])
    }

    /// Starts a server with several pre-rendered bodies (at least one): a chat request whose
    /// body carries `k` tool results (`"role":"tool"` messages) gets `bodies[k]` (the last one
    /// when `k` is past the end). So a stateless server still plays a multi-request turn (tool
    /// call, tool call, final answer) for any number of concurrent clients.
    pub fn start_prerendered_many(self, bodies: Vec<Bytes>) -> io::Result<MockServer> {
        if bodies.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "at least one pre-rendered body is needed",
            ));
        }
        let full = |body: &Bytes, close: bool| {
            let mut v = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                 content-length: {}\r\n{}\r\n",
                body.len(),
                if close { "connection: close\r\n" } else { "" }
            )
            .into_bytes();
            v.extend_from_slice(body);
            Bytes::from(v)
        };
        MockServer::spawn(
            Mode::Prerendered {
                keep_alive: bodies.iter().map(|b| full(b, false)).collect(),
                close: bodies.iter().map(|b| full(b, true)).collect(),
            },
            self.record_bodies.unwrap_or(false),
        )
    }
}

enum Mode {
    Scripted {
        script: Box<Script>,
        wire: WireOptions,
    },
    Prerendered {
        keep_alive: Vec<Bytes>,
        close: Vec<Bytes>,
    },
    Hostile(Hostile),
}

/// How many tool-result messages a request body carries (serde_json's compact form).
fn tool_results(body: &[u8]) -> usize {
    const NEEDLE: &[u8] = b"\"role\":\"tool\"";
    body.windows(NEEDLE.len()).filter(|w| *w == NEEDLE).count()
}

struct State {
    mode: Mode,
    record_bodies: bool,
    next: AtomicUsize,
    bodies: Mutex<Vec<Bytes>>,
    busy_nanos: AtomicU64,
    created: u64,
    /// Client connections not yet closed (by either side).
    open: AtomicUsize,
}

/// A running mock server; dropping it stops it.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .field("request_count", &self.request_count())
            .finish()
    }
}

impl MockServer {
    /// Starts a scripted server on `127.0.0.1:0`. The script may carry a top-level `"wire"`
    /// object (see [`WireOptions::from_value`]).
    pub fn start(script: Value) -> io::Result<MockServer> {
        MockBuilder::default().start(script)
    }

    /// Starts a server that writes `body` (a complete SSE body, e.g. from [`render_sse`]) for
    /// every chat request with minimal work. Bodies are counted, not kept.
    pub fn start_prerendered(body: Bytes) -> io::Result<MockServer> {
        MockBuilder::default().start_prerendered(body)
    }

    pub fn builder() -> MockBuilder {
        MockBuilder::default()
    }

    fn spawn(mode: Mode, record_bodies: bool) -> io::Result<MockServer> {
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let state = Arc::new(State {
            mode,
            record_bodies,
            next: AtomicUsize::new(0),
            bodies: Mutex::new(Vec::new()),
            busy_nanos: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            created: unix_now(),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mock-openai-{}", addr.port()))
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(_) => return,
                    };
                    accept_loop(listener, st, rx).await;
                });
                // Dropping the runtime here aborts every connection task and closes its socket.
                drop(rt);
            })?;
        Ok(MockServer {
            addr,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every chat request body received, in order (a body that is not JSON comes back as a
    /// string). Empty when bodies are not recorded.
    pub fn requests(&self) -> Vec<Value> {
        self.raw_requests()
            .iter()
            .map(|b| {
                serde_json::from_slice(b)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(b).into_owned()))
            })
            .collect()
    }

    /// The raw bytes of every recorded chat request body, in order.
    pub fn raw_requests(&self) -> Vec<Bytes> {
        lock(&self.state.bodies).clone()
    }

    /// How many client connections are open now (a client's idle pooled connection counts).
    pub fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// How many chat requests were received (recorded or not).
    pub fn request_count(&self) -> usize {
        self.state.next.load(Ordering::SeqCst)
    }

    /// Nanoseconds the server spent parsing requests and rendering and writing responses
    /// (scripted delays and stalls excluded).
    pub fn server_busy_nanos(&self) -> u64 {
        self.state.busy_nanos.load(Ordering::Relaxed)
    }

    /// Writes [`MockServer::requests`] to `path`, one compact JSON document per line.
    pub fn write_requests_jsonl(&self, path: &Path) -> io::Result<()> {
        let mut out = Vec::new();
        for r in self.requests() {
            serde_json::to_writer(&mut out, &r).map_err(io::Error::other)?;
            out.push(b'\n');
        }
        std::fs::write(path, out)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<State>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => {
                if let Ok((stream, _)) = r {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve_conn(stream, state.clone()));
                }
            }
        }
    }
}

/// Accumulates the time the server works, leaving out waits on the client and scripted sleeps.
struct Busy<'a> {
    total: &'a AtomicU64,
    since: Option<Instant>,
}

impl Busy<'_> {
    fn start(&mut self) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
        }
    }

    fn stop(&mut self) {
        if let Some(t) = self.since.take() {
            self.total
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Drops the running interval without counting it.
    fn discard(&mut self) {
        self.since = None;
    }

    async fn sleep(&mut self, d: Duration) {
        self.stop();
        tokio::time::sleep(d).await;
        self.start();
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Request {
    method: String,
    path: String,
    body: Bytes,
    close: bool,
}

async fn serve_conn(stream: TcpStream, state: Arc<State>) {
    state.open.fetch_add(1, Ordering::SeqCst);
    serve_requests(stream, &state).await;
    state.open.fetch_sub(1, Ordering::SeqCst);
}

async fn serve_requests(mut stream: TcpStream, state: &Arc<State>) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        let mut busy = Busy {
            total: &state.busy_nanos,
            since: None,
        };
        let req = match read_request(&mut stream, &mut buf, &mut busy).await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                let _ = write_simple(&mut stream, 400, "Bad Request", &e.to_string(), true).await;
                return;
            }
        };
        let keep = handle(&mut stream, state, req, &mut busy)
            .await
            .unwrap_or_default();
        busy.stop();
        if !keep {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

/// Reads one request; `Ok(None)` when the client closed the connection between requests.
async fn read_request(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    busy: &mut Busy<'_>,
) -> io::Result<Option<Request>> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_owned());
    // The head.
    let (head_len, method, path, content_length, chunked, close, expect_continue) = loop {
        if !buf.is_empty() {
            busy.start();
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(buf).map_err(|e| bad(&e.to_string()))? {
                httparse::Status::Complete(n) => {
                    let mut content_length = 0usize;
                    let mut chunked = false;
                    let mut close = req.version == Some(0);
                    let mut expect_continue = false;
                    for h in req.headers.iter() {
                        let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                        if h.name.eq_ignore_ascii_case("content-length") {
                            content_length =
                                v.trim().parse().map_err(|_| bad("bad content-length"))?;
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = v.contains("chunked");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            if v.contains("close") {
                                close = true;
                            } else if v.contains("keep-alive") {
                                close = false;
                            }
                        } else if h.name.eq_ignore_ascii_case("expect") {
                            expect_continue = v.contains("100-continue");
                        }
                    }
                    if content_length > MAX_REQUEST {
                        return Err(bad("request body too large"));
                    }
                    break (
                        n,
                        req.method.unwrap_or("").to_owned(),
                        req.path.unwrap_or("").to_owned(),
                        content_length,
                        chunked,
                        close,
                        expect_continue,
                    );
                }
                httparse::Status::Partial if buf.len() > MAX_HEAD => {
                    return Err(bad("request head too large"))
                }
                httparse::Status::Partial => {}
            }
        }
        busy.stop();
        if stream.read_buf(buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::from(io::ErrorKind::UnexpectedEof))
            };
        }
    };
    buf.advance(head_len);
    if expect_continue {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    // The body.
    let body = if chunked {
        read_chunked(stream, buf, busy).await?
    } else {
        while buf.len() < content_length {
            busy.stop();
            if stream.read_buf(buf).await? == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            busy.start();
        }
        buf.split_to(content_length).freeze()
    };
    busy.start();
    Ok(Some(Request {
        method,
        path,
        body,
        close,
    }))
}

async fn read_chunked(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    busy: &mut Busy<'_>,
) -> io::Result<Bytes> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_owned());
    let mut body = BytesMut::new();
    loop {
        // Size line.
        let (skip, size) = loop {
            match httparse::parse_chunk_size(buf).map_err(|_| bad("bad chunk size"))? {
                httparse::Status::Complete((n, size)) => break (n, size as usize),
                httparse::Status::Partial => {
                    busy.stop();
                    if stream.read_buf(buf).await? == 0 {
                        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                    }
                    busy.start();
                }
            }
        };
        if body.len() + size > MAX_REQUEST {
            return Err(bad("request body too large"));
        }
        buf.advance(skip);
        if size == 0 {
            // Trailers (ignored) end with an empty line.
            loop {
                if let Some(p) = buf.windows(2).position(|w| w == b"\r\n") {
                    let empty = p == 0;
                    buf.advance(p + 2);
                    if empty {
                        return Ok(body.freeze());
                    }
                    continue;
                }
                busy.stop();
                if stream.read_buf(buf).await? == 0 {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                }
                busy.start();
            }
        }
        while buf.len() < size + 2 {
            busy.stop();
            if stream.read_buf(buf).await? == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            busy.start();
        }
        body.extend_from_slice(&buf[..size]);
        buf.advance(size + 2);
    }
}

async fn write_simple(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    body: &str,
    close: bool,
) -> io::Result<()> {
    let msg = json!({"error": {"message": body, "type": "invalid_request_error", "param": null, "code": null}})
        .to_string();
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
        msg.len(),
        if close { "connection: close\r\n" } else { "" }
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(msg.as_bytes());
    stream.write_all(&out).await
}

/// Answers one request; `Ok(true)` when the connection stays open.
async fn handle(
    stream: &mut TcpStream,
    state: &State,
    req: Request,
    busy: &mut Busy<'_>,
) -> io::Result<bool> {
    let path = req.path.split('?').next().unwrap_or("");
    let is_chat = path.ends_with("/chat/completions");
    if is_chat && req.method == "POST" {
        let n = state.next.fetch_add(1, Ordering::SeqCst);
        if state.record_bodies {
            lock(&state.bodies).push(req.body.clone());
        }
        return match &state.mode {
            Mode::Hostile(h) => {
                // Only ends when the client hangs up (a write fails).
                let _ = serve_hostile(stream, *h, busy).await;
                Ok(false)
            }
            Mode::Prerendered { keep_alive, close } => {
                let all = if req.close { close } else { keep_alive };
                let out = if all.len() == 1 {
                    &all[0]
                } else {
                    &all[tool_results(&req.body).min(all.len() - 1)]
                };
                stream.write_all(out).await?;
                Ok(!req.close)
            }
            Mode::Scripted { script, wire } => {
                let resp = script.response(n);
                let model = script
                    .model
                    .clone()
                    .or_else(|| {
                        serde_json::from_slice::<Value>(&req.body)
                            .ok()
                            .and_then(|v| v.get("model").and_then(Value::as_str).map(str::to_owned))
                    })
                    .unwrap_or_else(|| "mock-model".to_owned());
                let ctx = Ctx {
                    id: format!("chatcmpl-mock-{}", n + 1),
                    model,
                    created: state.created,
                    wire: wire.clone(),
                };
                // A chat request (it has `messages`) that does not ask to stream; other bodies
                // (the wire tests' probes) are streamed as before.
                let whole = serde_json::from_slice::<Value>(&req.body).is_ok_and(|v| {
                    v.get("messages").is_some() && v.get("stream") != Some(&Value::Bool(true))
                });
                if whole && resp.fault.is_none() {
                    write_completion(stream, &resp, &ctx, req.close).await?;
                    return Ok(!req.close);
                }
                let keep = stream_response(stream, &resp, &ctx, req.close, busy).await?;
                Ok(keep)
            }
        };
    }
    if req.method == "GET" && path.ends_with("/_stats") {
        // Not the server's work for a client: leave it out of the busy time.
        busy.discard();
        let body = format!(
            "{{\"busy_nanos\":{},\"requests\":{}}}",
            state.busy_nanos.load(Ordering::Relaxed),
            state.next.load(Ordering::SeqCst)
        );
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
            body.len(),
            if req.close {
                "connection: close\r\n"
            } else {
                ""
            }
        );
        stream.write_all(format!("{head}{body}").as_bytes()).await?;
        return Ok(!req.close);
    }
    if req.method == "GET" && path.ends_with("/models") {
        let model = match &state.mode {
            Mode::Scripted { script, .. } => script.model.clone(),
            Mode::Prerendered { .. } | Mode::Hostile(_) => None,
        }
        .unwrap_or_else(|| "mock-model".to_owned());
        let body = json!({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "mock"}]})
            .to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
            body.len(),
            if req.close {
                "connection: close\r\n"
            } else {
                ""
            }
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        return Ok(!req.close);
    }
    let (status, reason) = if is_chat {
        (405, "Method Not Allowed")
    } else {
        (404, "Not Found")
    };
    write_simple(
        stream,
        status,
        reason,
        &format!("no route for {} {}", req.method, req.path),
        req.close,
    )
    .await?;
    Ok(!req.close)
}

async fn serve_hostile(stream: &mut TcpStream, h: Hostile, busy: &mut Busy<'_>) -> io::Result<()> {
    let content_type = if h == Hostile::GiantJson {
        "application/json"
    } else {
        "text/event-stream"
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let filler = vec![b'x'; 64 * 1024];
    match h {
        Hostile::EndlessText { chunk, interval_ms } => {
            let text = "x".repeat(chunk.max(1));
            let event = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
            );
            // Batch small events so a fast stream is not one syscall per delta.
            let per_write = if interval_ms == 0 {
                (64 * 1024 / event.len()).max(1)
            } else {
                1
            };
            let batch = event.repeat(per_write);
            loop {
                write_chunk(stream, batch.as_bytes()).await?;
                if interval_ms > 0 {
                    busy.sleep(Duration::from_millis(interval_ms)).await;
                }
            }
        }
        Hostile::GiantLine => {
            write_chunk(
                stream,
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"",
            )
            .await?;
            loop {
                write_chunk(stream, &filler).await?;
            }
        }
        Hostile::GiantJson => {
            write_chunk(stream, b"{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"").await?;
            loop {
                write_chunk(stream, &filler).await?;
            }
        }
        Hostile::EmptyDeltas { interval_ms } => loop {
            write_chunk(
                stream,
                b": keep-alive\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"}}]}\n\n",
            )
            .await?;
            busy.sleep(Duration::from_millis(interval_ms.max(1))).await;
        },
    }
}

/// What every chunk of one response shares.
struct Ctx {
    id: String,
    model: String,
    created: u64,
    wire: WireOptions,
}

impl Ctx {
    fn data(&self, out: &mut Vec<u8>, payload: &[u8]) {
        let eol = self.wire.eol();
        out.extend_from_slice(self.wire.data_prefix());
        out.extend_from_slice(payload);
        out.extend_from_slice(eol);
        out.extend_from_slice(eol);
    }

    fn comment(&self, out: &mut Vec<u8>) {
        let eol = self.wire.eol();
        out.extend_from_slice(b": keep-alive");
        out.extend_from_slice(eol);
        out.extend_from_slice(eol);
    }

    fn chunk(&self, choices: Option<Value>, usage: Value) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!("chat.completion.chunk"));
        m.insert("created".into(), json!(self.created));
        m.insert("model".into(), json!(self.model));
        m.insert("system_fingerprint".into(), json!("fp_mock"));
        if let Some(c) = choices {
            m.insert("choices".into(), c);
        }
        m.insert("usage".into(), usage);
        Value::Object(m)
    }

    fn choice(&self, delta: Map<String, Value>, finish: Option<&str>) -> Value {
        json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}])
    }

    /// Appends one event's `data:` frame.
    fn event(&self, out: &mut Vec<u8>, ev: &ScriptEvent<'_>, first: bool) {
        let mut delta = Map::new();
        if first {
            delta.insert("role".into(), json!("assistant"));
        }
        let v = match ev {
            ScriptEvent::Reasoning(r) => {
                delta.insert("content".into(), Value::Null);
                delta.insert("reasoning_content".into(), json!(r));
                self.chunk(Some(self.choice(delta, None)), Value::Null)
            }
            ScriptEvent::Text(t) => {
                delta.insert("content".into(), json!(t));
                self.chunk(Some(self.choice(delta, None)), Value::Null)
            }
            ScriptEvent::ToolCall {
                slot: _,
                call,
                piece,
            } => {
                let mut tc = Map::new();
                if let Some(i) = call.index {
                    tc.insert("index".into(), json!(i));
                }
                let mut function = Map::new();
                if *piece == 0 {
                    if let Some(id) = &call.id {
                        tc.insert("id".into(), json!(id));
                    }
                    tc.insert("type".into(), json!("function"));
                    function.insert("name".into(), json!(call.name));
                }
                let args = match &call.args {
                    ScriptArgs::Pieces(p) => json!(p.get(*piece).map(String::as_str).unwrap_or("")),
                    ScriptArgs::Object(o) => o.clone(),
                };
                function.insert("arguments".into(), args);
                tc.insert("function".into(), Value::Object(function));
                delta.insert("tool_calls".into(), json!([tc]));
                self.chunk(Some(self.choice(delta, None)), Value::Null)
            }
            ScriptEvent::Finish(f) => self.chunk(Some(self.choice(delta, Some(f))), Value::Null),
            ScriptEvent::Usage(u) => {
                let choices = match self.wire.usage_choices {
                    UsageChoices::Empty => Some(json!([])),
                    UsageChoices::Null => Some(Value::Null),
                    UsageChoices::Absent => None,
                };
                self.chunk(choices, (*u).clone())
            }
        };
        let payload = serde_json::to_vec(&v).unwrap_or_default();
        self.data(out, &payload);
    }
}

/// Writes `payload` as one HTTP/1.1 chunk.
async fn write_chunk(stream: &mut TcpStream, payload: &[u8]) -> io::Result<()> {
    if payload.is_empty() {
        return Ok(());
    }
    let mut out = Vec::with_capacity(payload.len() + 12);
    out.extend_from_slice(format!("{:x}\r\n", payload.len()).as_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
    stream.write_all(&out).await
}

/// A chat request without `"stream": true` gets the whole response as one `chat.completion`
/// JSON document, as a real server answers it.
async fn write_completion(
    stream: &mut TcpStream,
    resp: &ScriptResponse,
    ctx: &Ctx,
    close: bool,
) -> io::Result<()> {
    let mut message = json!({"role": "assistant", "content": resp.text_chunks.concat()});
    if !resp.tool_calls.is_empty() {
        let calls: Vec<Value> = resp
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let args = match &c.args {
                    ScriptArgs::Pieces(p) => p.concat(),
                    ScriptArgs::Object(v) => v.to_string(),
                };
                json!({"id": c.id.clone().unwrap_or_else(|| format!("call_{i}")), "type": "function",
                    "function": {"name": c.name, "arguments": args}})
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    let body = json!({"id": ctx.id, "object": "chat.completion", "created": ctx.created,
        "model": ctx.model, "choices": [{"index": 0, "message": message,
        "finish_reason": resp.finish_reason}]})
    .to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
        body.len(),
        if close { "connection: close\r\n" } else { "" }
    );
    stream.write_all(format!("{head}{body}").as_bytes()).await
}

/// Streams one scripted response (or its HTTP error). `Ok(true)`: keep the connection.
async fn stream_response(
    stream: &mut TcpStream,
    resp: &ScriptResponse,
    ctx: &Ctx,
    client_close: bool,
    busy: &mut Busy<'_>,
) -> io::Result<bool> {
    if let Some(Fault::HttpError {
        status,
        message,
        error_type,
        code,
        headers,
    }) = &resp.fault
    {
        let error_type = error_type.clone().unwrap_or_else(|| {
            if *status >= 500 {
                "server_error".into()
            } else {
                "invalid_request_error".into()
            }
        });
        let body =
            json!({"error": {"message": message, "type": error_type, "param": null, "code": code}})
                .to_string();
        let mut head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            reason_phrase(*status),
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if client_close {
            head.push_str("connection: close\r\n");
        }
        head.push_str("\r\n");
        head.push_str(&body);
        stream.write_all(head.as_bytes()).await?;
        return Ok(!client_close);
    }
    // Faults that end the exchange early also end the connection.
    let (drop_after, error_after) = match &resp.fault {
        Some(Fault::Drop { after_events }) => (Some(*after_events), None),
        Some(Fault::InStreamError { after_events, .. }) => (None, Some(*after_events)),
        _ => (None, None),
    };
    let close = client_close || drop_after.is_some() || error_after.is_some();
    let stall_ms = match &resp.fault {
        Some(Fault::Stall { ms }) => Some(Duration::from_millis(*ms)),
        _ => None,
    };
    if let (Some(d), true) = (stall_ms, ctx.wire.stall_before_headers) {
        busy.sleep(d).await;
    }
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
         transfer-encoding: chunked\r\n{}\r\n",
        if close { "connection: close\r\n" } else { "" }
    );
    stream.write_all(head.as_bytes()).await?;

    let mut out = Vec::with_capacity(512);
    match &resp.fault {
        Some(Fault::Stall { ms }) if !ctx.wire.stall_before_headers => {
            stall(stream, ctx, Duration::from_millis(*ms), busy).await?
        }
        Some(Fault::Malformed { line }) => {
            out.extend_from_slice(line.as_bytes());
            out.extend_from_slice(ctx.wire.eol());
            out.extend_from_slice(ctx.wire.eol());
            write_chunk(stream, &out).await?;
        }
        _ => {}
    }
    let events = resp.events();
    let delay = Duration::from_millis(resp.delay_ms);
    for i in 0..=events.len() {
        if drop_after == Some(i) {
            // Mid-body: the chunked encoding is left unfinished.
            stream.flush().await?;
            return Ok(false);
        }
        if error_after == Some(i) {
            write_in_stream_error(stream, resp, ctx).await?;
            stream.write_all(b"0\r\n\r\n").await?;
            return Ok(false);
        }
        let Some(ev) = events.get(i) else { break };
        if !delay.is_zero() {
            busy.sleep(delay).await;
        }
        out.clear();
        if ctx.wire.keepalive_comments {
            ctx.comment(&mut out);
        }
        ctx.event(&mut out, ev, i == 0);
        write_chunk(stream, &out).await?;
    }
    // A drop or an error placed past the last event.
    if drop_after.is_some() {
        return Ok(false);
    }
    if error_after.is_some() {
        write_in_stream_error(stream, resp, ctx).await?;
        stream.write_all(b"0\r\n\r\n").await?;
        return Ok(false);
    }
    out.clear();
    if !ctx.wire.omit_done {
        ctx.data(&mut out, b"[DONE]");
    }
    write_chunk(stream, &out).await?;
    stream.write_all(b"0\r\n\r\n").await?;
    Ok(!close)
}

async fn write_in_stream_error(
    stream: &mut TcpStream,
    resp: &ScriptResponse,
    ctx: &Ctx,
) -> io::Result<()> {
    let Some(Fault::InStreamError {
        message,
        code,
        error_type,
        ..
    }) = &resp.fault
    else {
        return Ok(());
    };
    let err = json!({"error": {
        "message": message,
        "type": error_type.clone().map_or(Value::Null, Value::String),
        "param": null,
        "code": code.clone().unwrap_or(Value::Null),
    }});
    let mut out = Vec::new();
    ctx.data(&mut out, err.to_string().as_bytes());
    write_chunk(stream, &out).await
}

/// Silence for `d` (or `: keep-alive` comments only, when the wire sends them).
async fn stall(
    stream: &mut TcpStream,
    ctx: &Ctx,
    d: Duration,
    busy: &mut Busy<'_>,
) -> io::Result<()> {
    if !ctx.wire.keepalive_comments {
        busy.sleep(d).await;
        return Ok(());
    }
    let end = tokio::time::Instant::now().checked_add(d);
    let every = Duration::from_millis(ctx.wire.keepalive_interval_ms.max(1));
    let mut out = Vec::new();
    ctx.comment(&mut out);
    loop {
        let now = tokio::time::Instant::now();
        let step = match end {
            Some(end) if end <= now => return Ok(()),
            Some(end) => every.min(end - now),
            None => every,
        };
        busy.sleep(step).await;
        write_chunk(stream, &out).await?;
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Site Overloaded",
        _ => "Error",
    }
}
