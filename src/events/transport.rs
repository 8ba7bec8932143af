//! The transport: how the agent talks to its host (spec §1).
//!
//! `emit` is fire-and-forget. The three requests answer through a [`Reply`], before the method
//! returns or later from any thread; the turn waits for it cancellably. Request methods are
//! always called on a blocking thread, never on a runtime worker, so a host may block in them.
//! Every method has the NullTransport's behaviour as its default.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::{JsonText, TurnEvent};

/// What `ask_user` answers when nobody can answer (exact reference text).
pub const NON_INTERACTIVE_ANSWER: &str = "[ask_user: not available in non-interactive mode]";

/// A listener of a transport's event fan-out; receives each event's JSON.
pub(crate) type Listener = Arc<dyn Fn(&str) + Send + Sync>;

/// A `confirm_tool` request.
#[derive(Debug, Clone)]
pub struct ConfirmRequest {
    pub tool_name: String,
    pub description: String,
    pub args_json: String,
    pub call_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    Allow,
    Deny,
    /// Declined because no person can approve (the reference's `approval-unavailable`).
    DenyUnavailable,
}

/// A host's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Confirm(Confirmation),
    Text(String),
    /// `on_max_iterations`: `{"action": "stop" | "continue" | "new_instruction", "message"?}`.
    Json(String),
    /// The host failed the request (the reference's exception); the message explains.
    Fail(String),
    /// A host tool's result text.
    ToolResult(String),
    /// A host tool's failure: the error type (the host event's `error_type`) and message.
    ToolError {
        error_type: String,
        message: String,
    },
    /// A compaction controller's decision.
    Compaction(CompactionDecision),
    /// A host hook's output: a JSON object in Claude Code's hook output format, or empty for
    /// no opinion (docs/hooks.md).
    Hook(String),
}

/// What a compaction controller decides about one full compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionDecision {
    /// The library summarises, as it would without a controller.
    Allow,
    /// No compaction; the host's reason, if it gave one, goes into `compaction_settled`.
    Cancel(Option<String>),
    /// This text is the summary, instead of the model's.
    Summary(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyKind {
    Confirm,
    AskUser,
    MaxIterations,
    /// A host tool's execution.
    HostTool,
    /// A compaction controller's decision.
    Compaction,
    /// A host hook's output.
    Hook,
}

/// The one-shot answer slot of a request. Answering consumes it; dropping it unanswered fails
/// the request, so a turn never waits on a reply nobody holds.
#[derive(Debug)]
pub struct Reply {
    kind: ReplyKind,
    tx: Option<oneshot::Sender<Answer>>,
}

/// How asking a host ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unanswered {
    Cancelled,
    /// No answer within this long.
    TimedOut(std::time::Duration),
}

/// Asks a host on a blocking thread (`ask` gets the request's [`Reply`]) and waits for the
/// answer, cancellably, at most `timeout`. A deferred host answers later from any thread, so
/// the answer is awaited, not the callback; but once answered (perhaps from inside the
/// callback) this returns only after the callback has too, so no request outlives its hold on
/// the host's userdata, whose finalizer the host may be waiting for. A cancel still ends that
/// wait. A reply dropped unanswered is `Ok(Err(_))`.
pub(crate) async fn ask_blocking(
    kind: ReplyKind,
    ask: impl FnOnce(Reply) + Send + 'static,
    cancel: &crate::cancel::CancelToken,
    timeout: Option<std::time::Duration>,
) -> Result<Result<Answer, oneshot::error::RecvError>, Unanswered> {
    if cancel.is_cancelled() {
        return Err(Unanswered::Cancelled);
    }
    let (reply, rx) = Reply::new(kind);
    let callback = tokio::task::spawn_blocking(move || ask(reply));
    let timed_out = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    let answer = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Unanswered::Cancelled),
        r = rx => r,
        _ = timed_out => return Err(Unanswered::TimedOut(timeout.unwrap_or_default())),
    };
    tokio::select! {
        _ = callback => {}
        _ = cancel.cancelled() => {}
    }
    Ok(answer)
}

