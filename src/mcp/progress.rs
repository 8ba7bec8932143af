//! Progress notifications routed to their call in the order the server wrote them, and before
//! the call's result.
//!
//! rmcp hands each notification to the client handler on a task of its own, while it hands a
//! response to its caller directly: the handler of the notifications written just before a
//! result can run after the caller has the result (their lines were lost), and two handlers
//! can run out of order. So the lines are taken where messages come in, in the transport's
//! `receive`, which rmcp calls for one message at a time: a line is queued for its call before
//! the next message (the result) is even read. A tool call's route is made when its request
//! is handed to the transport, before the server can see it (other requests have none: the
//! client forwards progress for tool calls only).
//!
//! The same place counts the server's requests to the client until their replies are written,
//! and closes the connection past `limits::MAX_UNANSWERED_REQUESTS`: rmcp takes every request
//! it is given, each on tasks of its own, however many replies wait to be written.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, ProgressNotificationParam,
    ProgressToken, ServerJsonRpcMessage, ServerNotification,
};

use super::limits::{Breach, Tripwire, UnansweredRequests};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::sync::Notify;

/// Bytes of one call's progress lines waiting for the call to forward them. The call forwards
/// each wake-up at once into the turn's own bounded mailbox, so this only fills if the
/// runtime is starved while a server floods; past it, lines are counted, never queued.
const PENDING_BYTES: usize = 64 * 1024;
/// What is kept of a progress message (a line, not a document).
const MESSAGE_CHARS: usize = 1000;

#[derive(Default)]
struct Pending {
    text: String,
    dropped: u64,
}

/// One call's queue of progress lines.
#[derive(Default)]
pub(crate) struct ProgressSlot {
    pending: Mutex<Pending>,
    notify: Notify,
}

impl ProgressSlot {
    fn push(&self, line: &str) {
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            // Once one is dropped, later ones are too until the call takes the queue, so the
            // lines keep their order around the gap.
            if p.dropped == 0 && p.text.len() + line.len() <= PENDING_BYTES {
                p.text.push_str(line);
            } else {
                p.dropped += 1;
            }
        }
        self.notify.notify_one();
    }

    /// The lines queued since the last take, with a notice for any that were dropped.
    pub(crate) fn take(&self) -> Option<String> {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.text.is_empty() && p.dropped == 0 {
            return None;
        }
        let Pending { mut text, dropped } = std::mem::take(&mut *p);
        if dropped > 0 {
            text.push_str(&format!(
                "[{dropped} progress notifications not shown: the server sent them faster than \
                 they could be forwarded]\n"
            ));
        }
        Some(text)
    }

    /// Resolves after a push (or at once if one happened since the last wait).
    pub(crate) async fn pushed(&self) {
        self.notify.notified().await;
    }
}

/// The calls in flight on one connection, by progress token.
#[derive(Clone, Default)]
pub(crate) struct ProgressRoutes(Arc<Mutex<Routes>>);

#[derive(Default)]
struct Routes {
    slots: HashMap<ProgressToken, RouteEntry>,
    /// Calls that ended before their request was written: the transport makes no route for
    /// them (it would never be removed).
    retired: HashSet<ProgressToken>,
}

struct RouteEntry {
    slot: Arc<ProgressSlot>,
    /// The request was handed to the transport.
    sent: bool,
}

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The route of the call whose request carries `token`, made if the transport has not
    /// made it yet. It lives until the returned guard is dropped.
    pub(crate) fn route(&self, token: &ProgressToken) -> Route {
        let slot = self
            .lock()
            .slots
            .entry(token.clone())
            .or_insert_with(|| RouteEntry {
                slot: Arc::default(),
                sent: false,
            })
            .slot
            .clone();
        Route {
            routes: self.clone(),
            token: token.clone(),
            slot,
        }
    }

    /// The route of a call written by its own task (`direct_call.rs`), made before its
    /// request is written: the transport never sees that request, so it is marked written.
    pub(crate) fn route_written(&self, token: &ProgressToken) -> Route {
        self.sending(token.clone());
        self.route(token)
    }

    /// The request carrying `token` is about to be written.
    fn sending(&self, token: ProgressToken) {
        let mut r = self.lock();
        if r.retired.remove(&token) {
            return;
        }
        r.slots
            .entry(token)
            .or_insert_with(|| RouteEntry {
                slot: Arc::default(),
                sent: false,
            })
            .sent = true;
    }

    fn deliver(&self, params: &ProgressNotificationParam) {
        let Some(slot) = self
            .lock()
            .slots
            .get(&params.progress_token)
            .map(|e| e.slot.clone())
        else {
            return;
        };
        slot.push(&line(params));
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        let r = self.lock();
        r.slots.is_empty() && r.retired.is_empty()
    }
}

