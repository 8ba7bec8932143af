//! A `tools/call` answer decoded straight into rmcp's types.
//!
//! rmcp reads every incoming line as an untagged `JsonRpcMessage`, whose result is the untagged
//! `ServerResult`: serde buffers the whole message and then tries each of the result's variants
//! in turn (`CallToolResult` is the sixteenth). For the common answer — `{"jsonrpc":"2.0",
//! "id":N,"result":{...}}` whose result holds only `CallToolResult`'s own keys — that is most
//! of a call's decoding. This reads such a line with one typed pass and gives the message rmcp
//! would have given; any other line (or anything this pass does not accept) is left to rmcp.
//!
//! [`AnswerReader`] sits under rmcp's line transport (`stdio.rs`): it holds each line back until
//! it is whole, takes the ones [`decode`] reads, and hands every other byte on unchanged, so rmcp
//! still frames, bounds and answers whatever it is given; the transport takes the decoded
//! messages before it asks rmcp for the next one.
//!
//! Why the two agree: rmcp classifies a line holding `result` and no `method` or `error` as a
//! response, and none of the result variants before `CallToolResult` accepts an object made
//! only of `content`, `structuredContent`, `isError`, `resultType` and `_meta` (each needs a
//! key of its own); `tests::agrees_with_rmcp_on_every_key_combination` checks exactly that,
//! and `tests::agrees_with_rmcp_on_varied_answers` compares whole messages.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rmcp::model::{
    Annotations, CallToolResult, ContentBlock, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0,
    MetaObject, NumberOrString, ResultType, ServerJsonRpcMessage, ServerResult, TextContent,
};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

/// Longest line tried here; a longer one goes to rmcp as it arrives, never held twice.
pub(crate) const MAX_FAST_LINE_BYTES: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer<Block> {
    // Checked to be "2.0" by rmcp's own type.
    #[allow(dead_code)]
    jsonrpc: JsonRpcVersion2_0,
    // rmcp's client numbers its requests; a string id is left to rmcp.
    id: i64,
    result: ToolResult<Block>,
}

/// `CallToolResult`'s wire keys, and no others (another key could select an earlier variant).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolResult<Block> {
    #[serde(default)]
    result_type: Option<ResultType>,
    content: Option<Vec<Block>>,
    // An explicit `null` is kept (as rmcp does): present is `Some(Value::Null)`.
    #[serde(default, deserialize_with = "present")]
    structured_content: Option<Value>,
    is_error: Option<bool>,
    #[serde(rename = "_meta")]
    meta: Option<MetaObject>,
}

/// A text block, the common content, read as a plain struct: `ContentBlock` is internally
/// tagged, which serde reads by buffering each block whole first. A block this does not take
/// (another type, another key) fails the pass and the line is read again with `ContentBlock`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextBlock {
    #[serde(rename = "type")]
    _kind: TextTag,
    text: String,
    annotations: Option<Annotations>,
    #[serde(rename = "_meta")]
    meta: Option<MetaObject>,
}

#[derive(Deserialize)]
enum TextTag {
    #[serde(rename = "text")]
    Text,
}

