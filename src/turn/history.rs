//! The turn's history: what it appends (user message, assistant messages with their calls,
//! tool answers) and the repair that answers every orphaned call.

use std::sync::Mutex;

use serde_json::{json, Value};

use super::Turn;
use crate::llm::{LlmResponse, ToolCall};

const ORPHAN_TEXT: &str = "Tool call interrupted: the turn ended before this tool's result was recorded. The tool may or may not have run — verify the current state before retrying, as re-running may repeat a side effect.";

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The answer to one tool call, as history records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub call_id: String,
    pub name: String,
    pub content: String,
}

impl ToolAnswer {
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ToolAnswer {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
        }
    }
}

/// Answers every assistant tool call that has no tool result yet (right after that message's
/// existing results), so the history is always valid for the next request.
pub fn backfill_orphans(history: &mut Vec<Value>) {
    let mut i = 0;
    while i < history.len() {
        let is_assistant = history[i].get("role").and_then(Value::as_str) == Some("assistant");
        let Some(calls) = history[i]
            .get("tool_calls")
            .and_then(Value::as_array)
            .filter(|_| is_assistant)
        else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < history.len() && history[j].get("role").and_then(Value::as_str) == Some("tool") {
            j += 1;
        }
        let answered = |id: &str| {
            history[i + 1..j]
                .iter()
                .any(|m| m.get("tool_call_id").and_then(Value::as_str) == Some(id))
        };
        let missing: Vec<Value> = calls
            .iter()
            .filter_map(|call| {
                let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                (!answered(id)).then(|| {
                    let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or("unknown");
                    json!({"role": "tool", "tool_call_id": id, "name": name, "content": ORPHAN_TEXT})
                })
            })
            .collect();
        let added = missing.len();
        history.splice(j..j, missing);
        i = j + added;
    }
}

impl Turn<'_, '_> {
    pub(super) fn record_user(&self, text: String) {
        lock(self.env.history).push(json!({"role": "user", "content": text}));
    }

    /// An assistant message without calls.
    pub(super) fn record_text(&self, text: &str) {
        lock(self.env.history).push(json!({"role": "assistant", "content": text}));
    }

    /// The final answer, with the reasoning that came with it.
    pub(super) fn record_final(&self, text: &str, reasoning: String) {
        let mut msg = json!({"role": "assistant", "content": text});
        if !reasoning.is_empty() {
            msg["reasoning_content"] = Value::String(reasoning);
        }
        lock(self.env.history).push(msg);
    }

    /// The assistant message that asked for `calls`, before any of them runs.
    pub(super) fn record_assistant(&self, r: &LlmResponse, calls: &[ToolCall]) {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.canonical_arguments()}})
            })
            .collect();
        let mut msg = json!({"role": "assistant", "content": r.content, "tool_calls": tool_calls});
        if !r.reasoning.is_empty() {
            msg["reasoning_content"] = Value::String(r.reasoning.clone());
        }
        lock(self.env.history).push(msg);
    }

    pub(super) fn record_answers(&self, answers: &[ToolAnswer]) {
        let mut h = lock(self.env.history);
        for a in answers {
            h.push(json!({"role": "tool", "tool_call_id": a.call_id, "name": a.name, "content": a.content}));
        }
    }

    /// The last assistant message's calls as `on_max_iterations` gets them (`[{name, args}]`),
    /// and its text when there is any.
    pub(super) fn last_assistant(&self) -> (String, Option<String>) {
        let h = lock(self.env.history);
        let last = h.iter().rev().find(|m| m["role"] == "assistant");
        let pending: Vec<Value> = last
            .and_then(|m| m["tool_calls"].as_array())
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| json!({"name": c["function"]["name"], "args": c["function"]["arguments"]}))
                    .collect()
            })
            .unwrap_or_default();
        let text = last
            .and_then(|m| m["content"].as_str())
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        (Value::Array(pending).to_string(), text)
    }

    pub(super) fn backfill(&self) {
        backfill_orphans(&mut lock(self.env.history));
    }
}
