//! A typed wire's conversation, rendered once and kept as bytes: what the Anthropic Messages
//! and OpenAI Responses wires send of the history on every request, without converting and
//! escaping the whole of it again each time (that grew each request's cost with the session).
//!
//! A wire's array element may be a run of messages, not one: the Messages wire merges
//! consecutive messages of one role into one turn (its tool results first), and the request's
//! volatile tail may join the last one. So messages are grouped into *units* (a wire's run of
//! messages that renders as its elements); a unit is *sealed* once a message of another unit
//! follows it, since nothing that comes later can change it then. Sealed units are rendered
//! into a [`Rope`] of shared buffers that goes into each body as is; only the last, open unit
//! (and the tail) is written per request, from its messages' renderings kept since they came.
//!
//! The check of which messages are still the ones rendered is the chat wire's cache's
//! ([`super::wire_cache`]): position by position, with the messages a sync checked trusted while
//! their list keeps its [`super::MessagesVersion`]. A change at a position reopens the unit
//! holding it: the rope is cut back to the unit's start and its messages rendered again.

use std::ops::Range;

use bytes::Bytes;
use serde_json::Value;

use super::wire_cache::Checked;
use super::{ChatRequest, Message};

/// How a wire renders messages into the elements of its array.
pub(crate) trait Units {
    /// One message's rendering, its share of a unit.
    type Part;
    /// What makes consecutive messages one unit (for a wire that merges them).
    type Key: Copy + Eq;
    /// Whether consecutive messages of one key merge into one unit; without it each message
    /// is a unit of its own.
    const MERGES: bool;

    fn part(m: &Message) -> Self::Part;

    /// The unit key of a part; `None` for a part that renders nothing (it joins any unit).
    fn key(p: &Self::Part) -> Option<Self::Key>;

    /// A unit's elements, each preceded by `,`.
    fn write_unit(parts: &[&Self::Part], out: &mut Vec<u8>);

    /// What goes before every unit, given the first unit's key (`None`: no unit), as elements
    /// each preceded by `,`.
    fn write_lead(first: Option<Self::Key>, out: &mut Vec<u8>) {
        let _ = (first, out);
    }
}

/// One sealed unit: where it starts among the messages, where it ends in the rope.
struct SealedUnit<K> {
    first: usize,
    end: usize,
    key: Option<K>,
}

/// One agent's rendered conversation, as of its last request.
pub(crate) struct SealedConversation<U: Units> {
    /// Every message rendered so far, to tell whether the request's message at a position is
    /// still it. (A tool's output is shared with the history, `Arc<str>`, not copied.)
    sources: Vec<Message>,
    /// How many of `sources` are in sealed units.
    sealed: usize,
    /// The renderings of `sources[sealed..]`: the open unit.
    open: Vec<U::Part>,
    units: Vec<SealedUnit<U::Key>>,
    rope: Rope,
    /// What the last sync checked (see [`Checked::trusted`]).
    checked: Option<Checked>,
}

impl<U: Units> Default for SealedConversation<U> {
    fn default() -> Self {
        SealedConversation {
            sources: Vec::new(),
            sealed: 0,
            open: Vec::new(),
            units: Vec::new(),
            rope: Rope::default(),
            checked: None,
        }
    }
}

impl<U: Units> SealedConversation<U> {
    /// Brings the renderings in line with the request's history then transcript: the longest
    /// unchanged prefix is kept (the unit holding the first change is reopened), the rest is
    /// rendered, and every unit but the last sealed. Returns how many messages were rendered.
    pub(crate) fn sync(&mut self, req: &ChatRequest<'_>) -> usize {
        let now = Checked::of(
            (req.history, req.history_version),
            (req.transcript, req.transcript_version),
        );
        let trusted = self
            .checked
            .map_or(0, |c| c.trusted(&now))
            .min(self.sources.len());
        self.checked = Some(now);
        let message = |i: usize| match i.checked_sub(req.history.len()) {
            None => &req.history[i],
            Some(t) => &req.transcript[t],
        };
        let n = req.history.len() + req.transcript.len();
        let mut same = trusted;
        while same < n.min(self.sources.len()) && same_message(&self.sources[same], message(same)) {
            same += 1;
        }
        let mut rendered = 0;
        if same < self.sources.len() {
            rendered += self.cut(same);
        }
        for i in same..n {
            let m = message(i);
            self.open.push(U::part(m));
            self.sources.push(m.clone());
            rendered += 1;
        }
        self.seal();
        rendered
    }

