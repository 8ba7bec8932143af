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

// The launch side (the spawn tool's `run_in_background`, the tools' registration) is wired
// when the spawn tool lands; until then only the tests and the turn's drain use the store.
#![cfg_attr(not(test), allow(dead_code, unused_imports))]

mod notices;
mod persist;
pub(crate) mod record;
pub(crate) mod store;
pub(crate) mod tools;

#[cfg(test)]
mod tests;

pub(crate) use record::{RunReport, Settled, TaskStatus};
pub(crate) use store::{BackgroundStore, LaunchError, CLOSE_TIMEOUT, MAX_IN_FLIGHT};

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
