//! How a finished sub-agent run is classified (spec §6.4, the reference's `_outcome.py`) and
//! the tool result the parent model reads. Its start and end are typed events
//! (`events::subagent_event`), from which `agent_start` / `agent_end` and the
//! `subagent_lifecycle` host events are projected.

use serde_json::Value;

use crate::events::host::SubagentUsage;
pub(crate) use crate::events::subagent_event::{ChildState, Lineage, RunStats};
use crate::llm::{Message, Usage};
use crate::turn::{IncompleteReason, TurnOutcome, TurnStatus};

/// Why a run stopped short of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Incomplete {
    /// Its `on_max_iterations` fired: the whole budget was used.
    MaxIterations {
        max_turns: u32,
    },
    /// The child's turn ended with this `incomplete_reason`.
    Turn(IncompleteReason),
    Cancelled,
    Error,
    Unknown,
}

impl Incomplete {
    /// The machine-readable reason (`error_type` is `incomplete:<reason>`).
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Incomplete::MaxIterations { .. } => "max_iterations",
            Incomplete::Turn(r) => r.as_str(),
            Incomplete::Cancelled => "cancelled",
            Incomplete::Error => "error",
            Incomplete::Unknown => "unknown",
        }
    }

    /// What the parent model reads (the reference's wording).
    pub(crate) fn detail(self) -> String {
        match self {
            Incomplete::MaxIterations { max_turns } => {
                format!("it used its entire {max_turns}-turn budget without finishing")
            }
            Incomplete::Turn(r) => match r {
                IncompleteReason::NoOutput => "it produced no output".into(),
                IncompleteReason::ReasoningOnly => {
                    "it produced only reasoning, with no answer".into()
                }
                IncompleteReason::LengthTruncated => {
                    "its answer was cut off by the model's output-length limit".into()
                }
                IncompleteReason::DoomLoop => {
                    "it was halted after repeating the same tool call".into()
                }
                IncompleteReason::LlmError => "the LLM API call failed".into(),
                other => format!("it stopped early ({})", other.as_str()),
            },
            Incomplete::Cancelled => "it was cancelled".into(),
            Incomplete::Error => "it ended with an error".into(),
            Incomplete::Unknown => "it did not produce a complete answer".into(),
        }
    }

    pub(crate) fn state(self) -> ChildState {
        match self {
            Incomplete::Cancelled => ChildState::Cancelled,
            _ => ChildState::Failed,
        }
    }
}

/// The classification order of spec §6.4: `complete_task` wins, then the budget, then an
/// answer, then the turn's reason, then its status. `None`: the run answered.
pub(crate) fn classify(
    outcome: &TurnOutcome,
    task_complete: bool,
    max_iterations_hit: bool,
    max_turns: u32,
) -> Option<Incomplete> {
    if task_complete {
        return None;
    }
    if max_iterations_hit {
        return Some(Incomplete::MaxIterations { max_turns });
    }
    if outcome.is_answer() {
        return None;
    }
    if let Some(r) = outcome.incomplete_reason {
        return Some(Incomplete::Turn(r));
    }
    Some(match outcome.status {
        TurnStatus::Cancelled => Incomplete::Cancelled,
        TurnStatus::Error => Incomplete::Error,
        TurnStatus::Ok => Incomplete::Unknown,
    })
}

/// Text the harness wrote on the child's behalf, never shown as its partial result.
pub(crate) fn is_harness_notice(text: &str) -> bool {
    let body = text.trim();
    body.is_empty()
        || matches!(
            body,
            "[No response]" | "Maximum tool call iterations reached." | "[Interrupted by user]"
        )
        || body.starts_with("[LLM API error:")
        || body.starts_with("[Cancelled:")
}

/// The last `complete_task` payload in the child's messages, if it called it.
pub(crate) fn complete_task_payload(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|m| {
        let v = serde_json::to_value(m).ok()?;
        (v.get("role")? == "tool" && v.get("name")? == super::complete::COMPLETE_TASK).then(|| {
            v.get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        })
    })
}

/// The reference's fallback estimate: ASCII 0.25, anything else 1.3 tokens per character.
fn text_tokens(text: &str) -> u64 {
    let n = text.chars().count() as u64;
    if n > 100_000 {
        return n / 4;
    }
    let ascii = text.chars().filter(char::is_ascii).count() as u64;
    (ascii * 25 + (n - ascii) * 130) / 100
}

