//! One background task as the store keeps it (and persists it): who it is, where it is in its
//! life, and what it left behind.

use serde::{Deserialize, Serialize};

/// Where a background task is in its life. The wire strings are the reference's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub(crate) enum TaskStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// Pending or running: it still holds one of the store's slots.
    pub(crate) fn in_flight(self) -> bool {
        matches!(self, TaskStatus::Pending | TaskStatus::Running)
    }
}

/// How a run ended, as the child run reports it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Settled {
    Completed {
        result: String,
    },
    /// `incomplete_reason` is set when the run finished without an answer (budget, doom loop,
    /// no output…) rather than by an error; `result` then keeps the work it did.
    Failed {
        error: String,
        incomplete_reason: Option<String>,
        result: Option<String>,
    },
    Cancelled {
        result: Option<String>,
    },
}

/// What a finished child run hands back to the store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunReport {
    pub(crate) settled: Settled,
    pub(crate) turns: u64,
    pub(crate) tool_calls: u64,
    pub(crate) tokens: u64,
    pub(crate) duration_ms: u64,
}

impl RunReport {
    /// A report without counters (a run that never got going, a synthetic run).
    pub(crate) fn bare(settled: Settled) -> Self {
        RunReport {
            settled,
            turns: 0,
            tool_calls: 0,
            tokens: 0,
            duration_ms: 0,
        }
    }
}

/// The reference's record fields, so a persisted file reads the same. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskRecord {
    pub(crate) agent_name: String,
    /// The first 80 characters of the task.
    pub(crate) task: String,
    pub(crate) status: TaskStatus,
    pub(crate) result: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) incomplete_reason: Option<String>,
    pub(crate) created_at: f64,
    pub(crate) started_at: Option<f64>,
    pub(crate) finished_at: Option<f64>,
    #[serde(default)]
    pub(crate) turns: u64,
    #[serde(default)]
    pub(crate) tool_calls: u64,
    #[serde(default)]
    pub(crate) tokens: u64,
    #[serde(default)]
    pub(crate) duration_ms: u64,
}

pub(crate) fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl TaskRecord {
    pub(crate) fn pending(agent_name: &str, task: &str) -> Self {
        TaskRecord {
            agent_name: agent_name.to_owned(),
            task: task.chars().take(80).collect(),
            status: TaskStatus::Pending,
            result: None,
            error: None,
            incomplete_reason: None,
            created_at: now(),
            started_at: None,
            finished_at: None,
            turns: 0,
            tool_calls: 0,
            tokens: 0,
            duration_ms: 0,
        }
    }

    /// Records the end of a run; every field is overwritten, as the reference's `update`.
    pub(crate) fn settle(&mut self, report: RunReport) {
        let (status, result, error, reason) = match report.settled {
            Settled::Completed { result } => (TaskStatus::Completed, Some(result), None, None),
            Settled::Failed {
                error,
                incomplete_reason,
                result,
            } => (TaskStatus::Failed, result, Some(error), incomplete_reason),
            Settled::Cancelled { result } => (TaskStatus::Cancelled, result, None, None),
        };
        self.status = status;
        self.result = result;
        self.error = error;
        self.incomplete_reason = reason;
        self.finished_at = Some(now());
        self.turns = report.turns;
        self.tool_calls = report.tool_calls;
        self.tokens = report.tokens;
        self.duration_ms = report.duration_ms;
    }
}
