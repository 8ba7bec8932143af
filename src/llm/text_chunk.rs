//! The fast path of chunk decoding: the shape nearly every streamed delta has,
//! `{"id":…,"object":"chat.completion.chunk",…,"choices":[{"index":0,"delta":{"content":"…"},…}],…}`,
//! read by a byte scanner that knows that shape, instead of serde_json's generic parser (which
//! was ~80 % of a delta's instructions).
//!
//! It only ever says "this is a plain text chunk, and here is what it carries" or "not sure":
//! anything outside the shape (tool calls, reasoning text, usage objects, errors, nested values
//! under keys we do not read, several choices, a key we read given twice, a number that is
//! not a plain integer, an escaped key, a malformed byte anywhere) returns `None` and the chunk
//! goes to the general decoder in `openai/decode.rs`. What it accepts is valid JSON that the general
//! decoder reads the same way (`fast_and_general_paths_agree` in `tests/delta.rs` checks this on a
//! corpus and on every single-byte mutation and truncation of it), so the host sees the same
//! deltas either way.

use std::borrow::Cow;
use std::ops::Range;

use super::assembly::Assembler;
use super::chunk_head::{top_level, ChunkHead, HeadEnd, TopLevel};
use super::sse::SseParser;
use crate::events::plain_len;

/// What a plain text chunk carries, borrowed from it where it has no escapes.
#[derive(Debug, Default, PartialEq)]
pub(super) struct TextChunk<'a> {
    pub(super) model: Option<Cow<'a, str>>,
    /// Borrowed only from a wire string without escapes (so without `"`, backslash or control
    /// character: [`string_end`] refuses a raw one): its JSON is its bytes between quotes.
    pub(super) content: Option<Cow<'a, str>>,
    pub(super) finish_reason: Option<Cow<'a, str>>,
    /// Where the content string (quotes included) lies in the chunk, when it is a string.
    pub(super) content_at: Option<Range<usize>>,
}

impl TextChunk<'_> {
    /// What the general decoder does with the same chunk. (It goes in document order; these
    /// three touch separate parts of the assembler, so the order does not matter.)
    #[inline]
    pub(super) fn apply(&self, asm: &mut Assembler) {
        if let Some(m) = &self.model {
            asm.model(m);
        }
        add_text(asm, self.content.as_ref());
        if let Some(r) = &self.finish_reason {
            asm.finish_reason(r);
        }
    }
}

/// Reads `text` (one SSE event's data, trimmed) if it is a plain text chunk: whole, or with
/// `resume` from the `choices` value after the remembered head ([`super::chunk_head`]; the
/// chunk's `model` is then the head's, not read again). Also returns its top level.
pub(super) fn text_chunk(
    text: &str,
    resume: Option<HeadEnd>,
) -> Option<(TextChunk<'_>, TopLevel<'_>)> {
    let mut out = TextChunk::default();
    let top = top_level(text, resume, |s| s.choices(&mut out))?;
    out.model = top.model.clone();
    Some((out, top))
}

/// `None` if `seen` was set already (a key given twice), else sets it.
pub(super) fn once(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}

/// Text the [`Scanner`] read: a borrowed string had no escapes (see [`TextChunk::content`]).
pub(super) fn add_text(asm: &mut Assembler, text: Option<&Cow<'_, str>>) {
    match text {
        Some(Cow::Borrowed(t)) => asm.verbatim_text(t),
        Some(Cow::Owned(t)) => asm.text(t),
        None => {}
    }
}

/// The last plain text chunk's bytes before and after its content string. The chunks of one
/// response differ only in their content (the id, model, `created` and the rest are repeated),
/// and the scanner reads left to right: a chunk with the same bytes before its content string
/// reaches that string in the same state, and with the same bytes after it ends as the last one
/// did. So such a chunk is read as the scanner would read it by comparing both sides and
/// reading only the content string (the scanner was most of what a delta cost).
#[derive(Debug, Default)]
pub(super) struct LastTextChunk {
    before: Vec<u8>,
    after: Vec<u8>,
    model: Option<String>,
    finish_reason: Option<String>,
    /// Neither side holds a CR or LF, so an SSE line starting with `before`, a string and
    /// `after` ends there or later ([`read_framed`]).
    one_line: bool,
    /// The head of the last chunk either fast path read whole (this stream's memory too).
    pub(super) head: ChunkHead,
}