#[derive(Debug, thiserror::Error)]
#[error("this reply expects a {expected} answer")]
pub struct WrongAnswer {
    pub(crate) expected: &'static str,
}

impl Reply {
    pub(crate) fn new(kind: ReplyKind) -> (Reply, oneshot::Receiver<Answer>) {
        let (tx, rx) = oneshot::channel();
        (Reply { kind, tx: Some(tx) }, rx)
    }

    /// Delivers the answer. An answer of the wrong kind fails the request (and says so).
    /// A late answer (the turn was cancelled meanwhile) is dropped silently.
    pub fn answer(mut self, answer: Answer) -> Result<(), WrongAnswer> {
        let fits = matches!(
            (self.kind, &answer),
            (_, Answer::Fail(_))
                | (ReplyKind::Confirm, Answer::Confirm(_))
                | (ReplyKind::AskUser, Answer::Text(_))
                | (ReplyKind::MaxIterations, Answer::Json(_))
                | (
                    ReplyKind::HostTool,
                    Answer::ToolResult(_) | Answer::ToolError { .. }
                )
                | (ReplyKind::Compaction, Answer::Compaction(_))
                | (ReplyKind::Hook, Answer::Hook(_))
        );
        let expected = match self.kind {
            ReplyKind::Confirm => "confirmation",
            ReplyKind::AskUser => "text",
            ReplyKind::MaxIterations => "JSON",
            ReplyKind::HostTool => "tool result",
            ReplyKind::Compaction => "compaction decision",
            ReplyKind::Hook => "hook output",
        };
        let tx = self.tx.take().expect("a reply is answered once");
        if fits {
            let _ = tx.send(answer);
            Ok(())
        } else {
            let _ = tx.send(Answer::Fail(format!(
                "the host answered with the wrong kind (this reply expects a {expected} answer)"
            )));
            Err(WrongAnswer { expected })
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Answer::Fail(
                "the host released the request without answering".into(),
            ));
        }
    }
}

pub trait Transport: Send + Sync {
    /// One event's JSON (`{"type","schema_version","data"}`); must return quickly.
    fn emit(&self, event: &str);

    /// [`Transport::emit`] for an event the library wrote: a transport that hands events to C
    /// lends [`JsonText`] in place (it is NUL-terminated) instead of copying it.
    fn emit_json(&self, event: JsonText<'_>) {
        self.emit(event.as_str());
    }

    /// Whether an event emitted now would reach anyone. `false` lets the agent skip writing
    /// the events nobody receives (and what only they need, such as a tool result's digest).
    /// Asked before each event, so a listener added during a turn gets the events after it.
    /// The default is `true`: a transport that cannot tell gets every event.
    fn listens(&self) -> bool {
        true
    }

    /// Whether [`Transport::listens`] is `true` for the transport's whole life, so the agent
    /// need not ask before each event (a streamed delta asked on every piece).
    fn always_listens(&self) -> bool {
        false
    }

    /// Whether the transport wants the turn's typed events through [`Transport::observe`].
    /// Asked once, when the agent is made. The default is `false`.
    fn observes(&self) -> bool {
        false
    }

