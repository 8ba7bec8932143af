//! The summary of a full compaction: the summarizer's prompt, the conversation as it reads it,
//! the call, and the message that replaces the summarised history.

use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::llm::message::Role;
use crate::llm::{ChatRequest, LlmClient, LlmError, Message, MessagesVersion};

/// Closes every summary, so the model (and a reader of the history) sees where it ends.
pub(crate) const END_MARKER: &str = "--- END OF CONTEXT SUMMARY ---";
/// Opens the message that holds a summary.
pub(crate) const SUMMARY_HEAD: &str = "<context-summary>\nThis session was compacted: the summary below replaces the earlier messages of the conversation. Treat it as what happened so far; the messages after it are verbatim.\n\n";

/// The summarizer's instructions. Its first line is what `mock-openai` recognises a summary
/// request by.
pub(crate) const SUMMARIZER_PROMPT: &str = "\
You are compacting the history of an agent session so the work can go on in a fresh context \
window. Another instance of the agent will continue from your summary alone, without the \
original messages, so anything you leave out is lost.

Write the summary under these headings, in this order, and keep every item that applies:

1. User's requests and constraints: what the user asked for, and every constraint, preference \
or instruction the user stated (quote them word for word; they still bind the work).
2. Decisions: what was decided or agreed, and why.
3. Files: every file path read, created, modified or deleted, each with what was done to it.
4. Commands and results: commands run and the results that matter (failures and their errors \
included).
5. Facts learned: names, values, identifiers, versions, URLs and other facts later work \
depends on, exactly as they appeared.
6. Open items: unfinished todo items, pending questions, and the very next step.

A <previous_summary> is the summary of an earlier compaction: carry all of it forward, merged \
with the new messages. Be specific and terse; never invent anything; write no preamble and no \
closing remarks.";

/// The longest one tool result is shown to the summarizer.
const TOOL_RESULT_CHARS: usize = 2_000;
/// The longest any other message is shown.
const MESSAGE_CHARS: usize = 8_000;

/// Whether `m` holds a summary of an earlier compaction; its text between head and marker.
pub(crate) fn previous_summary(m: &Message) -> Option<&str> {
    if m.role() != Role::User {
        return None;
    }
    let t = m.text()?.strip_prefix(SUMMARY_HEAD)?;
    Some(
        t.rsplit_once(END_MARKER)
            .map_or(t, |(body, _)| body)
            .trim_end(),
    )
}

/// The message that replaces the summarised history.
pub(crate) fn summary_message(summary: &str) -> Message {
    Message::User(format!(
        "{SUMMARY_HEAD}{}\n{END_MARKER}\n</context-summary>",
        summary.trim()
    ))
}

/// The conversation as the summarizer reads it: a previous summary in its own tags, then one
/// block per message, long ones shortened (head and tail), the date reminder of user messages
/// left out. `max_chars` bounds the whole: past it, the middle of the conversation goes.
pub(crate) fn render(messages: &[Message], max_chars: usize) -> String {
    let mut out = String::new();
    let mut rest = messages;
    if let Some(prev) = messages.first().and_then(previous_summary) {
        out.push_str("<previous_summary>\n");
        out.push_str(prev);
        out.push_str("\n</previous_summary>\n\n");
        rest = &messages[1..];
    }
    out.push_str("<conversation>\n");
    let start = out.len();
    for m in rest {
        render_message(&mut out, m);
    }
    if out.len() > max_chars.max(start + 1024) {
        let budget = max_chars.max(start + 1024) - start;
        let body = out.split_off(start);
        let head = floor(&body, budget / 3);
        let tail = ceil(&body, body.len() - (budget - head.len()));
        out.push_str(head);
        out.push_str("\n[… the middle of the conversation is omitted …]\n");
        out.push_str(tail);
    }
    out.push_str("</conversation>\n");
    out
}

