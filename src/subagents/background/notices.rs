//! Completion notices: one line per settled task, queued until the parent's next LLM iteration
//! drains them into its history (spec §6.5). Sub-agents never drain.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::record::Settled;

/// Oldest notices roll off past this, so a parent that never runs again cannot grow the queue
/// without bound (the reference's cap).
const CAPACITY: usize = 256;

/// How much of a result a notice previews (characters).
const PREVIEW_CHARS: usize = 300;

#[derive(Default)]
pub(crate) struct NoticeQueue {
    queue: Mutex<VecDeque<String>>,
    /// Lets the turn skip the lock on every iteration when nothing settled.
    nonempty: AtomicBool,
}

impl NoticeQueue {
    pub(crate) fn push(&self, notice: String) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == CAPACITY {
            q.pop_front();
        }
        q.push_back(notice);
        self.nonempty.store(true, Ordering::Release);
    }

    pub(crate) fn drain(&self) -> Vec<String> {
        if !self.nonempty.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.nonempty.store(false, Ordering::Release);
        q.drain(..).collect()
    }
}

/// The head of a result, as the reference cuts it (code points, then `…`).
fn preview(result: &str) -> String {
    match result.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &result[..cut]),
        None => result.to_owned(),
    }
}

/// The notice for a task that just settled.
pub(crate) fn notice_for(id: &str, name: &str, settled: &Settled) -> String {
    match settled {
        Settled::Completed { result } => format!(
            "Background agent '{name}' (ID: {id}) completed.\n{}",
            preview(result)
        ),
        Settled::Failed { error, .. } => {
            format!("Background agent '{name}' (ID: {id}) failed: {error}")
        }
        Settled::Cancelled { .. } => cancelled_notice(name, id),
    }
}

pub(crate) fn cancelled_notice(name: &str, id: &str) -> String {
    format!("Background agent '{name}' (ID: {id}) was cancelled.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_cuts_at_300_code_points() {
        let long = "é".repeat(301);
        let p = preview(&long);
        assert_eq!(p.chars().count(), 301);
        assert!(p.ends_with('…'));
        assert_eq!(preview(&"x".repeat(300)), "x".repeat(300));
    }

    #[test]
    fn queue_is_bounded_and_drains_once() {
        let q = NoticeQueue::default();
        for i in 0..CAPACITY + 5 {
            q.push(i.to_string());
        }
        let all = q.drain();
        assert_eq!(all.len(), CAPACITY);
        assert_eq!(all[0], "5");
        assert!(q.drain().is_empty());
    }
}
