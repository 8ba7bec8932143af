//! `TurnOutcome`: how a turn ended (spec §4.1–§4.3), from the final response or the loop's
//! error, and the `turn_end` event that reports it.

use serde::Serialize;

use super::{cancel_reason, events, LoopEnd, LoopError, Turn, TurnFailure};
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
    /// A lifecycle hook ended the turn: a blocked prompt, or `continue: false` (docs/hooks.md).
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

/// The outcome JSON's fields as one plain struct: a struct flattening [`TurnOutcome`] went
/// through serde's map path (a flattening serializer and a key escape per field), which wrote
/// the same bytes at several times the cost.
#[derive(Serialize)]
struct OutcomeJson<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    text: &'a str,
    status: TurnStatus,
    incomplete_reason: Option<IncompleteReason>,
    tool_count: u64,
    error: Option<&'a str>,
    finish_reason_missing: bool,
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
            text: &self.text,
            status: self.status,
            incomplete_reason: self.incomplete_reason,
            tool_count: self.tool_count,
            error: self.error.as_deref(),
            finish_reason_missing: self.finish_reason_missing,
            is_answer: self.is_answer(),
        })
        .expect("outcomes serialize")
    }

    /// The `data` of `turn_end`.
    pub(super) fn end_event(&self) -> events::TurnEnd<'_> {
        events::TurnEnd {
            final_text: &self.text,
            status: self.status.as_str(),
            error: self.error.as_deref(),
            tool_count: self.tool_count,
            incomplete_reason: self.incomplete_reason.map(IncompleteReason::as_str),
            finish_reason_missing: self.finish_reason_missing,
        }
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
        self.record_final(&text, r.reasoning, r.carrier.as_ref());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventWriter;
    use serde_json::json;

    /// The outcome JSON as it was written before: a struct flattening the outcome.
    #[derive(Serialize)]
    struct OldOutcomeJson<'a> {
        #[serde(rename = "type")]
        ty: &'static str,
        #[serde(flatten)]
        outcome: &'a TurnOutcome,
        is_answer: bool,
    }

    fn old_json(o: &TurnOutcome) -> String {
        serde_json::to_string(&OldOutcomeJson {
            ty: "turn_outcome",
            outcome: o,
            is_answer: o.is_answer(),
        })
        .unwrap()
    }

    /// `turn_end` as it was written before: a `json!` map through `EventWriter::event`.
    fn old_turn_end(o: &TurnOutcome) -> String {
        let data = json!({
            "final_text": o.text,
            "status": o.status.as_str(),
            "error": o.error,
            "tool_count": o.tool_count,
            "incomplete_reason": o.incomplete_reason.map(IncompleteReason::as_str),
            "finish_reason_missing": o.finish_reason_missing,
        });
        EventWriter::default()
            .event("turn_end", &data)
            .as_str()
            .to_owned()
    }

    fn reason_named(name: &str) -> IncompleteReason {
        use IncompleteReason::*;
        [
            NoOutput,
            ReasoningOnly,
            LengthTruncated,
            DoomLoop,
            MaxIterations,
            LlmError,
            HookStop,
        ]
        .into_iter()
        .find(|r| r.as_str() == name)
        .unwrap_or_else(|| panic!("unknown reason {name}"))
    }

    /// The outcomes of the reference transcripts, then every status, reason and flag with
    /// texts and errors holding escapes, control characters, astral characters, nothing, and a
    /// megabyte.
    fn outcomes() -> Vec<TurnOutcome> {
        let mut all = Vec::new();
        for t in crate::llm::script::conformance_transcripts() {
            for turn in t["turns"].as_array().unwrap() {
                let o = &turn["outcome"];
                all.push(TurnOutcome {
                    text: o["text"].as_str().unwrap().to_owned(),
                    status: [TurnStatus::Ok, TurnStatus::Error, TurnStatus::Cancelled]
                        .into_iter()
                        .find(|s| s.as_str() == o["status"])
                        .unwrap(),
                    incomplete_reason: o["incomplete_reason"].as_str().map(reason_named),
                    tool_count: o["tool_count"].as_u64().unwrap(),
                    error: o["error"].as_str().map(str::to_owned),
                    finish_reason_missing: o["finish_reason_missing"].as_bool().unwrap(),
                });
            }
        }
        assert!(all.len() >= 10);
        let controls: String = (0u8..0x20).map(char::from).collect();
        let texts = [
            String::new(),
            "plain".to_owned(),
            format!("a{controls}\"b\\c/\u{7f}"),
            "é \u{2028} \u{2029} 😀 中文 \0".to_owned(),
        ];
        let reasons = [
            None,
            Some(IncompleteReason::NoOutput),
            Some(IncompleteReason::ReasoningOnly),
            Some(IncompleteReason::LengthTruncated),
            Some(IncompleteReason::DoomLoop),
            Some(IncompleteReason::MaxIterations),
            Some(IncompleteReason::LlmError),
            Some(IncompleteReason::HookStop),
        ];
        let statuses = [TurnStatus::Ok, TurnStatus::Error, TurnStatus::Cancelled];
        for (i, text) in texts.iter().enumerate() {
            for (j, reason) in reasons.into_iter().enumerate() {
                for (k, status) in statuses.into_iter().enumerate() {
                    all.push(TurnOutcome {
                        text: text.clone(),
                        status,
                        incomplete_reason: reason,
                        tool_count: [0, 1, u64::MAX][(i + j + k) % 3],
                        error: ((j + k) % 2 == 1).then(|| texts[(i + 1) % texts.len()].clone()),
                        finish_reason_missing: (i + j + k) % 2 == 0,
                    });
                }
            }
        }
        // A field is rendered the same whatever the others hold, so the megabyte goes through
        // each text field once rather than through every combination (which in a debug build
        // was most of a 40-second test).
        let megabyte = "x\"".repeat(500_000);
        for (text, error) in [(megabyte.clone(), None), (texts[1].clone(), Some(megabyte))] {
            all.push(TurnOutcome {
                text,
                status: TurnStatus::Error,
                incomplete_reason: Some(IncompleteReason::LlmError),
                tool_count: 1,
                error,
                finish_reason_missing: true,
            });
        }
        all
    }

    #[test]
    fn outcome_json_and_turn_end_are_the_old_rendering() {
        let mut w = EventWriter::default();
        for o in outcomes() {
            assert_eq!(o.to_json(), old_json(&o));
            assert_eq!(
                w.data_event("turn_end", &o.end_event()).as_str(),
                old_turn_end(&o)
            );
        }
    }
}