    /// Forgets the messages from position `at` on. The unit holding the message before `at`
    /// is reopened (its messages rendered again) when it is sealed: the message at `at` may be
    /// what sealed it (a unit after the first starts with the message that closed the one
    /// before). Returns how many messages were rendered again.
    fn cut(&mut self, at: usize) -> usize {
        self.sources.truncate(at);
        if at > self.sealed || self.units.is_empty() {
            self.open.truncate(at - self.sealed);
            return 0;
        }
        let u = self
            .units
            .partition_point(|u| u.first < at)
            .saturating_sub(1);
        let start = self.units[u].first;
        self.rope
            .truncate(u.checked_sub(1).map_or(0, |p| self.units[p].end));
        self.units.truncate(u);
        self.sealed = start;
        self.open = self.sources[start..].iter().map(U::part).collect();
        self.open.len()
    }

    /// Seals every open unit but the last.
    fn seal(&mut self) {
        let parts: Vec<&U::Part> = self.open.iter().collect();
        let groups = units::<U>(&parts);
        let Some((last, closed)) = groups.split_last() else {
            return;
        };
        for g in closed {
            U::write_unit(&parts[g.clone()], self.rope.fresh());
            self.units.push(SealedUnit {
                first: self.sealed + g.start,
                end: self.rope.len(),
                key: key_of::<U>(&parts[g.clone()]),
            });
        }
        drop(parts);
        self.open.drain(..last.start);
        self.sealed += last.start;
    }

    /// The array of the last [`SealedConversation::sync`]'s messages then `tail` (the
    /// request's volatile message): `[`, the elements, `]`, as pieces of `out`'s body.
    pub(crate) fn write(&mut self, tail: Option<&U::Part>, out: &mut ArrayOut<'_>) {
        let mut parts: Vec<&U::Part> = self.open.iter().collect();
        parts.extend(tail);
        let groups = units::<U>(&parts);
        let first = match self.units.first() {
            Some(u) => u.key,
            None => groups.first().and_then(|g| key_of::<U>(&parts[g.clone()])),
        };
        out.begin();
        U::write_lead(first, out.bytes());
        out.element_written();
        for piece in self.rope.pieces() {
            out.share(piece.clone());
        }
        for g in groups {
            U::write_unit(&parts[g], out.bytes());
        }
        out.end();
    }
}

/// The key of a unit: its first keyed part's.
fn key_of<U: Units>(parts: &[&U::Part]) -> Option<U::Key> {
    parts.iter().find_map(|p| U::key(p))
}

/// The units of `parts`, as ranges of it.
fn units<U: Units>(parts: &[&U::Part]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut key: Option<U::Key> = None;
    for (i, p) in parts.iter().enumerate() {
        let k = U::key(p);
        match out.last_mut() {
            Some(r) if U::MERGES && (k.is_none() || key.is_none() || k == key) => {
                r.end = i + 1;
                key = key.or(k);
            }
            _ => {
                out.push(i..i + 1);
                key = k;
            }
        }
    }
    out
}

/// Whether `now` is the message `rendered` was made from, to the byte: a host's message must
/// also have its keys in the same order, since its nested values go out as written.
fn same_message(rendered: &Message, now: &Message) -> bool {
    match (rendered, now) {
        (Message::Host(a), Message::Host(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
        }
        _ => rendered == now,
    }
}

/// JSON equality that also compares the order of object keys.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_json(a, b))
        }
        _ => a == b,
    }
}

