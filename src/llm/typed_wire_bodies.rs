//! The typed wires' bodies rendered with their caches are byte for byte the bodies rendered
//! from scratch (the conversion of the whole conversation as JSON values), request after
//! request: across a growing history and a turn's transcript, after a history set by the host
//! (a new version), after a compaction (the history replaced by a summary and its tail), with
//! host messages whose keys change order, and under random edits.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::message::{AssistantMessage, HistoryCall, ToolAnswer};
use super::wire::WireSettings;
use super::{anthropic, responses, ChatRequest, Message, MessagesVersion};

fn host(v: Value) -> Message {
    Message::from_host(v.as_object().unwrap().clone())
}

/// Messages of every shape the wires convert: leading assistant text, mid-history system
/// text, consecutive users, calls and results (ids the Messages wire must force, `call|item`
/// ids), signed thinking blocks and reasoning items, images, empty texts, escapes.
fn shapes() -> Vec<Message> {
    vec![
        Message::assistant_text("I start"),
        Message::System("mid-history note \"quoted\"\n".into()),
        Message::User("question \u{2028} caf\u{e9}".into()),
        Message::User(String::new()),
        host(json!({"role": "assistant", "content": "calling",
            "tool_calls": [
                {"id": "call_1|fc_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1,\"b\":[2.5,{\"z\":0,\"y\":1}]}"}},
                {"id": "c.2", "type": "function", "function": {"name": "g", "arguments": "not json"}}],
            "anthropic_thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "S"},
                {"type": "redacted_thinking", "data": "R"}],
            "openai_reasoning_items": [{"type": "reasoning", "id": "rs_1", "summary": [],
                "encrypted_content": "ENC"}]})),
        host(json!({"role": "tool", "tool_call_id": "call_1|fc_1", "name": "f", "content": "one"})),
        Message::Tool(ToolAnswer::new("c.2", "g", "")),
        Message::User("and then".into()),
        host(
            json!({"role": "user", "content": [{"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}),
        ),
        Message::Assistant(AssistantMessage {
            content: String::new(),
            tool_calls: Some(vec![HistoryCall {
                id: "x".repeat(80).into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into(),
            }]),
            reasoning: Some("because".into()),
        }),
        Message::Tool(ToolAnswer::new("x".repeat(80), "read_file", "line\n")),
        Message::Assistant(AssistantMessage::default()),
        Message::assistant_text("done"),
        host(json!({"content": "keys the other way", "role": "user"})),
        host(json!({"role": "developer", "content": "another role"})),
        Message::assistant_text("ok"),
    ]
}

/// Settings with `extra_body` over some of the wire's keys and beside them.
fn settings(extra: Value) -> WireSettings {
    WireSettings {
        model: "m".into(),
        max_tokens: 100,
        temperature: Some(0.3),
        extra_body: extra.as_object().unwrap().clone(),
    }
}

/// One wire: its cached rendering and its reference.
trait Case {
    type Cache: Default;
    fn cached(req: &ChatRequest<'_>, s: &WireSettings, cache: &mut Self::Cache) -> Vec<u8>;
    fn scratch(req: &ChatRequest<'_>, s: &WireSettings) -> Map<String, Value>;
}

struct Anthropic;
impl Case for Anthropic {
    type Cache = anthropic::RenderCache;
    fn cached(req: &ChatRequest<'_>, s: &WireSettings, cache: &mut Self::Cache) -> Vec<u8> {
        anthropic::render_body(req, s, 100, cache)
            .to_bytes()
            .to_vec()
    }
    fn scratch(req: &ChatRequest<'_>, s: &WireSettings) -> Map<String, Value> {
        anthropic::render_from_scratch(req, s, 100)
    }
}

struct Responses;
impl Case for Responses {
    type Cache = responses::RenderCache;
    fn cached(req: &ChatRequest<'_>, s: &WireSettings, cache: &mut Self::Cache) -> Vec<u8> {
        responses::render_body(req, s, s.temperature, cache)
            .to_bytes()
            .to_vec()
    }
    fn scratch(req: &ChatRequest<'_>, s: &WireSettings) -> Map<String, Value> {
        responses::render_from_scratch(req, s, s.temperature)
    }
}

/// A request rendered both ways must give the same bytes.
struct Check<'s, C: Case> {
    cache: C::Cache,
    settings: &'s WireSettings,
    tools: Arc<Vec<Value>>,
    requests: usize,
}

impl<'s, C: Case> Check<'s, C> {
    fn new(settings: &'s WireSettings) -> Self {
        Check {
            cache: C::Cache::default(),
            settings,
            tools: Arc::new(vec![json!({"type": "function", "function": {"name": "f",
                "description": "d", "parameters": {"type": "object", "properties": {}}}})]),
            requests: 0,
        }
    }

    fn request(
        &mut self,
        (history, history_version): (&[Message], MessagesVersion),
        (transcript, transcript_version): (&[Message], MessagesVersion),
        tail: Option<&str>,
    ) {
        let no_tools = Arc::new(Vec::new());
        let system = if self.requests % 7 == 3 {
            ""
        } else {
            "sys \"x\""
        };
        let req = ChatRequest {
            system,
            history,
            history_version,
            transcript,
            transcript_version,
            tail,
            tools: if self.requests % 5 == 4 {
                &no_tools
            } else {
                &self.tools
            },
        };
        self.requests += 1;
        let cached = C::cached(&req, self.settings, &mut self.cache);
        let mut want = C::scratch(&req, self.settings);
        for (k, v) in &self.settings.extra_body {
            want.insert(k.clone(), v.clone());
        }
        let want = serde_json::to_vec(&want).unwrap();
        assert_eq!(
            String::from_utf8(cached).unwrap(),
            String::from_utf8(want).unwrap(),
            "request {} of {} + {} messages, tail {tail:?}",
            self.requests,
            history.len(),
            transcript.len()
        );
    }
}

fn the_session_renders_as_from_scratch<C: Case>(s: &WireSettings) {
    let all = shapes();
    let mut check = Check::<C>::new(s);
    let none = MessagesVersion::unknown();
    // A history that only grows (one version), with and without a tail.
    let v1 = MessagesVersion::fresh();
    for n in 0..=all.len() {
        check.request((&all[..n], v1), (&[], none), None);
        check.request((&all[..n], v1), (&[], none), Some("tail"));
    }
    // A turn: the history as it is, the transcript growing at its own version.
    let (history, turn) = all.split_at(5);
    let (hv, tv) = (MessagesVersion::fresh(), MessagesVersion::fresh());
    for n in 0..=turn.len() {
        check.request((history, hv), (&turn[..n], tv), Some("tail"));
    }
    // Its commit: the transcript is history now, at the same version.
    check.request((&all, hv), (&[], none), None);
    // The host sets a history: shorter, edited at the start, then in the middle.
    let v2 = MessagesVersion::fresh();
    check.request((&all[3..9], v2), (&[], none), None);
    let mut edited = all.clone();
    edited[0] = Message::User("edited".into());
    check.request((&edited, MessagesVersion::fresh()), (&[], none), None);
    edited[7] = Message::Tool(ToolAnswer::new("c.2", "g", "changed"));
    check.request((&edited, MessagesVersion::fresh()), (&[], none), None);
    // A compaction: a summary and the last messages.
    let mut compacted = vec![Message::User("[summary] what happened".into())];
    compacted.extend(all[all.len() - 4..].iter().cloned());
    let v3 = MessagesVersion::fresh();
    check.request((&compacted, v3), (&[], none), Some("tail"));
    compacted.push(Message::User("more".into()));
    check.request((&compacted, v3), (&[], none), None);
    // A host message's keys reordered (equal as maps), with no version to trust.
    let mut reordered = compacted.clone();
    reordered[1] = host(json!({"role": "user", "content": "keys", "x": 1}));
    check.request((&reordered, none), (&[], none), None);
    reordered[1] = host(json!({"x": 1, "content": "keys", "role": "user"}));
    check.request((&reordered, none), (&[], none), None);
    check.request((&[], v3), (&[], none), None);
    check.request(
        (&[], MessagesVersion::fresh()),
        (&[], none),
        Some("only a tail"),
    );
}

/// A small deterministic generator (xorshift), for the random edits.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Random appends (the version kept), truncations, edits and insertions (a new version), and
/// random splits between history and transcript.
fn random_sessions_render_as_from_scratch<C: Case>(s: &WireSettings) {
    let pool = shapes();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut check = Check::<C>::new(s);
    let mut list: Vec<Message> = Vec::new();
    let mut version = MessagesVersion::fresh();
    for _ in 0..600 {
        match rng.below(10) {
            0..=5 => {
                for _ in 0..=rng.below(3) {
                    list.push(pool[rng.below(pool.len())].clone());
                }
            }
            6 => {
                let n = rng.below(list.len() + 1);
                list.truncate(n);
                version = MessagesVersion::fresh();
            }
            7 if !list.is_empty() => {
                let at = rng.below(list.len());
                list[at] = pool[rng.below(pool.len())].clone();
                version = MessagesVersion::fresh();
            }
            8 => {
                let at = rng.below(list.len() + 1);
                list.insert(at, pool[rng.below(pool.len())].clone());
                version = MessagesVersion::fresh();
            }
            _ => {}
        }
        let tail = ["", "t"].get(rng.below(3)).copied();
        if rng.below(3) == 0 {
            // As a turn sees it: the history before, its transcript after.
            let split = rng.below(list.len() + 1);
            let (h, t) = list.split_at(split);
            check.request((h, MessagesVersion::fresh()), (t, version), tail);
        } else {
            check.request((&list, version), (&[], MessagesVersion::unknown()), tail);
        }
    }
}

#[test]
fn the_messages_wire_renders_as_from_scratch() {
    for extra in [
        json!({}),
        json!({"stream": false, "metadata": {"user_id": "u"}}),
    ] {
        the_session_renders_as_from_scratch::<Anthropic>(&settings(extra.clone()));
        random_sessions_render_as_from_scratch::<Anthropic>(&settings(extra));
    }
    // `extra_body` naming the conversation's own key wins there too.
    the_session_renders_as_from_scratch::<Anthropic>(&settings(json!({"messages": []})));
}

#[test]
fn the_responses_wire_renders_as_from_scratch() {
    for extra in [
        json!({}),
        json!({"store": true, "max_output_tokens": 5, "x": null}),
    ] {
        the_session_renders_as_from_scratch::<Responses>(&settings(extra.clone()));
        random_sessions_render_as_from_scratch::<Responses>(&settings(extra));
    }
    the_session_renders_as_from_scratch::<Responses>(&settings(json!({"input": []})));
}
