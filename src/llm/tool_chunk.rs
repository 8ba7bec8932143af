//! The fast path for a chunk carrying tool-call deltas, the shape every streamed call has:
//! `{…,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",
//! "function":{"name":"read_file","arguments":"{\"file_path\": …}"}}]},…}],…}`, read with the
//! scanner of `text_chunk.rs` instead of serde_json's generic parser (which was ~12k
//! instructions of a tool-loop iteration's ~148k).
//!
//! As `text_chunk`, it says "this chunk carries exactly this" or "not sure": anything outside the
//! shape (arguments that are not a string, reasoning text, usage objects, errors, nested values
//! under keys we do not read, several choices, more than [`MAX_CALLS`] calls, a key given twice,
//! an index that is not a plain non-negative integer, an escaped key, a malformed byte) returns
//! `None` and the chunk goes to the general decoder in `openai/decode.rs`. What it accepts is valid
//! JSON that the general decoder reads the same way (`fast_and_general_paths_agree` and
//! `tool_call_chunks_take_the_fast_path` in `tests/delta.rs` check this on the transcripts'
//! chunks, the fuzz seeds and every single-byte mutation and truncation of them).

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::assembly::Assembler;
use super::chunk_head::{top_level, HeadEnd, TopLevel};
use super::text_chunk::{add_text, once, Scanner};

/// Calls one chunk may carry on the fast path (servers stream one per chunk; more go the
/// general way rather than allocating here).
const MAX_CALLS: usize = 4;

/// One call's delta as the general decoder reads it (`ToolCallDelta` in `openai/decode.rs`).
#[derive(Debug, Default, PartialEq)]
struct CallDelta<'a> {
    index: Option<u64>,
    id: Option<Cow<'a, str>>,
    name: Option<Cow<'a, str>>,
    arguments: Option<Cow<'a, str>>,
    /// Old llama.cpp put the call id in `function`.
    function_id: Option<Cow<'a, str>>,
}

/// What a tool-call chunk carries, borrowed from it where it has no escapes.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ToolChunk<'a> {
    model: Option<Cow<'a, str>>,
    content: Option<Cow<'a, str>>,
    finish_reason: Option<Cow<'a, str>>,
    calls: [CallDelta<'a>; MAX_CALLS],
    n_calls: usize,
}

impl ToolChunk<'_> {
    /// What the general decoder does with the same chunk: the calls in their order (they
    /// depend on each other); the model, text and finish reason touch other parts of the
    /// assembler, so their place among them does not matter.
    pub(super) fn apply(&self, asm: &mut Assembler) {
        if let Some(m) = &self.model {
            asm.model(m);
        }
        add_text(asm, self.content.as_ref());
        for c in &self.calls[..self.n_calls] {
            asm.tool_delta(
                c.index,
                c.id.as_deref().or(c.function_id.as_deref()),
                c.name.as_deref(),
                c.arguments.as_deref(),
            );
        }
        if let Some(r) = &self.finish_reason {
            asm.finish_reason(r);
        }
    }
}

/// Reads `text` (one SSE event's data, trimmed) if it is a chunk of tool-call deltas: whole,
/// or with `resume` from the `choices` value after the remembered head
/// ([`super::chunk_head`]). A chunk without a `"tool_calls":[` after its head is left alone
/// at the cost of one search. Also returns its top level.
pub(super) fn tool_chunk(
    text: &str,
    resume: Option<HeadEnd>,
) -> Option<(ToolChunk<'_>, TopLevel<'_>)> {
    let after_head = resume.map_or(0, HeadEnd::at);
    if !has_call_list(&text.as_bytes()[after_head..]) {
        return None;
    }
    let mut out = ToolChunk::default();
    let top = top_level(text, resume, |s| choice_list(s, &mut out))?;
    out.model = top.model.clone();
    (out.n_calls > 0).then_some((out, top))
}

/// Whether `b` has a key `"tool_calls"` whose value starts as a list.
fn has_call_list(b: &[u8]) -> bool {
    // Built once: building the searcher was most of what a text chunk paid here.
    static KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"tool_calls\""));
    KEY.find_iter(b).any(|at| {
        let mut rest = b[at + 12..].trim_ascii_start();
        if let Some(r) = rest.strip_prefix(b":") {
            rest = r.trim_ascii_start();
            rest.first() == Some(&b'[')
        } else {
            false
        }
    })
}

/// Reads `null`, `[]` or the opening of a list: whether items follow.
fn list_has_items(s: &mut Scanner<'_>) -> Option<bool> {
    s.ws();
    if s.literal(b"null") {
        return Some(false);
    }
    s.eat(b'[')?;
    s.ws();
    if s.peek()? == b']' {
        s.pos += 1;
        return Some(false);
    }
    Some(true)
}

/// `null`, `[]` or a one-element list of one choice object.
fn choice_list<'a>(s: &mut Scanner<'a>, out: &mut ToolChunk<'a>) -> Option<()> {
    if !list_has_items(s)? {
        return Some(());
    }
    let (mut delta, mut finish) = (false, false);
    s.object(|s, key| match key {
        "delta" => {
            once(&mut delta)?;
            delta_object(s, out)
        }
        "finish_reason" => {
            once(&mut finish)?;
            out.finish_reason = s.string_or_null()?;
            Some(())
        }
        // `message` is read like `delta` by the general decoder.
        "message" => None,
        _ => s.scalar(),
    })?;
    s.eat(b']')
}

