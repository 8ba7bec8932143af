//! The top level of a streamed chunk, read the same way by both fast paths (`text_chunk.rs`,
//! `tool_chunk.rs`), and its head: the bytes before the `choices` value,
//! `{"id":…,"object":…,"created":…,"model":…,"system_fingerprint":…,"choices":`, which the
//! chunks of one response repeat byte for byte. A chunk that starts with the last chunk's head
//! is read from its `choices` value on, in the state the scanner reached there: the head's keys
//! and values were about a third of reading a chunk that is not a remembered text delta (a tool
//! call's chunk, a response's last).
//!
//! The scanner reads left to right and looks at no byte past a value's end but the one after a
//! number, which lies inside the head too: the same head bytes always leave it in the same state
//! ([`HeadEnd`]), so resuming there reads the chunk as reading it whole would
//! (`fast_and_general_paths_agree` in `tests/delta.rs` decodes every mutation of each chunk after
//! the chunk itself).

use std::borrow::Cow;

use super::assembly::Assembler;
use super::text_chunk::{once, Scanner};

/// The top-level keys read before `choices` (each may be given once).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct HeadKeys {
    model: bool,
    object: bool,
    usage: bool,
}

/// Where the `choices` value starts in a chunk, and the keys read before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HeadEnd {
    at: usize,
    keys: HeadKeys,
}

/// A chunk's top level besides `choices`.
#[derive(Debug)]
pub(super) struct TopLevel<'a> {
    /// The model read by the scanner (not the remembered head's, for a resumed chunk).
    pub(super) model: Option<Cow<'a, str>>,
    /// Where the head ended, for a chunk read whole.
    pub(super) head: Option<HeadEnd>,
}

/// Reads a chunk's top-level object, `choices` by `choices`: from its start, or with `resume`
/// from the `choices` value after a remembered head.
pub(super) fn top_level<'a>(
    text: &'a str,
    resume: Option<HeadEnd>,
    mut choices: impl FnMut(&mut Scanner<'a>) -> Option<()>,
) -> Option<TopLevel<'a>> {
    let mut s = Scanner { text, pos: 0 };
    let mut keys = resume.map_or_else(HeadKeys::default, |h| h.keys);
    let (mut choices_seen, mut head, mut model) = (false, None, None);
    let value = |s: &mut Scanner<'a>, key: &'a str| match key {
        "choices" => {
            once(&mut choices_seen)?;
            head = Some(HeadEnd { at: s.pos, keys });
            choices(s)
        }
        "model" => {
            once(&mut keys.model)?;
            model = s.string_or_null()?;
            Some(())
        }
        // The general decoder reports `"object":"error"` as an in-stream error.
        "object" => {
            once(&mut keys.object)?;
            match s.string_or_null()? {
                Some(o) if o == "error" => None,
                _ => Some(()),
            }
        }
        "usage" => {
            once(&mut keys.usage)?;
            s.null()
        }
        // Read by the general decoder (errors in a 200 stream).
        "error" | "message" | "code" | "type" => None,
        _ => s.scalar(),
    };
    match resume {
        None => s.object(value)?,
        Some(h) => {
            s.pos = h.at;
            s.members(value, Some("choices"))?;
        }
    }
    s.ws();
    (s.pos == text.len()).then_some(TopLevel {
        model,
        head: head.filter(|_| resume.is_none()),
    })
}

/// The head of the last chunk a fast path read whole, per stream.
#[derive(Debug, Default)]
pub(super) struct ChunkHead {
    bytes: Vec<u8>,
    end: Option<HeadEnd>,
    /// The model the head gave (a `model` after `choices` is the chunk's own).
    model: Option<String>,
}

impl HeadEnd {
    pub(super) fn at(self) -> usize {
        self.at
    }
}

impl ChunkHead {
    /// Where to read `text` from, if it starts with the remembered head.
    pub(super) fn resume(&self, text: &str) -> Option<HeadEnd> {
        let end = self.end?;
        text.as_bytes().starts_with(&self.bytes).then_some(end)
    }

