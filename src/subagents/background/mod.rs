//! Background sub-agents (spec §6.5): a child run launched with `run_in_background: true`
//! runs on the agent's runtime with its own cancellation token while the parent goes on; when
//! it settles, a notice is queued and the parent's next LLM iteration reads it as a
//! `<system-reminder>`.
//!
//! | concept | file |
//! |---|---|
//! | one task's record, states, and what a run reports | `record.rs` |
//! | the store: ids, cap, launch, cancel, waits, close | `store.rs` |
//! | completion notices and their queue | `notices.rs` |
//! | `check_background_agent`, `cancel_background_agent` | `tools.rs` |
//! | opt-in `.agentao/background_tasks.json` | `persist.rs` |

mod notices;
mod persist;
pub(crate) mod record;
pub(crate) mod store;
pub(crate) mod tools;

#[cfg(test)]
mod tests;

pub(crate) use record::{RunReport, Settled};
pub(crate) use store::{BackgroundStore, CLOSE_TIMEOUT};

use super::outcome::ChildState;
use super::run::ChildReport;

/// A child run's report as the store records it: the text the model would have read in the
/// foreground is the result (a failed run keeps it as its partial work).
pub(crate) fn run_report(r: ChildReport) -> RunReport {
    let settled = match (r.state, r.setup_error) {
        (ChildState::Completed, _) => Settled::Completed { result: r.text },
        (ChildState::Cancelled, _) => Settled::Cancelled {
            result: Some(r.text),
        },
        // The child could not be built: the text is the error, and there is no work.
        (ChildState::Failed, Some(_)) => Settled::Failed {
            error: r.text,
            incomplete_reason: None,
            result: None,
        },
        (ChildState::Failed, None) => {
            let reason = r
                .error_type
                .as_deref()
                .and_then(|t| t.strip_prefix("incomplete:"))
                .map(str::to_owned);
            Settled::Failed {
                error: r
                    .detail
                    .or_else(|| r.error_type.clone())
                    .unwrap_or_default(),
                incomplete_reason: reason,
                result: Some(r.text),
            }
        }
    };
    RunReport {
        settled,
        turns: r.stats.turns,
        tool_calls: r.stats.tool_calls,
        tokens: r.stats.tokens,
        duration_ms: r.stats.duration_ms,
    }
}

impl crate::turn::BackgroundNotices for BackgroundStore {
    fn drain(&self) -> Vec<String> {
        self.drain_notices()
    }
}

/// What the spawn tool answers at once for a launched task (the reference's text).
pub(crate) fn started_text(name: &str, id: &str, task: &str) -> String {
    let head: String = task.chars().take(80).collect();
    let more = if task.chars().nth(80).is_some() {
        "…"
    } else {
        ""
    };
    format!(
        "Background agent '{name}' started (ID: {id}). Task: {head}{more}. Continue other work; \
         do not wait with sleep or repeated status checks. If there is nothing else to do, end \
         this turn. A background agent update can be read when this session next runs. If this \
         turn cannot continue without its result, call \
         check_background_agent(agent_id='{id}', wait_seconds=N) once."
    )
}
