//! The model's control surface over its background agents: `check_background_agent` (status,
//! result, an optional bounded wait the turn can cancel) and `cancel_background_agent`, with the
//! reference's texts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::record::TaskStatus;
use super::store::{BackgroundStore, TaskView};
use crate::pycompat::{py_repr, python_str};
use crate::tools::{required_str, tool_metadata, Tool, ToolContext, ToolError};

/// Upper bound of one `wait_seconds`.
pub(crate) const MAX_WAIT_SECONDS: i64 = 1800;

/// How often a long wait reports that it is still waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(60);

pub(crate) struct CheckBackgroundAgent {
    pub(crate) store: Arc<BackgroundStore>,
}

pub(crate) struct CancelBackgroundAgent {
    pub(crate) store: Arc<BackgroundStore>,
}

/// Python's `int(x or 0)` on a JSON value: numbers truncate, strings parse, booleans count.
fn python_int(v: Option<&Value>) -> Option<i64> {
    match v {
        None | Some(Value::Null) => Some(0),
        Some(Value::Bool(b)) => Some(i64::from(*b)),
        Some(Value::Number(n)) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f.trunc().clamp(i64::MIN as f64, i64::MAX as f64) as i64)
        }),
        Some(Value::String(s)) if s.is_empty() => Some(0),
        Some(Value::String(s)) => s.trim().replace('_', "").parse().ok(),
        Some(_) => None,
    }
}

fn elapsed_since(start: Option<f64>, end: f64) -> f64 {
    start.map_or(0.0, |s| end - s)
}

/// One record as the reference reports it.
fn report(view: &TaskView) -> String {
    let (id, rec) = (&view.id, &view.rec);
    let name = &rec.agent_name;
    let with_result = |head: String| match rec.result.as_deref() {
        Some(r) if !r.is_empty() => format!("{head}\n\n{r}"),
        _ => head,
    };
    match rec.status {
        TaskStatus::Pending => format!("Agent '{name}' ({id}) is queued, not yet started."),
        TaskStatus::Running => format!(
            "Agent '{name}' ({id}) is still running… ({:.0}s elapsed)",
            elapsed_since(rec.started_at, super::record::now())
        ),
        TaskStatus::Completed => format!(
            "Agent '{name}' ({id}) completed ({:.1}s):\n\n{}",
            elapsed_since(rec.started_at, rec.finished_at.unwrap_or_default()),
            rec.result.as_deref().unwrap_or("None")
        ),
        TaskStatus::Cancelled => with_result(format!("Agent '{name}' ({id}) was cancelled.")),
        TaskStatus::Failed => {
            let error = rec.error.as_deref().unwrap_or("None");
            with_result(match &rec.incomplete_reason {
                Some(reason) => format!("Agent '{name}' ({id}) did not finish ({reason}): {error}"),
                None => format!("Agent '{name}' ({id}) failed: {error}"),
            })
        }
    }
}

fn listing(tasks: &[TaskView]) -> String {
    if tasks.is_empty() {
        return "No background agents in this conversation.".to_owned();
    }
    let now = super::record::now();
    let mut lines = vec!["Background agents:".to_owned()];
    for t in tasks {
        let rec = &t.rec;
        let elapsed = match (rec.started_at, rec.finished_at) {
            (Some(s), Some(f)) => format!("{:.1}s", f - s),
            (Some(s), None) => format!("{:.0}s running", now - s),
            (None, Some(_)) if rec.status == TaskStatus::Cancelled => {
                "cancelled before start".to_owned()
            }
            _ => "queued".to_owned(),
        };
        let task: String = rec.task.chars().take(60).collect();
        lines.push(format!(
            "  [{}] {} — {} ({elapsed}): {task}",
            t.id,
            rec.agent_name,
            rec.status.as_str()
        ));
    }
    lines.join("\n")
}

