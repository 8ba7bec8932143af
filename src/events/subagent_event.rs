//! A sub-agent's start and end as typed events ([`super::TurnEvent::SubagentSpawned`],
//! [`super::TurnEvent::SubagentEnded`]): the facts the transport's `agent_start` / `agent_end`
//! and the `subagent_lifecycle` host events are both projected from. The run that produces them
//! lives in `crate::subagents`.

use super::host::SubagentUsage;
use super::{EventData, FieldValue, Fields};

/// How a run ended, in the vocabulary the lifecycle phase, `agent_end.state` and the
/// background store share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildState {
    Completed,
    Failed,
    Cancelled,
}

impl ChildState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ChildState::Completed => "completed",
            ChildState::Failed => "failed",
            ChildState::Cancelled => "cancelled",
        }
    }
}

impl FieldValue for ChildState {
    fn write_json(&self, out: &mut Vec<u8>) {
        // A plain lowercase word: nothing to escape.
        out.push(b'"');
        out.extend_from_slice(self.as_str().as_bytes());
        out.push(b'"');
    }
}

/// What the footer and `agent_end` report: counted from the child's messages, timed by the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunStats {
    /// Assistant messages.
    pub(crate) turns: u64,
    /// Tool messages.
    pub(crate) tool_calls: u64,
    /// The estimated size of the child's history (not what it was billed).
    pub(crate) tokens: u64,
    pub(crate) duration_ms: u64,
}

/// The ids one run's events share (spec §3.4), fixed before the first of them.
#[derive(Debug, Clone)]
pub(crate) struct Lineage {
    pub(crate) parent_session_id: String,
    /// The background task's id; `None` in the foreground.
    pub(crate) parent_task_id: Option<String>,
    pub(crate) parent_tool_call_id: Option<String>,
    pub(crate) child_session_id: String,
    pub(crate) child_task_id: String,
    /// The sub-agent's name.
    pub(crate) name: String,
    pub(crate) started_at: String,
}

impl Lineage {
    /// A foreground child's start and end are on its parent's transport; a background
    /// child's are host events only.
    pub(crate) fn foreground(&self) -> bool {
        self.parent_task_id.is_none()
    }
}

/// A sub-agent was spawned.
pub struct SubagentSpawned<'a> {
    pub(crate) lineage: &'a Lineage,
    /// The task's first 80 characters.
    pub(crate) task: &'a str,
    pub(crate) max_turns: u32,
}

/// `agent_start`: its keys in the order of the `json!` map it was written from before.
impl EventData for SubagentSpawned<'_> {
    fn write_fields(&self, fields: &mut Fields<'_>) {
        fields.field("\"agent\":", &self.lineage.name);
        fields.field("\"task\":", &self.task);
        fields.field("\"max_turns\":", &self.max_turns);
        fields.field("\"child_task_id\":", &self.lineage.child_task_id);
    }
}

/// A sub-agent's run ended.
pub struct SubagentEnded<'a> {
    pub(crate) lineage: &'a Lineage,
    pub(crate) state: ChildState,
    /// `None` when the child could not be built: nothing ran, nothing was counted.
    pub(crate) stats: Option<RunStats>,
    /// Why the run stopped short (`agent_end`'s `error`).
    pub(crate) error: Option<&'a str>,
    /// The host event's `error_type`, kept on a failed run only.
    pub(crate) error_type: Option<&'a str>,
    /// What the child's model calls cost (the host event's `usage`).
    pub(crate) usage: Option<SubagentUsage>,
}

/// `agent_end`: its keys in the order of the `json!` maps it was written from before; a child
/// that could not be built has no counters.
impl EventData for SubagentEnded<'_> {
    fn write_fields(&self, fields: &mut Fields<'_>) {
        fields.field("\"agent\":", &self.lineage.name);
        fields.field("\"state\":", &self.state);
        if let Some(s) = &self.stats {
            fields.field("\"turns\":", &s.turns);
            fields.field("\"tool_calls\":", &s.tool_calls);
            fields.field("\"tokens\":", &s.tokens);
            fields.field("\"duration_ms\":", &s.duration_ms);
        }
        fields.field("\"error\":", &self.error);
        fields.field("\"child_task_id\":", &self.lineage.child_task_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{EventWriter, TurnEvent};
    use serde_json::json;

    fn lineage(parent_task_id: Option<&str>) -> Lineage {
        Lineage {
            parent_session_id: "p".into(),
            parent_task_id: parent_task_id.map(str::to_owned),
            parent_tool_call_id: Some("call".into()),
            child_session_id: "c".into(),
            child_task_id: "t\"1".into(),
            name: "scout é".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
        }
    }

    fn old(ty: &str, data: serde_json::Value) -> String {
        EventWriter::default().event(ty, &data).as_str().to_owned()
    }

    /// `agent_start` and `agent_end` are the bytes the `json!` maps wrote before, and a
    /// background child's are not on the transport.
    #[test]
    fn agent_start_and_end_are_the_old_rendering() {
        let fg = lineage(None);
        let start = TurnEvent::SubagentSpawned(SubagentSpawned {
            lineage: &fg,
            task: "find \"x\"\n",
            max_turns: 7,
        });
        assert_eq!(
            start.to_json().unwrap(),
            old(
                "agent_start",
                json!({"agent": "scout é", "task": "find \"x\"\n", "max_turns": 7,
                       "child_task_id": "t\"1"})
            )
        );
        let stats = RunStats {
            turns: 2,
            tool_calls: 3,
            tokens: 1234,
            duration_ms: 56,
        };
        for (state, error) in [
            (ChildState::Completed, None),
            (ChildState::Failed, Some("it produced no output")),
            (ChildState::Cancelled, None),
        ] {
            let end = TurnEvent::SubagentEnded(SubagentEnded {
                lineage: &fg,
                state,
                stats: Some(stats),
                error,
                error_type: Some("incomplete:no_output"),
                usage: None,
            });
            assert_eq!(
                end.to_json().unwrap(),
                old(
                    "agent_end",
                    json!({"agent": "scout é", "state": state.as_str(), "turns": 2,
                           "tool_calls": 3, "tokens": 1234, "duration_ms": 56,
                           "error": error, "child_task_id": "t\"1"})
                )
            );
        }
        let unbuilt = TurnEvent::SubagentEnded(SubagentEnded {
            lineage: &fg,
            state: ChildState::Failed,
            stats: None,
            error: Some("ValueError"),
            error_type: Some("ValueError"),
            usage: None,
        });
        assert_eq!(
            unbuilt.to_json().unwrap(),
            old(
                "agent_end",
                json!({"agent": "scout é", "state": "failed", "error": "ValueError",
                       "child_task_id": "t\"1"})
            )
        );
        let bg = lineage(Some("ab12cd34"));
        let start = TurnEvent::SubagentSpawned(SubagentSpawned {
            lineage: &bg,
            task: "x",
            max_turns: 1,
        });
        assert_eq!(start.to_json(), None);
        let end = TurnEvent::SubagentEnded(SubagentEnded {
            lineage: &bg,
            state: ChildState::Completed,
            stats: Some(stats),
            error: None,
            error_type: None,
            usage: None,
        });
        assert_eq!(end.to_json(), None);
    }
}
