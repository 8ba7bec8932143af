//! JSON-RPC 2.0 over newline-delimited stdio: the outbox (one writer thread, messages in the
//! order they were queued), incoming message classification, and the table of requests this
//! server sent to the client and awaits answers for.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use serde::Serialize;
use serde_json::Value;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// Bytes queued for the writer; past this a producer waits (a client that stops reading slows
/// the turns down instead of growing memory).
const MAX_BUFFERED: usize = 8 * 1024 * 1024;

/// A JSON-RPC error.
#[derive(Debug, Clone, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }
}

/// The write side: serializes each message straight into one shared buffer that the writer
/// thread swaps out and writes whole, so a message costs its serialization and no allocation,
/// and the writer is woken only when it is idle.
#[derive(Clone)]
pub struct Outbox {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// The writer waits here for bytes.
    ready: Condvar,
    /// Producers wait here for room.
    room: Condvar,
    /// The sink failed: the client is gone.
    closed: AtomicBool,
}

#[derive(Default)]
struct State {
    buf: Vec<u8>,
    writer_idle: bool,
    producers_waiting: usize,
    closing: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Serialize)]
struct Notification<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct Request<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct Success<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a R,
}

#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcError,
}

impl Outbox {
    /// Starts the writer thread over `sink`. It ends after [`Outbox::close`] (once what was
    /// queued is written) or when the sink fails (the client is gone).
    pub fn start(sink: impl Write + Send + 'static) -> (Outbox, JoinHandle<()>) {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            room: Condvar::new(),
            closed: AtomicBool::new(false),
        });
        let writer = shared.clone();
        let handle = std::thread::Builder::new()
            .name("acp-writer".into())
            .spawn(move || write_loop(&writer, sink))
            .expect("the writer thread starts");
        (Outbox { shared }, handle)
    }

    /// Whether the client's side of the output is gone.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Appends one message (one line) written by `write`.
    fn push(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        while st.buf.len() >= MAX_BUFFERED && !st.closing && !self.is_closed() {
            st.producers_waiting += 1;
            st = sh.room.wait(st).unwrap_or_else(|e| e.into_inner());
            st.producers_waiting -= 1;
        }
        if st.closing || self.is_closed() {
            return;
        }
        let mark = st.buf.len();
        write(&mut st.buf);
        if st.buf.len() == mark {
            return;
        }
        st.buf.push(b'\n');
        let wake = st.writer_idle;
        st.writer_idle = false;
        drop(st);
        if wake {
            sh.ready.notify_one();
        }
    }

    fn serialize<T: Serialize>(buf: &mut Vec<u8>, value: &T) {
        let mark = buf.len();
        if let Err(e) = serde_json::to_writer(&mut *buf, value) {
            // Our own types always serialize; never leave half a message behind.
            buf.truncate(mark);
            eprintln!("agentao-acp: a message could not be serialized: {e}");
        }
    }

    /// Ends the writer once what is queued is written; later messages are dropped.
    pub fn close(&self) {
        let mut st = self.shared.lock();
        st.closing = true;
        drop(st);
        self.shared.ready.notify_one();
        self.shared.room.notify_all();
    }

    pub fn notify<P: Serialize>(&self, method: &str, params: &P) {
        self.push(|b| {
            Self::serialize(
                b,
                &Notification {
                    jsonrpc: "2.0",
                    method,
                    params,
                },
            )
        });
    }

    pub fn request<P: Serialize>(&self, id: u64, method: &str, params: &P) {
        self.push(|b| {
            Self::serialize(
                b,
                &Request {
                    jsonrpc: "2.0",
                    id,
                    method,
                    params,
                },
            )
        });
    }

    pub fn respond<R: Serialize>(&self, id: &Value, result: &R) {
        self.push(|b| {
            Self::serialize(
                b,
                &Success {
                    jsonrpc: "2.0",
                    id,
                    result,
                },
            )
        });
    }

    pub fn fail(&self, id: &Value, error: &RpcError) {
        self.push(|b| {
            Self::serialize(
                b,
                &Failure {
                    jsonrpc: "2.0",
                    id,
                    error,
                },
            )
        });
    }

    pub fn reply(&self, id: &Value, result: Result<Value, RpcError>) {
        match result {
            Ok(v) => self.respond(id, &v),
            Err(e) => self.fail(id, &e),
        }
    }
}

