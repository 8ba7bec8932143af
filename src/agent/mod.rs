//! One agent session: config, history, the turn lock, the last turn, and the entry points
//! (blocking, asynchronous with a completion, streaming).
//!
//! | file | holds |
//! |---|---|
//! | `api.rs` | the [`Agent`] handle, [`WeakAgent`], what a host asks of an agent between turns |
//! | `turns.rs` | the turn entry points: the turn lock, [`TurnOptions`], [`TurnResult`], completions |
//! | `session.rs` | one session's state (`AgentCore`) and what a turn or a sub-agent borrows from it |
//! | `compose.rs` | an agent built from its config (or resumed from a session document), and each turn's tools |
//! | `session_document.rs` | the session document: what a session needs to continue, versioned |
//! | `durable.rs` | the session's store: resume, the commit after every turn, its report |
//! | `runtime.rs` | the process-wide runtime |

use std::sync::Mutex;

mod api;
mod compaction;
mod compose;
mod durable;
mod hooks;
mod runtime;
mod session;
pub mod session_document;
mod skills;
mod trace_context;
mod turns;

pub use api::{Agent, WeakAgent};
pub use durable::{block_on_store, CommitReport, CommitStatus};
pub(crate) use runtime::{on_runtime_thread, runtime, set_worker_threads};
pub(crate) use turns::Completion;
pub use turns::{TurnOptions, TurnResult};

/// Why an entry point refused or failed; the C layer maps each to a status code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    InvalidJson(String),
    #[error("a turn is already running on this agent")]
    TurnInProgress,
    #[error("the transport has no subscribe, so the streaming entry point cannot attach to it")]
    NoSubscribe,
    #[error("{0}")]
    StreamSubscribe(String),
    #[error("a blocking call was made from a library callback or runtime thread")]
    Reentrant,
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    HostError(String),
    #[error("the turn panicked: {0}")]
    Panic(String),
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    NoEngine(String),
    /// A session store operation failed (the in-memory session is untouched).
    #[error("{0}")]
    Store(crate::session_store::StoreError),
    /// A session document cannot be read.
    #[error("{0}")]
    Document(session_document::DocumentError),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
