//! The server: its builder, its thread and accept loop, the routes, the streamed answer to a
//! scripted chat request, and its statistics (requests, busy time).

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentao::llm::script::{Fault, Script, ScriptArgs, ScriptResponse};
use bytes::{Bytes, BytesMut};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::faults::{serve_hostile, stall, write_in_stream_error, Hostile};
use crate::http::{
    read_request, reason_phrase, write_chunk, write_error, write_json, write_simple, Request,
};
use crate::render::{split_wire, unix_now, Ctx, WireOptions};
use crate::session::{self, Answer, SessionModel, SessionStats};

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

    /// Starts a session model (see [`SessionModel`]): no script, any number of requests.
    pub fn start_session(self, model: SessionModel) -> io::Result<MockServer> {
        MockServer::spawn(
            Mode::Session(Box::new(model)),
            self.record_bodies.unwrap_or(false),
        )
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
        self.start_prerendered_wires(bodies, Vec::new(), Vec::new())
    }

    /// [`start_prerendered_many`](Self::start_prerendered_many) on every wire: `chat` for
    /// `/chat/completions`, and, when not empty, `anthropic` for `/messages` and `responses`
    /// for `/responses` (from [`render_wire_sse_all`](crate::render_wire_sse_all)), each picked
    /// by the request's count of its wire's tool results (`tool_result` blocks,
    /// `function_call_output` items).
    pub fn start_prerendered_wires(
        self,
        chat: Vec<Bytes>,
        anthropic: Vec<Bytes>,
        responses: Vec<Bytes>,
    ) -> io::Result<MockServer> {
        if chat.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "at least one pre-rendered body is needed",
            ));
        }
        let typed = |bodies: Vec<Bytes>| (!bodies.is_empty()).then(|| Prerendered::new(&bodies));
        MockServer::spawn(
            Mode::Prerendered(Box::new(PrerenderedWires {
                chat: Prerendered::new(&chat),
                anthropic: typed(anthropic),
                responses: typed(responses),
            })),
            self.record_bodies.unwrap_or(false),
        )
    }
}

/// One wire's pre-rendered answers as whole HTTP responses, with and without
/// `connection: close`.
struct Prerendered {
    keep_alive: Vec<Bytes>,
    close: Vec<Bytes>,
}

impl Prerendered {
    fn new(bodies: &[Bytes]) -> Prerendered {
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
        Prerendered {
            keep_alive: bodies.iter().map(|b| full(b, false)).collect(),
            close: bodies.iter().map(|b| full(b, true)).collect(),
        }
    }

    /// The answer to a request whose body carries `needle` (its wire's tool-result marker)
    /// `k` times: body `k`, or the last.
    fn pick(&self, close: bool, body: &[u8], needle: &[u8]) -> &Bytes {
        let all = if close { &self.close } else { &self.keep_alive };
        if all.len() == 1 {
            &all[0]
        } else {
            &all[occurrences(body, needle).min(all.len() - 1)]
        }
    }
}

struct PrerenderedWires {
    chat: Prerendered,
    anthropic: Option<Prerendered>,
    responses: Option<Prerendered>,
}

enum Mode {
    Scripted {
        script: Box<Script>,
        wire: WireOptions,
    },
    Prerendered(Box<PrerenderedWires>),
    Hostile(Hostile),
    Session(Box<SessionModel>),
}