fn write_loop(sh: &Shared, mut sink: impl Write) {
    let mut out = Vec::new();
    loop {
        let mut st = sh.lock();
        while st.buf.is_empty() && !st.closing {
            st.writer_idle = true;
            st = sh.ready.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.writer_idle = false;
        if st.buf.is_empty() {
            return; // closing, and everything is written
        }
        std::mem::swap(&mut st.buf, &mut out);
        let wake = st.producers_waiting > 0;
        drop(st);
        if wake {
            sh.room.notify_all();
        }
        if sink.write_all(&out).and_then(|()| sink.flush()).is_err() {
            sh.closed.store(true, Ordering::Release);
            sh.room.notify_all();
            return;
        }
        out.clear();
        // Keep one large buffer from pinning memory after a burst.
        if out.capacity() > MAX_BUFFERED {
            out = Vec::new();
        }
    }
}

/// One incoming message, classified.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
}

/// Classifies one line. `Err` carries the error to send and the id to send it with (`null`
/// when the message is unreadable).
pub fn classify(line: &[u8]) -> Result<Incoming, (Value, RpcError)> {
    let v: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
        )
    })?;
    let Value::Object(mut m) = v else {
        return Err((
            Value::Null,
            RpcError::new(INVALID_REQUEST, "Invalid Request: not a JSON object"),
        ));
    };
    let id = m.remove("id");
    let valid_id = |id: &Value| matches!(id, Value::Number(_) | Value::String(_) | Value::Null);
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        let id = id.filter(valid_id).unwrap_or(Value::Null);
        return Err((
            id,
            RpcError::new(INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\""),
        ));
    }
    match (m.remove("method"), id) {
        (Some(Value::String(method)), id) => {
            let params = m.remove("params").unwrap_or(Value::Null);
            if !matches!(params, Value::Object(_) | Value::Array(_) | Value::Null) {
                let id = id.filter(valid_id).unwrap_or(Value::Null);
                return Err((
                    id,
                    RpcError::new(
                        INVALID_REQUEST,
                        "Invalid Request: params must be structured",
                    ),
                ));
            }
            match id {
                None => Ok(Incoming::Notification { method, params }),
                Some(id) if valid_id(&id) => Ok(Incoming::Request { id, method, params }),
                Some(_) => Err((
                    Value::Null,
                    RpcError::new(INVALID_REQUEST, "Invalid Request: bad id"),
                )),
            }
        }
        (Some(_), id) => Err((
            id.filter(valid_id).unwrap_or(Value::Null),
            RpcError::new(INVALID_REQUEST, "Invalid Request: method must be a string"),
        )),
        (None, Some(id)) => {
            let result = match (m.remove("result"), m.remove("error")) {
                (Some(r), None) => Ok(r),
                (None, Some(e)) => Err(RpcError::new(
                    e.get("code")
                        .and_then(Value::as_i64)
                        .unwrap_or(INTERNAL_ERROR),
                    e.get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error")
                        .to_owned(),
                )),
                _ => {
                    return Err((
                        Value::Null,
                        RpcError::new(INVALID_REQUEST, "Invalid Request: no method"),
                    ))
                }
            };
            Ok(Incoming::Response { id, result })
        }
        (None, None) => Err((
            Value::Null,
            RpcError::new(INVALID_REQUEST, "Invalid Request: no method"),
        )),
    }
}

/// What to do with the client's answer to one of our requests.
pub type ResponseHandler = Box<dyn FnOnce(Result<Value, RpcError>) + Send>;

/// Requests this server sent to the client, by id. A handler dropped unanswered (shutdown)
/// releases whatever it holds, which fails the waiting turn's reply cleanly.
#[derive(Default)]
pub struct Pending {
    next: AtomicU64,
    table: Mutex<HashMap<u64, ResponseHandler>>,
}

impl Pending {
    pub fn register(&self, handler: ResponseHandler) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, handler);
        id
    }

    /// Runs the handler of `id`; false when nothing waits for it (a response to nothing).
    pub fn resolve(&self, id: &Value, result: Result<Value, RpcError>) -> bool {
        let Some(n) = id.as_u64() else {
            return false;
        };
        let handler = self
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&n);
        match handler {
            Some(h) => {
                h(result);
                true
            }
            None => false,
        }
    }

    /// Drops every waiting handler (shutdown).
    pub fn clear(&self) {
        let drained: Vec<_> = self
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        drop(drained);
    }
}