/// Rendered bytes kept as a few shared buffers: appended to between requests, cut back when a
/// unit reopens. Each request's new bytes become a buffer of their own, merged with the ones
/// before while those are not at least twice as long: a body carries a handful of pieces
/// (logarithmic in the conversation's size), and each byte is copied a logarithmic number of
/// times over the session rather than once per request.
#[derive(Default)]
struct Rope {
    chunks: Vec<Bytes>,
    /// Bytes appended since the last request, not yet a chunk.
    fresh: Vec<u8>,
    /// The bytes in `chunks`.
    chunked: usize,
}

/// A `fresh` buffer kept for reuse up to this capacity; a larger one (a long history's first
/// request) is given back.
const FRESH_KEPT: usize = 16 << 10;

impl Rope {
    fn len(&self) -> usize {
        self.chunked + self.fresh.len()
    }

    fn fresh(&mut self) -> &mut Vec<u8> {
        &mut self.fresh
    }

    fn flush(&mut self) {
        if self.fresh.is_empty() {
            return;
        }
        self.chunks.push(Bytes::copy_from_slice(&self.fresh));
        self.chunked += self.fresh.len();
        if self.fresh.capacity() > FRESH_KEPT {
            self.fresh = Vec::new();
        } else {
            self.fresh.clear();
        }
        while let [.., a, b] = &self.chunks[..] {
            if a.len() >= 2 * b.len() {
                break;
            }
            let mut joined = Vec::with_capacity(a.len() + b.len());
            joined.extend_from_slice(a);
            joined.extend_from_slice(b);
            self.chunks.truncate(self.chunks.len() - 2);
            self.chunks.push(Bytes::from(joined));
        }
    }

    fn truncate(&mut self, len: usize) {
        self.flush();
        let mut at = 0;
        let mut keep = 0;
        while let Some(c) = self.chunks.get(keep) {
            if at + c.len() > len {
                break;
            }
            at += c.len();
            keep += 1;
        }
        if at < len {
            self.chunks[keep] = self.chunks[keep].slice(..len - at);
            keep += 1;
        }
        self.chunks.truncate(keep);
        self.chunked = len;
    }

    fn pieces(&mut self) -> &[Bytes] {
        self.flush();
        &self.chunks
    }
}

/// A JSON array written into a body from elements each preceded by `,` (in own bytes or in
/// shared pieces): the first element's `,` is left out.
pub(crate) struct ArrayOut<'b> {
    out: &'b mut Vec<u8>,
    shared: &'b mut Vec<(usize, Bytes)>,
    /// Where the array's first element starts, while none was written.
    start: Option<usize>,
}

impl<'b> ArrayOut<'b> {
    pub(crate) fn new(out: &'b mut Vec<u8>, shared: &'b mut Vec<(usize, Bytes)>) -> Self {
        ArrayOut {
            out,
            shared,
            start: None,
        }
    }

    fn begin(&mut self) {
        self.out.push(b'[');
        self.start = Some(self.out.len());
    }

    fn bytes(&mut self) -> &mut Vec<u8> {
        self.out
    }

    /// Drops the `,` of an element written into own bytes, if it is the array's first.
    fn element_written(&mut self) {
        if let Some(start) = self.start {
            if self.out.len() > start {
                debug_assert_eq!(self.out[start], b',');
                self.out.remove(start);
                self.start = None;
            }
        }
    }

    fn share(&mut self, piece: Bytes) {
        let piece = match self.start.take() {
            Some(_) => piece.slice(1..),
            None => piece,
        };
        if !piece.is_empty() {
            self.shared.push((self.out.len(), piece));
        }
    }