    /// The model of a chunk read from `resume`: its head's when it had one.
    pub(super) fn model<'a>(
        &'a self,
        resume: Option<HeadEnd>,
        read: Option<&'a str>,
    ) -> Option<&'a str> {
        match resume {
            Some(h) if h.keys.model => self.model.as_deref(),
            _ => read,
        }
    }

    /// After a fast path read `text` (from `resume`, when given): a resumed chunk's head model
    /// goes to `asm` (the scanner did not read it again), and a head read whole is remembered.
    pub(super) fn after_read(
        &mut self,
        asm: &mut Assembler,
        text: &str,
        resume: Option<HeadEnd>,
        top: &TopLevel<'_>,
    ) {
        if let Some(h) = resume {
            if let Some(m) = self.model.as_deref().filter(|_| h.keys.model) {
                asm.model(m);
            }
            return;
        }
        let Some(end) = top.head else {
            return;
        };
        self.bytes.clear();
        self.bytes.extend_from_slice(&text.as_bytes()[..end.at]);
        self.end = Some(end);
        // A model read before `choices` is the head's; one after it would be a repeat, refused.
        match top.model.as_deref().filter(|_| end.keys.model) {
            Some(m) => {
                let model = self.model.get_or_insert_with(String::new);
                model.clear();
                model.push_str(m);
            }
            None => self.model = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::text_chunk::text_chunk;
    use crate::llm::tool_chunk::tool_chunk;

    const HEAD: &str = r#"{"id":"c-1","object":"chat.completion.chunk","created":1796,"model":"m","system_fingerprint":"fp","choices":"#;

    /// The assembler's state after `text` read whole, and after it read from `head`'s end.
    fn both_ways(head: &mut ChunkHead, text: &str) -> (Option<String>, Option<String>) {
        let whole = text_chunk(text, None).map(|(c, _)| {
            let mut asm = Assembler::default();
            c.apply(&mut asm);
            format!("{asm:?}")
        });
        let resume = head.resume(text).expect("the chunk starts with the head");
        let resumed = text_chunk(text, Some(resume)).map(|(c, top)| {
            assert!(top.head.is_none(), "a resumed read remembers no head");
            let mut asm = Assembler::default();
            c.apply(&mut asm);
            head.after_read(&mut asm, text, Some(resume), &top);
            format!("{asm:?}")
        });
        (whole, resumed)
    }

    #[test]
    fn a_chunk_with_the_remembered_head_reads_as_it_reads_whole() {
        let first = format!(
            r#"{HEAD}[{{"index":0,"delta":{{"role":"assistant","tool_calls":[{{"index":0,"id":"c1","type":"function","function":{{"name":"read_file","arguments":"{{}}"}}}}]}},"finish_reason":null}}],"usage":null}}"#
        );
        let mut head = ChunkHead::default();
        let mut asm = Assembler::default();
        let (chunk, top) = tool_chunk(&first, None).expect("a tool-call chunk");
        chunk.apply(&mut asm);
        head.after_read(&mut asm, &first, None, &top);
        assert_eq!(head.bytes, HEAD.as_bytes());
        assert_eq!(head.model.as_deref(), Some("m"));
        for tail in [
            r#"[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}"#,
            r#"[{"index":0,"delta":{"content":"a\nb"},"finish_reason":null}]}"#,
            r#"[],"usage":null}"#,
            r#"null}"#,
        ] {
            let text = format!("{HEAD}{tail}");
            let (whole, resumed) = both_ways(&mut head, &text);
            assert!(whole.is_some(), "{text}");
            assert_eq!(whole, resumed, "{text}");
        }
        // Refused the same way whole and resumed: a repeated key of the head, an error object.
        for tail in [
            r#"[],"model":"n"}"#,
            r#"[],"object":"x"}"#,
            r#"[],"usage":null,"usage":null}"#,
            r#"[],"error":{"message":"x"}}"#,
            r#"[],"choices":[]}"#,
            r#"[]"#,
        ] {
            let text = format!("{HEAD}{tail}");
            let resume = head.resume(&text).unwrap();
            assert!(text_chunk(&text, None).is_none(), "{text}");
            assert!(text_chunk(&text, Some(resume)).is_none(), "{text}");
            assert!(tool_chunk(&text, Some(resume)).is_none(), "{text}");
        }
        // Another head is read whole.
        let other = first.replace(r#""model":"m""#, r#""model":"n""#);
        assert_eq!(head.resume(&other), None);
    }

    /// A model given after `choices` is the chunk's own, not the head's.
    #[test]
    fn a_model_after_choices_is_read_with_the_chunk() {
        let first = r#"{"id":"x","choices":[{"delta":{"content":"a"}}],"model":"m"}"#;
        let mut head = ChunkHead::default();
        let (chunk, top) = text_chunk(first, None).unwrap();
        chunk.apply(&mut Assembler::default());
        head.after_read(&mut Assembler::default(), first, None, &top);
        assert_eq!(head.bytes, br#"{"id":"x","choices":"#);
        assert_eq!(head.model, None);
        let next = r#"{"id":"x","choices":[{"delta":{"content":"b"}}],"model":"n"}"#;
        let resume = head.resume(next).unwrap();
        let (chunk, _) = text_chunk(next, Some(resume)).unwrap();
        assert_eq!(chunk.model.as_deref(), Some("n"));
        assert_eq!(head.model(Some(resume), chunk.model.as_deref()), Some("n"));
    }
}
