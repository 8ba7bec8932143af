//! The conversation's messages as JSON, each rendered once and spliced into every later
//! request body. A request re-sends the whole conversation, and escaping its strings again
//! on every request was the largest part of a tool-loop iteration; with this cache a
//! request renders only the messages added since the last one. The renderings are kept as one
//! byte string in shared chunks ([`AppendedChunks`]), so a request copies no more of the
//! history than its last chunk either.
//!
//! The cache is keyed by the messages themselves, position by position: an entry is spliced
//! only while the message at its position still serializes to the entry's JSON. So an
//! edited, inserted, removed or replaced message (a host's new history, the orphan backfill,
//! anything a later repair may change) is rendered again from its position on, and the body is
//! always what serializing the messages would give. Comparing costs a `memcmp` of the short
//! texts and a pointer compare of a tool's output, which the entry shares with the history
//! (`Arc<str>`): a copy of the outputs cost the 1,000-agent scale run 9 % of its peak memory.

use bytes::Bytes;
use serde::ser::{Serialize, Serializer};

use super::appended_chunks::AppendedChunks;

use super::message::WireJson;
use super::Message;

/// Which state of a list of messages (an agent's history, a turn's transcript) a request was
/// built from. Every change other than an append makes a new one, unique in the process, so two
/// lists never share one; [`MessagesVersion::unknown`] makes the request cache check every
/// message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessagesVersion(u64);

impl MessagesVersion {
    /// No version: every message is checked. (A function, not an associated constant, which
    /// cbindgen would put in the C header.)
    pub const fn unknown() -> MessagesVersion {
        MessagesVersion(0)
    }