    /// One typed event of a turn, called inline on the turn's thread, in order, before the
    /// same event's JSON goes to [`Transport::emit`] (when the transport also listens). An
    /// observer reads the fields it needs, so a renamed field does not compile, where a
    /// re-parse of the JSON would drop the event. Must return quickly; its calls do not go
    /// through the gate that keeps `emit`'s calls from overlapping.
    fn observe(&self, _event: &TurnEvent<'_>) {}

    fn confirm_tool(&self, _req: ConfirmRequest, reply: Reply) {
        let _ = reply.answer(Answer::Confirm(Confirmation::Allow));
    }

    /// `hints_json`: `{"header": str|null, "options": [str]|null, "multiple": bool, "allow_custom": bool}`.
    fn ask_user(&self, _question: &str, _hints_json: &str, reply: Reply) {
        let _ = reply.answer(Answer::Text(NON_INTERACTIVE_ANSWER.to_owned()));
    }

    /// `pending_json`: the last assistant message's tool calls, `[{"name", "args"}]`.
    fn on_max_iterations(&self, _count: u32, _pending_json: &str, reply: Reply) {
        let _ = reply.answer(Answer::Json(r#"{"action":"stop"}"#.to_owned()));
    }

    /// Whether the transport can fan events out to subscribers. The streaming entry points do
    /// not ask: they deliver deltas to the stream themselves.
    fn supports_subscribe(&self) -> bool {
        false
    }
}

/// Fan-out to listeners by registration id. Delivery iterates over a snapshot, so subscribing or
/// unsubscribing during delivery takes effect from the next event; a panicking listener is
/// contained and the others still run.
#[derive(Default)]
pub(crate) struct Broadcaster {
    listeners: Mutex<Arc<Vec<(u64, Listener)>>>,
    count: AtomicUsize,
    next_id: AtomicU64,
    /// Set by [`Broadcaster::close`]: a delivery in flight calls no further listener.
    closed: AtomicBool,
}

impl Broadcaster {
    pub(crate) fn subscribe(&self, listener: Listener) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut guard = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        let mut list = (**guard).clone();
        list.push((id, listener));
        self.count.store(list.len(), Ordering::Release);
        *guard = Arc::new(list);
        id
    }

    pub(crate) fn unsubscribe(&self, id: u64) {
        let mut guard = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        if guard.iter().any(|(i, _)| *i == id) {
            let list: Vec<_> = guard.iter().filter(|(i, _)| *i != id).cloned().collect();
            self.count.store(list.len(), Ordering::Release);
            *guard = Arc::new(list);
        }
    }

    /// Drops every listener (their finalizers run now, or on the thread that finishes a
    /// delivery still holding them) and stops deliveries in flight after their current one.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let dropped =
            std::mem::take(&mut *self.listeners.lock().unwrap_or_else(|e| e.into_inner()));
        self.count.store(0, Ordering::Release);
        // Outside the lock: a finalizer may call back in.
        drop(dropped);
    }

    pub(crate) fn has_listeners(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    pub(crate) fn notify(&self, event: &str) {
        if !self.has_listeners() {
            return;
        }
        let snapshot = self
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (_, listener) in snapshot.iter() {
            if self.closed.load(Ordering::Acquire) {
                break;
            }
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(event)));
        }
    }
}

/// The reference's NullTransport: discards events (after notifying subscribers), approves,
/// answers the fixed non-interactive text, stops at the iteration limit.
#[derive(Default)]
pub(crate) struct NullTransport {
    pub(crate) broadcaster: Broadcaster,
}

impl Transport for NullTransport {
    fn emit(&self, event: &str) {
        self.broadcaster.notify(event);
    }
    fn listens(&self) -> bool {
        self.broadcaster.has_listeners()
    }
    fn supports_subscribe(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcaster_snapshot_and_idempotent_unsubscribe() {
        let b = Arc::new(Broadcaster::default());
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let id = b.subscribe(Arc::new(move |_| {
            h.fetch_add(1, Ordering::SeqCst);
        }));
        b.subscribe(Arc::new(|_| panic!("bad listener")));
        b.notify("{}");
        b.unsubscribe(id);
        b.unsubscribe(id);
        b.notify("{}");
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert_eq!(b.count.load(Ordering::Acquire), 1);
    }

    #[test]
    fn dropped_reply_fails_and_wrong_kind_is_reported() {
        let (r, mut rx) = Reply::new(ReplyKind::Confirm);
        drop(r);
        assert!(matches!(rx.try_recv(), Ok(Answer::Fail(_))));
        let (r, mut rx) = Reply::new(ReplyKind::Confirm);
        assert!(r.answer(Answer::Text("x".into())).is_err());
        assert!(matches!(rx.try_recv(), Ok(Answer::Fail(_))));
    }
}