impl From<TextBlock> for ContentBlock {
    fn from(b: TextBlock) -> ContentBlock {
        let mut text = TextContent::new(b.text);
        text.annotations = b.annotations;
        text.meta = b.meta;
        ContentBlock::Text(text)
    }
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The message rmcp would make of `line` (one line, without its newline), when `line` is a
/// tool call's answer of the common shape; `None` leaves the line to rmcp.
pub(crate) fn decode(line: &[u8]) -> Option<ServerJsonRpcMessage> {
    // Cheap rejections first: progress notifications and requests are the other lines a call
    // sees, and a BOM or carriage return is rmcp's to strip.
    if line.len() > MAX_FAST_LINE_BYTES
        || !line.starts_with(b"{")
        || !line.ends_with(b"}")
        || memchr::memmem::find(line, b"\"result\"").is_none()
    {
        return None;
    }
    match serde_json::from_slice::<Answer<TextBlock>>(line) {
        Ok(answer) => message(answer),
        Err(_) => message(serde_json::from_slice::<Answer<ContentBlock>>(line).ok()?),
    }
}

/// The message rmcp makes of `answer`, when rmcp reads it as a `CallToolResult`.
fn message<Block: Into<ContentBlock>>(answer: Answer<Block>) -> Option<ServerJsonRpcMessage> {
    let r = answer.result;
    // rmcp's `CallToolResult` refuses these, and another variant may take them.
    if r.result_type.as_ref().is_some_and(|t| !t.is_complete())
        || (r.content.is_none() && r.structured_content.is_none() && r.is_error.is_none())
    {
        return None;
    }
    let mut result = CallToolResult::default();
    result.result_type = r.result_type;
    result.content = r
        .content
        .map_or_else(Vec::new, |c| c.into_iter().map(Into::into).collect());
    result.structured_content = r.structured_content;
    result.is_error = r.is_error;
    result.meta = r.meta;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id: NumberOrString::Number(answer.id),
        result: ServerResult::CallToolResult(result),
    }))
}

/// How much is read from the server at a time.
const READ_CHUNK: usize = 8 * 1024;

/// The message [`AnswerReader`] decoded and the transport has not taken yet (at most one: the
/// reader reads no further until it is taken).
#[derive(Clone, Default)]
pub(crate) struct DecodedAnswer(Arc<Mutex<Option<ServerJsonRpcMessage>>>);

impl DecodedAnswer {
    pub(crate) fn take(&self) -> Option<ServerJsonRpcMessage> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn put(&self, msg: ServerJsonRpcMessage) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg);
    }

    fn is_waiting(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    /// At the start of a line: it is held until whole (or too long to try).
    LineStart,
    /// Handing a line on to rmcp, up to and including its newline.
    Passing,
}

/// A server's stdout as rmcp reads it, minus the lines [`decode`] took (see the module doc).
pub(crate) struct AnswerReader<R> {
    inner: R,
    /// `buf[start..end]` was read from `inner` and not yet handed on or taken. The whole of
    /// `buf` stays initialised, so a read never zeroes its space again.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes from `start` already searched for a newline, so a line that arrives in many small
    /// reads is scanned once, not once a read.
    searched: usize,
    position: Position,
    eof: bool,
    decoded: DecodedAnswer,
}

impl<R> AnswerReader<R> {
    pub(crate) fn new(inner: R, decoded: DecodedAnswer) -> Self {
        AnswerReader {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            searched: 0,
            position: Position::LineStart,
            eof: false,
            decoded,
        }
    }
}

