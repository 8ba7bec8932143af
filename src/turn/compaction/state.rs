//! A session's context bookkeeping, kept across turns: the window, the provider's last count
//! (the estimate's anchor), and the circuit breaker of automatic compaction.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::estimate::{
    messages_tokens, text_tokens, GrowingCount, RequestMessages, VersionedMessages,
};
use super::{CompactionStatus, FULL_PERCENT, MICRO_PERCENT};
use crate::llm::MessagesVersion;

/// Consecutive failed compactions after which automatic ones stop (until one succeeds on
/// another trigger, or the history is replaced).
pub(crate) const BREAKER_FAILURES: u32 = 3;

#[derive(Debug, Default)]
struct Inner {
    learned: Option<u64>,
    reported: Option<u64>,
    anchor: Option<Anchor>,
    failures: u32,
    compactions: u64,
    last_estimate: Option<u64>,
    /// The tokens of the last tool list measured. The list is held so that a new list can
    /// never be taken for it by its address.
    tools: Option<(Arc<Vec<Value>>, u64)>,
    /// The local counts of the history and of the running turn's transcript, kept between
    /// estimates so each request counts only the messages added since the last.
    history_count: GrowingCount,
    transcript_count: GrowingCount,
}

/// The provider's `prompt_tokens` for a request, how many messages (history then transcript)
/// it held, and which state of each list they were.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    prompt_tokens: u64,
    messages: usize,
    history_version: MessagesVersion,
    transcript_version: MessagesVersion,
}

impl Anchor {
    /// Whether the messages this count covered are still the first messages of `now`: the
    /// history kept its version (it was only appended to), and the transcript did too, or the
    /// counted messages lie wholly in the history (the turn was committed, a new one began).
    fn still_a_prefix_of(&self, now: RequestMessages<'_>) -> bool {
        let history = now.history.messages.len();
        self.prompt_tokens > 0
            && self.messages <= history + now.transcript.messages.len()
            && self.history_version == now.history.version
            && (self.transcript_version == now.transcript.version || self.messages <= history)
    }
}

pub(crate) struct ContextState {
    configured: u64,
    inner: Mutex<Inner>,
}

/// What `agentao_agent_context_usage` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ContextUsage {
    pub(crate) estimated_tokens: u64,
    pub(crate) window: u64,
    pub(crate) configured_window: u64,
    pub(crate) learned_window: Option<u64>,
    pub(crate) microcompact_above: u64,
    pub(crate) compact_above: u64,
    pub(crate) compactions: u64,
    pub(crate) consecutive_failures: u32,
    pub(crate) breaker_open: bool,
}

impl Inner {
    fn local_tokens(&mut self, messages: RequestMessages<'_>) -> u64 {
        self.history_count.tokens(messages.history)
            + self.transcript_count.tokens(messages.transcript)
    }
}

