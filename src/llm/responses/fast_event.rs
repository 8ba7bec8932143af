//! The fast path of the Responses stream: the flat events that carry a streamed piece
//! (`response.output_text.delta`, `.refusal.delta`, `.function_call_arguments.delta` and
//! `.done`, `.reasoning_summary_text.delta`, `.reasoning_text.delta`) and the events the decoder
//! ignores (`.content_part.*`, `.output_text.done`, unknown ones), read by a byte scanner into
//! borrowed fields instead of a `serde_json::Value` (whose map and owned strings were ~12k of a
//! 4-char delta's ~14k instructions).
//!
//! It says "this event is exactly this" or "not sure": the events whose nested objects the
//! decoder reads (`response.created`, `.in_progress`, `.output_item.*`, `.completed`,
//! `.incomplete`, `.failed`, `error`), and anything unusual (a member read of an unexpected
//! type, a key read twice, an output index that is not a plain non-negative integer, a float
//! anywhere, an escaped key, deep nesting, bytes that are not one JSON object) are `None` and
//! go to the general decoder in `decode.rs`. Both paths end in the same functions there, and
//! `fast_and_general_paths_agree` (tests.rs) and the `responses_decoder` fuzz target check
//! that they leave the same state.

use std::borrow::Cow;

use crate::llm::event_scan::{once, skip_value, string, u64_value, whole_object};

/// Where a piece belongs, as `decode.rs` reads it.
#[derive(Debug, Default)]
pub(super) struct PieceAt<'a> {
    pub(super) output_index: Option<u64>,
    pub(super) item_id: Option<Cow<'a, str>>,
}

/// An event the fast path read.
#[derive(Debug)]
pub(super) enum FastEvent<'a> {
    Text(Cow<'a, str>),
    Reasoning {
        output_index: u64,
        delta: Cow<'a, str>,
    },
    ArgumentsDelta {
        at: PieceAt<'a>,
        delta: Cow<'a, str>,
    },
    ArgumentsDone {
        at: PieceAt<'a>,
        arguments: Cow<'a, str>,
    },
    /// One the decoder does nothing with.
    Ignored,
}

/// Reads `text` (one event's data, trimmed) if it is one of the fast path's events.
pub(super) fn fast_event(text: &str) -> Option<FastEvent<'_>> {
    let mut kind = None;
    let mut at = PieceAt::default();
    let mut delta = None;
    let mut arguments = None;
    whole_object(text, |s, key| match key {
        "type" => {
            once(&mut kind, string(s))?;
            // An event the general decoder reads is not scanned on: it may hold a whole
            // response (and its tools, instructions and output), scanned again there.
            (!left_to_general(kind.as_deref().unwrap_or_default())).then_some(())
        }
        "output_index" => once(&mut at.output_index, u64_value(s)),
        "item_id" => once(&mut at.item_id, string(s)),
        "delta" => once(&mut delta, string(s)),
        "arguments" => once(&mut arguments, string(s)),
        // The general decoder reads `item` of the events it leaves to it, and of no other.
        _ => skip_value(s),
    })?;
    let delta = delta.unwrap_or_default();
    Some(match kind.as_deref().unwrap_or_default() {
        "response.output_text.delta" | "response.refusal.delta" => FastEvent::Text(delta),
        "response.function_call_arguments.delta" if !delta.is_empty() => {
            FastEvent::ArgumentsDelta { at, delta }
        }
        "response.function_call_arguments.done" => FastEvent::ArgumentsDone {
            at,
            arguments: arguments.unwrap_or_default(),
        },
        "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
            FastEvent::Reasoning {
                output_index: at.output_index.unwrap_or(0),
                delta,
            }
        }
        kind if left_to_general(kind) => return None,
        _ => FastEvent::Ignored,
    })
}

/// The events whose nested objects the general decoder reads.
fn left_to_general(kind: &str) -> bool {
    matches!(
        kind,
        "response.created"
            | "response.in_progress"
            | "response.output_item.added"
            | "response.output_item.done"
            | "response.completed"
            | "response.incomplete"
            | "response.failed"
            | "error"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_piece_events_and_leaves_the_rest() {
        let e = fast_event(
            r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"ab","logprobs":[],"sequence_number":5}"#,
        );
        assert!(
            matches!(e, Some(FastEvent::Text(Cow::Borrowed("ab")))),
            "{e:?}"
        );
        let e = fast_event(
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":3,"delta":"{\"a\""}"#,
        );
        let Some(FastEvent::ArgumentsDelta { at, delta }) = e else {
            panic!("{e:?}");
        };
        assert_eq!(
            (at.output_index, at.item_id.as_deref(), &*delta),
            (Some(3), Some("fc_1"), "{\"a\"")
        );
        assert!(matches!(
            fast_event(
                r#"{"type":"response.content_part.done","part":{"type":"output_text","text":"x","annotations":[]}}"#
            ),
            Some(FastEvent::Ignored)
        ));
        for other in [
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call"}}"#,
            r#"{"type":"response.completed","response":{}}"#,
            r#"{"type":"error","code":"server_error","message":"m"}"#,
            r#"{"type":"response.output_text.delta","delta":1}"#,
            r#"{"type":"response.output_text.delta","delta":"a","delta":"b"}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":1.0,"delta":"a"}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":null,"delta":"a"}"#,
            r#"{"type":"response.output_text.delta","delta":"a"}x"#,
        ] {
            assert!(fast_event(other).is_none(), "{other}");
        }
    }
}