impl<R: AsyncRead + Unpin> AnswerReader<R> {
    /// Reads more from `inner` after `end` (the handed-on part dropped first).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < READ_CHUNK {
            self.buf.resize(self.end + READ_CHUNK, 0);
        }
        let mut read = ReadBuf::new(&mut self.buf[self.end..]);
        std::task::ready!(Pin::new(&mut self.inner).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        if n == 0 {
            self.eof = true;
        }
        self.end += n;
        Poll::Ready(Ok(()))
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for AnswerReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.decoded.is_waiting() {
                // The transport takes it before it polls rmcp again; nothing is read past it.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let pending = &this.buf[this.start..this.end];
            match this.position {
                Position::Passing => {
                    if pending.is_empty() {
                        if this.eof {
                            return Poll::Ready(Ok(()));
                        }
                        std::task::ready!(this.poll_fill(cx))?;
                        continue;
                    }
                    // Only as far as `out` has room: what is searched is handed on.
                    let room = pending.len().min(out.remaining());
                    let newline = memchr::memchr(b'\n', &pending[..room]);
                    let n = newline.map_or(room, |p| p + 1);
                    out.put_slice(&pending[..n]);
                    this.start += n;
                    if newline.is_some() {
                        this.position = Position::LineStart;
                    }
                    return Poll::Ready(Ok(()));
                }
                Position::LineStart => match memchr::memchr(b'\n', &pending[this.searched..]) {
                    Some(p) => {
                        let p = this.searched + p;
                        this.searched = 0;
                        if let Some(msg) = decode(&pending[..p]) {
                            this.start += p + 1;
                            this.decoded.put(msg);
                            continue;
                        }
                        this.position = Position::Passing;
                    }
                    None if this.eof || pending.len() > MAX_FAST_LINE_BYTES => {
                        this.searched = 0;
                        if pending.is_empty() {
                            return Poll::Ready(Ok(()));
                        }
                        this.position = Position::Passing;
                    }
                    None => {
                        this.searched = pending.len();
                        std::task::ready!(this.poll_fill(cx))?;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rmcp(line: &str) -> Option<ServerJsonRpcMessage> {
        serde_json::from_str(line).ok()
    }

    /// Whenever `decode` answers, rmcp gives the same message.
    fn check(line: &str) -> bool {
        match decode(line.as_bytes()) {
            Some(fast) => {
                // rmcp's message types have no `PartialEq`; their `Debug` names every variant
                // and field.
                assert_eq!(
                    Some(format!("{fast:?}")),
                    rmcp(line).map(|m| format!("{m:?}")),
                    "{line}"
                );
                true
            }
            None => false,
        }
    }

    #[test]
    fn agrees_with_rmcp_on_every_key_combination() {
        let keys: [(&str, Value); 5] = [
            ("content", json!([{"type": "text", "text": "pong"}])),
            ("structuredContent", json!({"a": [1, 2.5, -3, null, "x"]})),
            ("isError", json!(false)),
            ("resultType", json!("complete")),
            ("_meta", json!({"k": 1})),
        ];
        let mut fast = 0;
        for mask in 0u32..32 {
            for nulls in [false, true] {
                let mut result = serde_json::Map::new();
                for (i, (k, v)) in keys.iter().enumerate() {
                    if mask & (1 << i) != 0 {
                        let v = if nulls { Value::Null } else { v.clone() };
                        result.insert((*k).to_owned(), v);
                    }
                }
                let line = json!({"jsonrpc": "2.0", "id": 7, "result": result}).to_string();
                fast += usize::from(check(&line));
            }
        }
        // Every combination that names content, structuredContent or isError, with values.
        assert!(fast >= 28, "{fast}");
    }

    #[test]
    fn agrees_with_rmcp_on_varied_answers() {
        let taken = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ping 1"}]}}"#,
            r#"{"jsonrpc":"2.0","id":-5,"result":{"content":[],"isError":true}}"#,
            r#"{"id":9223372036854775807,"result":{"isError":false},"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"resource","resource":{"uri":"file:///a","text":"t"}},{"type":"resource_link","uri":"file:///b","name":"b"},{"type":"text","text":"\u00e9\n\"q\"","annotations":{"priority":0.5}}]}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"structuredContent":null}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"structuredContent":{"n":18446744073709551615,"f":1e400,"s":"x"}}}"#,
            r#" {"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"a"}],"_meta":{"progressToken":1}}}"#.trim_start(),
        ];
        for line in taken {
            if rmcp(line).is_some() {
                assert!(check(line), "not taken: {line}");
            } else {
                assert!(decode(line.as_bytes()).is_none(), "{line}");
            }
        }
        let left = [
            // Other keys: an earlier variant, or a key rmcp keeps elsewhere.
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"extra":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":1,"message":"m"}}"#,
            // Not the result rmcp's CallToolResult takes.
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            // Ids and versions rmcp reads its own way.
            r#"{"jsonrpc":"2.0","id":"1","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{"content":[]}}"#,
            r#"{"id":1,"result":{"content":[]}}"#,
            // Duplicate keys, malformed content, not an object, framing rmcp strips.
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"nope"}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}} "#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}",
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            "[]",
            "",
        ];
        for line in left {
            assert!(decode(line.as_bytes()).is_none(), "{line}");
        }
    }

    #[test]
    fn truncations_and_byte_changes_never_disagree() {
        let line = r#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"ping \"12\""}],"structuredContent":{"a":[1,true,null]},"isError":false}}"#;
        assert!(check(line));
        let bytes = line.as_bytes();
        let mut taken = 0;
        for cut in 0..bytes.len() {
            if let Ok(s) = std::str::from_utf8(&bytes[..cut]) {
                taken += usize::from(check(s));
            }
        }
        assert_eq!(taken, 0, "a truncated line was taken");
        for at in 0..bytes.len() {
            for b in [b'"', b'{', b'}', b',', b':', b'0', b'x', b' ', b'\\', b'n'] {
                let mut changed = bytes.to_vec();
                changed[at] = b;
                if let Ok(s) = std::str::from_utf8(&changed) {
                    check(s);
                }
            }
        }
    }

    /// A reader that gives at most `chunk` bytes a read.
    struct Chunked<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl AsyncRead for Chunked<'_> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let n = self.chunk.min(self.data.len()).min(buf.remaining());
            buf.put_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Poll::Ready(Ok(()))
        }
    }

    /// What a reader over `input` gives its two consumers, in order: `Err(id)` for an answer it
    /// decoded, `Ok(bytes)` for what it handed on.
    fn drain(input: &[u8], chunk: usize, out_size: usize) -> Vec<Result<Vec<u8>, i64>> {
        let decoded = DecodedAnswer::default();
        let mut reader = AnswerReader::new(Chunked { data: input, chunk }, decoded.clone());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut got: Vec<Result<Vec<u8>, i64>> = Vec::new();
        let mut out = vec![0u8; out_size];
        loop {
            if let Some(JsonRpcMessage::Response(r)) = decoded.take() {
                let NumberOrString::Number(id) = r.id else {
                    panic!("a string id")
                };
                got.push(Err(id));
            }
            let mut buf = ReadBuf::new(&mut out);
            match Pin::new(&mut reader).poll_read(&mut cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return got,
                Poll::Ready(Ok(())) => match got.last_mut() {
                    Some(Ok(bytes)) => bytes.extend_from_slice(buf.filled()),
                    _ => got.push(Ok(buf.filled().to_vec())),
                },
                Poll::Ready(Err(e)) => panic!("{e}"),
                Poll::Pending => assert!(decoded.is_waiting(), "pending with nothing decoded"),
            }
        }
    }

    #[test]
    fn the_reader_takes_answers_in_order_and_hands_every_other_byte_on() {
        let answer = |id: i64| {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"isError":false}}}}"#)
        };
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":9,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(MAX_FAST_LINE_BYTES)
        );
        let input = format!(
            "{}\n{progress}\n{}\n{}\n\n{long}\n{}\r\n{}\n{{\"partial",
            answer(1),
            answer(2),
            answer(3),
            answer(4),
            answer(5)
        );
        let expected: Vec<Result<Vec<u8>, i64>> = vec![
            Err(1),
            Ok(format!("{progress}\n").into_bytes()),
            Err(2),
            Err(3),
            // An empty line, a line too long to hold, an answer with a carriage return: rmcp's.
            Ok(format!("\n{long}\n{}\r\n", answer(4)).into_bytes()),
            Err(5),
            Ok(b"{\"partial".to_vec()),
        ];
        for chunk in [1, 7, 100, 8192, usize::MAX] {
            for out_size in [1, 13, 8192] {
                assert_eq!(
                    drain(input.as_bytes(), chunk, out_size),
                    expected,
                    "chunk {chunk}, out {out_size}"
                );
            }
        }
    }
}
