//! The agent's background tasks (spec §6.5): ids, states, the cap, launch on the agent's
//! runtime, cancel, bounded waits, and the close that agent free performs.
//!
//! A task is a future (a child run) that gets its own cancellation token: the parent's turn
//! ending or being cancelled never touches it, only `cancel` and `close` do. The supervisor
//! task that runs it records the outcome whatever happens to the future (a report, a panic, an
//! abort), so every launched task settles.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::notices::{self, NoticeQueue};
use super::persist::Persistence;
use super::record::{now, RunReport, Settled, TaskRecord, TaskStatus};
use crate::cancel::CancelToken;
use crate::panic_text::panic_text;

/// Pending or running tasks one store allows (the reference's `DEFAULT_MAX_CONCURRENT`).
pub(crate) const MAX_IN_FLIGHT: usize = 6;

/// How long agent free waits for cancelled tasks to settle (the reference's close timeout).
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Finished records kept; older ones are dropped (from memory and the file) so a long session
/// cannot grow the store without bound.
const MAX_FINISHED: usize = 256;

/// The error of a task a resumed session found in flight.
const RESUMED_ERROR: &str = "the session was resumed after the process running the task ended";

/// Why a launch was refused. The text is what the model reads after `Error executing agent_x: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LaunchError {
    #[error("Background agent not started: {0} background agents are already running, the most this session allows. Wait for one to finish (check_background_agent with wait_seconds), cancel one, or run this task in the foreground (run_in_background=false).")]
    AtCapacity(usize),
    #[error("Background agent not started: this agent is closed, so it cannot start new background agents.")]
    Closed,
}

impl LaunchError {
    /// The reference's exception class, for the tool error's `error_type`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            LaunchError::AtCapacity(_) => "BackgroundCapacityError",
            LaunchError::Closed => "BackgroundOwnerClosedError",
        }
    }
}

/// What `cancel` did, typed; [`CancelResult::text`] is the reference's sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CancelResult {
    Unknown,
    AlreadyDone { name: String, status: TaskStatus },
    BeforeStart { name: String },
    Signalled { name: String },
}

impl CancelResult {
    pub(crate) fn text(&self, id: &str) -> String {
        match self {
            CancelResult::Unknown => format!("No background agent found with ID: {id}"),
            CancelResult::AlreadyDone { name, status } => format!(
                "Agent '{name}' ({id}) is already {} — nothing to cancel.",
                status.as_str()
            ),
            CancelResult::BeforeStart { name } => {
                format!("Agent '{name}' ({id}) cancelled before it started.")
            }
            CancelResult::Signalled { name } => format!(
                "Cancellation signal sent to agent '{name}' ({id}). It will stop at the next safe point."
            ),
        }
    }
}

struct Task {
    id: String,
    rec: TaskRecord,
    /// The run's own token, while it is in flight.
    token: Option<CancelToken>,
    /// Aborts the run's future: agent free's last resort for a run that ignores its token.
    abort: Option<tokio::task::AbortHandle>,
    /// Loaded from an earlier process's file: readable by id, not listed as this session's.
    recovered: bool,
}

#[derive(Default)]
struct State {
    /// In launch order.
    tasks: Vec<Task>,
    closed: bool,
    /// Ids dropped from memory that the next flush removes from the file.
    dropped: Vec<String>,
}

impl State {
    fn find(&mut self, id: &str) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    fn in_flight(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.rec.status.in_flight())
            .count()
    }

    fn prune(&mut self) {
        let finished = self.tasks.len() - self.in_flight();
        if finished <= MAX_FINISHED {
            return;
        }
        let mut excess = finished - MAX_FINISHED;
        let dropped = &mut self.dropped;
        self.tasks.retain(|t| {
            if excess > 0 && !t.rec.status.in_flight() {
                excess -= 1;
                dropped.push(t.id.clone());
                return false;
            }
            true
        });
    }
}

/// One agent's background tasks. Shared (`Arc`) by the agent, its tools and the supervisors.
pub(crate) struct BackgroundStore {
    state: Mutex<State>,
    /// Signalled whenever a task settles (and when a waiter's turn is cancelled).
    settled: Condvar,
    notices: NoticeQueue,
    runtime: tokio::runtime::Handle,
    persistence: Option<Persistence>,
}

/// A copy of one record for readers.
#[derive(Debug, Clone)]
pub(crate) struct TaskView {
    pub(crate) id: String,
    pub(crate) rec: TaskRecord,
}