/// How many times `needle` occurs in a request body: with a wire's tool-result marker in
/// serde_json's compact form, how many tool results the request carries.
fn occurrences(body: &[u8], needle: &[u8]) -> usize {
    body.windows(needle.len()).filter(|w| *w == needle).count()
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
    /// Client connections accepted since the start.
    accepted: AtomicUsize,
    /// Responses whose last byte was written.
    written: AtomicUsize,
    /// What a session model saw.
    session: SessionStats,
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
    ///
    /// [`render_sse`]: crate::render_sse
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
            accepted: AtomicUsize::new(0),
            written: AtomicUsize::new(0),
            session: SessionStats::default(),
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

    /// How many client connections were accepted since the start (a client that reuses an
    /// idle connection adds none).
    pub fn accepted_connections(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// How many responses were written to their last byte (a chunked body's terminator
    /// included); one the client left early does not count.
    pub fn responses_written(&self) -> usize {
        self.state.written.load(Ordering::SeqCst)
    }

    /// How many chat requests were received (recorded or not).
    pub fn request_count(&self) -> usize {
        self.state.next.load(Ordering::SeqCst)
    }

    /// What a session model saw (zeros for the other modes).
    pub fn session_stats(&self) -> &SessionStats {
        &self.state.session
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
pub(crate) struct Busy<'a> {
    total: &'a AtomicU64,
    since: Option<Instant>,
}

impl Busy<'_> {
    pub(crate) fn start(&mut self) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
        }
    }

    pub(crate) fn stop(&mut self) {
        if let Some(t) = self.since.take() {
            self.total
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Drops the running interval without counting it.
    fn discard(&mut self) {
        self.since = None;
    }

    pub(crate) async fn sleep(&mut self, d: Duration) {
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

async fn serve_conn(stream: TcpStream, state: Arc<State>) {
    state.open.fetch_add(1, Ordering::SeqCst);
    state.accepted.fetch_add(1, Ordering::SeqCst);
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
        let handled = handle(&mut stream, state, req, &mut busy).await;
        busy.stop();
        if handled.is_ok() {
            state.written.fetch_add(1, Ordering::SeqCst);
        }
        if !handled.unwrap_or_default() {
            let _ = stream.shutdown().await;
            return;
        }
    }
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
    if let (Some(wire), "POST", Mode::Scripted { script, .. }) = (
        crate::wires::Wire::of_path(path),
        req.method.as_str(),
        &state.mode,
    ) {
        let n = state.next.fetch_add(1, Ordering::SeqCst);
        if state.record_bodies {
            lock(&state.bodies).push(req.body.clone());
        }
        let model = script
            .model
            .clone()
            .unwrap_or_else(|| "mock-model".to_owned());
        return crate::wires::serve(stream, wire, &script.response(n), &model, n + 1, req.close)
            .await;
    }
    if let (Some(wire), "POST", Mode::Prerendered(p)) = (
        crate::wires::Wire::of_path(path),
        req.method.as_str(),
        &state.mode,
    ) {
        let (bodies, needle): (_, &[u8]) = match wire {
            crate::wires::Wire::Anthropic => (&p.anthropic, b"\"type\":\"tool_result\""),
            crate::wires::Wire::Responses => (&p.responses, b"\"type\":\"function_call_output\""),
        };
        if let Some(bodies) = bodies {
            state.next.fetch_add(1, Ordering::SeqCst);
            if state.record_bodies {
                lock(&state.bodies).push(req.body.clone());
            }
            stream
                .write_all(bodies.pick(req.close, &req.body, needle))
                .await?;
            return Ok(!req.close);
        }
    }
    if is_chat && req.method == "POST" {
        let n = state.next.fetch_add(1, Ordering::SeqCst);
        if state.record_bodies {
            lock(&state.bodies).push(req.body.clone());
        }
        return match &state.mode {
            Mode::Session(model) => {
                let (status, ctype, body) =
                    match session::answer(model, &state.session, &req.body, n) {
                        Answer::Error(status, body) => (status, "application/json", body),
                        Answer::Stream(body) => (200, "text/event-stream", body),
                    };
                let head =
                    format!(
                    "HTTP/1.1 {status} {}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n{}\r\n",
                    reason_phrase(status),
                    body.len(),
                    if req.close { "connection: close\r\n" } else { "" }
                );
                let mut out = head.into_bytes();
                out.extend_from_slice(body.as_bytes());
                stream.write_all(&out).await?;
                Ok(!req.close)
            }
            Mode::Hostile(h) => {
                // Only ends when the client hangs up (a write fails).
                let _ = serve_hostile(stream, *h, busy).await;
                Ok(false)
            }
            Mode::Prerendered(p) => {
                let out = p.chat.pick(req.close, &req.body, b"\"role\":\"tool\"");
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
        write_json(stream, 200, "OK", &body, req.close).await?;
        return Ok(!req.close);
    }
    if req.method == "GET" && path.ends_with("/models") {
        let model = match &state.mode {
            Mode::Scripted { script, .. } => script.model.clone(),
            Mode::Prerendered(_) | Mode::Hostile(_) | Mode::Session(_) => None,
        }
        .unwrap_or_else(|| "mock-model".to_owned());
        let body = json!({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "mock"}]})
            .to_string();
        write_json(stream, 200, "OK", &body, req.close).await?;
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
    write_json(stream, 200, "OK", &body, close).await
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
        write_error(stream, *status, headers, &body, client_close).await?;
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
        write_split(stream, &out, ctx.wire.split_bytes).await?;
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
    write_split(stream, &out, ctx.wire.split_bytes).await?;
    if ctx.wire.end_after_done_ms > 0 {
        busy.sleep(Duration::from_millis(ctx.wire.end_after_done_ms))
            .await;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    Ok(!close)
}

/// `payload` as HTTP chunks of at most `split` bytes, each flushed alone (0: one chunk).
async fn write_split(stream: &mut TcpStream, payload: &[u8], split: usize) -> io::Result<()> {
    if split == 0 {
        return write_chunk(stream, payload).await;
    }
    for piece in payload.chunks(split) {
        write_chunk(stream, piece).await?;
        stream.flush().await?;
        tokio::task::yield_now().await;
    }
    Ok(())
}
