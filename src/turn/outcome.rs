//! `TurnOutcome`: how a turn ended (spec §4.1–§4.3).

use serde::Serialize;

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
