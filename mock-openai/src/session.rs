//! A model with a context window (the "session" mode): instead of a script it answers by the
//! shape of the conversation, so a session of any length (with compactions and retries the
//! test cannot count in advance) plays out.
//!
//! * A request whose estimated prompt tokens (the body's bytes / 4) exceed the window gets a
//!   real server's overflow error: OpenAI's 400 `context_length_exceeded` (`This model's
//!   maximum context length is N tokens…`), or a bare 413.
//! * With `reject_images`, a request with an `image_url` part gets OpenAI's text-only refusal.
//! * A summary request (its system prompt starts `You are compacting the history`) is answered
//!   by an echo: the previous summary, then every `[user]:` line of the conversation, capped
//!   at `summary_chars` from the start, so an early fact survives every compaction.
//! * Otherwise the last message decides: a user message gets a call of `tool` with
//!   `{"request": <the message without its date reminder>}` (or, when the request offers the
//!   `spawn` tool, a call of it with `{"task": …}`: the parent of a sub-agent, whose own
//!   requests do not offer it); a tool result gets another call of `tool` with the same
//!   request (numbered ` call=N` when there are several) until the turn has `calls_per_turn`
//!   results, then a short answer.
//!
//! Every success reports `prompt_tokens` = the estimate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};

/// How the model refuses a prompt over its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverflowStyle {
    /// HTTP 400 with OpenAI's `context_length_exceeded` body.
    #[default]
    OpenAi,
    /// A bare HTTP 413 `Request Entity Too Large`.
    PayloadTooLarge,
}

/// The session model's settings.
#[derive(Debug, Clone)]
pub struct SessionModel {
    /// Context window in (estimated) tokens.
    pub window: u64,
    pub overflow: OverflowStyle,
    pub reject_images: bool,
    /// The tool a user message is answered with.
    pub tool: String,
    /// The longest echoed summary.
    pub summary_chars: usize,
    /// Summary requests refused (HTTP 400) before the summarizer works.
    pub failing_summaries: u64,
    /// A sub-agent's tool (`agent_<name>`): a user message of a request that offers it gets a
    /// call of it instead of `tool`.
    pub spawn: Option<String>,
    /// Tool results after the last user message before the model answers (at least 1).
    pub calls_per_turn: usize,
}

impl Default for SessionModel {
    fn default() -> Self {
        SessionModel {
            window: 32_000,
            overflow: OverflowStyle::OpenAi,
            reject_images: false,
            tool: "fetch_blob".to_owned(),
            summary_chars: 6_000,
            failing_summaries: 0,
            spawn: None,
            calls_per_turn: 1,
        }
    }
}

/// What the session model saw, for the test.
#[derive(Debug, Default)]
pub struct SessionStats {
    pub overflow_errors: AtomicU64,
    pub image_rejections: AtomicU64,
    pub summary_requests: AtomicU64,
    pub largest_prompt: AtomicU64,
    /// Every summary the model wrote, in order.
    pub summaries: Mutex<Vec<String>>,
    /// The estimated prompt tokens of every chat request, in order.
    pub prompts: Mutex<Vec<u64>>,
}

/// The summarizer's first words, as the library's prompt has them.
const SUMMARY_PROMPT_START: &str = "You are compacting the history";

/// An answer: a status and a JSON error body, or an SSE body.
pub(crate) enum Answer {
    Error(u16, String),
    Stream(String),
}

