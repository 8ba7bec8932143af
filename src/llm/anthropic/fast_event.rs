//! The fast path of the Messages stream: the events a streamed block is made of
//! (`content_block_delta` with its text, thinking, signature or input-JSON piece,
//! `content_block_stop`), `message_stop`, and the events the decoder ignores (`ping`, unknown
//! ones), read by a byte scanner into borrowed fields instead of a `serde_json::Value` (whose map
//! and owned strings were ~9k of a 4-char delta's ~11k instructions).
//!
//! It says "this event is exactly this" or "not sure": the events that carry nested objects the
//! decoder reads (`message_start`, `content_block_start`, `message_delta`, `error`), and anything
//! unusual (a member read of an unexpected type, a key read twice, an index that is not a plain
//! non-negative integer, a float anywhere, an escaped key, deep nesting, bytes that are not one
//! JSON object) are `None` and go to the general decoder in `decode.rs`. Both paths end in the
//! same functions there, and `fast_and_general_paths_agree` (tests.rs) and the
//! `anthropic_decoder` fuzz target check that they leave the same state.

use std::borrow::Cow;

use crate::llm::event_scan::{once, skip_value, string, u64_value, whole_object};

/// A `content_block_delta`'s `delta` members, as `decode.rs` reads them (absent: empty).
#[derive(Debug, Default)]
pub(super) struct DeltaFields<'a> {
    pub(super) kind: Option<Cow<'a, str>>,
    pub(super) text: Option<Cow<'a, str>>,
    pub(super) thinking: Option<Cow<'a, str>>,
    pub(super) signature: Option<Cow<'a, str>>,
    pub(super) partial_json: Option<Cow<'a, str>>,
}

/// An event the fast path read.
#[derive(Debug)]
pub(super) enum FastEvent<'a> {
    BlockDelta {
        index: u64,
        delta: DeltaFields<'a>,
    },
    BlockStop {
        index: u64,
    },
    MessageStop,
    /// One the decoder does nothing with.
    Ignored,
}

/// Reads `text` (one event's data, trimmed) if it is one of the fast path's events.
pub(super) fn fast_event(text: &str) -> Option<FastEvent<'_>> {
    let mut kind = None;
    let mut index = None;
    let mut delta: Option<DeltaFields<'_>> = None;
    whole_object(text, |s, key| match key {
        "type" => once(&mut kind, string(s)),
        "index" => once(&mut index, u64_value(s)),
        "delta" => {
            let mut d = DeltaFields::default();
            s.ws();
            s.object(|s, key| match key {
                "type" => once(&mut d.kind, string(s)),
                "text" => once(&mut d.text, string(s)),
                "thinking" => once(&mut d.thinking, string(s)),
                "signature" => once(&mut d.signature, string(s)),
                "partial_json" => once(&mut d.partial_json, string(s)),
                _ => skip_value(s),
            })?;
            once(&mut delta, Some(d))
        }
        _ => skip_value(s),
    })?;
    let index = index.unwrap_or(0);
    Some(match kind.as_deref().unwrap_or_default() {
        "content_block_delta" => match delta {
            Some(delta) => FastEvent::BlockDelta { index, delta },
            None => FastEvent::Ignored,
        },
        "content_block_stop" => FastEvent::BlockStop { index },
        "message_stop" => FastEvent::MessageStop,
        "message_start" | "content_block_start" | "message_delta" | "error" => return None,
        _ => FastEvent::Ignored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_block_events_and_leaves_the_rest() {
        let e = fast_event(
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"a\nb"}}"#,
        );
        let Some(FastEvent::BlockDelta { index: 2, delta }) = e else {
            panic!("{e:?}");
        };
        assert_eq!(delta.kind.as_deref(), Some("text_delta"));
        assert_eq!(delta.text.as_deref(), Some("a\nb"));
        assert!(matches!(
            fast_event(r#" {"type": "content_block_stop", "index": 0 } "#),
            Some(FastEvent::BlockStop { index: 0 })
        ));
        assert!(matches!(
            fast_event(r#"{"type":"ping"}"#),
            Some(FastEvent::Ignored)
        ));
        for other in [
            r#"{"type":"message_start","message":{}}"#,
            r#"{"type":"error","error":{"type":"overloaded_error"}}"#,
            r#"{"type":"content_block_delta","index":"1","delta":{}}"#,
            r#"{"type":"content_block_delta","index":-1,"delta":{}}"#,
            r#"{"type":"content_block_delta","delta":{"text":1}}"#,
            r#"{"type":"content_block_delta","delta":{"text":"a","text":"b"}}"#,
            r#"{"type":"content_block_delta","delta":[]}"#,
            r#"{"type":"ping","type":"ping"}"#,
            r#"{"type":"ping","x":1.5}"#,
            r#"{"type":"ping"} {}"#,
            r#"["ping"]"#,
        ] {
            assert!(fast_event(other).is_none(), "{other}");
        }
    }
}