impl ContextState {
    pub(crate) fn new(configured: u64) -> Self {
        ContextState {
            configured,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tokens of the tools' schemas as a request sends them. The registry hands out one
    /// list until its tools change, so they are measured once a change, not once a turn
    /// (serialising and counting ~10 KB of schemas was two thirds of a short turn's cost).
    pub(crate) fn tools_tokens(&self, schemas: &Arc<Vec<Value>>) -> u64 {
        let mut i = self.lock();
        if let Some((seen, n)) = &i.tools {
            if Arc::ptr_eq(seen, schemas) {
                return *n;
            }
        }
        let n = serde_json::to_string(&**schemas).map_or(0, |j| text_tokens(&j));
        i.tools = Some((schemas.clone(), n));
        n
    }

    /// `W`: the least of the configured window, the one an overflow error stated, and the one
    /// the provider reported.
    pub(crate) fn window(&self) -> u64 {
        let i = self.lock();
        [Some(self.configured), i.learned, i.reported]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(self.configured)
    }

    /// An overflow error stated the window.
    pub(crate) fn learn(&self, window: u64) {
        let mut i = self.lock();
        i.learned = Some(i.learned.map_or(window, |w| w.min(window)));
    }

    /// The provider counted `prompt_tokens` for a request holding `messages` history messages.
    pub(crate) fn anchor(&self, prompt_tokens: u64, request: RequestMessages<'_>) {
        self.lock().anchor = Some(Anchor {
            prompt_tokens,
            messages: request.history.messages.len() + request.transcript.messages.len(),
            history_version: request.history.version,
            transcript_version: request.transcript.version,
        });
    }

    /// The history changed other than by appending: the last count no longer describes a
    /// prefix of it.
    pub(crate) fn forget_anchor(&self) {
        self.lock().anchor = None;
    }

    /// The estimate of a request with `messages`: the provider's last count plus the messages
    /// added since, or, without a usable count, `fixed` (system prompt, tools, volatile tail)
    /// plus all the messages. One lock for the whole estimate.
    pub(crate) fn estimate(&self, messages: RequestMessages<'_>, fixed: u64) -> u64 {
        let mut i = self.lock();
        let (history, transcript) = (messages.history.messages, messages.transcript.messages);
        let est = match i.anchor {
            Some(a) if a.still_a_prefix_of(messages) => {
                let all = history.iter().chain(transcript);
                a.prompt_tokens + messages_tokens(all.skip(a.messages))
            }
            _ => fixed + i.local_tokens(messages),
        };
        i.last_estimate = Some(est);
        est
    }

    /// The local count of `messages`, without the fixed part: what a compaction reports as
    /// the history's tokens.
    pub(crate) fn history_tokens(&self, messages: RequestMessages<'_>) -> u64 {
        self.lock().local_tokens(messages)
    }

    /// Whether automatic compaction has stopped after repeated failures.
    pub(crate) fn breaker_open(&self) -> bool {
        self.lock().failures >= BREAKER_FAILURES
    }

    pub(crate) fn record(&self, status: CompactionStatus) {
        let mut i = self.lock();
        match status {
            CompactionStatus::Success => {
                i.failures = 0;
                i.compactions += 1;
                // The provider counted the history before it shrank.
                i.anchor = None;
            }
            CompactionStatus::Failed => i.failures += 1,
            CompactionStatus::Cancelled | CompactionStatus::Skipped => {}
        }
    }

    /// A new history (set by the host, or cleared): no anchor, the breaker closed.
    pub(crate) fn reset(&self) {
        let mut i = self.lock();
        i.anchor = None;
        i.failures = 0;
        i.last_estimate = None;
    }

    /// The figures for the host; `estimated_tokens` is the estimate of `history` now.
    pub(crate) fn usage(&self, history: VersionedMessages<'_>, fixed: u64) -> ContextUsage {
        let messages = RequestMessages {
            history,
            transcript: VersionedMessages::unversioned(&[]),
        };
        let estimated_tokens = self.estimate(messages, fixed);
        let window = self.window();
        let i = self.lock();
        ContextUsage {
            estimated_tokens,
            window,
            configured_window: self.configured,
            learned_window: i.learned,
            microcompact_above: window * MICRO_PERCENT / 100,
            compact_above: window * FULL_PERCENT / 100,
            compactions: i.compactions,
            consecutive_failures: i.failures,
            breaker_open: i.failures >= BREAKER_FAILURES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;

    #[test]
    fn the_window_is_the_least_known_and_the_anchor_counts_only_newer_messages() {
        let s = ContextState::new(200_000);
        assert_eq!(s.window(), 200_000);
        s.learn(32_768);
        s.learn(100_000);
        assert_eq!(s.window(), 32_768);
        let h = vec![Message::User("abcd".repeat(100)); 3];
        let v = MessagesVersion::fresh();
        let at = |messages| RequestMessages {
            history: VersionedMessages {
                messages,
                version: v,
            },
            transcript: VersionedMessages::unversioned(&[]),
        };
        let local = s.estimate(at(&h), 50);
        assert_eq!(local, 50 + 3 * 104);
        s.anchor(1_000, at(&h[..2]));
        assert_eq!(s.estimate(at(&h), 50), 1_000 + 104);
        // A shorter history than the anchor saw: the local estimate again.
        assert_eq!(s.estimate(at(&h[..1]), 50), 50 + 104);
    }

    #[test]
    fn an_anchor_is_not_used_once_what_it_counted_changed_other_than_by_appending() {
        let s = ContextState::new(200_000);
        let h = vec![Message::User("abcd".repeat(100)); 2];
        let t = vec![Message::User("abcd".repeat(100)); 2];
        let (hv, tv) = (MessagesVersion::fresh(), MessagesVersion::fresh());
        let at = |history, hv, transcript, tv| RequestMessages {
            history: VersionedMessages {
                messages: history,
                version: hv,
            },
            transcript: VersionedMessages {
                messages: transcript,
                version: tv,
            },
        };
        s.anchor(1_000, at(&h, hv, &t, tv));
        assert_eq!(s.estimate(at(&h, hv, &t, tv), 50), 1_000);
        // The turn's messages edited in place (images removed): a new transcript version.
        assert_eq!(
            s.estimate(at(&h, hv, &t, MessagesVersion::fresh()), 50),
            50 + 4 * 104
        );
        // Committed (appended to the history) and a new turn begun: still the anchor's prefix.
        let all: Vec<Message> = h.iter().chain(&t).cloned().collect();
        let next = [Message::User("abcd".repeat(100))];
        assert_eq!(
            s.estimate(at(&all, hv, &next, MessagesVersion::fresh()), 50),
            1_000 + 104
        );
        // The history edited in place (microcompaction): a new history version.
        assert_eq!(
            s.estimate(at(&all, MessagesVersion::fresh(), &next, tv), 50),
            50 + 5 * 104
        );
    }

    #[test]
    fn the_breaker_opens_after_three_failures_and_a_success_closes_it() {
        let s = ContextState::new(10_000);
        for _ in 0..2 {
            s.record(CompactionStatus::Failed);
        }
        assert!(!s.breaker_open());
        s.record(CompactionStatus::Cancelled);
        s.record(CompactionStatus::Failed);
        assert!(s.breaker_open());
        s.record(CompactionStatus::Success);
        assert!(!s.breaker_open());
    }
}