/// A call's route: removed when dropped.
pub(crate) struct Route {
    routes: ProgressRoutes,
    token: ProgressToken,
    pub(crate) slot: Arc<ProgressSlot>,
}

impl Drop for Route {
    fn drop(&mut self) {
        let mut r = self.routes.lock();
        if let Some(e) = r.slots.remove(&self.token) {
            if !e.sent {
                r.retired.insert(self.token.clone());
            }
        }
    }
}

/// `progress 2/4: message` (the total and message when the server gave them).
fn line(params: &ProgressNotificationParam) -> String {
    let mut line = match params.total {
        Some(total) => format!("progress {}/{}", params.progress, total),
        None => format!("progress {}", params.progress),
    };
    if let Some(m) = params.message.as_deref().filter(|m| !m.is_empty()) {
        line.push_str(": ");
        line.extend(m.chars().take(MESSAGE_CHARS));
    }
    line.push('\n');
    line
}

/// A transport that routes progress notifications as they are read and bounds the server's
/// unanswered requests (see the module doc).
pub(crate) struct ProgressTap<T> {
    pub(crate) inner: T,
    pub(crate) routes: ProgressRoutes,
    pub(crate) unanswered: UnansweredRequests,
    pub(crate) tripwire: Tripwire,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let reply_to = match &item {
            JsonRpcMessage::Request(r) => {
                if let ClientRequest::CallToolRequest(_) = &r.request {
                    if let Some(token) = r.request.get_meta().get_progress_token() {
                        self.routes.sending(token);
                    }
                }
                None
            }
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            JsonRpcMessage::Notification(_) => None,
        };
        let replying = reply_to.map(|id| self.unanswered.replying(id));
        let send = self.inner.send(item);
        async move {
            let sent = send.await;
            drop(replying);
            sent
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        let routes = self.routes.clone();
        let unanswered = self.unanswered.clone();
        let tripwire = self.tripwire.clone();
        let next = self.inner.receive();
        async move {
            // Once tripped, nothing more is read: rmcp's loop ends and the connection closes.
            if tripwire.tripped().is_some() {
                return None;
            }
            let msg = next.await?;
            match &msg {
                JsonRpcMessage::Notification(n) => match &n.notification {
                    ServerNotification::ProgressNotification(p) => routes.deliver(&p.params),
                    ServerNotification::CancelledNotification(c) => {
                        if let Some(id) = &c.params.request_id {
                            unanswered.cancelled(id);
                        }
                    }
                    _ => {}
                },
                JsonRpcMessage::Request(r) => {
                    let within_cap = unanswered.received(r.id.clone());
                    if !within_cap {
                        tripwire.trip(Breach::UnansweredRequests);
                        return None;
                    }
                }
                _ => {}
            }
            Some(msg)
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn params(token: i64, progress: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(token)), progress)
            .with_total(3.0)
    }

    #[test]
    fn lines_queue_in_order_only_for_routed_calls_and_overflow_is_counted() {
        let routes = ProgressRoutes::default();
        routes.deliver(&params(1, 1.0));
        let token = ProgressToken(NumberOrString::Number(1));
        routes.sending(token.clone());
        let route = routes.route(&token);
        routes.deliver(&params(1, 2.0));
        routes.deliver(&params(1, 3.0));
        routes.deliver(&params(2, 1.0));
        assert_eq!(
            route.slot.take().as_deref(),
            Some("progress 2/3\nprogress 3/3\n")
        );
        assert!(route.slot.take().is_none());
        let flood = params(1, 1.0).with_message("m".repeat(5000));
        for _ in 0..100 {
            routes.deliver(&flood);
        }
        routes.deliver(&params(1, 2.0));
        let text = route.slot.take().unwrap();
        let kept = PENDING_BYTES / line(&flood).len();
        assert_eq!(
            text.lines().count(),
            kept + 1,
            "{}",
            &text[text.len() - 200..]
        );
        assert!(text.ends_with(&format!(
            "[{} progress notifications not shown: the server sent them faster than they \
             could be forwarded]\n",
            100 - kept + 1
        )));
        drop(route);
        assert!(routes.is_empty());
    }

    #[test]
    fn a_call_gone_before_its_request_was_written_leaves_no_route() {
        let routes = ProgressRoutes::default();
        let token = ProgressToken(NumberOrString::Number(7));
        // Sent first, then claimed: one route, removed with the guard.
        routes.sending(token.clone());
        routes.deliver(&params(7, 1.0));
        let route = routes.route(&token);
        assert_eq!(route.slot.take().as_deref(), Some("progress 1/3\n"));
        drop(route);
        assert!(routes.is_empty());
        // Claimed and dropped (cancelled) before the transport wrote the request.
        let token = ProgressToken(NumberOrString::Number(8));
        drop(routes.route(&token));
        routes.sending(token);
        assert!(routes.is_empty());
    }
}
