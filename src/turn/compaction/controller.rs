//! The host's compaction controller (spec §5.10): asked before every full compaction
//! (automatic, on the overflow ladder, on demand; a sub-agent's too), it allows it, cancels it
//! or writes the summary itself. Microcompaction calls no model and is not asked.
//!
//! The controller answers through a [`Reply`], inside its callback or later from any thread;
//! the compaction waits for it cancellably and at most the config's `reply_timeout_ms`. A
//! controller that fails (the host fails or drops the request, answers with the wrong kind,
//! or the wait times out) cancels the compaction: the library does nothing to the history the
//! host did not agree to, and the host sees why in `compaction_settled`'s `detail`.

use std::sync::Arc;
use std::time::Duration;

use super::{Kind, Trigger};
use crate::cancel::CancelToken;
use crate::events::transport::{
    ask_blocking, Answer, CompactionDecision, Reply, ReplyKind, Unanswered,
};

/// What the controller is told about one full compaction.
#[derive(Debug, Clone)]
pub struct CompactionFacts {
    pub trigger: Trigger,
    pub kind: Kind,
    pub reason: String,
    /// The request's estimate now: system prompt, tools and history.
    pub estimated_tokens: u64,
    pub window: u64,
    /// The messages the summary replaces, as a JSON array (the history's format).
    pub messages_json: String,
    pub to_summarize: usize,
    /// The recent messages kept verbatim after the summary.
    pub kept: usize,
    /// Set when a foreground sub-agent compacts (its `child_task_id`).
    pub child_task_id: Option<String>,
}

/// A host's compaction policy. `decide` is called on a blocking thread; it answers `reply`
/// with an [`Answer::Compaction`] (or fails it) now or later from any thread.
pub trait CompactionController: Send + Sync {
    fn decide(&self, facts: CompactionFacts, reply: Reply);
}

/// A sub-agent's view of its parent's controller: the same policy, told which child asks.
pub(crate) struct ChildController {
    pub(crate) parent: Arc<dyn CompactionController>,
    pub(crate) child_task_id: String,
}

impl CompactionController for ChildController {
    fn decide(&self, mut facts: CompactionFacts, reply: Reply) {
        facts.child_task_id = Some(self.child_task_id.clone());
        self.parent.decide(facts, reply);
    }
}

/// The controller's answer, as the compaction acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allow,
    Summary(String),
    /// Cancelled: the `compaction_settled` detail says by whom and why.
    Cancel(String),
}

/// Asks `controller` and waits for its answer (see the module's note on failures).
pub(crate) async fn ask(
    controller: &Arc<dyn CompactionController>,
    facts: CompactionFacts,
    cancel: &CancelToken,
    timeout: Option<Duration>,
) -> Verdict {
    let c = controller.clone();
    let failed = |why: &str| Verdict::Cancel(format!("the compaction controller failed: {why}"));
    let answer = match ask_blocking(
        ReplyKind::Compaction,
        move |reply| c.decide(facts, reply),
        cancel,
        timeout,
    )
    .await
    {
        Ok(a) => a,
        Err(Unanswered::Cancelled) => return Verdict::Cancel("cancelled".into()),
        Err(Unanswered::TimedOut(t)) => {
            return failed(&format!("no answer within {} ms", t.as_millis()))
        }
    };
    match answer {
        Ok(Answer::Compaction(CompactionDecision::Allow)) => Verdict::Allow,
        Ok(Answer::Compaction(CompactionDecision::Summary(s))) if s.trim().is_empty() => {
            failed("its summary is empty")
        }
        Ok(Answer::Compaction(CompactionDecision::Summary(s))) => Verdict::Summary(s),
        Ok(Answer::Compaction(CompactionDecision::Cancel(why))) => Verdict::Cancel(match why {
            Some(w) if !w.is_empty() => format!("cancelled by the compaction controller: {w}"),
            _ => "cancelled by the compaction controller".into(),
        }),
        Ok(Answer::Fail(m)) => failed(&m),
        Ok(_) => failed("it answered with something other than a decision"),
        Err(_) => failed("it dropped the request"),
    }
}
