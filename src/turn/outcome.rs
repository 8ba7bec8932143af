//! `TurnOutcome`: how a turn ended (spec §4.1–§4.3), from the final response or the loop's
//! error, and the `turn_end` event that reports it.

use serde::Serialize;
use serde_json::json;

use super::{cancel_reason, LoopEnd, LoopError, Turn, TurnFailure};
use crate::llm::LlmResponse;
use crate::tools::result_format::strip_tag_chars;

const NO_RESPONSE: &str = "[No response]";
const NO_TEXT_RESPONSE: &str = "[No text response]";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnStatus {
    Ok,
    Error,
    Cancelled,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Ok => "ok",
            TurnStatus::Error => "error",
            TurnStatus::Cancelled => "cancelled",
        }
    }
}

/// Why `text` is not a complete model answer (the reference's closed vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IncompleteReason {
    NoOutput,
    ReasoningOnly,
    LengthTruncated,
    DoomLoop,
    MaxIterations,
    LlmError,
    /// Reserved: only plugin hooks (not in this library yet) can end a turn this way.
    HookStop,
}

impl IncompleteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            IncompleteReason::NoOutput => "no_output",
            IncompleteReason::ReasoningOnly => "reasoning_only",
            IncompleteReason::LengthTruncated => "length_truncated",
            IncompleteReason::DoomLoop => "doom_loop",
            IncompleteReason::MaxIterations => "max_iterations",
            IncompleteReason::LlmError => "llm_error",
            IncompleteReason::HookStop => "hook_stop",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnOutcome {
    pub text: String,
    pub status: TurnStatus,
    pub incomplete_reason: Option<IncompleteReason>,
    pub tool_count: u64,
    pub error: Option<String>,
    pub finish_reason_missing: bool,
}

#[derive(Serialize)]
struct OutcomeJson<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    #[serde(flatten)]
    outcome: &'a TurnOutcome,
    is_answer: bool,
}

impl TurnOutcome {
    pub fn is_answer(&self) -> bool {
        self.status == TurnStatus::Ok && self.incomplete_reason.is_none()
    }

    /// `{"type":"turn_outcome", text, status, incomplete_reason, tool_count, error,
    /// finish_reason_missing, is_answer}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&OutcomeJson {
            ty: "turn_outcome",
            outcome: self,
            is_answer: self.is_answer(),
        })
        .expect("outcomes serialize")
    }
}

/// The `data` of `turn_end`.
pub(super) struct TurnEnd<'a>(pub &'a TurnOutcome);

impl Serialize for TurnEnd<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = self.0;
        json!({
            "final_text": o.text,
            "status": o.status.as_str(),
            "error": o.error,
            "tool_count": o.tool_count,
            "incomplete_reason": o.incomplete_reason.map(IncompleteReason::as_str),
            "finish_reason_missing": o.finish_reason_missing,
        })
        .serialize(s)
    }
}

impl Turn<'_, '_> {
    /// A response without tool calls ends the loop: its text (or a placeholder) is the answer.
    pub(super) fn final_response(&mut self, r: LlmResponse, truncated: bool) -> LoopEnd {
        let blank = r.content.trim().is_empty();
        let (text, reason) = if truncated {
            let text = if blank {
                if r.reasoning.is_empty() {
                    NO_RESPONSE
                } else {
                    NO_TEXT_RESPONSE
                }
                .to_owned()
            } else {
                strip_tag_chars(&r.content)
            };
            (text, Some(IncompleteReason::LengthTruncated))
        } else if blank && !r.reasoning.trim().is_empty() {
            (
                NO_TEXT_RESPONSE.to_owned(),
                Some(IncompleteReason::ReasoningOnly),
            )
        } else if blank {
            (NO_RESPONSE.to_owned(), Some(IncompleteReason::NoOutput))
        } else {
            (strip_tag_chars(&r.content), None)
        };
        self.record_final(&text, r.reasoning);
        LoopEnd { text, reason }
    }

    /// The outcome of the loop's result (spec §4.3); a cancelled or failed turn also leaves
    /// every call in history answered.
    pub(super) fn settle(
        &mut self,
        result: Result<LoopEnd, LoopError>,
    ) -> (TurnOutcome, Option<TurnFailure>) {
        let cancel = self.cancel.clone();
        let (mut outcome, failure) = match result {
            Ok(end) => {
                let status = if cancel.is_cancelled() {
                    TurnStatus::Cancelled
                } else {
                    TurnStatus::Ok
                };
                (
                    TurnOutcome {
                        text: end.text,
                        status,
                        incomplete_reason: end.reason,
                        tool_count: self.tool_count,
                        error: None,
                        finish_reason_missing: self.finish_reason_missing,
                    },
                    None,
                )
            }
            Err(LoopError::Cancelled) => {
                let text = format!("[Cancelled: {}]", cancel_reason(&cancel));
                self.backfill();
                self.record_text(&text);
                (
                    TurnOutcome {
                        text,
                        status: TurnStatus::Cancelled,
                        incomplete_reason: None,
                        tool_count: self.tool_count,
                        error: None,
                        finish_reason_missing: false,
                    },
                    None,
                )
            }
            Err(LoopError::Failed(f)) => {
                self.backfill();
                let msg = match &f {
                    TurnFailure::Host(m) | TurnFailure::Timeout(m) => m.clone(),
                };
                (
                    TurnOutcome {
                        text: String::new(),
                        status: TurnStatus::Error,
                        incomplete_reason: None,
                        tool_count: self.tool_count,
                        error: Some(msg),
                        finish_reason_missing: self.finish_reason_missing,
                    },
                    Some(f),
                )
            }
        };
        if outcome.status == TurnStatus::Cancelled {
            outcome.error = Some(cancel_reason(&cancel).to_owned());
            outcome.incomplete_reason = None;
            outcome.finish_reason_missing = false;
        }
        (outcome, failure)
    }
}
