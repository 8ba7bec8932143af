//! `tools/call` on a stdio server, written by the calling task and answered by the reader.
//!
//! Through rmcp a call crosses tasks four times: the caller hands the request to rmcp's service
//! task over a channel, which spawns a task to write it and is woken when that task ends, and
//! the answer goes from the service task back to the caller. Here the caller writes the line
//! itself ([`SharedStdin`]) and the transport's reader hands the answer straight to it
//! ([`DirectCalls::deliver`]): one crossing, the reader's. rmcp keeps everything else on the
//! connection (initialisation, notifications, cancellation included, the server's requests,
//! every other request), and any call this cannot write at once goes through rmcp as before.
//!
//! The ids of these calls are numbers from [`FIRST_DIRECT_ID`] up, so they never meet rmcp's
//! (numbered from 0, one per request); each call's progress token is its id.

use std::fmt::Write as _;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{JsonRpcMessage, NumberOrString, ProgressToken, ServerJsonRpcMessage};
use rmcp::service::ServiceError;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::shared_stdin::{LineWrite, SharedStdin};

/// The first id of a directly written call: past any id rmcp's counter reaches (it would take
/// 2^32 requests), and exact in every JSON reader (JavaScript's numbers are exact to 2^53).
pub(crate) const FIRST_DIRECT_ID: i64 = 1 << 32;

/// A call's answer, as rmcp would have given it.
pub(crate) type Answer = Result<rmcp::model::ServerResult, ServiceError>;

#[derive(Default)]
struct Waiting {
    /// The calls written and not answered yet (a handful at most: one per parallel call).
    calls: Vec<(i64, oneshot::Sender<Answer>)>,
    /// The connection ended: no answer will come.
    closed: bool,
}

struct Shared {
    stdin: SharedStdin,
    waiting: Mutex<Waiting>,
    next_id: AtomicI64,
}

/// One stdio connection's directly written calls (see the module doc).
#[derive(Clone)]
pub(crate) struct DirectCalls(Arc<Shared>);

/// A call whose answer is awaited; dropping it forgets the call (an answer is then discarded).
pub(crate) struct DirectCall {
    id: i64,
    pub(crate) answer: oneshot::Receiver<Answer>,
    calls: DirectCalls,
}

/// What [`DirectCalls::write`] did with a call's request.
pub(crate) enum Written {
    /// On its way; the answer comes to the call.
    Sent,
    /// Not written (the pipe is busy or full): send the request through rmcp.
    Busy,
}

impl DirectCalls {
    pub(crate) fn new(stdin: SharedStdin) -> DirectCalls {
        DirectCalls(Arc::new(Shared {
            stdin,
            waiting: Mutex::default(),
            next_id: AtomicI64::new(FIRST_DIRECT_ID),
        }))
    }

    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.0.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new call, waiting for its answer before its request is written (the reader could
    /// read the answer before the writer returns); `None` once the connection has ended.
    pub(crate) fn begin(&self) -> Option<DirectCall> {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.waiting();
        if waiting.closed {
            return None;
        }
        waiting.calls.push((id, tx));
        Some(DirectCall {
            id,
            answer: rx,
            calls: self.clone(),
        })
    }

    /// Writes `call`'s `tools/call` request for `tool` with `args`.
    pub(crate) fn write(
        &self,
        call: &DirectCall,
        tool: &str,
        args: &Map<String, Value>,
    ) -> io::Result<Written> {
        let line = request_line(call.id, tool, args)?;
        match self.0.stdin.try_write_line(&line)? {
            LineWrite::Written => Ok(Written::Sent),
            LineWrite::Busy => Ok(Written::Busy),
            LineWrite::Partly => {
                // The rest is written whatever becomes of the call: half a line would garble
                // every message after it.
                tokio::spawn(self.0.stdin.clone().write_tail());
                Ok(Written::Sent)
            }
        }
    }

    /// Hands `msg` to its call when it answers one; any other message is returned for rmcp.
    pub(crate) fn deliver(&self, msg: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        let (id, answer) = match msg {
            JsonRpcMessage::Response(r) => match r.id {
                NumberOrString::Number(id) if id >= FIRST_DIRECT_ID => (id, Ok(r.result)),
                _ => return Some(JsonRpcMessage::Response(r)),
            },
            JsonRpcMessage::Error(e) => match e.id {
                Some(NumberOrString::Number(id)) if id >= FIRST_DIRECT_ID => {
                    (id, Err(ServiceError::McpError(e.error)))
                }
                _ => return Some(JsonRpcMessage::Error(e)),
            },
            other => return Some(other),
        };
        let tx = {
            let mut waiting = self.waiting();
            let at = waiting.calls.iter().position(|(i, _)| *i == id);
            at.map(|at| waiting.calls.swap_remove(at).1)
        };
        // No call: it was cancelled or timed out (rmcp, too, drops such an answer).
        if let Some(tx) = tx {
            let _ = tx.send(answer);
        }
        None
    }

    /// The connection ended: every call waiting is told (its answer channel closes).
    pub(crate) fn close(&self) {
        let mut waiting = self.waiting();
        waiting.closed = true;
        waiting.calls.clear();
    }
}

impl DirectCall {
    pub(crate) fn id(&self) -> NumberOrString {
        NumberOrString::Number(self.id)
    }

