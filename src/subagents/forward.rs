//! The child's transport (spec §6.2): a foreground child forwards a whitelist of its events to
//! the parent (`turn_start`, `tool_start`, `tool_confirmation`, `tool_output`, `tool_complete`),
//! relabelled and stamped with `child_task_id`, and asks the parent's host its confirmations
//! (as `"[<name>] <tool>"`) and questions; its text, reasoning, turn and LLM-call events stay
//! private. A background child forwards nothing and refuses every confirmation.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::parent::ParentAgent;
use crate::events::transport::{
    Answer, ConfirmRequest, Confirmation, Reply, Transport, NON_INTERACTIVE_ANSWER,
};
use crate::events::EventWriter;

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

    /// The forwarded `data` of one child event, or `None` when it stays private.
    fn forwarded(&self, ty: &str, d: &Map<String, Value>) -> Option<Value> {
        let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
        let call_id = |tool: &str| match d.get("call_id") {
            Some(Value::String(c)) if !c.is_empty() => c.clone(),
            _ => tool.to_owned(),
        };
        let mut data = match ty {
            "turn_start" => {
                let reset = d.get("display_reset").and_then(Value::as_bool) == Some(true);
                if !reset {
                    self.turn.fetch_add(1, Ordering::AcqRel);
                }
                if reset {
                    json!({"display_reset": true})
                } else {
                    json!({})
                }
            }
            "tool_start" => {
                let tool = self.label(s("tool"));
                let args = d
                    .get("args")
                    .filter(|a| a.is_object())
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                json!({"tool": tool, "args": args, "call_id": call_id(&tool)})
            }
            "tool_confirmation" => {
                let mut data = d.clone();
                data.insert("tool".into(), Value::String(self.label(s("tool"))));
                Value::Object(data)
            }
            "tool_output" => {
                json!({"tool": s("tool"), "chunk": s("chunk"), "call_id": call_id(s("tool"))})
            }
            "tool_complete" => json!({
                "tool": s("tool"),
                "call_id": call_id(s("tool")),
                "status": d.get("status").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| json!("ok")),
                "duration_ms": d.get("duration_ms").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| json!(0)),
                "error": d.get("error").cloned().unwrap_or(Value::Null),
            }),
            _ => return None,
        };
        data.as_object_mut()?.insert(
            "child_task_id".into(),
            Value::String(self.child_task_id.clone()),
        );
        Some(data)
    }
}

impl Transport for Forwarder {
    fn emit(&self, event: &str) {
        if !self.foreground {
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(event) else {
            return;
        };
        let (Some(ty), Some(d)) = (
            v.get("type").and_then(Value::as_str),
            v.get("data").and_then(Value::as_object),
        ) else {
            return;
        };
        if let Some(data) = self.forwarded(ty, d) {
            let mut w = EventWriter::default();
            self.parent.emitter().emit(w.event(ty, &data));
        }
    }

    fn listens(&self) -> bool {
        self.foreground && self.parent.emitter().listens()
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
