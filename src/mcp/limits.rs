//! Limits an MCP server must keep, and the tripwire that closes its connection when it breaks
//! one. A tripped connection ends its calls in flight at once with the reason: rmcp's own loop
//! only fails them once it has wound down, which takes up to 5 s (it waits for the replies it
//! is still writing), and its message would not say why.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::RequestId;
use tokio::sync::watch;

/// The largest message (one line on stdio) a server may send, rmcp's own bound for its stdio
/// transport and for an SSE event: past it a message would have to be dropped, and a dropped
/// answer leaves its call waiting forever.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// How many of a server's requests to the client (`ping` and the like) may wait for their
/// reply to be written. rmcp runs each on a task and writes each reply on another (~2.5 KB
/// together), so a server that sends requests and reads no replies piled them up without
/// bound (1 GB at 400,000 pings). A server that reads its replies never comes near it.
pub(crate) const MAX_UNANSWERED_REQUESTS: usize = 64;

/// Bounds on one server's whole tool list (config `mcp_limits`). The list is kept for as long
/// as the connection and sent to the model with every request, and a server can page it out in
/// as many 16 MiB messages as it likes: past either bound the server fails, never half-listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ToolListLimits {
    /// Tools in the list.
    pub(crate) max_tools: usize,
    /// The list's size as JSON: each tool's name, description, schemas and annotations.
    pub(crate) max_bytes: usize,
}

impl Default for ToolListLimits {
    /// The reference's 1,024 tools; 8 MiB is some hundred times the largest real list seen
    /// (a few hundred tools at a few KiB each).
    fn default() -> Self {
        ToolListLimits {
            max_tools: 1024,
            max_bytes: 8 << 20,
        }
    }
}

impl ToolListLimits {
    /// `mcp_limits`: `{"max_tools": n, "max_tool_list_bytes": n}`, both optional, positive.
    pub(crate) fn parse(v: Option<&serde_json::Value>) -> Result<Self, String> {
        let mut limits = ToolListLimits::default();
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(limits);
        };
        let o = v
            .as_object()
            .ok_or_else(|| "config field `mcp_limits`: must be an object".to_owned())?;
        for (k, v) in o {
            let slot = match k.as_str() {
                "max_tools" => &mut limits.max_tools,
                "max_tool_list_bytes" => &mut limits.max_bytes,
                _ => {
                    return Err(format!(
                        "config field `mcp_limits.{k}`: not a known key (known: max_tools, \
                         max_tool_list_bytes)"
                    ))
                }
            };
            *slot = v
                .as_u64()
                .filter(|n| *n > 0)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    format!("config field `mcp_limits.{k}`: must be a positive integer")
                })?;
        }
        Ok(limits)
    }

    /// The byte bound as the failure message says it.
    pub(crate) fn bytes_text(&self) -> String {
        if self.max_bytes.is_multiple_of(1 << 20) {
            format!("{} MiB", self.max_bytes >> 20)
        } else {
            format!("{} bytes", self.max_bytes)
        }
    }
}

/// Counts what is written to it, so a value's JSON size is known without building the text.
#[derive(Default)]
pub(crate) struct ByteCount(pub(crate) usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The limit a server broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Breach {
    /// A message over [`MAX_MESSAGE_BYTES`].
    OversizedMessage,
    /// More than [`MAX_UNANSWERED_REQUESTS`] requests whose replies were not yet written.
    UnansweredRequests,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Breach::OversizedMessage => write!(
                f,
                "the server sent a message over {} MiB, the limit of one message",
                MAX_MESSAGE_BYTES >> 20
            ),
            Breach::UnansweredRequests => write!(
                f,
                "the server sent more than {MAX_UNANSWERED_REQUESTS} requests without reading \
                 their replies"
            ),
        }
    }
}

/// Set once, by whichever part of a connection sees the server break a limit; the connection
/// waits on it beside each call.
#[derive(Clone)]
pub(crate) struct Tripwire(Arc<watch::Sender<Option<Breach>>>);

impl Default for Tripwire {
    fn default() -> Self {
        Tripwire(Arc::new(watch::Sender::new(None)))
    }
}

