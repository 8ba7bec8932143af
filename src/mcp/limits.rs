//! Limits an MCP server must keep, and the tripwire that closes its connection when it breaks
//! one. A tripped connection ends its calls in flight at once with the reason: rmcp's own loop
//! only fails them once it has wound down, which takes up to 5 s (it waits for the replies it
//! is still writing), and its message would not say why.

use std::sync::Arc;

use tokio::sync::watch;

/// The largest message (one line on stdio) a server may send, rmcp's own bound for its stdio
/// transport and for an SSE event: past it a message would have to be dropped, and a dropped
/// answer leaves its call waiting forever.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// The limit a server broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Breach {
    /// A message over [`MAX_MESSAGE_BYTES`].
    OversizedMessage,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Breach::OversizedMessage => write!(
                f,
                "the server sent a message over {} MiB, the limit of one message",
                MAX_MESSAGE_BYTES >> 20
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