fn render_message(out: &mut String, m: &Message) {
    let text = m.text().unwrap_or_default();
    match m {
        Message::User(_) => {
            out.push_str("[user]: ");
            out.push_str(&shorten(without_reminder(text), MESSAGE_CHARS));
        }
        Message::Assistant(a) => {
            out.push_str("[assistant]: ");
            out.push_str(&shorten(&a.content, MESSAGE_CHARS));
            for c in a.tool_calls.iter().flatten() {
                out.push_str(&format!(
                    "\n[assistant calls {}]: {}",
                    c.name,
                    shorten(&c.arguments, TOOL_RESULT_CHARS)
                ));
            }
        }
        Message::Tool(t) => {
            out.push_str(&format!("[result of {}]: ", t.name));
            out.push_str(&shorten(&t.content, TOOL_RESULT_CHARS));
        }
        Message::System(_) => {
            out.push_str("[system]: ");
            out.push_str(&shorten(text, MESSAGE_CHARS));
        }
        Message::Host(_) if crate::llm::image::parts(m).is_some() && m.role() == Role::User => {
            let plain = crate::llm::image::without_images(m, |_, mime| format!("[image {mime}]"));
            out.push_str("[user]: ");
            let text = plain.as_ref().and_then(Message::text).unwrap_or_default();
            out.push_str(&shorten(without_reminder(text), MESSAGE_CHARS));
        }
        Message::Host(map) => {
            out.push_str("[message]: ");
            let j = serde_json::to_string(map).unwrap_or_default();
            out.push_str(&shorten(&j, MESSAGE_CHARS));
        }
    }
    out.push_str("\n\n");
}

/// A user message's text without the date reminder the turn put before it.
fn without_reminder(text: &str) -> &str {
    text.strip_prefix("<system-reminder>\n")
        .and_then(|t| t.split_once("</system-reminder>\n"))
        .map_or(text, |(_, rest)| rest)
}

/// The largest prefix of `s` of at most `n` bytes that ends on a character boundary.
fn floor(s: &str, n: usize) -> &str {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// The suffix of `s` from the first character boundary at or after `n`.
fn ceil(s: &str, n: usize) -> &str {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n += 1;
    }
    &s[n..]
}

fn shorten(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let head = floor(s, max / 4);
    let tail = ceil(s, s.len() - (max - head.len()));
    format!(
        "{head}\n[… {} bytes omitted …]\n{tail}",
        s.len() - head.len() - tail.len()
    )
    .into()
}

/// Why a summary was not produced.
pub(crate) enum SummaryError {
    /// Why: the turn's cancel, or the compaction controller's.
    Cancelled(String),
    Failed(String),
}

/// Asks the model for the summary of `rendered`. Nothing of the call reaches the host's
/// stream; its usage counts in the session's totals.
pub(crate) async fn summarize(
    llm: &LlmClient,
    rendered: String,
    cancel: &CancelToken,
) -> Result<String, SummaryError> {
    let input = [Message::User(rendered)];
    let no_tools = Arc::new(Vec::new());
    let req = ChatRequest {
        system: SUMMARIZER_PROMPT,
        history: &input,
        history_version: MessagesVersion::unknown(),
        transcript: &[],
        transcript_version: MessagesVersion::unknown(),
        tail: None,
        tools: &no_tools,
    };
    let mut call = llm.start(&req, cancel);
    let drained: Result<(), LlmError> = async {
        while call.next().await?.is_some() {}
        Ok(())
    }
    .await;
    if cancel.is_cancelled() {
        return Err(SummaryError::Cancelled("cancelled".into()));
    }
    if let Err(e) = drained {
        return Err(SummaryError::Failed(format!("summarizer call failed: {e}")));
    }
    let text = call.finish().content;
    if text.trim().is_empty() {
        return Err(SummaryError::Failed(
            "the summarizer returned no text".into(),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::message::ToolAnswer;

    #[test]
    fn a_summary_message_is_recognised_and_folded_into_the_next_rendering() {
        let m = summary_message("FACT: the port is 8443");
        assert_eq!(previous_summary(&m), Some("FACT: the port is 8443"));
        let text = m.text().unwrap();
        assert!(text.contains(END_MARKER));
        let r = render(
            &[
                m.clone(),
                Message::User(
                    "<system-reminder>\nCurrent Date/Time: x\n</system-reminder>\nedit src/a.rs"
                        .into(),
                ),
                Message::Tool(ToolAnswer::new("c", "read_file", "y".repeat(10_000))),
            ],
            1_000_000,
        );
        assert!(r.starts_with("<previous_summary>\nFACT: the port is 8443\n</previous_summary>"));
        assert!(r.contains("[user]: edit src/a.rs\n"), "{r}");
        assert!(r.contains("bytes omitted"));
        assert!(r.len() < 4_000);
    }

    #[test]
    fn the_rendering_keeps_to_its_bound() {
        let ms: Vec<Message> = (0..100)
            .map(|i| Message::User(format!("message {i} {}", "z".repeat(1000))))
            .collect();
        let r = render(&ms, 10_000);
        assert!(r.len() < 11_000, "{}", r.len());
        assert!(r.contains("message 0 ") && r.contains("message 99 "));
    }
}