/// The next event of `input` (the read buffer at the parser's position) when it is one `data:`
/// line holding the remembered chunk's bytes around a content string, and its empty line: the
/// bytes it takes, with what [`LastTextChunk::read`] reads from its data applied to `asm`
/// (handed over directly: a chunk returned to be applied cost a tenth of a delta). The value's end is
/// where the remembered bytes after the string end, so the line is not searched for its end
/// (a measurable part of a delta): the sides hold no CR or LF and a JSON string
/// no raw one, so the line cannot end earlier. `None`: read the event as before.
pub(super) fn read_framed(
    parser: &mut SseParser,
    last: &LastTextChunk,
    input: &[u8],
    asm: &mut Assembler,
) -> Option<usize> {
    if !last.one_line || last.before.is_empty() {
        return None;
    }
    let at = parser.value_start(input)?;
    let value = &input[at..];
    if !value.starts_with(&last.before) {
        return None;
    }
    let start = last.before.len();
    let (end, escaped) = string_end(value, start)?;
    if !value[end..].starts_with(&last.after) {
        return None;
    }
    let len = end + last.after.len();
    let n = parser.event_end(input, at, len)?;
    if escaped {
        last.content(&value[..len], start..end)?.apply(asm);
        return Some(n);
    }
    // No escapes: the scanner would borrow the text between the quotes as it is, and
    // `TextChunk::apply` would hand it over as it does here.
    let text = std::str::from_utf8(&value[start + 1..end - 1]).ok()?;
    if let Some(m) = &last.model {
        asm.model(m);
    }
    asm.verbatim_text(text);
    if let Some(r) = &last.finish_reason {
        asm.finish_reason(r);
    }
    Some(n)
}

/// The end (after the closing quote) of the JSON string at `b[start]`, skipping escapes, and
/// whether it has any; `None` at a raw control character (invalid JSON, and it could be a line
/// end) or the input's end.
#[inline]
fn string_end(b: &[u8], start: usize) -> Option<(usize, bool)> {
    if b.get(start) != Some(&b'"') {
        return None;
    }
    let mut i = start + 1;
    let mut escaped = false;
    loop {
        i += plain_len(b.get(i..)?);
        match *b.get(i)? {
            b'"' => return Some((i + 1, escaped)),
            b'\\' if b.get(i + 1).is_some_and(|&c| c >= 0x20) => {
                escaped = true;
                i += 2;
            }
            _ => return None,
        }
    }
}

/// The contents of a JSON string with escapes (between its quotes, raw control characters
/// already refused by [`string_end`]), decoded as serde_json decodes them. `None` for an escape
/// it refuses and for a `\u` surrogate (a pair, or serde_json's refusal of a lone one), which
/// are left to serde_json. Going through serde_json for every string with an escape (a tool
/// call's arguments, a line break in the text) cost more than the rest of the chunk.
fn unescape(body: &str) -> Option<String> {
    let b = body.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'\\', &b[from..]) {
        let at = from + i;
        // A backslash and every escape are ASCII: all the slices end on char boundaries.
        out.push_str(&body[from..at]);
        let (c, len) = match *b.get(at + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => {
                let mut code = 0;
                for &h in b.get(at + 2..at + 6)? {
                    code = code * 16 + char::from(h).to_digit(16)?;
                }
                (char::from_u32(code)?, 6)
            }
            _ => return None,
        };
        out.push(c);
        from = at + len;
    }
    out.push_str(&body[from..]);
    Some(out)
}

/// A JSON string with escapes (quotes included), decoded as serde_json decodes it.
#[cold]
#[inline(never)]
fn escaped_string(quoted: &str) -> Option<String> {
    unescape(&quoted[1..quoted.len() - 1]).or_else(|| serde_json::from_str::<String>(quoted).ok())
}

impl LastTextChunk {
    /// Remembers `text`, which [`text_chunk`] read as `chunk` (from `resume`, when given: its
    /// model is then the head's).
    pub(super) fn remember(&mut self, text: &str, chunk: &TextChunk<'_>, resume: Option<HeadEnd>) {
        let Some(at) = &chunk.content_at else {
            return;
        };
        let model = self
            .head
            .model(resume, chunk.model.as_deref())
            .map(str::to_owned);
        let bytes = text.as_bytes();
        self.before.clear();
        self.before.extend_from_slice(&bytes[..at.start]);
        self.after.clear();
        self.after.extend_from_slice(&bytes[at.end..]);
        self.model = model;
        self.finish_reason = chunk.finish_reason.as_deref().map(str::to_owned);
        // One search of the whole chunk: the content string between the sides holds no raw
        // CR or LF (`string_end` refuses raw control characters).
        self.one_line = memchr::memchr2(b'\n', b'\r', bytes).is_none();
    }

