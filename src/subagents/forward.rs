//! The child's transport (spec §6.2): a foreground child forwards a whitelist of its events to
//! the parent (`turn_start`, `tool_start`, `tool_confirmation`, `tool_output`, `tool_complete`),
//! relabelled and stamped with `child_task_id`, and its compaction events stamped the same way
//! (`compaction_started`, `compaction_settled`, `context_compressed`,
//! `session_summary_written`: beyond the reference's whitelist, docs/deviations.md), and asks the parent's host its confirmations
//! (as `"[<name>] <tool>"`) and questions; its text, reasoning, turn and LLM-call events stay
//! private. A background child forwards nothing and refuses every confirmation.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::parent::ParentAgent;
use crate::events::transport::{
    Answer, ConfirmRequest, Confirmation, Reply, Transport, NON_INTERACTIVE_ANSWER,
};
use crate::events::turn_event::{
    CompactionSettled, CompactionStarted, ContextCompressed, SessionSummaryWritten, ToolCall,
    ToolComplete, ToolOutput, ToolStart, TurnStart,
};
use crate::events::{EventWriter, TurnEvent};

/// How a child runs: in the foreground its host is the parent's; in the background nobody is
/// asked and nothing is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChildMode {
    Foreground,
    /// A background task; `parent_task_id` is its id in the store (8 hex digits).
    Background {
        parent_task_id: String,
    },
}

pub(crate) struct Forwarder {
    parent: Arc<dyn ParentAgent>,
    name: String,
    max_turns: u32,
    child_task_id: String,
    foreground: bool,
    turn: AtomicU32,
    max_iterations_hit: AtomicBool,
}

impl Forwarder {
    pub(crate) fn new(
        parent: Arc<dyn ParentAgent>,
        name: &str,
        max_turns: u32,
        child_task_id: &str,
        mode: &ChildMode,
    ) -> Self {
        Forwarder {
            parent,
            name: name.to_owned(),
            max_turns,
            child_task_id: child_task_id.to_owned(),
            foreground: *mode == ChildMode::Foreground,
            turn: AtomicU32::new(0),
            max_iterations_hit: AtomicBool::new(false),
        }
    }

    /// Whether the child used its whole budget (its `on_max_iterations` fired).
    pub(crate) fn max_iterations_hit(&self) -> bool {
        self.max_iterations_hit.load(Ordering::Acquire)
    }

    fn label(&self, tool: &str) -> String {
        format!(
            "[{} {}/{}] {tool}",
            self.name,
            self.turn.load(Ordering::Acquire),
            self.max_turns
        )
    }

    /// Forwards one child event to the parent, relabelled and stamped, when it is one the
    /// parent sees.
    fn forward(&self, event: &TurnEvent<'_>) {
        let child_task_id = Some(self.child_task_id.as_str());
        // The call's id, or the tool's name when the child's is empty.
        let call_id = |call_id: &'_ str, tool: &str| -> String {
            if call_id.is_empty() {
                tool.to_owned()
            } else {
                call_id.to_owned()
            }
        };
        let parent = self.parent.emitter();
        let mut w = EventWriter::default();
        match event {
            TurnEvent::TurnStart(d) => {
                if !d.display_reset {
                    self.turn.fetch_add(1, Ordering::AcqRel);
                }
                if parent.listens() {
                    let ev = TurnEvent::TurnStart(TurnStart {
                        display_reset: d.display_reset,
                        child_task_id,
                    });
                    parent.send(&mut w, &ev);
                }
            }
            TurnEvent::ToolStart(d) if parent.listens() => {
                let tool = self.label(d.tool);
                let call_id = call_id(d.call_id, &tool);
                let ev = TurnEvent::ToolStart(ToolStart {
                    tool: &tool,
                    call_id: &call_id,
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            TurnEvent::ToolConfirmation(d) if parent.listens() => {
                let tool = self.label(d.tool);
                let ev = TurnEvent::ToolConfirmation(ToolCall {
                    tool: &tool,
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            TurnEvent::ToolOutput(d) if parent.listens() => {
                let call_id = call_id(d.call_id, d.tool);
                let ev = TurnEvent::ToolOutput(ToolOutput {
                    call_id: &call_id,
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            TurnEvent::ToolComplete(d) if parent.listens() => {
                let call_id = call_id(d.call_id, d.tool);
                let ev = TurnEvent::ToolComplete(ToolComplete {
                    call_id: &call_id,
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            TurnEvent::CompactionStarted(d) if parent.listens() => {
                let ev = TurnEvent::CompactionStarted(CompactionStarted {
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            TurnEvent::CompactionSettled(d) if parent.listens() => {
                let ev = TurnEvent::CompactionSettled(CompactionSettled {
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            TurnEvent::ContextCompressed(d) if parent.listens() => {
                let ev = TurnEvent::ContextCompressed(ContextCompressed {
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            TurnEvent::SessionSummaryWritten(d) if parent.listens() => {
                let ev = TurnEvent::SessionSummaryWritten(SessionSummaryWritten {
                    child_task_id,
                    ..*d
                });
                parent.send(&mut w, &ev);
            }
            _ => {}
        }
    }
}

impl Transport for Forwarder {
    /// The child's events are not wanted as JSON: the forwarded ones are observed typed.
    fn emit(&self, _event: &str) {}

    fn listens(&self) -> bool {
        false
    }

    fn observes(&self) -> bool {
        self.foreground
    }

    fn observe(&self, event: &TurnEvent<'_>) {
        self.forward(event);
    }

    fn confirm_tool(&self, mut req: ConfirmRequest, reply: Reply) {
        if !self.foreground {
            let _ = reply.answer(Answer::Confirm(Confirmation::Deny));
            return;
        }
        req.tool_name = format!("[{}] {}", self.name, req.tool_name);
        self.parent.emitter().transport().confirm_tool(req, reply);
    }

    fn ask_user(&self, question: &str, hints_json: &str, reply: Reply) {
        if !self.foreground {
            let _ = reply.answer(Answer::Text(NON_INTERACTIVE_ANSWER.to_owned()));
            return;
        }
        self.parent
            .emitter()
            .transport()
            .ask_user(question, hints_json, reply);
    }

    /// Not the parent's question: the child stops at its budget, and the run is classified
    /// `max_iterations`.
    fn on_max_iterations(&self, _count: u32, _pending_json: &str, reply: Reply) {
        self.max_iterations_hit.store(true, Ordering::Release);
        let _ = reply.answer(Answer::Json(r#"{"action":"stop"}"#.to_owned()));
    }
}
