//! JSON-RPC 2.0 over newline-delimited stdio: the outbox (one writer thread, messages in the
//! order they were queued), incoming message classification, and the table of requests this
//! server sent to the client and awaits answers for.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::Serialize;
use serde_json::Value;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// Messages queued for the writer; past this a producer waits (a client that stops reading
/// slows the turn down instead of growing memory).
const OUTBOX_CAPACITY: usize = 4096;

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

/// The write side: serializes a message into one line and hands it to the writer thread.
#[derive(Clone)]
pub struct Outbox {
    tx: SyncSender<Vec<u8>>,
    closed: Arc<AtomicBool>,
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
    /// Starts the writer thread over `sink`. The thread ends when every `Outbox` clone is
    /// dropped (after writing what was queued) or when the sink fails (the client is gone).
    pub fn start(sink: impl Write + Send + 'static) -> (Outbox, JoinHandle<()>) {
        let (tx, rx) = sync_channel(OUTBOX_CAPACITY);
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        let handle = std::thread::Builder::new()
            .name("acp-writer".into())
            .spawn(move || write_loop(rx, sink, &flag))
            .expect("the writer thread starts");
        (Outbox { tx, closed }, handle)
    }

    /// Whether the client's side of the output is gone.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn push(&self, line: Vec<u8>) {
        match self.tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(line)) => {
                let _ = self.tx.send(line);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Ends the writer once what is queued is written; later messages are dropped.
    pub fn close(&self) {
        self.push(Vec::new());
    }

    fn line<T: Serialize>(value: &T) -> Vec<u8> {
        let mut buf = Vec::with_capacity(128);
        serde_json::to_writer(&mut buf, value).expect("messages serialize");
        buf.push(b'\n');
        buf
    }

    pub fn notify<P: Serialize>(&self, method: &str, params: &P) {
        self.push(Self::line(&Notification {
            jsonrpc: "2.0",
            method,
            params,
        }));
    }

    pub fn request<P: Serialize>(&self, id: u64, method: &str, params: &P) {
        self.push(Self::line(&Request {
            jsonrpc: "2.0",
            id,
            method,
            params,
        }));
    }

    pub fn respond<R: Serialize>(&self, id: &Value, result: &R) {
        self.push(Self::line(&Success {
            jsonrpc: "2.0",
            id,
            result,
        }));
    }

    pub fn fail(&self, id: &Value, error: &RpcError) {
        self.push(Self::line(&Failure {
            jsonrpc: "2.0",
            id,
            error,
        }));
    }

    pub fn reply(&self, id: &Value, result: Result<Value, RpcError>) {
        match result {
            Ok(v) => self.respond(id, &v),
            Err(e) => self.fail(id, &e),
        }
    }
}

fn write_loop(rx: Receiver<Vec<u8>>, sink: impl Write, closed: &AtomicBool) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, sink);
    while let Ok(first) = rx.recv() {
        if first.is_empty() {
            break;
        }
        let mut ok = out.write_all(&first).is_ok();
        // Batch whatever else is already queued into the same flush.
        while ok {
            match rx.try_recv() {
                Ok(next) if next.is_empty() => {
                    let _ = out.flush();
                    return;
                }
                Ok(next) => ok = out.write_all(&next).is_ok(),
                Err(_) => break,
            }
        }
        if !ok || out.flush().is_err() {
            closed.store(true, Ordering::Release);
            // Keep draining so producers never block on a dead client.
            while rx.recv().is_ok() {}
            return;
        }
    }
    let _ = out.flush();
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
