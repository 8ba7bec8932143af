//! Streamed tool output on its way from a tool's thread to the turn task: one event per chunk
//! while the host keeps up, coalesced and bounded when it does not.
//!
//! A tool may produce output far faster than the host takes `tool_output` events (`yes`, a
//! recursive grep). Each call gets a slot holding at most [`PENDING_LIMIT`] bytes not yet
//! emitted; the turn task takes every waiting chunk, each as its own event, as the reference
//! sends one event per chunk. Past [`PENDING_CHUNKS`] waiting chunks the host is behind, and
//! later chunks join the last one, so a flood of tiny chunks costs events no faster than the
//! host takes them. While a slot is full, further output is counted instead of kept, and the
//! turn task says how much it skipped with a notice in the stream. So memory stays bounded
//! whatever the tool or the host do, the tool's thread never waits for the host, and a cancel
//! discards what is queued (the tool's own result keeps its head and tail: streaming is only
//! for display).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::tools::result_format::thousands;

/// Bytes of one call's output that may wait for the turn task.
pub(crate) const PENDING_LIMIT: usize = 64 * 1024;
/// Chunks of one call that wait as separate events; later ones are merged into the last.
pub(crate) const PENDING_CHUNKS: usize = 256;

#[derive(Default)]
struct Pending {
    chunks: Vec<String>,
    bytes: usize,
    /// Bytes dropped since the last take, all after `chunks`.
    skipped: u64,
}

/// What the turn task takes from a slot.
pub(crate) struct Taken {
    /// One `tool_output` event each, in order.
    pub(crate) chunks: Vec<String>,
    pub(crate) skipped: u64,
}

impl Taken {
    /// The notice streamed in place of skipped output.
    pub(crate) fn skipped_notice(&self) -> Option<String> {
        (self.skipped > 0).then(|| {
            format!(
                "\n[{} bytes of output not streamed: the host was reading more slowly than the tool wrote]\n",
                thousands(self.skipped)
            )
        })
    }
}

/// One slot per planned call, and a wake-up for the turn task.
pub(crate) struct OutputMailbox {
    slots: Vec<Mutex<Pending>>,
    notify: Notify,
    closed: AtomicBool,
}

impl OutputMailbox {
    pub(crate) fn new(calls: usize) -> Self {
        OutputMailbox {
            slots: (0..calls).map(|_| Mutex::default()).collect(),
            notify: Notify::new(),
            closed: AtomicBool::new(false),
        }
    }

    /// Called from the tool's thread; never blocks on the host. False once the mailbox is
    /// closed (the chunk is dropped).
    pub(crate) fn push(&self, call: usize, chunk: &str) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        let Some(slot) = self.slots.get(call) else {
            return true;
        };
        {
            let mut p = slot.lock().unwrap_or_else(|e| e.into_inner());
            // Once something is skipped, skip until the turn task has taken the slot, so the
            // stream keeps its order around the gap.
            if p.skipped == 0 && p.bytes + chunk.len() <= PENDING_LIMIT {
                p.bytes += chunk.len();
                let behind = p.chunks.len() >= PENDING_CHUNKS;
                match p.chunks.last_mut() {
                    Some(last) if behind => last.push_str(chunk),
                    _ => p.chunks.push(chunk.to_owned()),
                }
            } else {
                p.skipped += chunk.len() as u64;
            }
        }
        self.notify.notify_one();
        true
    }

    /// Everything waiting in the slot of `call`, if anything is.
    pub(crate) fn take(&self, call: usize) -> Option<Taken> {
        let slot = self.slots.get(call)?;
        let mut p = slot.lock().unwrap_or_else(|e| e.into_inner());
        if p.chunks.is_empty() && p.skipped == 0 {
            return None;
        }
        let taken = std::mem::take(&mut *p);
        Some(Taken {
            chunks: taken.chunks,
            skipped: taken.skipped,
        })
    }

    /// Drops what is queued and everything pushed from now on (the turn was cancelled).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for slot in &self.slots {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Pending::default();
        }
    }

    pub(crate) fn calls(&self) -> usize {
        self.slots.len()
    }

    /// Resolves after a push (or at once if one happened since the last wait).
    pub(crate) async fn pushed(&self) {
        self.notify.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_chunks_apart_then_merges_then_counts_what_does_not_fit() {
        let m = OutputMailbox::new(2);
        m.push(0, "ab");
        m.push(0, "cd");
        let t = m.take(0).unwrap();
        assert_eq!((t.chunks, t.skipped), (vec!["ab".into(), "cd".into()], 0));
        assert!(m.take(0).is_none());
        for _ in 0..PENDING_CHUNKS + 2 {
            m.push(0, "z");
        }
        let t = m.take(0).unwrap();
        assert_eq!(t.chunks.len(), PENDING_CHUNKS);
        assert_eq!(t.chunks.last().unwrap(), "zzz");
        let big = "x".repeat(PENDING_LIMIT);
        m.push(1, "a");
        m.push(1, &big);
        // Fits again, but comes after the gap: skipped too.
        m.push(1, "b");
        let t = m.take(1).unwrap();
        assert_eq!(t.chunks, ["a"]);
        assert_eq!(t.skipped, PENDING_LIMIT as u64 + 1);
        assert!(t.skipped_notice().unwrap().contains("65,537 bytes"));
    }

    #[test]
    fn close_discards_queued_and_later_output() {
        let m = OutputMailbox::new(1);
        m.push(0, "queued");
        m.close();
        m.push(0, "later");
        assert!(m.take(0).is_none());
    }
}