impl RunStats {
    pub(crate) fn of(messages: &[Message], duration_ms: u64) -> RunStats {
        let mut s = RunStats {
            duration_ms,
            ..RunStats::default()
        };
        for m in messages {
            let Ok(v) = serde_json::to_value(m) else {
                continue;
            };
            match v.get("role").and_then(Value::as_str) {
                Some("assistant") => s.turns += 1,
                Some("tool") => s.tool_calls += 1,
                _ => {}
            }
            if let Some(t) = v.get("content").and_then(Value::as_str) {
                s.tokens += text_tokens(t);
            }
            if let Some(calls) = v.get("tool_calls") {
                s.tokens += text_tokens(&crate::pycompat::python_str(calls));
            }
        }
        s
    }
}

/// The spawn tool's result: the child's text and a footer, led by a plain "did not finish"
/// when it stopped short (its text then shown as a partial result unless the harness wrote it).
pub(crate) fn result_text(
    name: &str,
    result: &str,
    stats: &RunStats,
    incomplete: Option<Incomplete>,
) -> String {
    let footer = format!(
        "[{name}: {} turns, {} tool calls, ~{} tokens, {}ms]",
        stats.turns,
        stats.tool_calls,
        crate::tools::result_format::thousands(stats.tokens),
        stats.duration_ms
    );
    match incomplete {
        None => format!("{result}\n\n{footer}"),
        Some(i) => {
            let header = format!("[{name} did not finish: {}]", i.detail());
            if is_harness_notice(result) {
                format!("{header}\n\n{footer}")
            } else {
                format!("{header}\nPartial result:\n{result}\n\n{footer}")
            }
        }
    }
}

pub(crate) fn usage_of(u: &Usage) -> SubagentUsage {
    SubagentUsage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_creation_tokens: u.cache_creation_tokens,
        reasoning_tokens: u.reasoning_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: TurnStatus, reason: Option<IncompleteReason>) -> TurnOutcome {
        TurnOutcome {
            text: "t".into(),
            status,
            incomplete_reason: reason,
            tool_count: 0,
            error: None,
            finish_reason_missing: false,
        }
    }

    #[test]
    fn classification_order() {
        let ok = outcome(TurnStatus::Ok, None);
        let trunc = outcome(TurnStatus::Ok, Some(IncompleteReason::LengthTruncated));
        assert_eq!(classify(&trunc, true, true, 5), None);
        assert_eq!(
            classify(&ok, false, true, 5),
            Some(Incomplete::MaxIterations { max_turns: 5 })
        );
        assert_eq!(classify(&ok, false, false, 5), None);
        let i = classify(&trunc, false, false, 5).unwrap();
        assert_eq!(
            (i.reason(), i.state()),
            ("length_truncated", ChildState::Failed)
        );
        let c = classify(&outcome(TurnStatus::Cancelled, None), false, false, 5).unwrap();
        assert_eq!(
            (c.reason(), c.state()),
            ("cancelled", ChildState::Cancelled)
        );
        let e = classify(&outcome(TurnStatus::Error, None), false, false, 5).unwrap();
        assert_eq!(e.reason(), "error");
    }

    #[test]
    fn result_text_forms() {
        let s = RunStats {
            turns: 2,
            tool_calls: 1,
            tokens: 1234,
            duration_ms: 56,
        };
        assert_eq!(
            result_text("x", "found it", &s, None),
            "found it\n\n[x: 2 turns, 1 tool calls, ~1,234 tokens, 56ms]"
        );
        let i = Some(Incomplete::MaxIterations { max_turns: 3 });
        assert_eq!(
            result_text("x", "half", &s, i),
            "[x did not finish: it used its entire 3-turn budget without finishing]\nPartial result:\nhalf\n\n[x: 2 turns, 1 tool calls, ~1,234 tokens, 56ms]"
        );
        assert_eq!(
            result_text("x", "[LLM API error: boom]", &s, i),
            "[x did not finish: it used its entire 3-turn budget without finishing]\n\n[x: 2 turns, 1 tool calls, ~1,234 tokens, 56ms]"
        );
    }
}