    pub(crate) fn progress_token(&self) -> ProgressToken {
        ProgressToken(self.id())
    }
}

impl Drop for DirectCall {
    fn drop(&mut self) {
        let mut waiting = self.calls.waiting();
        waiting.calls.retain(|(i, _)| *i != self.id);
    }
}

/// `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{...}}` and its newline: what rmcp
/// writes for the call, the arguments serialised from the caller's map (not a copy of it).
fn request_line(id: i64, tool: &str, args: &Map<String, Value>) -> io::Result<Vec<u8>> {
    let mut head = String::with_capacity(128 + tool.len());
    // Writing to a String cannot fail.
    let _ = write!(
        head,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"_meta":{{"progressToken":{id}}},"name":"#
    );
    let mut line = head.into_bytes();
    serde_json::to_writer(&mut line, tool)?;
    line.extend_from_slice(br#","arguments":"#);
    serde_json::to_writer(&mut line, args)?;
    line.extend_from_slice(b"}}\n");
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        CallToolResult, ClientJsonRpcMessage, ClientRequest, ErrorData, GetMeta, JsonRpcError,
        JsonRpcResponse, JsonRpcVersion2_0, ServerResult,
    };
    use serde_json::json;

    fn answer(id: i64) -> ServerJsonRpcMessage {
        JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id: NumberOrString::Number(id),
            result: ServerResult::CallToolResult(CallToolResult::default()),
        })
    }

    fn error(id: i64) -> ServerJsonRpcMessage {
        JsonRpcMessage::Error(JsonRpcError {
            jsonrpc: JsonRpcVersion2_0,
            id: Some(NumberOrString::Number(id)),
            error: ErrorData::invalid_params("bad", None),
        })
    }

    /// Answers go to their call, rmcp's messages and answers to forgotten calls do not reach
    /// a call, and the end of the connection ends every call waiting.
    #[test]
    fn answers_reach_their_call_and_the_end_of_the_connection_ends_the_rest() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut child = tokio::process::Command::new("cat")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let (stdin, mut rmcp) = SharedStdin::new(child.stdin.take().unwrap());
            // Written through rmcp's writer first, which waits for the new pipe to be ready.
            tokio::io::AsyncWriteExt::write_all(&mut rmcp, b"\n")
                .await
                .unwrap();
            let calls = DirectCalls::new(stdin);
            let mut a = calls.begin().unwrap();
            let mut b = calls.begin().unwrap();
            let forgotten = calls.begin().unwrap();
            let forgotten_id = forgotten.id;
            drop(forgotten);
            assert!(matches!(
                calls.write(&a, "echo", &Map::new()).unwrap(),
                Written::Sent
            ));
            // rmcp's own: handed back.
            assert!(calls.deliver(answer(3)).is_some());
            assert!(calls.deliver(error(FIRST_DIRECT_ID - 1)).is_some());
            // A forgotten call's answer: dropped.
            assert!(calls.deliver(answer(forgotten_id)).is_none());
            assert!(calls.deliver(error(b.id)).is_none());
            assert!(calls.deliver(answer(a.id)).is_none());
            assert!(matches!(
                a.answer.try_recv(),
                Ok(Ok(ServerResult::CallToolResult(_)))
            ));
            assert!(matches!(
                b.answer.try_recv(),
                Ok(Err(ServiceError::McpError(_)))
            ));
            let mut c = calls.begin().unwrap();
            calls.close();
            assert!(c.answer.try_recv().is_err());
            assert!(calls.begin().is_none());
            assert!(calls.waiting().calls.is_empty());
        });
    }

    /// The line reads back, through rmcp's own types, as the request rmcp would have sent.
    #[test]
    fn the_request_line_is_the_call_rmcp_would_write() {
        let args = json!({"text": "a \"quoted\"\nline", "n": [1, 2.5, null], "o": {}});
        let Value::Object(args) = args else {
            unreachable!()
        };
        let line = request_line(FIRST_DIRECT_ID + 7, "ech\"o", &args).unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let msg: ClientJsonRpcMessage = serde_json::from_slice(&line).unwrap();
        let JsonRpcMessage::Request(r) = msg else {
            panic!("not a request: {msg:?}")
        };
        assert_eq!(r.id, NumberOrString::Number(FIRST_DIRECT_ID + 7));
        assert_eq!(
            r.request.get_meta().get_progress_token(),
            Some(ProgressToken(NumberOrString::Number(FIRST_DIRECT_ID + 7)))
        );
        let ClientRequest::CallToolRequest(call) = r.request else {
            panic!("not tools/call")
        };
        assert_eq!(call.params.name, "ech\"o");
        assert_eq!(call.params.arguments, Some(args));
    }
}