    fn end(&mut self) {
        self.element_written();
        self.out.push(b']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::request_body::RequestBody;
    use crate::llm::MessagesVersion;

    /// Units of user texts by their first letter: `a1 a2 b1` is `[a1+a2,b1]`.
    struct Letters;
    impl Units for Letters {
        type Part = (Option<u8>, String);
        type Key = u8;
        const MERGES: bool = true;
        fn part(m: &Message) -> Self::Part {
            let t = m.text().unwrap_or_default().to_owned();
            (t.bytes().next(), t)
        }
        fn key(p: &Self::Part) -> Option<u8> {
            p.0
        }
        fn write_unit(parts: &[&Self::Part], out: &mut Vec<u8>) {
            let texts: Vec<&str> = parts.iter().map(|p| p.1.as_str()).collect();
            out.extend_from_slice(format!(",{}", texts.join("+")).as_bytes());
        }
    }

    fn body(
        c: &mut SealedConversation<Letters>,
        h: &[Message],
        v: MessagesVersion,
    ) -> (usize, String, usize) {
        let tools = std::sync::Arc::new(Vec::new());
        let req = ChatRequest {
            system: "",
            history: h,
            history_version: v,
            transcript: &[],
            transcript_version: MessagesVersion::unknown(),
            tail: None,
            tools: &tools,
        };
        let rendered = c.sync(&req);
        let (mut out, mut shared) = (Vec::new(), Vec::new());
        c.write(None, &mut ArrayOut::new(&mut out, &mut shared));
        let pieces = shared.len();
        let body = RequestBody::spliced(out, shared).to_bytes();
        (rendered, String::from_utf8(body.to_vec()).unwrap(), pieces)
    }

    /// While the history only grows, a request renders only its new message and its body
    /// carries a few shared pieces however long the history; a change renders again from the
    /// unit before it, since the changed message may be what closed that unit.
    #[test]
    fn a_growing_history_renders_only_what_it_appends() {
        let mut c = SealedConversation::<Letters>::default();
        let v = MessagesVersion::fresh();
        let mut h = Vec::new();
        let mut want = Vec::new();
        for i in 0..2000 {
            let letter = ["a", "b", "c"][i / 2 % 3];
            h.push(Message::User(format!("{letter}{i}")));
            let (rendered, got, pieces) = body(&mut c, &h, v);
            assert_eq!(rendered, 1);
            assert!(pieces <= 12, "{pieces} pieces at {i}");
            if i % 2 == 0 {
                want.push(format!("{letter}{i}"));
            } else {
                let last = want.last_mut().unwrap();
                *last = format!("{last}+{letter}{i}");
            }
            assert_eq!(got, format!("[{}]", want.join(",")));
        }
        // `b1` closed `a0+a1`: replacing it by an `a` text merges it into that unit.
        let mut edited = h[..4].to_vec();
        edited[2] = Message::User("a2".into());
        let (rendered, got, _) = body(&mut c, &edited, MessagesVersion::fresh());
        assert_eq!((rendered, got.as_str()), (4, "[a0+a1+a2,b3]"));
        let (rendered, got, _) = body(&mut c, &[], MessagesVersion::fresh());
        assert_eq!((rendered, got.as_str()), (0, "[]"));
    }

    #[test]
    fn the_rope_keeps_few_pieces_and_cuts_back_exactly() {
        let mut rope = Rope::default();
        let mut whole = Vec::new();
        for i in 0..1000u32 {
            let add = format!(",{i}");
            rope.fresh().extend_from_slice(add.as_bytes());
            whole.extend_from_slice(add.as_bytes());
            let pieces = rope.pieces();
            assert!(pieces.len() <= 12, "{} pieces", pieces.len());
            assert_eq!(pieces.concat(), whole);
            if i % 97 == 0 {
                let cut = whole.len() * 2 / 3;
                rope.truncate(cut);
                whole.truncate(cut);
                assert_eq!(rope.len(), cut);
                assert_eq!(rope.pieces().concat(), whole);
            }
        }
        rope.truncate(0);
        assert!(rope.pieces().is_empty());
    }

    #[test]
    fn json_sameness_sees_the_order_of_keys() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":[{"x":1,"y":2}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":1,"b":[{"y":2,"x":1}]}"#).unwrap();
        assert_eq!(a, b, "map equality ignores the order");
        assert!(!same_json(&a, &b) && same_json(&a, &a.clone()));
        let one: Value = serde_json::from_str("1").unwrap();
        let float: Value = serde_json::from_str("1.0").unwrap();
        assert!(!same_json(&one, &float));
    }
}