impl CheckBackgroundAgent {
    fn wait_and_report(&self, id: &str, wait: i64, ctx: &ToolContext<'_>) -> String {
        let started = Instant::now();
        let total = Duration::from_secs(wait.unsigned_abs());
        loop {
            let left = total.saturating_sub(started.elapsed());
            let Some(view) = self.store.wait(id, left.min(PROGRESS_EVERY), ctx.cancel) else {
                return format!("No background agent found with ID: {id}");
            };
            if !view.rec.status.in_flight() {
                return report(&view);
            }
            let name = &view.rec.agent_name;
            if ctx.cancel.is_cancelled() {
                return format!(
                    "Stopped waiting for agent '{name}' ({id}): this turn was cancelled. The agent itself was not cancelled and is still {}.",
                    view.rec.status.as_str()
                );
            }
            if started.elapsed() >= total {
                return format!(
                    "{}\nWaited {wait}s without it finishing. Do not repeat the same wait: end this turn (its update is delivered when this session next runs), or stop it with cancel_background_agent.",
                    report(&view)
                );
            }
            (ctx.output)(&format!(
                "Still waiting for agent '{name}' ({id}): {:.0}s of {wait}s\n",
                started.elapsed().as_secs_f64()
            ));
        }
    }
}

impl Tool for CheckBackgroundAgent {
    tool_metadata! {
        name: "check_background_agent",
        read_only: true,
        description: "Check the status of a background sub-agent previously launched with run_in_background=true. \
         Returns 'pending', 'running', 'completed' (with result), 'failed' (with error), or \
         'cancelled'. Pass \
         agent_id='' to list this conversation's background agents (and any still running). Only \
         when you need the result before you can continue in this turn, pass wait_seconds (up to \
         1800) to wait for it once. If the wait times out, do not repeat it: end the turn or cancel \
         the agent.",
        parameters: {"type": "object", "properties": {
            "agent_id": {"type": "string", "description": "The agent ID returned when the background agent was launched. Pass empty string to list this conversation's background agents."},
            "wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS,
                "description": "Seconds to wait for this agent to finish before answering. Default 0 answers at once. Ignored when listing."}},
            "required": ["agent_id"]},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let id = required_str(args, "agent_id", self.name())?;
        if id.is_empty() {
            return Ok(listing(&self.store.list()));
        }
        let raw = args.get("wait_seconds");
        let Some(wait) = python_int(raw) else {
            let shown = match raw {
                Some(Value::String(s)) => py_repr(s),
                Some(v) => python_str(v),
                None => "None".to_owned(),
            };
            return Ok(format!(
                "Invalid wait_seconds {shown}: expected an integer from 0 to {MAX_WAIT_SECONDS}."
            ));
        };
        let wait = wait.clamp(0, MAX_WAIT_SECONDS);
        if wait > 0 {
            return Ok(self.wait_and_report(id, wait, ctx));
        }
        Ok(match self.store.get(id) {
            Some(view) => report(&view),
            None => format!("No background agent found with ID: {id}"),
        })
    }
}

impl Tool for CancelBackgroundAgent {
    tool_metadata! {
        name: "cancel_background_agent",
        description: "Cancel a background sub-agent that was launched with run_in_background=true. Works on \
         both pending (not yet started) and running agents. Completed, failed or already \
         cancelled agents cannot be cancelled.",
        parameters: {"type": "object", "properties": {
            "agent_id": {"type": "string", "description": "The agent ID returned when the background agent was launched."}},
            "required": ["agent_id"]},
    }
    /// Not read-only (it changes a task), yet never asks: the reference's flags.
    fn requires_confirmation(&self) -> bool {
        false
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        _ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let id = required_str(args, "agent_id", self.name())?;
        Ok(self
            .store
            .cancel(id, crate::cancel::DEFAULT_REASON)
            .text(id))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn wait_seconds_reads_as_python_int() {
        assert_eq!(python_int(None), Some(0));
        assert_eq!(python_int(Some(&json!(2.9))), Some(2));
        assert_eq!(python_int(Some(&json!(" 7 "))), Some(7));
        assert_eq!(python_int(Some(&json!(true))), Some(1));
        assert_eq!(python_int(Some(&json!("x"))), None);
        assert_eq!(python_int(Some(&json!([1]))), None);
    }
}