    /// What [`text_chunk`] reads from `data` (trimmed), if `data` has the remembered bytes
    /// around its content string; `None` means "not known here", not "not a text chunk".
    pub(super) fn read<'a>(&'a self, data: &'a [u8]) -> Option<TextChunk<'a>> {
        if self.before.is_empty()
            || data.len() < self.before.len() + self.after.len()
            || !data.starts_with(&self.before)
            || !data.ends_with(&self.after)
        {
            return None;
        }
        self.content(data, self.before.len()..data.len() - self.after.len())
    }

    /// The chunk whose content string is `data[at]`, the remembered bytes around it.
    fn content<'a>(&'a self, data: &'a [u8], at: Range<usize>) -> Option<TextChunk<'a>> {
        // Both remembered sides are UTF-8 and cut at ASCII quotes: only the string is checked.
        let string = std::str::from_utf8(&data[at.clone()]).ok()?;
        let mut s = Scanner {
            text: string,
            pos: 0,
        };
        let content = s.string()?;
        (s.pos == string.len()).then(|| TextChunk {
            model: self.model.as_deref().map(Cow::Borrowed),
            content: Some(content),
            finish_reason: self.finish_reason.as_deref().map(Cow::Borrowed),
            content_at: Some(at),
        })
    }
}

/// A left-to-right reader of one chunk's JSON (`tool_chunk.rs` reads tool-call chunks with it).
pub(super) struct Scanner<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

