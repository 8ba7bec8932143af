//! The process-wide tokio runtime every agent's turns run on, and whether a thread is one of
//! its threads.

use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use super::AgentError;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
static WORKER_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the runtime's worker count; only before the runtime exists (first agent). Returns
/// false when it is too late.
pub(crate) fn set_worker_threads(n: usize) -> bool {
    if RUNTIME.get().is_some() {
        return false;
    }
    WORKER_THREADS.store(n, Ordering::Relaxed);
    true
}

/// The process-wide runtime, built on first use.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime, AgentError> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    // std has no fallible `get_or_init`: a thread that loses the race to build the first runtime
    // drops its own, which is safe because no runtime thread exists before the first one is set.
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all()
        .thread_name("agentao-worker")
        .on_thread_start(crate::mcp::client::block_sigpipe);
    let n = WORKER_THREADS.load(Ordering::Relaxed);
    if n > 0 {
        b.worker_threads(n);
    }
    let rt = b
        .build()
        .map_err(|e| AgentError::Internal(format!("cannot start the runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Whether the calling thread belongs to a runtime (a worker, a blocking-pool thread running a
/// callback or a tool): a blocking entry point there could deadlock.
pub(crate) fn on_runtime_thread() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}