pub(crate) fn answer(model: &SessionModel, stats: &SessionStats, body: &[u8], n: usize) -> Answer {
    let est = body.len() as u64 / 4;
    stats.prompts.lock().unwrap().push(est);
    stats.largest_prompt.fetch_max(est, Ordering::SeqCst);
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return Answer::Error(400, error_body("request body is not JSON", None));
    };
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    if est > model.window {
        stats.overflow_errors.fetch_add(1, Ordering::SeqCst);
        return match model.overflow {
            OverflowStyle::OpenAi => Answer::Error(
                400,
                error_body(
                    &format!(
                        "This model's maximum context length is {} tokens. However, your messages resulted in {est} tokens. Please reduce the length of the messages.",
                        model.window
                    ),
                    Some("context_length_exceeded"),
                ),
            ),
            OverflowStyle::PayloadTooLarge => {
                Answer::Error(413, error_body("Request Entity Too Large", None))
            }
        };
    }
    if model.reject_images && String::from_utf8_lossy(body).contains("\"image_url\"") {
        stats.image_rejections.fetch_add(1, Ordering::SeqCst);
        return Answer::Error(
            400,
            error_body(
                "Invalid content type. image_url is only supported by certain models.",
                None,
            ),
        );
    }
    let system = messages
        .first()
        .filter(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    let id = format!("chatcmpl-session-{n}");
    if system.starts_with(SUMMARY_PROMPT_START) {
        let k = stats.summary_requests.fetch_add(1, Ordering::SeqCst);
        if k < model.failing_summaries {
            return Answer::Error(400, error_body("the summarizer is unavailable", None));
        }
        let input = messages
            .last()
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        let summary = echo_summary(input, model.summary_chars);
        stats.summaries.lock().unwrap().push(summary.clone());
        return Answer::Stream(text_stream(&id, &summary, est));
    }
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let spawn = model.spawn.as_deref().filter(|s| offers(&req, s));
    let turn_start = messages.iter().rposition(|m| m["role"] == "user");
    let results = messages[turn_start.map_or(0, |i| i + 1)..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    if last["role"] == "tool" && (spawn.is_some() || results >= model.calls_per_turn.max(1)) {
        let content = last["content"].as_str().unwrap_or("");
        let head: String = content.chars().take(40).collect();
        return Answer::Stream(text_stream(&id, &format!("Noted: {head}"), est));
    }
    let user = turn_start.map_or(&Value::Null, |i| &messages[i]);
    let text = user["content"].as_str().map(without_reminder).unwrap_or("");
    let (tool, args) = match spawn {
        Some(s) => (s, json!({"task": text})),
        // Numbered, so the loop guard does not take the calls of one turn for a repetition.
        None if model.calls_per_turn > 1 => (
            model.tool.as_str(),
            json!({"request": format!("{text} call={}", results + 1)}),
        ),
        None => (model.tool.as_str(), json!({"request": text})),
    };
    Answer::Stream(call_stream(&id, tool, &args.to_string(), est))
}

/// Whether the request offers a tool of this name.
fn offers(req: &Value, name: &str) -> bool {
    req["tools"]
        .as_array()
        .is_some_and(|ts| ts.iter().any(|t| t["function"]["name"] == name))
}

fn without_reminder(text: &str) -> &str {
    text.strip_prefix("<system-reminder>\n")
        .and_then(|t| t.split_once("</system-reminder>\n"))
        .map_or(text, |(_, rest)| rest)
}

/// The previous summary's lines, then the conversation's `[user]:` lines, capped.
fn echo_summary(input: &str, cap: usize) -> String {
    let mut out = String::new();
    let mut in_previous = false;
    for line in input.lines() {
        match line {
            "<previous_summary>" => in_previous = true,
            "</previous_summary>" => in_previous = false,
            l if in_previous || l.starts_with("[user]:") => {
                if out.len() + l.len() + 1 > cap {
                    break;
                }
                out.push_str(l);
                out.push('\n');
            }
            _ => {}
        }
    }
    if out.is_empty() {
        out.push_str("(nothing to keep)");
    }
    out
}

fn error_body(message: &str, code: Option<&str>) -> String {
    json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}})
        .to_string()
}

fn chunk(id: &str, delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "session",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn usage(id: &str, prompt: u64, completion: u64) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "session",
        "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion}});
    format!("data: {c}\n\ndata: [DONE]\n\n")
}

fn text_stream(id: &str, text: &str, prompt: u64) -> String {
    let mut s = chunk(id, json!({"role": "assistant", "content": text}), None);
    s.push_str(&chunk(id, json!({}), Some("stop")));
    s.push_str(&usage(id, prompt, text.len() as u64 / 4 + 1));
    s
}

fn call_stream(id: &str, tool: &str, args: &str, prompt: u64) -> String {
    let call = json!({"index": 0, "id": format!("call_{id}"), "type": "function",
        "function": {"name": tool, "arguments": args}});
    let mut s = chunk(id, json!({"role": "assistant", "tool_calls": [call]}), None);
    s.push_str(&chunk(id, json!({}), Some("tool_calls")));
    s.push_str(&usage(id, prompt, args.len() as u64 / 4 + 1));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_keeps_the_previous_summary_first_and_the_user_lines() {
        let input = "<previous_summary>\nFACT: a\n</previous_summary>\n\n<conversation>\n[user]: b\n\n[assistant]: c\n\n[user]: d\n</conversation>\n";
        assert_eq!(echo_summary(input, 1000), "FACT: a\n[user]: b\n[user]: d\n");
        assert_eq!(echo_summary(input, 12), "FACT: a\n");
    }
}
