//! The turn's transcript: the messages it adds (user message, assistant messages with their
//! calls, tool answers), kept by the turn and committed to the agent's history when it ends;
//! and the repair that answers every orphaned call.

use std::sync::{RwLock, RwLockReadGuard};

use serde_json::{json, Value};

use super::Turn;
use crate::llm::assembly::WireCarrier;
use crate::llm::message::{AssistantMessage, HistoryCall, Role, ToolAnswer};
use crate::llm::{LlmResponse, Message, ToolCall};

const ORPHAN_TEXT: &str = "Tool call interrupted: the turn ended before this tool's result was recorded. The tool may or may not have run — verify the current state before retrying, as re-running may repeat a side effect.";

pub(super) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// Answers every assistant tool call that has no tool result yet (right after that message's
/// existing results), so the history is always valid for the next request.
pub(crate) fn backfill_orphans(history: &mut Vec<Message>) {
    backfill_orphans_from(history, 0);
}

/// [`backfill_orphans`] of the messages from `start` on, where `history[..start]` has every
/// call answered already (an earlier repair's history, only appended to since): a call there
/// has its answers there, so nothing before `start` can gain one.
pub(crate) fn backfill_orphans_from(history: &mut Vec<Message>, start: usize) {
    let mut i = start;
    while i < history.len() {
        let Some(calls) = history[i].calls() else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < history.len() && history[j].role() == Role::Tool {
            j += 1;
        }
        let answered = |id: &str| {
            history[i + 1..j]
                .iter()
                .any(|m| m.tool_call_id() == Some(id))
        };
        let missing: Vec<Message> = calls
            .iter()
            .filter_map(|call| {
                let id = call.id.unwrap_or_default();
                (!answered(id)).then(|| {
                    let name = call.name.unwrap_or("unknown");
                    Message::Tool(ToolAnswer::new(id, name, ORPHAN_TEXT))
                })
            })
            .collect();
        let added = missing.len();
        history.splice(j..j, missing);
        i = j + added;
    }
}

/// The calls of an assistant message as `on_max_iterations` gets them: `{name, args}`.
fn pending_calls(m: &Message) -> Vec<Value> {
    match m {
        Message::Assistant(a) => a
            .tool_calls
            .iter()
            .flatten()
            .map(|c| json!({"name": c.name, "args": c.arguments}))
            .collect(),
        Message::Host(map) => map
            .get("tool_calls")
            .and_then(Value::as_array)
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| json!({"name": c["function"]["name"], "args": c["function"]["arguments"]}))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// An assistant message with the wire's opaque reasoning under the reference's history key
/// (`anthropic_thinking_blocks`, `openai_reasoning_items`): a message in that shape is kept
/// as written, so the items go back whole on the next request.
fn with_carrier(m: Message, carrier: Option<&WireCarrier>) -> Message {
    let Some(carrier) = carrier else { return m };
    match serde_json::to_value(&m) {
        Ok(Value::Object(mut map)) => {
            map.insert(
                carrier.history_key().to_owned(),
                Value::Array(carrier.items().to_vec()),
            );
            Message::Host(map)
        }
        _ => m,
    }
}

impl Turn<'_, '_> {
    fn record(&mut self, m: Message) {
        self.transcript.push(m);
    }

    pub(super) fn record_user(&mut self, text: String) {
        self.record(Message::User(text));
    }

    /// An assistant message without calls.
    pub(super) fn record_text(&mut self, text: &str) {
        self.record(Message::assistant_text(text));
    }

    /// The final answer, with the reasoning that came with it.
    pub(super) fn record_final(
        &mut self,
        text: &str,
        reasoning: String,
        carrier: Option<&WireCarrier>,
    ) {
        self.record(with_carrier(
            Message::Assistant(AssistantMessage {
                content: text.to_owned(),
                tool_calls: None,
                reasoning: (!reasoning.is_empty()).then_some(reasoning),
            }),
            carrier,
        ));
    }

    /// The assistant message that asked for `calls`, before any of them runs.
    pub(super) fn record_assistant(&mut self, r: &LlmResponse, calls: &[ToolCall]) {
        let tool_calls = calls
            .iter()
            .map(|c| HistoryCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.canonical_arguments(),
            })
            .collect();
        self.record(with_carrier(
            Message::Assistant(AssistantMessage {
                content: r.content.clone(),
                tool_calls: Some(tool_calls),
                reasoning: (!r.reasoning.is_empty()).then(|| r.reasoning.clone()),
            }),
            r.carrier.as_ref(),
        ));
    }

    pub(super) fn record_answers(&mut self, answers: Vec<ToolAnswer>) {
        self.transcript
            .extend(answers.into_iter().map(Message::Tool));
    }

    /// The last assistant message's calls as `on_max_iterations` gets them (`[{name, args}]`),
    /// and its text when there is any.
    pub(super) fn last_assistant(&self) -> (String, Option<String>) {
        let h = read(self.env.history);
        let last = (h.iter().chain(&self.transcript))
            .rev()
            .find(|m| m.role() == Role::Assistant);
        let pending = last.map(pending_calls).unwrap_or_default();
        let text = last
            .and_then(Message::text)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        (Value::Array(pending).to_string(), text)
    }

    /// Answers this turn's calls that have none (the history before the turn was repaired
    /// when the turn began).
    pub(super) fn backfill(&mut self) {
        let before = self.transcript.len();
        backfill_orphans(&mut self.transcript);
        // It inserts: the length tells whether it changed anything.
        if self.transcript.len() != before {
            self.transcript_version = crate::llm::MessagesVersion::fresh();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::message::{AssistantMessage, HistoryCall};

    fn calling(id: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: String::new(),
            tool_calls: Some(vec![HistoryCall {
                id: id.into(),
                name: "read_file".into(),
                arguments: "{}".into(),
            }]),
            reasoning: None,
        })
    }

    #[test]
    fn a_repair_from_a_whole_prefix_answers_what_the_full_repair_answers() {
        let mut history = vec![
            Message::User("a".into()),
            calling("one"),
            Message::Tool(ToolAnswer::new("one", "read_file", "done")),
            Message::User("b".into()),
            calling("two"),
            Message::User("c".into()),
        ];
        let mut whole = history.clone();
        backfill_orphans(&mut whole);
        backfill_orphans_from(&mut history, 3);
        assert_eq!(history, whole);
        assert_eq!(history.len(), 7);
        assert_eq!(history[5].tool_call_id(), Some("two"));
    }
}