/// `null` or a delta object: content text, tool calls, null reasoning.
fn delta_object<'a>(s: &mut Scanner<'a>, out: &mut ToolChunk<'a>) -> Option<()> {
    s.ws();
    if s.literal(b"null") {
        return Some(());
    }
    let (mut content, mut calls) = (false, false);
    s.object(|s, key| match key {
        "content" => {
            once(&mut content)?;
            out.content = s.string_or_null()?;
            Some(())
        }
        "tool_calls" => {
            once(&mut calls)?;
            call_list(s, out)
        }
        // Reasoning text is the general decoder's (which of the two keys counts depends on
        // their order); null adds nothing.
        "reasoning_content" | "reasoning" => s.null(),
        _ => s.scalar(),
    })
}

/// `null` or a list of call objects.
fn call_list<'a>(s: &mut Scanner<'a>, out: &mut ToolChunk<'a>) -> Option<()> {
    if !list_has_items(s)? {
        return Some(());
    }
    loop {
        let slot = out.calls.get_mut(out.n_calls)?;
        call_object(s, slot)?;
        out.n_calls += 1;
        s.ws();
        match s.peek()? {
            b',' => s.pos += 1,
            b']' => {
                s.pos += 1;
                return Some(());
            }
            _ => return None,
        }
    }
}

/// One call: `index`, `id` and `function` read, any other key a scalar (a derived
/// `Deserialize`, as the general decoder's, ignores unknown fields and refuses repeated ones).
fn call_object<'a>(s: &mut Scanner<'a>, call: &mut CallDelta<'a>) -> Option<()> {
    let (mut index, mut id, mut function) = (false, false, false);
    s.object(|s, key| match key {
        "index" => {
            once(&mut index)?;
            s.ws();
            if s.literal(b"null") {
                return Some(());
            }
            call.index = Some(unsigned(s)?);
            Some(())
        }
        "id" => {
            once(&mut id)?;
            call.id = s.string_or_null()?;
            Some(())
        }
        "function" => {
            once(&mut function)?;
            function_object(s, call)
        }
        _ => s.scalar(),
    })
}

/// `null` or `{"name":…,"arguments":"…"}`; arguments that are not a string or null are the
/// general decoder's (it re-serializes them).
fn function_object<'a>(s: &mut Scanner<'a>, call: &mut CallDelta<'a>) -> Option<()> {
    s.ws();
    if s.literal(b"null") {
        return Some(());
    }
    let (mut name, mut arguments, mut id) = (false, false, false);
    s.object(|s, key| match key {
        "name" => {
            once(&mut name)?;
            call.name = s.string_or_null()?;
            Some(())
        }
        "arguments" => {
            once(&mut arguments)?;
            call.arguments = s.string_or_null()?;
            Some(())
        }
        "id" => {
            once(&mut id)?;
            call.function_id = s.string_or_null()?;
            Some(())
        }
        _ => s.scalar(),
    })
}

/// `0|[1-9][0-9]*` within `u64`, followed by what may follow a value (anything else, such as
/// `1.0`, `1e2` or `-1`, the general decoder reads or refuses as a `u64` would).
fn unsigned(s: &mut Scanner<'_>) -> Option<u64> {
    let b = s.text.as_bytes();
    let start = s.pos;
    let mut n: u64 = 0;
    while let Some(&d @ b'0'..=b'9') = b.get(s.pos) {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        s.pos += 1;
    }
    let digits = &b[start..s.pos];
    if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    match b.get(s.pos) {
        Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read whole by [`tool_chunk`].
    fn whole(text: &str) -> Option<ToolChunk<'_>> {
        tool_chunk(text, None).map(|(chunk, _)| chunk)
    }

    #[test]
    fn reads_the_common_shape() {
        let c = whole(
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"file_path\": \"f1.txt\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        )
        .expect("the common shape");
        assert_eq!(c.model.as_deref(), Some("m"));
        assert_eq!(c.n_calls, 1);
        let call = &c.calls[0];
        assert_eq!(call.index, Some(0));
        assert_eq!(call.id.as_deref(), Some("call_1"));
        assert_eq!(call.name.as_deref(), Some("read_file"));
        assert_eq!(
            call.arguments.as_deref(),
            Some(r#"{"file_path": "f1.txt"}"#)
        );
        let c = whole(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"x"}},{"function":{"id":"old","name":"g"}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(c.n_calls, 2);
        assert!(matches!(c.calls[0].arguments, Some(Cow::Borrowed("x"))));
        assert_eq!(c.calls[1].function_id.as_deref(), Some("old"));
    }

    #[test]
    fn leaves_everything_else_to_the_general_decoder() {
        for other in [
            r#"{"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":null}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":1}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1.0}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":18446744073709551616}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"index":1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":1}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[null]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{}]},"x":{}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{},{},{},{},{}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{}],"tool_calls":[{}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{}],"reasoning_content":"r"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{}]}},{"delta":{}}]}"#,
            r#"{"choices":[{"message":{"tool_calls":[{}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{}]}}],"usage":{"total_tokens":1}}"#,
            r#"{"object":"error","choices":[{"delta":{"tool_calls":[{}]}}]}"#,
            r#"{"error":null,"choices":[{"delta":{"tool_calls":[{}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{}]}}]} x"#,
            r#"{"choices":[{"delta":{"tool_calls":[{}]}}]"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"\ud800"}]}}]}"#,
        ] {
            assert_eq!(whole(other), None, "{other}");
        }
        // An empty call object is a call (the general decoder opens a slot for it).
        assert!(whole(r#"{"choices":[{"delta":{"tool_calls":[{}]}}]}"#).is_some());
    }
}