impl<'a> Scanner<'a> {
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    /// JSON whitespace (not the form feed `trim_ascii` also strips).
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    pub(super) fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.pos += 1)
    }

    pub(super) fn literal(&mut self, word: &[u8]) -> bool {
        if self.bytes()[self.pos..].starts_with(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    pub(super) fn null(&mut self) -> Option<()> {
        self.ws();
        self.literal(b"null").then_some(())
    }

    /// An object, each key handed to `value` with the scanner at its value.
    pub(super) fn object(
        &mut self,
        value: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        self.members(value, None)
    }

    /// An object's members through its closing brace, from the next key on or, with `first`,
    /// from the value of that key, where the scanner is.
    pub(super) fn members(
        &mut self,
        mut value: impl FnMut(&mut Self, &'a str) -> Option<()>,
        mut first: Option<&'a str>,
    ) -> Option<()> {
        loop {
            let key = match first.take() {
                Some(key) => key,
                None => {
                    self.ws();
                    let key = self.plain_string()?;
                    self.eat(b':')?;
                    key
                }
            };
            value(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// `null`, `[]` or a one-element array of one choice object.
    fn choices(&mut self, out: &mut TextChunk<'a>) -> Option<()> {
        self.ws();
        if self.literal(b"null") {
            return Some(());
        }
        self.eat(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(());
        }
        let (mut delta, mut finish) = (false, false);
        self.object(|s, key| match key {
            "delta" => {
                if std::mem::replace(&mut delta, true) {
                    return None;
                }
                s.delta(out)
            }
            "finish_reason" => {
                if std::mem::replace(&mut finish, true) {
                    return None;
                }
                out.finish_reason = s.string_or_null()?;
                Some(())
            }
            // `message` is read like `delta` by the general decoder.
            "message" => None,
            _ => s.scalar(),
        })?;
        self.eat(b']')
    }

    /// `null` or a delta object whose only text is `content`.
    fn delta(&mut self, out: &mut TextChunk<'a>) -> Option<()> {
        self.ws();
        if self.literal(b"null") {
            return Some(());
        }
        let mut content = false;
        self.object(|s, key| match key {
            "content" => {
                if std::mem::replace(&mut content, true) {
                    return None;
                }
                s.ws();
                let start = s.pos;
                out.content = s.string_or_null()?;
                out.content_at = out.content.is_some().then_some(start..s.pos);
                Some(())
            }
            // Null reasoning or tool calls (servers send them beside content) add nothing;
            // anything else in them is the general decoder's.
            "reasoning_content" | "reasoning" | "tool_calls" => s.null(),
            _ => s.scalar(),
        })
    }

    /// A string, `true`, `false`, `null` or a plain integer; anything else is not ours.
    pub(super) fn scalar(&mut self) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => (self.literal(b"null") || self.literal(b"true") || self.literal(b"false"))
                .then_some(()),
        }
    }

    /// `-?(0|[1-9][0-9]*)`, followed by what may follow a value.
    fn integer(&mut self) -> Option<()> {
        let b = self.bytes();
        if b[self.pos] == b'-' {
            self.pos += 1;
        }
        let start = self.pos;
        while let Some(b'0'..=b'9') = b.get(self.pos) {
            self.pos += 1;
        }
        let digits = &b[start..self.pos];
        if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) {
            return None;
        }
        match b.get(self.pos) {
            Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') => Some(()),
            _ => None,
        }
    }

    pub(super) fn string_or_null(&mut self) -> Option<Option<Cow<'a, str>>> {
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(Some),
            _ => self.literal(b"null").then_some(None),
        }
    }

    /// A string without escapes (keys: an escaped key is rare enough to leave to serde_json).
    #[inline]
    fn plain_string(&mut self) -> Option<&'a str> {
        let (end, escaped) = string_end(self.bytes(), self.pos)?;
        if escaped {
            return None;
        }
        let start = self.pos + 1;
        self.pos = end;
        // The text is a `&str` and both ends are ASCII quotes: char boundaries.
        Some(&self.text[start..end - 1])
    }

    /// A string at `"`: borrowed when it has no escapes; with escapes, decoded as serde_json
    /// decodes it ([`unescape`]), or by serde_json itself where that leaves it (a surrogate),
    /// so it means exactly what it means to the general decoder.
    ///
    /// Inlined, with the escaped case out of line: most strings a chunk holds are short keys
    /// and values without escapes, and a call with the escaped case's frame cost more than
    /// reading them.
    #[inline]
    pub(super) fn string(&mut self) -> Option<Cow<'a, str>> {
        let (end, escaped) = string_end(self.bytes(), self.pos)?;
        let start = self.pos + 1;
        self.pos = end;
        // The text is a `&str` and both ends are ASCII quotes: char boundaries.
        if !escaped {
            return Some(Cow::Borrowed(&self.text[start..end - 1]));
        }
        escaped_string(&self.text[start - 1..end]).map(Cow::Owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read whole by [`text_chunk`].
    fn whole(text: &str) -> Option<TextChunk<'_>> {
        text_chunk(text, None).map(|(chunk, _)| chunk)
    }
    use crate::llm::Piece;

    /// The text pieces of `chunks` read in turn, each popped after the chunks before the next
    /// `|`: the text and whether it is handed out as needing no JSON escaping.
    fn pieces(chunks: &[&str]) -> Vec<(String, bool)> {
        let mut asm = Assembler::default();
        let mut out = Vec::new();
        for &c in chunks {
            if c != "|" {
                whole(c).expect("a plain text chunk").apply(&mut asm);
                continue;
            }
            let kind = asm
                .pop_piece(std::time::Duration::default)
                .expect("a piece");
            let Piece::Text(t) = asm.piece(kind) else {
                panic!("not text");
            };
            out.push((t.text.to_owned(), t.verbatim_json));
        }
        out
    }

    #[test]
    fn only_text_read_without_escapes_is_handed_out_as_verbatim_json() {
        let plain = r#"{"choices":[{"index":0,"delta":{"content":"a b"}}]}"#;
        let escaped = r#"{"choices":[{"index":0,"delta":{"content":"c\nd"}}]}"#;
        let quoted = r#"{"choices":[{"index":0,"delta":{"content":"\"q\""}}]}"#;
        let piece = |s: &str, v: bool| (s.to_owned(), v);
        assert_eq!(pieces(&[plain, "|"]), [piece("a b", true)]);
        assert_eq!(pieces(&[escaped, "|"]), [piece("c\nd", false)]);
        assert_eq!(pieces(&[quoted, "|"]), [piece("\"q\"", false)]);
        // A piece is verbatim only if every delta in it is.
        assert_eq!(pieces(&[plain, escaped, "|"]), [piece("a bc\nd", false)]);
        assert_eq!(pieces(&[escaped, plain, "|"]), [piece("c\nda b", false)]);
        assert_eq!(pieces(&[plain, plain, "|"]), [piece("a ba b", true)]);
        // Each piece starts afresh.
        assert_eq!(
            pieces(&[escaped, "|", plain, "|"]),
            [piece("c\nd", false), piece("a b", true)]
        );
    }

    /// `Scanner::string` against serde_json on strings built from every escape, surrogates
    /// (paired, lone, reversed), bad escapes and multi-byte text: the same text or the same
    /// refusal, and the fast decoder takes every string without a surrogate.
    #[test]
    fn escaped_strings_read_as_serde_json_reads_them() {
        const PIECES: &[&str] = &[
            "a",
            "é",
            "\u{1f600}",
            " ",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b",
            "\\f",
            "\\n",
            "\\r",
            "\\t",
            "\\u0041",
            "\\u00e9",
            "\\u0000",
            "\\u001f",
            "\\uFFFF",
            "\\ufdd0",
            "\\uD83D\\uDE00",
            "\\ud83d",
            "\\ude00",
            "\\uDE00\\uD83D",
            "\\u12",
            "\\u12G4",
            "\\x",
            "\\'",
            "\\u",
            "\\U0041",
            "{\\\"file_path\\\": \\\"f1.txt\\\"}",
        ];
        // A small deterministic generator: every string of up to three pieces, then longer ones.
        let mut strings: Vec<String> = Vec::new();
        for a in PIECES {
            strings.push((*a).to_owned());
            for b in PIECES {
                strings.push(format!("{a}{b}"));
                for c in PIECES.iter().step_by(3) {
                    strings.push(format!("{a}{b}{c}"));
                }
            }
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let mut s = String::new();
            for _ in 0..8 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push_str(PIECES[(seed % PIECES.len() as u64) as usize]);
            }
            strings.push(s);
        }
        let mut fast = 0;
        for body in &strings {
            let json = format!("\"{body}\"");
            let want = serde_json::from_str::<String>(&json).ok();
            let mut s = Scanner {
                text: &json,
                pos: 0,
            };
            let got = s.string().map(Cow::into_owned);
            assert_eq!(got, want, "{json}");
            if let Some(w) = &want {
                assert_eq!(s.pos, json.len());
                if !body.to_ascii_lowercase().contains("\\ud") {
                    assert_eq!(unescape(body).as_ref(), Some(w), "{json}");
                    fast += 1;
                }
            }
        }
        assert!(fast > 2_000, "{fast} strings took the fast decoder");
    }

    #[test]
    fn reads_the_common_shape() {
        let c = whole(
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":"ab\ncd"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        )
        .expect("the common shape");
        assert_eq!(c.model.as_deref(), Some("m"));
        assert_eq!(c.content.as_deref(), Some("ab\ncd"));
        assert!(matches!(c.content, Some(Cow::Owned(_))));
        assert_eq!(c.finish_reason, None);
        let c = whole(r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#).unwrap();
        assert!(matches!(c.content, Some(Cow::Borrowed("x"))));
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn leaves_everything_else_to_the_general_decoder() {
        for other in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"r"}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
            r#"{"error":{"message":"x"}}"#,
            r#"{"object":"error","message":"x"}"#,
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[{"message":{"content":"a"}}]}"#,
            r#"{"created":1.5,"choices":[]}"#,
            r#"{"created":01,"choices":[]}"#,
            r#"{"x":{"y":1}}"#,
            r#"{"c\u0068oices":[]}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"a\u{1}\"}}]}",
            r#"{"choices":[{"delta":{"content":"a"}}]} x"#,
            r#"{"choices":[{"delta":{"content":"a"}}]"#,
            r#"{"choices":[{"delta":{"content":"\ud800"}}]}"#,
            r#"[1]"#,
        ] {
            assert_eq!(whole(other), None, "{other}");
        }
    }

    /// The remembered last chunk reads what the scanner reads; what it does not know it leaves
    /// to the scanner.
    #[test]
    fn the_remembered_chunk_reads_as_the_scanner_reads() {
        let frame = |content: &str| {
            format!(
                r#"{{"id":"c-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":{content}}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
            )
        };
        let first = frame(r#""abcd""#);
        let mut last = LastTextChunk::default();
        last.remember(&first, &whole(&first).unwrap(), None);
        let mut read = 0;
        for content in [
            r#""xyz""#,
            r#""""#,
            r#""a\nb\"c""#,
            r#""\ud83d\ude00 é""#,
            r#""\ud800""#,
            r#""a\""#,
            r#""a","x":"y""#,
            "\"a\u{1}\"",
            "null",
            "1",
            r#""a","reasoning_content":"r""#,
        ] {
            let chunk = frame(content);
            if let Some(by_memo) = last.read(chunk.as_bytes()) {
                read += 1;
                assert_eq!(Some(by_memo), whole(&chunk), "{chunk}");
            }
        }
        assert_eq!(
            read, 4,
            "the plain, empty, escaped and surrogate-pair strings"
        );
        for other in [
            first.replace(r#""model":"m""#, r#""model":"n""#),
            first.replace(r#""finish_reason":null"#, r#""finish_reason":"stop""#),
            first.replace("}],", r#"},{"index":1,"delta":{"content":"b"}}],"#),
            first.replace(r#""usage":null"#, r#""usage":{"total_tokens":1}"#),
        ] {
            assert_eq!(last.read(other.as_bytes()), None, "{other}");
        }
    }
}