impl BackgroundStore {
    /// A store running its tasks on `runtime`; with `persist_in`, it keeps
    /// `<persist_in>/.agentao/background_tasks.json` up to date and reads the earlier
    /// process's records from it (in-flight ones become failed).
    pub(crate) fn new(runtime: tokio::runtime::Handle, persist_in: Option<PathBuf>) -> Arc<Self> {
        let persistence = persist_in.map(|dir| Persistence::new(&dir));
        let tasks = persistence
            .as_ref()
            .map(Persistence::recover)
            .unwrap_or_default()
            .into_iter()
            .map(|(id, rec)| Task {
                id,
                rec,
                token: None,
                abort: None,
                recovered: true,
            })
            .collect();
        let store = Arc::new(BackgroundStore {
            state: Mutex::new(State {
                tasks,
                ..State::default()
            }),
            settled: Condvar::new(),
            notices: NoticeQueue::default(),
            runtime,
            persistence,
        });
        // The reclassified orphans go back to the file at once.
        if !store.lock().tasks.is_empty() {
            store.flush();
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the owned records to the file (when persisting). Never called under `state`.
    fn flush(&self) {
        if let Some(p) = &self.persistence {
            p.flush(|| {
                let mut s = self.lock();
                let dropped = std::mem::take(&mut s.dropped);
                let tasks = s
                    .tasks
                    .iter()
                    .map(|t| (t.id.clone(), t.rec.clone()))
                    .collect();
                (tasks, dropped)
            });
        }
    }

    /// This session's records in launch order, for its session document.
    pub(crate) fn records(&self) -> Vec<(String, TaskRecord)> {
        self.lock()
            .tasks
            .iter()
            .filter(|t| !t.recovered)
            .map(|t| (t.id.clone(), t.rec.clone()))
            .collect()
    }

    /// A resumed session's records become this session's. An in-flight one failed: the
    /// process that ran it is gone, and nothing here runs it. An id already present is kept.
    pub(crate) fn adopt(&self, records: Vec<(String, TaskRecord)>) {
        {
            let mut s = self.lock();
            for (id, mut rec) in records {
                if s.tasks.iter().any(|t| t.id == id) {
                    continue;
                }
                if rec.status.in_flight() {
                    rec.status = TaskStatus::Failed;
                    rec.error = Some(RESUMED_ERROR.to_owned());
                    rec.finished_at.get_or_insert_with(now);
                }
                s.tasks.push(Task {
                    id,
                    rec,
                    token: None,
                    abort: None,
                    recovered: false,
                });
            }
            s.prune();
        }
        self.flush();
    }

    /// Registers a pending task named `name` and starts `run(id, token)` (the task's id and its
    /// own token) on the runtime. Returns the 8-hex id at once. Refused (nothing recorded, `run` never called)
    /// when [`MAX_IN_FLIGHT`] tasks are pending or running, or the agent is closed.
    pub(crate) fn launch<F, Fut>(
        self: &Arc<Self>,
        name: &str,
        task: &str,
        run: F,
    ) -> Result<String, LaunchError>
    where
        F: FnOnce(&str, CancelToken) -> Fut,
        Fut: Future<Output = RunReport> + Send + 'static,
    {
        let token = CancelToken::new();
        let id = {
            let mut s = self.lock();
            if s.closed {
                return Err(LaunchError::Closed);
            }
            if s.in_flight() >= MAX_IN_FLIGHT {
                return Err(LaunchError::AtCapacity(MAX_IN_FLIGHT));
            }
            let id = loop {
                let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
                if s.tasks.iter().all(|t| t.id != id) {
                    break id;
                }
            };
            s.tasks.push(Task {
                id: id.clone(),
                rec: TaskRecord::pending(name, task),
                token: Some(token.clone()),
                abort: None,
                recovered: false,
            });
            id
        };
        self.flush();
        let run = run(&id, token);
        let store = self.clone();
        let task_id = id.clone();
        self.runtime.spawn(async move {
            let Some(child) = store.start(&task_id, run) else {
                return; // cancelled (or closed) before it started
            };
            let blocking = store.clone();
            let _ = tokio::task::spawn_blocking(move || blocking.flush()).await;
            let report = match child.await {
                Ok(report) => report,
                Err(e) if e.is_panic() => RunReport::bare(Settled::Failed {
                    error: format!(
                        "the background agent panicked: {}",
                        panic_text(e.into_panic())
                    ),
                    incomplete_reason: None,
                    result: None,
                }),
                // Aborted by agent free after its bounded wait.
                Err(_) => RunReport::bare(Settled::Cancelled { result: None }),
            };
            let _ = tokio::task::spawn_blocking(move || store.settle(&task_id, report)).await;
        });
        Ok(id)
    }

    /// Pending → running, and the run spawned; `None` when the task is no longer pending.
    fn start<Fut>(&self, id: &str, run: Fut) -> Option<tokio::task::JoinHandle<RunReport>>
    where
        Fut: Future<Output = RunReport> + Send + 'static,
    {
        let mut s = self.lock();
        let task = s.find(id).filter(|t| t.rec.status == TaskStatus::Pending)?;
        task.rec.status = TaskStatus::Running;
        task.rec.started_at = Some(now());
        let child = self.runtime.spawn(run);
        task.abort = Some(child.abort_handle());
        Some(child)
    }

    /// Records a run's end, wakes waiters and queues the notice. Only the first settle of a
    /// task counts (a child run records itself before its terminal event; the supervisor's
    /// settle afterwards is then a no-op).
    pub(crate) fn settle(&self, id: &str, report: RunReport) {
        {
            let mut s = self.lock();
            let Some(task) = s.find(id).filter(|t| t.rec.status.in_flight()) else {
                return;
            };
            // Queued under the lock: whoever sees the task settled also finds its notice.
            self.notices.push(notices::notice_for(
                id,
                &task.rec.agent_name,
                &report.settled,
            ));
            task.rec.settle(report);
            task.token = None;
            task.abort = None;
            s.prune();
        }
        self.settled.notify_all();
        self.flush();
    }

    /// Cancels a task: a pending one settles at once, a running one gets its token cancelled
    /// (`reason`) and settles when its run stops.
    pub(crate) fn cancel(&self, id: &str, reason: &str) -> CancelResult {
        let (result, token) = {
            let mut s = self.lock();
            let Some(task) = s.find(id) else {
                return CancelResult::Unknown;
            };
            let name = task.rec.agent_name.clone();
            match task.rec.status {
                TaskStatus::Pending => {
                    self.notices.push(notices::cancelled_notice(&name, id));
                    task.rec
                        .settle(RunReport::bare(Settled::Cancelled { result: None }));
                    task.token = None;
                    (CancelResult::BeforeStart { name }, None)
                }
                TaskStatus::Running => (CancelResult::Signalled { name }, task.token.clone()),
                status => return CancelResult::AlreadyDone { name, status },
            }
        };
        match &result {
            CancelResult::BeforeStart { .. } => {
                self.settled.notify_all();
                self.flush();
            }
            _ => {
                if let Some(t) = token {
                    t.cancel(reason);
                }
            }
        }
        result
    }

    /// A copy of the record with this id (this session's or a recovered one).
    pub(crate) fn get(&self, id: &str) -> Option<TaskView> {
        self.lock().find(id).map(|t| TaskView {
            id: t.id.clone(),
            rec: t.rec.clone(),
        })
    }

    /// This session's tasks in launch order (records recovered from an earlier process are
    /// left out, as the reference's `list_current`).
    pub(crate) fn list(&self) -> Vec<TaskView> {
        self.lock()
            .tasks
            .iter()
            .filter(|t| !t.recovered)
            .map(|t| TaskView {
                id: t.id.clone(),
                rec: t.rec.clone(),
            })
            .collect()
    }

    /// Blocks the calling (non-runtime) thread until the task settles, `timeout` passes or
    /// `stop` is cancelled; returns the latest copy (`None`: no such task). Never touches the
    /// task itself.
    pub(crate) fn wait(
        self: &Arc<Self>,
        id: &str,
        timeout: Duration,
        stop: &CancelToken,
    ) -> Option<TaskView> {
        let deadline = Instant::now() + timeout;
        // The waiter's turn being cancelled wakes the wait at once. Signalled under the lock,
        // so the wake-up cannot fall between the waiter's check and its wait.
        let store = self.clone();
        let wake = stop.on_cancel(move |_| {
            let _s = store.lock();
            store.settled.notify_all();
        });
        let view = {
            let mut s = self.lock();
            loop {
                let Some(task) = s.find(id) else { break None };
                let left = deadline.saturating_duration_since(Instant::now());
                if !task.rec.status.in_flight() || stop.is_cancelled() || left.is_zero() {
                    break Some(TaskView {
                        id: task.id.clone(),
                        rec: task.rec.clone(),
                    });
                }
                s = self
                    .settled
                    .wait_timeout(s, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        };
        stop.remove_callback(wake);
        view
    }

    /// Agent free: refuses new launches, cancels every pending or running task (`reason`), and
    /// waits up to `timeout` for them to settle; a run still going then is aborted at its next
    /// await point (the reference can only detach its thread). Returns how many were still in
    /// flight when the wait ended.
    pub(crate) fn close(&self, reason: &str, timeout: Duration) -> usize {
        let ids: Vec<String> = {
            let mut s = self.lock();
            s.closed = true;
            s.tasks
                .iter()
                .filter(|t| t.rec.status.in_flight())
                .map(|t| t.id.clone())
                .collect()
        };
        for id in &ids {
            self.cancel(id, reason);
        }
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let in_flight = s.in_flight();
            if in_flight == 0 || left.is_zero() {
                for t in s.tasks.iter_mut().filter(|t| t.rec.status.in_flight()) {
                    if let Some(a) = t.abort.take() {
                        a.abort();
                    }
                }
                return in_flight;
            }
            s = self
                .settled
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The queued completion notices, emptied (the parent's next LLM iteration).
    pub(crate) fn drain_notices(&self) -> Vec<String> {
        self.notices.drain()
    }
}
