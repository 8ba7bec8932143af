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
use std::ops::Range;

use crate::llm::event_scan::{once, skip_value, string, u64_value, whole_object};
use crate::llm::text_chunk::Scanner;

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

/// The last text delta's bytes before and after its text string. The text deltas of a block
/// differ only in their text, and the scanner reads left to right: an event with the same
/// bytes around a string reaches that string in the same state and ends as the last one did,
/// so it is read by two compares and the string's scan (the scanner was half a delta's cost).
#[derive(Default, Clone)]
pub(super) struct LastTextDelta {
    before: Vec<u8>,
    after: Vec<u8>,
    index: u64,
}

/// A cache of what the scanner would read, not decoding state: the tests compare the fast
/// path's state with the general decoder's, which has none.
impl std::fmt::Debug for LastTextDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LastTextDelta")
    }
}

impl LastTextDelta {
    /// The index and text of `data` if it is the remembered delta around one JSON string;
    /// `None`: not known here (the scanner reads it).
    pub(super) fn read<'a>(&self, data: &'a str) -> Option<(u64, Cow<'a, str>)> {
        let b = data.as_bytes();
        if self.before.is_empty()
            || b.len() < self.before.len() + self.after.len()
            || !b.starts_with(&self.before)
            || !b.ends_with(&self.after)
        {
            return None;
        }
        // Both remembered sides end and start at ASCII quotes: char boundaries.
        let string = data.get(self.before.len()..b.len() - self.after.len())?;
        let mut s = Scanner {
            text: string,
            pos: 0,
        };
        let text = s.string()?;
        (s.pos == string.len()).then_some((self.index, text))
    }

    fn remember(&mut self, data: &str, at: Range<usize>, index: u64) {
        self.before.clear();
        self.before.extend_from_slice(&data.as_bytes()[..at.start]);
        self.after.clear();
        self.after.extend_from_slice(&data.as_bytes()[at.end..]);
        self.index = index;
    }
}

/// Reads `text` (one event's data, trimmed) if it is one of the fast path's events; a text
/// delta is remembered in `last` (when given) for the next.
pub(super) fn fast_event<'a>(
    text: &'a str,
    last: Option<&mut LastTextDelta>,
) -> Option<FastEvent<'a>> {
    let mut kind = None;
    let mut index = None;
    let mut delta: Option<DeltaFields<'_>> = None;
    let mut text_at = None;
    whole_object(text, |s, key| match key {
        "type" => once(&mut kind, string(s)),
        "index" => once(&mut index, u64_value(s)),
        "delta" => {
            let mut d = DeltaFields::default();
            s.ws();
            s.object(|s, key| match key {
                "type" => once(&mut d.kind, string(s)),
                "text" => {
                    s.ws();
                    let start = s.pos;
                    once(&mut d.text, string(s))?;
                    text_at = Some(start..s.pos);
                    Some(())
                }
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
            Some(delta) => {
                if let (Some(last), Some(at), Some("text_delta")) =
                    (last, text_at, delta.kind.as_deref())
                {
                    last.remember(text, at, index);
                }
                FastEvent::BlockDelta { index, delta }
            }
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
            None,
        );
        let Some(FastEvent::BlockDelta { index: 2, delta }) = e else {
            panic!("{e:?}");
        };
        assert_eq!(delta.kind.as_deref(), Some("text_delta"));
        assert_eq!(delta.text.as_deref(), Some("a\nb"));
        assert!(matches!(
            fast_event(r#" {"type": "content_block_stop", "index": 0 } "#, None),
            Some(FastEvent::BlockStop { index: 0 })
        ));
        assert!(matches!(
            fast_event(r#"{"type":"ping"}"#, None),
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
            assert!(fast_event(other, None).is_none(), "{other}");
        }
    }

    /// The remembered delta reads what the scanner reads; what it does not know it leaves to
    /// the scanner.
    #[test]
    fn the_remembered_delta_reads_as_the_scanner_reads() {
        let frame = |text: &str| {
            format!(
                r#"{{"type":"content_block_delta","index":3,"delta":{{"type":"text_delta","text":{text}}}}}"#
            )
        };
        let mut last = LastTextDelta::default();
        assert!(fast_event(&frame(r#""ab""#), Some(&mut last)).is_some());
        let mut read = 0;
        for text in [
            r#""xyz""#,
            r#""""#,
            r#""a\nb\"c""#,
            r#""\ud83d\ude00""#,
            r#""\ud800""#,
            r#""a","x":"y""#,
            "\"a\u{1}\"",
            "null",
            "1",
        ] {
            let event = frame(text);
            if let Some((index, t)) = last.read(&event) {
                read += 1;
                let Some(FastEvent::BlockDelta { index: i, delta }) = fast_event(&event, None)
                else {
                    panic!("{event}");
                };
                assert_eq!((index, Some(t)), (i, delta.text), "{event}");
            }
        }
        assert_eq!(
            read, 4,
            "the plain, empty, escaped and surrogate-pair strings"
        );
        let other = frame(r#""ab""#).replace(r#""index":3"#, r#""index":4"#);
        assert!(last.read(&other).is_none());
    }
}
