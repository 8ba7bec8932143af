//! Decodes the text of a chat completion stream as its frames arrive: the least a client that
//! delivers the text must do, and so the floor of the library's streamed deltas. For each
//! `data:` line, `choices[0].delta.content` is deserialized with `serde_json` into a minimal
//! borrowed struct (the way a small Rust client would), counted, and appended to the text, which
//! the bench checks against the mock's. [`crate::sse_lines::DataLineCounter`] only finds line
//! ends; this reads inside every line, and counts the `data:` lines as that counter does.

use std::borrow::Cow;

use serde::Deserialize;

#[derive(Deserialize)]
struct Chunk<'a> {
    // Borrowed: a delta without escapes is never copied before it is appended.
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
}

#[derive(Debug, Default)]
pub struct DeltaTextDecoder {
    /// The start of a line whose newline has not arrived yet (a frame may end anywhere).
    partial: Vec<u8>,
    lines: u64,
    deltas: u64,
    text: String,
}

impl DeltaTextDecoder {
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), String> {
        let mut rest = chunk;
        if !self.partial.is_empty() {
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                self.partial.extend_from_slice(rest);
                return Ok(());
            };
            self.partial.extend_from_slice(&rest[..nl]);
            rest = &rest[nl + 1..];
            let line = std::mem::take(&mut self.partial);
            let decoded = self.line(&line);
            // Keep the allocation for the next split line.
            self.partial = line;
            self.partial.clear();
            decoded?;
        }
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            self.line(&rest[..nl])?;
            rest = &rest[nl + 1..];
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    fn line(&mut self, line: &[u8]) -> Result<(), String> {
        let Some(data) = line.strip_prefix(b"data:") else {
            return Ok(());
        };
        self.lines += 1;
        let data = data.strip_suffix(b"\r").unwrap_or(data);
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if data == b"[DONE]" {
            return Ok(());
        }
        let chunk: Chunk<'_> =
            serde_json::from_slice(data).map_err(|e| format!("data line: {e}"))?;
        let content = chunk
            .choices
            .as_deref()
            .and_then(<[Choice]>::first)
            .and_then(|c| c.delta.as_ref())
            .and_then(|d| d.content.as_deref());
        if let Some(text) = content {
            self.deltas += 1;
            self.text.push_str(text);
        }
        Ok(())
    }

    /// The `data:` lines ended so far, counted as
    /// [`DataLineCounter`](crate::sse_lines::DataLineCounter) counts them.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The `data:` lines that carried a content string (an empty one counts).
    pub fn deltas(&self) -> u64 {
        self.deltas
    }

    /// The decoded text so far, every response's in order.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = b"data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ab\"},\"finish_reason\":null}]}\n\n\
: keep-alive\n\n\
data:{\"choices\":[{\"delta\":{\"content\":\"c\\\"\\u00e9\\n\\ud83d\\ude00\"}}]}\r\n\r\n\
data: {\"choices\":[{\"delta\":{\"content\":null,\"reasoning_content\":\"no\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n\
data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n\
data: {\"usage\":null}\n\n\
data: [DONE]\n\n";

    const TEXT: &str = "abc\"\u{e9}\n\u{1f600}";

    fn decode_in_pieces(body: &[u8], piece: usize) -> DeltaTextDecoder {
        let mut d = DeltaTextDecoder::default();
        for p in body.chunks(piece) {
            d.feed(p).unwrap();
        }
        d
    }

    #[test]
    fn decodes_content_and_skips_the_rest() {
        let d = decode_in_pieces(BODY, BODY.len());
        assert_eq!(d.text(), TEXT);
        assert_eq!(d.deltas(), 2);
        assert_eq!(d.lines(), 8);
        let mut counter = crate::sse_lines::DataLineCounter::default();
        counter.feed(BODY);
        assert_eq!(counter.lines(), d.lines());
    }

    #[test]
    fn the_text_does_not_depend_on_where_frames_split() {
        for piece in 1..BODY.len() {
            let d = decode_in_pieces(BODY, piece);
            assert_eq!(d.text(), TEXT, "pieces of {piece}");
            assert_eq!((d.deltas(), d.lines()), (2, 8), "pieces of {piece}");
        }
    }

    #[test]
    fn a_bad_data_line_is_an_error() {
        let mut d = DeltaTextDecoder::default();
        assert!(d
            .feed(b"data: {\"choices\":[{\"delta\":{\"content\":1}}]}\n")
            .is_err());
    }

    #[test]
    fn the_mocks_stream_decodes_to_its_text() {
        let script =
            serde_json::json!({"responses": [{"repeat_text": {"unit": "a\"b", "count": 7}}]});
        let body = mock_openai::render_sse(script).unwrap();
        let d = decode_in_pieces(&body, 13);
        assert_eq!(d.text(), "a\"b".repeat(7));
        assert_eq!(d.deltas(), 7);
    }
}
