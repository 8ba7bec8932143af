//! Stream assembly: text, reasoning and tool-call slots accumulated from deltas.
//!
//! Tool-call deltas are keyed per slot, never by a "current call" cursor: the same `index` is the
//! same slot unless it arrives with a different `id` (Ollama reuses index 0 for parallel calls);
//! without an index, an `id` opens (or finds) a slot and an arguments-only delta continues the
//! latest one (Gemini). A name is assigned once per slot: servers that resend it on every delta
//! (old llama.cpp) do not get it doubled.
//!
//! A slot is found in constant time (by index, by id), and a response opens at most
//! [`MAX_TOOL_CALLS`]: a server that streamed a new index per delta made each delta scan every
//! slot before it, 160 s of a runtime worker for 250,000 slots in 3 MB (docs/security.md).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::tool_call::ToolCall;
use super::{LlmError, Piece, StreamedText};

/// Tool calls one response may open. Real servers send a handful of parallel calls (OpenAI's
/// `tools` array itself holds at most 128 tools); past this the response is refused whole,
/// like one past `llm.max_response_bytes`, rather than a turn running a thousand calls.
pub(crate) const MAX_TOOL_CALLS: usize = 1024;

/// Up to this many slots a lookup scans them (the common case: a few parallel calls); past it
/// the maps take over, so a lookup stays constant time.
const SCAN_SLOTS: usize = 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cache_read_tokens: u64,
    pub(crate) cache_creation_tokens: u64,
    pub(crate) reasoning_tokens: u64,
    /// What the tokens cost by the config's price table, in billionths of a US dollar (0 for
    /// one attempt's usage as the wire reports it; the totals' sum of each attempt's cost).
    pub(crate) cost_nano_usd: u64,
}

impl Usage {
    /// Reads an OpenAI-style `usage` object; anything that is not a non-negative integer is 0.
    pub(crate) fn from_openai(u: &Value) -> Usage {
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        let cache_read = u
            .get("cache_read_input_tokens")
            .or_else(|| u.pointer("/prompt_tokens_details/cached_tokens"));
        let cache_creation = u
            .get("cache_creation_input_tokens")
            .or_else(|| u.pointer("/prompt_tokens_details/cache_write_tokens"));
        Usage {
            prompt_tokens: n(u.get("prompt_tokens")),
            completion_tokens: n(u.get("completion_tokens")),
            cache_read_tokens: n(cache_read),
            cache_creation_tokens: n(cache_creation),
            reasoning_tokens: n(u.pointer("/completion_tokens_details/reasoning_tokens")),
            cost_nano_usd: 0,
        }
    }
}

/// Everything one LLM call produced.
#[derive(Debug, Clone, Default)]
pub struct LlmResponse {
    pub content: String,
    pub reasoning: String,
    /// Each call's arguments already parsed.
    pub tool_calls: Vec<ToolCall>,
    /// `None` when the provider sent no (or an empty) finish reason.
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub model: String,
    pub(crate) duration: Duration,
    pub first_token: Option<Duration>,
    pub first_reasoning: Option<Duration>,
    /// The wire's opaque reasoning items, to go back whole with the assistant message.
    pub(crate) carrier: Option<WireCarrier>,
}

/// Reasoning a wire requires back unmodified in later requests, under the history key the
/// reference stores it by (see [`WireCarrier::history_key`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WireCarrier {
    /// Anthropic `thinking` blocks with their signatures, and `redacted_thinking` blocks.
    AnthropicThinking(Vec<Value>),
    /// OpenAI Responses `reasoning` items, with their `encrypted_content`.
    ResponsesReasoning(Vec<Value>),
}

