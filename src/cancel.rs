//! Cancellation tokens: a one-way tree of flags with a reason, waitable from async code and
//! pollable from blocking code.
//!
//! The first `cancel` wins; its reason is kept and every later call is a no-op. Children are
//! linked one way: cancelling a parent cancels its children with the parent's reason, never the
//! reverse. Callbacks and wake-ups run on the cancelling thread, outside every lock, so a cancel
//! made from inside a host callback cannot deadlock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::sync::Notify;

/// The reason used when a caller cancels without giving one.
pub(crate) const DEFAULT_REASON: &str = "user-cancel";

type Callback = Box<dyn FnOnce(&str) + Send>;

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    reason: OnceLock<String>,
    notify: Notify,
    links: Mutex<Links>,
}

#[derive(Default)]
struct Links {
    children: Vec<Weak<Inner>>,
    callbacks: Vec<(u64, Callback)>,
    next_id: u64,
}

/// A cheaply clonable handle to one cancellation flag.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<Inner>);

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .field("reason", &self.reason())
            .finish()
    }
}

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels the token (idempotent, non-blocking). An empty reason means `"cancelled"`.
    pub fn cancel(&self, reason: &str) {
        let reason = if reason.is_empty() {
            "cancelled"
        } else {
            reason
        };
        if self.0.reason.set(reason.to_owned()).is_err() {
            return; // first cancel wins
        }
        self.0.cancelled.store(true, Ordering::Release);
        self.0.notify.notify_waiters();
        let (children, callbacks) = {
            let mut links = self.0.links.lock().unwrap_or_else(|e| e.into_inner());
            (
                std::mem::take(&mut links.children),
                std::mem::take(&mut links.callbacks),
            )
        };
        for child in children.iter().filter_map(Weak::upgrade) {
            CancelToken(child).cancel(reason);
        }
        for (_, cb) in callbacks {
            cb(reason);
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Acquire)
    }

    /// The reason, or `""` while not cancelled.
    pub fn reason(&self) -> &str {
        if !self.is_cancelled() {
            return "";
        }
        self.0.reason.get().map(String::as_str).unwrap_or("")
    }

    /// A new token cancelled whenever this one is (one-way link).
    pub(crate) fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        self.link_child(&child);
        child
    }

    /// Links an existing token under this one: cancelling `self` cancels `child`.
    pub(crate) fn link_child(&self, child: &CancelToken) {
        {
            let mut links = self.0.links.lock().unwrap_or_else(|e| e.into_inner());
            if !self.is_cancelled() {
                links.children.retain(|w| w.strong_count() > 0);
                links.children.push(Arc::downgrade(&child.0));
                return;
            }
        }
        child.cancel(self.reason());
    }

    /// Runs `f(reason)` once when the token is cancelled (at once if it already is). Returns an id
    /// for [`CancelToken::remove_callback`].
    pub(crate) fn on_cancel(&self, f: impl FnOnce(&str) + Send + 'static) -> u64 {
        {
            let mut links = self.0.links.lock().unwrap_or_else(|e| e.into_inner());
            if !self.is_cancelled() {
                links.next_id += 1;
                let id = links.next_id;
                links.callbacks.push((id, Box::new(f)));
                return id;
            }
        }
        f(self.reason());
        0
    }

    /// Removes a callback that has not run; true when it was there. The callback is dropped
    /// after the lock (a host's finalizer may run then).
    pub(crate) fn remove_callback(&self, id: u64) -> bool {
        let removed = {
            let mut links = self.0.links.lock().unwrap_or_else(|e| e.into_inner());
            let at = links.callbacks.iter().position(|(i, _)| *i == id);
            at.map(|at| links.callbacks.remove(at))
        };
        removed.is_some()
    }

    /// Resolves when the token is cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

thread_local! {
    /// The cancellation of what the thread runs for (a tool call, a turn's memory read), while
    /// it runs it ([`with_current`]).
    static CURRENT: std::cell::RefCell<Option<CancelToken>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `token` as the thread's current cancellation: a wait in host code deep below
/// (a deferred file-system or memory-store answer) ends when it fires, though no parameter
/// carries it there ([`current`]).
pub(crate) fn with_current<R>(token: &CancelToken, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<CancelToken>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = before);
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.borrow_mut().replace(token.clone())));
    f()
}

/// The thread's current cancellation ([`with_current`]), if any.
pub(crate) fn current() -> Option<CancelToken> {
    CURRENT.with(|c| c.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_cancel_wins_and_children_follow_one_way() {
        let parent = CancelToken::new();
        let child = parent.child();
        child.cancel("child-only");
        assert!(!parent.is_cancelled());
        let other = parent.child();
        parent.cancel("stop");
        parent.cancel("again");
        assert_eq!(parent.reason(), "stop");
        assert_eq!(other.reason(), "stop");
        assert_eq!(child.reason(), "child-only");
        let late = parent.child();
        assert_eq!(late.reason(), "stop");
    }

    #[test]
    fn callbacks_run_once_and_can_be_removed() {
        let t = CancelToken::new();
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = hits.clone();
        t.on_cancel(move |_| {
            h.fetch_add(1, Ordering::SeqCst);
        });
        let h = hits.clone();
        let id = t.on_cancel(move |_| {
            h.fetch_add(10, Ordering::SeqCst);
        });
        assert!(t.remove_callback(id));
        assert!(!t.remove_callback(id));
        t.cancel("");
        t.cancel("x");
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert_eq!(t.reason(), "cancelled");
    }
}