    /// A version no history had before.
    pub(crate) fn fresh() -> MessagesVersion {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        MessagesVersion(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    fn is_unknown(self) -> bool {
        self == MessagesVersion::unknown()
    }
}

/// An agent's current [`MessagesVersion`], next to its history. Renewed under the history's
/// write lock, so a reader holding the read lock sees the version of what it reads.
pub(crate) struct MessagesVersionCell(std::sync::atomic::AtomicU64);

impl MessagesVersionCell {
    /// A cell holding a fresh version.
    pub(crate) fn fresh() -> MessagesVersionCell {
        MessagesVersionCell(std::sync::atomic::AtomicU64::new(
            MessagesVersion::fresh().0,
        ))
    }

    /// A cell that says nothing: every request checks every message.
    pub(crate) fn unknown() -> MessagesVersionCell {
        MessagesVersionCell(std::sync::atomic::AtomicU64::new(
            MessagesVersion::unknown().0,
        ))
    }

    pub(crate) fn get(&self) -> MessagesVersion {
        MessagesVersion(self.0.load(std::sync::atomic::Ordering::Acquire))
    }

    /// The history changed other than by an append.
    pub(crate) fn renew(&self) {
        self.0.store(
            MessagesVersion::fresh().0,
            std::sync::atomic::Ordering::Release,
        );
    }
}

/// One agent's rendered conversation, as of its last request.
#[derive(Default)]
pub(crate) struct RenderedMessages {
    entries: Vec<Entry>,
    /// Each entry's JSON preceded by the `,` that separates it from the one before (they follow
    /// the system message), in order: a request shares its sealed chunks and copies only the
    /// open one, so one deep into a session copies no history but the last chunk.
    bytes: AppendedChunks,
    /// What the last sync checked. While a list keeps its version it only grows, so the
    /// entries of what was checked still fit without a look (the check per message grew
    /// with the conversation, on every request).
    checked: Option<Checked>,
    /// Renderings the turn made for `llm_call_delta`, used by the next
    /// [`RenderedMessages::sync`] for a position it must render, if the message there is
    /// still the one rendered; dropped by it either way.
    offered: Vec<Offered>,
}

/// A list of messages as a sync saw it.
#[derive(Clone, Copy)]
struct Seen {
    version: MessagesVersion,
    len: usize,
}

impl Seen {
    /// Whether `now` is this list at the same known version, so it only grew since.
    fn grew_into(self, now: Seen) -> bool {
        !now.version.is_unknown() && now.version == self.version
    }
}

/// The history and transcript a sync checked.
#[derive(Clone, Copy)]
pub(crate) struct Checked {
    history: Seen,
    transcript: Seen,
}

impl Checked {
    /// A request's history and transcript as a sync sees them.
    pub(crate) fn of(
        (history, history_version): (&[Message], MessagesVersion),
        (transcript, transcript_version): (&[Message], MessagesVersion),
    ) -> Checked {
        Checked {
            history: Seen {
                version: history_version,
                len: history.len(),
            },
            transcript: Seen {
                version: transcript_version,
                len: transcript.len(),
            },
        }
    }

    /// How many messages of `now`'s history then transcript still fit the entries unlooked:
    /// the history's checked ones, and when the history is as it was (a turn goes on), the
    /// transcript's too.
    pub(crate) fn trusted(&self, now: &Checked) -> usize {
        if !self.history.grew_into(now.history) {
            return 0;
        }
        if now.history.len != self.history.len || !self.transcript.grew_into(now.transcript) {
            return self.history.len.min(now.history.len);
        }
        now.history.len + self.transcript.len.min(now.transcript.len)
    }
}

/// One message's place in [`RenderedMessages::bytes`]: it ends at `end`.
struct Entry {
    source: Source,
    end: usize,
}

enum Source {
    /// A message of our own shapes. The copy shares a tool message's output with the history
    /// (`Arc<str>`: a pointer, compared first, and holding it keeps its address from being
    /// reused for another text); the rest of a message is short.
    Ours(Message),
    /// A host's message kept as written: its bytes are compared with a fresh serialization
    /// (the equality of its map ignores key order, which the bytes do not). Rare.
    Host,
}

/// A rendering made for `llm_call_delta`, for position `at`: `json` is `source`'s.
struct Offered {
    at: usize,
    source: Message,
    json: WireJson,
}

impl RenderedMessages {
    /// Brings the cache in line with `history` then `transcript`: the entries of the longest
    /// unchanged prefix are kept and the rest rendered. The messages checked at the last sync
    /// are not looked at again while their list keeps its version ([`Checked::trusted`]).
    /// Returns how many messages were rendered.
    pub(crate) fn sync(
        &mut self,
        history: (&[Message], MessagesVersion),
        transcript: (&[Message], MessagesVersion),
    ) -> usize {
        let now = Checked::of(history, transcript);
        let ((history, _), (transcript, _)) = (history, transcript);
        let trusted = self
            .checked
            .map_or(0, |c| c.trusted(&now))
            .min(self.entries.len());
        self.checked = Some(now);
        let (history_left, transcript_left) = match trusted.checked_sub(history.len()) {
            None => (&history[trusted..], transcript),
            Some(into_transcript) => (&history[history.len()..], &transcript[into_transcript..]),
        };
        let mut rendered = 0;
        let mut n = trusted;
        let mut scratch = Vec::new();
        for m in history_left.iter().chain(transcript_left) {
            if !self.still_fits(n, m, &mut scratch) {
                self.cut(n);
                rendered += usize::from(self.append(n, m));
            }
            n += 1;
        }
        self.cut(n);
        self.offered.clear();
        rendered
    }

    /// Whether entry `n` is `m`'s.
    fn still_fits(&self, n: usize, m: &Message, scratch: &mut Vec<u8>) -> bool {
        let Some(e) = self.entries.get(n) else {
            return false;
        };
        match &e.source {
            Source::Ours(source) => source == m,
            Source::Host if matches!(m, Message::Host(_)) => {
                let start = n.checked_sub(1).map_or(0, |p| self.entries[p].end);
                scratch.clear();
                scratch.push(b',');
                m.write_wire(scratch);
                start + scratch.len() == e.end && self.bytes.matches_at(start, scratch)
            }
            Source::Host => false,
        }
    }

    /// Keeps the first `n` entries and their bytes.
    fn cut(&mut self, n: usize) {
        if n < self.entries.len() {
            self.entries.truncate(n);
            self.bytes
                .truncate(self.entries.last().map_or(0, |e| e.end));
        }
    }

    /// Appends `m`'s entry at position `n` (the last); whether it was rendered here.
    fn append(&mut self, n: usize, m: &Message) -> bool {
        let offered = match m {
            Message::Host(_) => None,
            _ => self.take_offered(n, m),
        };
        let out = self.bytes.open_mut();
        out.push(b',');
        let (source, rendered) = match (m, offered) {
            (Message::Host(_), _) => {
                m.write_wire(out);
                (Source::Host, false)
            }
            (_, Some(o)) => {
                out.extend_from_slice(o.json.as_bytes());
                (Source::Ours(o.source), false)
            }
            (_, None) => {
                m.write_wire(out);
                (Source::Ours(m.clone()), true)
            }
        };
        self.bytes.seal_if_full();
        self.entries.push(Entry {
            source,
            end: self.bytes.len(),
        });
        rendered
    }

    /// Renderings of `messages`, which stand at positions `at..` of the next request's
    /// conversation; `json[i]` must be `WireJson::of(&messages[i])`.
    pub(crate) fn offer(&mut self, at: usize, messages: &[Message], json: Vec<WireJson>) {
        debug_assert!(messages
            .iter()
            .zip(&json)
            .all(|(m, j)| WireJson::of(m) == *j));
        self.offered.clear();
        for (i, (m, json)) in messages.iter().zip(json).enumerate() {
            if !matches!(m, Message::Host(_)) {
                self.offered.push(Offered {
                    at: at + i,
                    source: m.clone(),
                    json,
                });
            }
        }
    }

    /// The offered rendering for position `n`, if it was made from `m`.
    fn take_offered(&mut self, n: usize, m: &Message) -> Option<Offered> {
        let i = self
            .offered
            .iter()
            .position(|o| o.at == n && o.source == *m)?;
        Some(self.offered.swap_remove(i))
    }

    /// The messages of the last [`RenderedMessages::sync`] as JSON array elements, each
    /// preceded by a `,` (they follow the system message): the sealed chunks, to be shared,
    /// then the open one, to be copied.
    pub(crate) fn conversation(&self) -> (&[Bytes], &[u8]) {
        (self.bytes.sealed(), self.bytes.open())
    }
}

/// The request-only volatile `user` message, as `{"role":"user","content":…}`.
pub(crate) struct UserWire<'a>(pub(crate) &'a str);

impl Serialize for UserWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        role_and_content(s, "user", self.0)
    }
}