impl Tripwire {
    /// Records `breach` unless one is recorded already (the first one is the cause).
    pub(crate) fn trip(&self, breach: Breach) {
        self.0.send_if_modified(|b| {
            if b.is_some() {
                return false;
            }
            *b = Some(breach);
            true
        });
    }

    pub(crate) fn tripped(&self) -> Option<Breach> {
        *self.0.borrow()
    }

    /// Resolves with the breach once there is one.
    pub(crate) async fn wait(&self) -> Breach {
        let mut rx = self.0.subscribe();
        let seen = rx.wait_for(Option::is_some).await.ok().and_then(|b| *b);
        match seen {
            Some(b) => b,
            // The sender lives in `self`, so the channel cannot close while this waits.
            None => std::future::pending().await,
        }
    }
}

/// The server's requests whose replies are not yet written, by id (a reply is matched to its
/// request by id, and a request the server cancels gets none).
#[derive(Clone, Default)]
pub(crate) struct UnansweredRequests(Arc<Mutex<HashSet<RequestId>>>);

impl UnansweredRequests {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a request from the server; false once more than the cap wait.
    pub(crate) fn received(&self, id: RequestId) -> bool {
        let mut waiting = self.lock();
        waiting.insert(id);
        waiting.len() <= MAX_UNANSWERED_REQUESTS
    }

    /// The server cancelled its request: rmcp writes no reply to it.
    pub(crate) fn cancelled(&self, id: &RequestId) {
        self.lock().remove(id);
    }

    /// The reply to `id` is being written; it stops waiting when the guard drops, once the
    /// write is done (or failed, or abandoned with the connection).
    pub(crate) fn replying(&self, id: RequestId) -> Replying {
        Replying {
            waiting: self.clone(),
            id,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// A reply being written; see [`UnansweredRequests::replying`].
pub(crate) struct Replying {
    waiting: UnansweredRequests,
    id: RequestId,
}

impl Drop for Replying {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_list_limits_parse_with_defaults_and_refuse_bad_values() {
        use serde_json::json;
        let d = ToolListLimits::default();
        assert_eq!(ToolListLimits::parse(None), Ok(d));
        assert_eq!(d.bytes_text(), "8 MiB");
        let l = ToolListLimits::parse(Some(&json!({"max_tool_list_bytes": 4096}))).unwrap();
        assert_eq!((l.max_tools, l.max_bytes), (1024, 4096));
        assert_eq!(l.bytes_text(), "4096 bytes");
        for bad in [
            json!({"max_tools": 0}),
            json!({"max_tools": "1"}),
            json!({"x": 1}),
            json!(3),
        ] {
            assert!(ToolListLimits::parse(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_first_breach_is_kept_and_wakes_a_waiter() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let wire = Tripwire::default();
        assert_eq!(wire.tripped(), None);
        let waiter = {
            let wire = wire.clone();
            rt.spawn(async move { wire.wait().await })
        };
        wire.trip(Breach::OversizedMessage);
        assert_eq!(rt.block_on(waiter).unwrap(), Breach::OversizedMessage);
        assert_eq!(rt.block_on(wire.wait()), Breach::OversizedMessage);
        assert_eq!(wire.tripped(), Some(Breach::OversizedMessage));
    }

    #[test]
    fn requests_count_until_their_reply_is_written_or_they_are_cancelled() {
        use rmcp::model::NumberOrString;
        let id = |n: i64| -> RequestId { NumberOrString::Number(n) };
        let waiting = UnansweredRequests::default();
        for n in 0..MAX_UNANSWERED_REQUESTS as i64 {
            assert!(waiting.received(id(n)));
        }
        // The same id again is the same request waiting.
        assert!(waiting.received(id(0)));
        let reply = waiting.replying(id(0));
        assert_eq!(waiting.len(), MAX_UNANSWERED_REQUESTS);
        drop(reply);
        waiting.cancelled(&id(1));
        assert_eq!(waiting.len(), MAX_UNANSWERED_REQUESTS - 2);
        assert!(waiting.received(id(1000)));
        assert!(waiting.received(id(1001)));
        assert!(!waiting.received(id(1002)));
    }
}