impl WireCarrier {
    /// The key of the assistant message in history that carries the items.
    pub(crate) fn history_key(&self) -> &'static str {
        match self {
            WireCarrier::AnthropicThinking(_) => "anthropic_thinking_blocks",
            WireCarrier::ResponsesReasoning(_) => "openai_reasoning_items",
        }
    }

    pub(crate) fn items(&self) -> &[Value] {
        match self {
            WireCarrier::AnthropicThinking(v) | WireCarrier::ResponsesReasoning(v) => v,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum PieceKind {
    Text,
    Reasoning,
}

#[derive(Debug, Default, Clone)]
struct Slot {
    index: Option<u64>,
    /// Set whole: made once as the call's shared text, not copied into it at the end.
    id: Arc<str>,
    name: SlotName,
    arguments: String,
}

/// A call's name: shared as it came (nearly always whole, in one delta), or grown in place
/// once a server streams it in pieces (re-making the shared text for each piece was quadratic
/// in a hostile server's name).
#[derive(Debug, Clone)]
enum SlotName {
    Whole(Arc<str>),
    Pieces(String),
}

impl Default for SlotName {
    fn default() -> Self {
        SlotName::Whole(Arc::default())
    }
}

impl SlotName {
    fn as_str(&self) -> &str {
        match self {
            SlotName::Whole(w) => w,
            SlotName::Pieces(p) => p,
        }
    }

    fn push(&mut self, piece: &str) {
        match self {
            SlotName::Whole(w) => *self = SlotName::Pieces(format!("{w}{piece}")),
            SlotName::Pieces(p) => p.push_str(piece),
        }
    }

    fn into_shared(self) -> Arc<str> {
        match self {
            SlotName::Whole(w) => w,
            SlotName::Pieces(p) => p.into(),
        }
    }
}

/// Accumulates one attempt's deltas.
#[derive(Debug, Default, Clone)]
pub(crate) struct Assembler {
    content: String,
    reasoning: String,
    slots: Vec<Slot>,
    /// The latest slot opened for each index (a reused index with a new id opens another).
    /// Kept only past [`SCAN_SLOTS`] slots: a few slots are scanned, with no hashing or copies.
    by_index: HashMap<u64, usize>,
    /// The first slot that took each id: a slot's id is only ever set once, from empty. Kept
    /// only past [`SCAN_SLOTS`] slots.
    by_id: HashMap<Arc<str>, usize>,
    /// A delta tried to open a slot past [`MAX_TOOL_CALLS`]; the response is refused.
    too_many_calls: bool,
    finish_reason: Option<String>,
    pub(crate) usage: Option<Usage>,
    model: String,
    pending_reasoning: String,
    /// Where the text not yet handed out starts in `content`: a text piece is lent from
    /// `content` itself, not copied into a pending buffer and then swapped out (a copy and a
    /// swap per streamed delta).
    text_from: usize,
    /// Where the text piece handed out last starts in `content` (it runs to the end: nothing
    /// is added before the turn takes it).
    text_out: usize,
    /// Whether every delta in `content[text_from..]` came through [`Assembler::verbatim_text`].
    pending_verbatim: bool,
    /// [`StreamedText::verbatim_json`] of the text piece handed out last.
    out_verbatim: bool,
    /// The reasoning piece handed out last; reused so a piece costs no allocation.
    out: String,
    /// Whether text reached the host (no retry after that).
    pub(crate) progress: bool,
    pub(crate) first_token: Option<Duration>,
    pub(crate) first_reasoning: Option<Duration>,
    /// Bytes of text, reasoning and tool-call fields received (plus a fixed cost per call
    /// slot): the measure of progress and of the response's size.
    received: usize,
    /// See [`LlmResponse::carrier`].
    pub(crate) carrier: Option<WireCarrier>,
}

/// What one tool-call slot costs beyond its strings, so that a flood of empty calls counts.
const SLOT_COST: usize = 64;

impl Assembler {
    /// Bytes of text, reasoning and tool calls received so far in this attempt.
    pub(crate) fn received(&self) -> usize {
        self.received
    }

    pub(crate) fn text(&mut self, t: &str) {
        if t.is_empty() {
            return;
        }
        self.pending_verbatim = false;
        self.received += t.len();
        self.content.push_str(t);
    }

    /// [`Assembler::text`] for text that needs no JSON escaping (see
    /// [`StreamedText::verbatim_json`]): a wire string read without escapes.
    pub(crate) fn verbatim_text(&mut self, t: &str) {
        if t.is_empty() {
            return;
        }
        if self.text_from == self.content.len() {
            self.pending_verbatim = true;
        }
        self.received += t.len();
        self.content.push_str(t);
    }

    pub(crate) fn reasoning(&mut self, t: &str) {
        if t.is_empty() {
            return;
        }
        self.received += t.len();
        self.reasoning.push_str(t);
        self.pending_reasoning.push_str(t);
    }

    pub(crate) fn finish_reason(&mut self, r: &str) {
        let r = r.trim();
        if !r.is_empty() {
            self.finish_reason = Some(r.to_owned());
        }
    }

    pub(crate) fn usage(&mut self, u: Usage) {
        self.usage = Some(u);
    }

    pub(crate) fn model(&mut self, m: &str) {
        if self.model.is_empty() && !m.is_empty() {
            self.model = m.to_owned();
        }
    }

    /// One tool-call delta.
    pub(crate) fn tool_delta(
        &mut self,
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        let id = id.filter(|s| !s.is_empty());
        let slot = match index {
            Some(i) => match (self.slot_of_index(i), id) {
                (Some(pos), Some(id))
                    if !self.slots[pos].id.is_empty() && *self.slots[pos].id != *id =>
                {
                    // A reused index with a new id is a new call; an id seen before goes back
                    // to its own slot.
                    match self.slot_of_id(id) {
                        Some(p) => Some(p),
                        None => self.open(index),
                    }
                }
                (Some(pos), _) => Some(pos),
                (None, _) => self.open(index),
            },
            None => match id {
                Some(id) => match self.slot_of_id(id) {
                    Some(p) => Some(p),
                    None => self.open(None),
                },
                None if self.slots.is_empty() => self.open(None),
                None => Some(self.slots.len() - 1),
            },
        };
        let Some(slot) = slot else {
            return;
        };
        let mapped = self.slots.len() > SCAN_SLOTS;
        let s = &mut self.slots[slot];
        let mut added = 0;
        if let Some(id) = id {
            if *s.id != *id {
                added += id.len();
                s.id = id.into();
                if mapped {
                    self.by_id.entry(s.id.clone()).or_insert(slot);
                }
            }
        }
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            if s.name.as_str().is_empty() {
                added += n.len();
                s.name = SlotName::Whole(n.into());
            } else if s.name.as_str() != n {
                added += n.len();
                s.name.push(n);
            }
        }
        if let Some(a) = arguments {
            added += a.len();
            s.arguments.push_str(a);
        }
        self.received += added;
    }

    /// The latest slot opened for index `i`. Arguments mostly continue the latest slot, which
    /// is checked before the map (no hashing for them).
    fn slot_of_index(&self, i: u64) -> Option<usize> {
        match self.slots.last() {
            Some(last) if last.index == Some(i) => Some(self.slots.len() - 1),
            _ if self.slots.len() <= SCAN_SLOTS => {
                self.slots.iter().rposition(|s| s.index == Some(i))
            }
            _ => self.by_index.get(&i).copied(),
        }
    }

    /// The first slot that took `id`.
    fn slot_of_id(&self, id: &str) -> Option<usize> {
        if self.slots.len() <= SCAN_SLOTS {
            self.slots.iter().position(|s| *s.id == *id)
        } else {
            self.by_id.get(id).copied()
        }
    }

    /// A new slot, or `None` (and the response marked refused) past [`MAX_TOOL_CALLS`].
    fn open(&mut self, index: Option<u64>) -> Option<usize> {
        if self.slots.len() >= MAX_TOOL_CALLS {
            self.too_many_calls = true;
            return None;
        }
        self.received += SLOT_COST;
        let slot = self.slots.len();
        self.slots.push(Slot {
            index,
            ..Default::default()
        });
        if self.slots.len() == SCAN_SLOTS + 1 {
            // From now on the maps answer: they learn the slots scanned so far.
            for (pos, s) in self.slots.iter().enumerate() {
                if let Some(i) = s.index {
                    self.by_index.insert(i, pos);
                }
                if !s.id.is_empty() {
                    self.by_id.entry(s.id.clone()).or_insert(pos);
                }
            }
        } else if self.slots.len() > SCAN_SLOTS + 1 {
            if let Some(i) = index {
                self.by_index.insert(i, slot);
            }
        }
        Some(slot)
    }

    /// The refusal of a response that tried to open more than [`MAX_TOOL_CALLS`] calls; not
    /// retried (the server would send the same again).
    pub(crate) fn call_bound_error(&self) -> Option<LlmError> {
        self.too_many_calls.then(|| {
            LlmError::api(format!(
                "The model server's response has more than {MAX_TOOL_CALLS} tool calls; the response was abandoned."
            ))
        })
    }

    /// Takes the next pending piece (reasoning before text), [`Assembler::piece`] from now on;
    /// the first of each kind notes `elapsed()`.
    pub(crate) fn pop_piece(&mut self, elapsed: impl FnOnce() -> Duration) -> Option<PieceKind> {
        let (kind, first) = if !self.pending_reasoning.is_empty() {
            self.out.clear();
            std::mem::swap(&mut self.out, &mut self.pending_reasoning);
            (PieceKind::Reasoning, &mut self.first_reasoning)
        } else if self.text_from < self.content.len() {
            self.text_out = self.text_from;
            self.text_from = self.content.len();
            self.out_verbatim = self.pending_verbatim;
            self.progress = true;
            (PieceKind::Text, &mut self.first_token)
        } else {
            return None;
        };
        first.get_or_insert_with(elapsed);
        Some(kind)
    }

    /// The piece [`Assembler::pop_piece`] took last, of the kind it said.
    pub(crate) fn piece(&self, kind: PieceKind) -> Piece<'_> {
        match kind {
            PieceKind::Text => Piece::Text(StreamedText {
                text: &self.content[self.text_out..],
                verbatim_json: self.out_verbatim,
            }),
            PieceKind::Reasoning => Piece::Reasoning(&self.out),
        }
    }

    /// Forgets a failed attempt (no text reached the host, or we would not retry).
    pub(crate) fn reset_for_retry(&mut self) {
        let out = std::mem::take(&mut self.out);
        *self = Assembler {
            out,
            ..Default::default()
        };
    }

    pub(crate) fn finish(self) -> LlmResponse {
        LlmResponse {
            content: self.content,
            reasoning: self.reasoning,
            tool_calls: self
                .slots
                .into_iter()
                .map(|s| ToolCall::new(s.id, s.name.into_shared(), s.arguments))
                .collect(),
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: self.model,
            duration: Duration::ZERO,
            first_token: self.first_token,
            first_reasoning: self.first_reasoning,
            carrier: self.carrier,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(a: Assembler) -> Vec<(String, String, String)> {
        a.finish()
            .tool_calls
            .into_iter()
            .map(|c| (c.id.to_string(), c.name.to_string(), c.raw_arguments))
            .collect()
    }

    #[test]
    fn fragments_by_index_interleaved() {
        let mut a = Assembler::default();
        a.tool_delta(Some(0), Some("a"), Some("read_file"), Some(""));
        a.tool_delta(Some(1), Some("b"), Some("list_directory"), Some("{\"d"));
        a.tool_delta(Some(0), None, None, Some("{\"f\":"));
        a.tool_delta(Some(1), None, None, Some("\":1}"));
        a.tool_delta(Some(0), None, None, Some("1}"));
        assert_eq!(
            calls(a),
            vec![
                ("a".into(), "read_file".into(), "{\"f\":1}".into()),
                ("b".into(), "list_directory".into(), "{\"d\":1}".into())
            ]
        );
    }

    #[test]
    fn reused_index_with_new_id_opens_a_slot() {
        let mut a = Assembler::default();
        a.tool_delta(Some(0), Some("x"), Some("f"), Some("{}"));
        a.tool_delta(Some(0), Some("y"), Some("g"), Some("{}"));
        assert_eq!(calls(a).len(), 2);
    }

    #[test]
    fn missing_index_uses_id_then_latest() {
        let mut a = Assembler::default();
        a.tool_delta(None, Some("x"), Some("f"), Some("{\"a\""));
        a.tool_delta(None, None, None, Some(":1}"));
        a.tool_delta(None, Some("y"), Some("g"), Some("{}"));
        let c = calls(a);
        assert_eq!(c[0].2, "{\"a\":1}");
        assert_eq!(c[1].1, "g");
    }

    #[test]
    fn an_id_seen_before_goes_back_to_its_slot() {
        let mut a = Assembler::default();
        a.tool_delta(Some(0), Some("x"), Some("f"), Some("{\"a\""));
        a.tool_delta(Some(0), Some("y"), Some("g"), Some("{"));
        a.tool_delta(None, Some("z"), Some("h"), Some("{}"));
        a.tool_delta(Some(0), Some("x"), None, Some(":1}"));
        a.tool_delta(None, Some("y"), None, Some("}"));
        // The latest slot of index 0 is y's: an arguments-only delta continues it.
        a.tool_delta(Some(0), None, None, Some(" "));
        assert_eq!(
            calls(a),
            vec![
                ("x".into(), "f".into(), "{\"a\":1}".into()),
                ("y".into(), "g".into(), "{} ".into()),
                ("z".into(), "h".into(), "{}".into())
            ]
        );
    }

    #[test]
    fn scanned_and_mapped_slots_are_found_alike() {
        // The same stream on either side of SCAN_SLOTS: ids and indexes set while slots were
        // scanned are found once the maps answer.
        for n in [SCAN_SLOTS - 2, SCAN_SLOTS + 5] {
            let mut a = Assembler::default();
            a.tool_delta(Some(0), Some("first"), Some("f"), Some("{"));
            a.tool_delta(Some(0), Some("again"), Some("g"), Some("{"));
            for i in 1..n as u64 {
                a.tool_delta(Some(i), Some(&format!("c{i}")), Some("h"), Some("{"));
            }
            a.tool_delta(Some(0), Some("first"), None, Some("}"));
            a.tool_delta(None, Some("again"), None, Some("}"));
            a.tool_delta(Some(1), None, None, Some("}"));
            let got = calls(a);
            assert_eq!(got.len(), n + 1, "{n}");
            assert_eq!(got[0], ("first".into(), "f".into(), "{}".into()), "{n}");
            assert_eq!(got[1], ("again".into(), "g".into(), "{}".into()), "{n}");
            assert_eq!(got[2], ("c1".into(), "h".into(), "{}".into()), "{n}");
        }
    }

    #[test]
    fn slots_past_the_bound_refuse_the_response() {
        let mut a = Assembler::default();
        for i in 0..MAX_TOOL_CALLS as u64 {
            a.tool_delta(Some(i), Some(&format!("c{i}")), Some("f"), Some("{"));
        }
        // Every slot is still found: the first, by index and by id, and the last.
        a.tool_delta(Some(0), None, None, Some("}"));
        a.tool_delta(None, Some("c1"), None, Some("}"));
        a.tool_delta(Some(MAX_TOOL_CALLS as u64 - 1), None, None, Some("}"));
        assert!(a.call_bound_error().is_none());
        a.tool_delta(Some(MAX_TOOL_CALLS as u64), None, None, Some("{}"));
        let e = a.call_bound_error().expect("refused past the bound");
        assert!(!e.retryable);
        assert_eq!(
            e.message,
            "The model server's response has more than 1024 tool calls; the response was abandoned."
        );
        let c = calls(a);
        assert_eq!(c.len(), MAX_TOOL_CALLS);
        assert_eq!(c[0].2, "{}");
        assert_eq!(c[1].2, "{}");
        assert_eq!(c[2].2, "{");
        assert_eq!(c[MAX_TOOL_CALLS - 1].2, "{}");
    }

    #[test]
    fn a_name_in_pieces_is_joined() {
        let mut a = Assembler::default();
        a.tool_delta(Some(0), Some("x"), Some("read"), None);
        for piece in ["_", "f", "i", "l", "e"] {
            a.tool_delta(Some(0), None, Some(piece), None);
        }
        assert_eq!(calls(a)[0].1, "read_file");
    }

    #[test]
    fn repeated_name_is_not_doubled() {
        let mut a = Assembler::default();
        a.tool_delta(Some(0), Some("x"), Some("read_file"), Some("{"));
        a.tool_delta(Some(0), None, Some("read_file"), Some("}"));
        assert_eq!(calls(a)[0].1, "read_file");
    }

    #[test]
    fn reasoning_pops_before_text() {
        let mut a = Assembler::default();
        a.text("t");
        a.reasoning("r");
        let mut now = Duration::ZERO;
        let mut next = |a: &mut Assembler| {
            now += Duration::from_millis(1);
            let t = now;
            a.pop_piece(|| t)
                .map(|k| match a.piece(k) {
                    Piece::Text(t) => format!("Text({:?})", t.text),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default()
        };
        assert_eq!(next(&mut a), "Reasoning(\"r\")");
        assert!(!a.progress);
        assert_eq!(next(&mut a), "Text(\"t\")");
        assert!(a.progress);
        assert_eq!(next(&mut a), "");
        a.text("");
        assert_eq!(next(&mut a), "");
        a.text("uv");
        a.text("w");
        a.reasoning("s");
        assert_eq!(next(&mut a), "Reasoning(\"s\")");
        assert_eq!(next(&mut a), "Text(\"uvw\")");
        assert_eq!(next(&mut a), "");
        a.text("x");
        assert_eq!(next(&mut a), "Text(\"x\")");
        assert_eq!(a.first_reasoning, Some(Duration::from_millis(1)));
        assert_eq!(a.first_token, Some(Duration::from_millis(2)));
        assert_eq!(a.finish().content, "tuvwx");
    }
}