/// The system message, as `{"role":"system","content":…}`.
pub(crate) struct SystemWire<'a>(pub(crate) &'a str);

impl Serialize for SystemWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        role_and_content(s, "system", self.0)
    }
}

fn role_and_content<S: Serializer>(s: S, role: &str, content: &str) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("role", role)?;
    m.serialize_entry("content", content)?;
    m.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::message::{AssistantMessage, HistoryCall, ToolAnswer};
    use serde_json::json;

    fn body(cache: &mut RenderedMessages, messages: &[Message]) -> (usize, String) {
        body_of(cache, messages, MessagesVersion::unknown(), &[])
    }

    /// A request of `history` at `version` and a turn's `transcript` (of no known version).
    fn body_of(
        cache: &mut RenderedMessages,
        history: &[Message],
        version: MessagesVersion,
        transcript: &[Message],
    ) -> (usize, String) {
        body_in_turn(
            cache,
            (history, version),
            (transcript, MessagesVersion::unknown()),
        )
    }

    fn body_in_turn(
        cache: &mut RenderedMessages,
        (history, history_version): (&[Message], MessagesVersion),
        (transcript, transcript_version): (&[Message], MessagesVersion),
    ) -> (usize, String) {
        let rendered = cache.sync((history, history_version), (transcript, transcript_version));
        let (sealed, open) = cache.conversation();
        let mut out: Vec<u8> = sealed.iter().flat_map(|b| b.to_vec()).collect();
        out.extend_from_slice(open);
        // Each element comes with the `,` that separates it from the one before.
        let elements = String::from_utf8(out).unwrap();
        let elements = elements.strip_prefix(',').unwrap_or_default();
        (rendered, format!("[{elements}]"))
    }

    fn plain(messages: &[Message]) -> String {
        serde_json::to_string(messages).unwrap()
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::User("read \"a\"".into()),
            Message::Assistant(AssistantMessage {
                content: String::new(),
                tool_calls: Some(vec![HistoryCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                }]),
                reasoning: Some("think".into()),
            }),
            Message::Tool(ToolAnswer::new("c1", "read_file", "line\n")),
            Message::from_host(
                json!({"content": "key order kept", "role": "user"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
            Message::assistant_text("done"),
        ]
    }

    #[test]
    fn a_turn_renders_only_what_it_appends() {
        let mut cache = RenderedMessages::default();
        let mut m = conversation();
        m.truncate(3);
        assert_eq!(body(&mut cache, &m), (3, plain(&m)));
        assert_eq!(body(&mut cache, &m), (0, plain(&m)));
        m.push(Message::User("next".into()));
        m.push(Message::assistant_text("ok"));
        assert_eq!(body(&mut cache, &m), (2, plain(&m)));
    }

    #[test]
    fn a_changed_message_is_rendered_again() {
        let mut cache = RenderedMessages::default();
        let mut m = conversation();
        assert_eq!(body(&mut cache, &m), (4, plain(&m)));

        // Same length, same place: only equality can tell.
        let Message::Tool(t) = &mut m[2] else {
            unreachable!()
        };
        t.content = "LINE\n".into();
        assert_eq!(body(&mut cache, &m), (2, plain(&m)));

        // A call's arguments inside an assistant message.
        let Message::Assistant(a) = &mut m[1] else {
            unreachable!()
        };
        a.tool_calls.as_mut().unwrap()[0].arguments = r#"{"path":"b"}"#.into();
        assert_eq!(body(&mut cache, &m), (3, plain(&m)));

        // Inserted (as the orphan backfill does), removed, replaced by a host's history.
        m.insert(3, Message::Tool(ToolAnswer::new("c2", "glob", "x")));
        assert_eq!(body(&mut cache, &m), (2, plain(&m)));
        m.remove(0);
        assert_eq!(body(&mut cache, &m), (4, plain(&m)));
        let host = vec![Message::User("fresh".into())];
        assert_eq!(body(&mut cache, &host), (1, plain(&host)));
        assert_eq!(body(&mut cache, &[]), (0, "[]".to_owned()));
    }

    /// While the history keeps its version it only grows (a turn's commit): the messages
    /// checked before are trusted, the appended ones checked; a new version (a host's history,
    /// a repair) checks everything again, as does an unknown one.
    #[test]
    fn a_history_version_spares_the_check_of_what_it_checked() {
        let v1 = MessagesVersion::fresh();
        let mut cache = RenderedMessages::default();
        let m = conversation();
        let (history, transcript) = m.split_at(3);
        assert_eq!(body_of(&mut cache, history, v1, transcript), (4, plain(&m)));
        // The turn committed: its transcript is now history, at the same version.
        assert_eq!(body_of(&mut cache, &m, v1, &[]), (0, plain(&m)));
        let mut more = m.clone();
        more.push(Message::User("next".into()));
        assert_eq!(body_of(&mut cache, &m, v1, &more[5..]), (1, plain(&more)));

        // The checked messages are not looked at while the version holds: a change made
        // without a new version (which the agent never does) would go unseen.
        let mut edited = m.clone();
        edited[0] = Message::User("edited".into());
        assert_eq!(body_of(&mut cache, &edited, v1, &[]), (0, plain(&m)));
        // With a new version, or none, it is seen.
        let v2 = MessagesVersion::fresh();
        assert_ne!(v1, v2);
        assert_eq!(body_of(&mut cache, &edited, v2, &[]), (4, plain(&edited)));
        let mut again = edited.clone();
        again[1] = Message::User("edited too".into());
        assert_eq!(
            body_of(&mut cache, &again, MessagesVersion::unknown(), &[]),
            (3, plain(&again))
        );
        // A shorter history at a known version is checked up to its length.
        let v3 = MessagesVersion::fresh();
        assert_eq!(body_of(&mut cache, &again, v3, &[]), (0, plain(&again)));
        assert_eq!(
            body_of(&mut cache, &again[..2], v3, &[]),
            (0, plain(&again[..2]))
        );
        assert_eq!(body_of(&mut cache, &again, v3, &[]), (2, plain(&again)));
    }

    /// Within a turn (the history as it was), the transcript's checked messages are trusted
    /// while it keeps its version; a new one (the turn's repair), or another turn's, checks
    /// them again.
    #[test]
    fn a_turn_spares_the_check_of_its_own_messages() {
        let (hv, tv) = (MessagesVersion::fresh(), MessagesVersion::fresh());
        let mut cache = RenderedMessages::default();
        let m = conversation();
        let (history, turn) = m.split_at(1);
        let request = |cache: &mut RenderedMessages, t: &[Message], v| {
            body_in_turn(cache, (history, hv), (t, v))
        };
        assert_eq!(request(&mut cache, &turn[..2], tv), (3, plain(&m[..3])));
        assert_eq!(request(&mut cache, turn, tv), (1, plain(&m)));
        // Unlooked: an edit without a new version (which the turn never makes) goes unseen.
        let mut edited = turn.to_vec();
        edited[0] = Message::User("edited".into());
        assert_eq!(request(&mut cache, &edited, tv), (0, plain(&m)));
        // A new version of the transcript, or the history grown, checks it again.
        let mut all_edited = history.to_vec();
        all_edited.extend(edited.iter().cloned());
        let tv2 = MessagesVersion::fresh();
        assert_eq!(request(&mut cache, &edited, tv2), (3, plain(&all_edited)));
        // The next turn's transcript has a version of its own.
        let tv3 = MessagesVersion::fresh();
        assert_eq!(request(&mut cache, turn, tv3), (3, plain(&m)));
        // Its commit grew the history: the transcript is not trusted, the history's part is.
        assert_eq!(
            body_in_turn(&mut cache, (&m[..2], hv), (&m[2..], tv3)),
            (0, plain(&m))
        );
    }

    /// An offered rendering is spliced only at its position and only for the message it was
    /// made from; a wrong one (made from another message) is never sent.
    #[test]
    fn an_offered_rendering_is_used_only_for_its_message() {
        let m = conversation();
        let mut cache = RenderedMessages::default();
        let json = |ms: &[Message]| ms.iter().map(WireJson::of).collect::<Vec<_>>();
        cache.offer(0, &m, json(&m));
        assert_eq!(body(&mut cache, &m), (0, plain(&m)), "all offered");

        let mut cache = RenderedMessages::default();
        cache.offer(1, &m[1..3], json(&m[1..3]));
        assert_eq!(body(&mut cache, &m), (2, plain(&m)), "the others rendered");

        // Offered at the wrong place, or for a message since replaced.
        let mut cache = RenderedMessages::default();
        cache.offer(0, &m[1..3], json(&m[1..3]));
        assert_eq!(body(&mut cache, &m), (4, plain(&m)));
        let mut edited = m.clone();
        edited[2] = Message::Tool(ToolAnswer::new("c1", "read_file", "other"));
        cache.offer(2, &m[2..3], json(&m[2..3]));
        assert_eq!(body(&mut cache, &edited), (2, plain(&edited)));
        // Not for another message at its position.
        cache.offer(4, &m[2..3], json(&m[2..3]));
        assert_eq!(body(&mut cache, &m), (2, plain(&m)));
    }

    #[test]
    fn host_messages_keep_their_bytes_whatever_their_key_order() {
        let mut cache = RenderedMessages::default();
        let host = |v: serde_json::Value| Message::from_host(v.as_object().unwrap().clone());
        let a = vec![host(json!({"role": "user", "content": [1], "x": 1}))];
        let b = vec![host(json!({"x": 1, "content": [1], "role": "user"}))];
        assert_eq!(a[0], b[0], "map equality ignores key order");
        assert_eq!(body(&mut cache, &a).1, plain(&a));
        assert_eq!(body(&mut cache, &b).1, plain(&b));
        assert_ne!(plain(&a), plain(&b));
    }

    #[test]
    fn the_volatile_tail_is_a_user_message() {
        let t = "tail \"q\"\n";
        assert_eq!(
            serde_json::to_string(&UserWire(t)).unwrap(),
            json!({"role": "user", "content": t}).to_string()
        );
        assert_eq!(
            serde_json::to_string(&SystemWire(t)).unwrap(),
            json!({"role": "system", "content": t}).to_string()
        );
    }
}
