//! The conversation as typed messages. A message becomes the OpenAI wire shape only when it is
//! serialized (into a request body, an event or the host's copy of the history), and its
//! `Serialize` impl writes it directly, field by field, in the order the reference sends.
//!
//! A message a host installs that has none of our shapes (other fields, non-string content,
//! another key order) is kept exactly as the host wrote it ([`Message::Host`]), so what we send
//! back is byte for byte what the host gave us.

use std::sync::Arc;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::events::push_json_string;

/// One message of the history.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    Assistant(AssistantMessage),
    Tool(ToolAnswer),
    /// A host-installed message in none of the shapes above, kept as written.
    Host(Map<String, Value>),
}

/// An assistant message: its text, the calls it asked for, and the reasoning that came with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssistantMessage {
    pub(crate) content: String,
    /// `None`: the message has no `tool_calls` key.
    pub(crate) tool_calls: Option<Vec<HistoryCall>>,
    /// `None`: no `reasoning_content` key.
    pub(crate) reasoning: Option<String>,
}

/// A tool call as history records it: `{"id", "type": "function", "function": {"name",
/// "arguments"}}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistoryCall {
    /// Shared with the call, its plan and its answer (a tool-loop iteration copied each id and
    /// name nine times).
    pub(crate) id: Arc<str>,
    pub(crate) name: Arc<str>,
    /// The arguments string as sent back to the model.
    pub(crate) arguments: String,
}

/// The answer to one tool call (a `role: "tool"` message).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub(crate) call_id: Arc<str>,
    pub(crate) name: Arc<str>,
    /// Shared, not copied, by the request cache ([`super::wire_cache`]): a tool's output is
    /// most of a conversation's bytes.
    pub(crate) content: Arc<str>,
}

impl ToolAnswer {
    pub(crate) fn new(
        call_id: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        content: impl Into<Arc<str>>,
    ) -> Self {
        ToolAnswer {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
        }
    }
}

/// A message's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    System,
    User,
    Assistant,
    Tool,
    /// A host message whose role is none of the four.
    Other,
}

/// A call of an assistant message as the history repair reads it, whatever the message's
/// shape.
pub(crate) struct CallView<'a> {
    pub(crate) id: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
}

impl Message {
    pub(crate) fn assistant_text(text: impl Into<String>) -> Message {
        Message::Assistant(AssistantMessage {
            content: text.into(),
            ..AssistantMessage::default()
        })
    }

    /// A host's message: typed when the typed form serializes to exactly the same bytes,
    /// kept as written otherwise.
    pub(crate) fn from_host(m: Map<String, Value>) -> Message {
        match typed(&m) {
            Some(t) if serde_json::to_vec(&t).ok() == serde_json::to_vec(&m).ok() => t,
            _ => Message::Host(m),
        }
    }

    pub(crate) fn role(&self) -> Role {
        match self {
            Message::System(_) => Role::System,
            Message::User(_) => Role::User,
            Message::Assistant(_) => Role::Assistant,
            Message::Tool(_) => Role::Tool,
            Message::Host(m) => match m.get("role").and_then(Value::as_str) {
                Some("system") => Role::System,
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("tool") => Role::Tool,
                _ => Role::Other,
            },
        }
    }

    /// The content when it is a string.
    pub(crate) fn text(&self) -> Option<&str> {
        match self {
            Message::System(t) | Message::User(t) => Some(t),
            Message::Assistant(a) => Some(&a.content),
            Message::Tool(t) => Some(&*t.content),
            Message::Host(m) => m.get("content").and_then(Value::as_str),
        }
    }

    /// The `tool_call_id` of a tool message.
    pub(crate) fn tool_call_id(&self) -> Option<&str> {
        match self {
            Message::Tool(t) => Some(&t.call_id),
            Message::Host(m) if self.role() == Role::Tool => {
                m.get("tool_call_id").and_then(Value::as_str)
            }
            _ => None,
        }
    }

    /// The calls of an assistant message (`None`: it has no `tool_calls` list).
    pub(crate) fn calls(&self) -> Option<Vec<CallView<'_>>> {
        match self {
            Message::Assistant(a) => a.tool_calls.as_ref().map(|calls| {
                calls
                    .iter()
                    .map(|c| CallView {
                        id: Some(&c.id),
                        name: Some(&c.name),
                    })
                    .collect()
            }),
            Message::Host(m) if self.role() == Role::Assistant => {
                m.get("tool_calls").and_then(Value::as_array).map(|calls| {
                    calls
                        .iter()
                        .map(|c| CallView {
                            id: c.get("id").and_then(Value::as_str),
                            name: c.pointer("/function/name").and_then(Value::as_str),
                        })
                        .collect()
                })
            }
            _ => None,
        }
    }

    /// About the length of [`Message::write_wire`]'s JSON: the texts, their keys and a
    /// little room for escapes.
    fn wire_len_hint(&self) -> usize {
        let texts = match self {
            Message::System(t) | Message::User(t) => t.len(),
            Message::Assistant(a) => {
                let calls = a.tool_calls.iter().flatten();
                a.content.len()
                    + a.reasoning.as_ref().map_or(0, |r| r.len() + 24)
                    + calls
                        .map(|c| c.id.len() + c.name.len() + c.arguments.len() + 64)
                        .sum::<usize>()
            }
            Message::Tool(t) => t.call_id.len() + t.name.len() + t.content.len() + 24,
            Message::Host(_) => 0,
        };
        texts + texts / 8 + 48
    }

    /// The message in the wire shape, appended to `out`: the bytes its `Serialize` gives
    /// through serde_json, with our keys written as literals (serde_json's map path scanned
    /// each key for escapes; a tool-loop iteration renders a dozen of them twice, for the
    /// request and for `llm_call_delta`). A host's message goes through serde as written.
    pub(crate) fn write_wire(&self, out: &mut Vec<u8>) {
        match self {
            Message::System(content) => {
                role_and_content(out, br#"{"role":"system","content":"#, content)
            }
            Message::User(content) => {
                role_and_content(out, br#"{"role":"user","content":"#, content)
            }
            Message::Assistant(a) => {
                out.extend_from_slice(br#"{"role":"assistant","content":"#);
                json_string(out, &a.content);
                if let Some(calls) = &a.tool_calls {
                    out.extend_from_slice(br#","tool_calls":["#);
                    for (i, c) in calls.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(br#"{"id":"#);
                        json_string(out, &c.id);
                        out.extend_from_slice(br#","type":"function","function":{"name":"#);
                        json_string(out, &c.name);
                        out.extend_from_slice(br#","arguments":"#);
                        json_string(out, &c.arguments);
                        out.extend_from_slice(b"}}");
                    }
                    out.push(b']');
                }
                if let Some(r) = &a.reasoning {
                    out.extend_from_slice(br#","reasoning_content":"#);
                    json_string(out, r);
                }
                out.push(b'}');
            }
            Message::Tool(t) => {
                out.extend_from_slice(br#"{"role":"tool","tool_call_id":"#);
                json_string(out, &t.call_id);
                out.extend_from_slice(br#","name":"#);
                json_string(out, &t.name);
                out.extend_from_slice(br#","content":"#);
                json_string(out, &t.content);
                out.push(b'}');
            }
            Message::Host(m) => {
                serde_json::to_writer(out, m).expect("messages serialize into a Vec")
            }
        }
    }
}

/// A message's JSON as [`Message::write_wire`] wrote it: rendered once by the turn for
/// `llm_call_delta` and handed to the request's cache ([`super::LlmClient::offer_rendered`]),
/// which copies it into its own bytes and drops it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireJson(Vec<u8>);

impl WireJson {
    pub(crate) fn of(m: &Message) -> WireJson {
        // Sized once: growing from empty was most of a small message's rendering. Not shrunk
        // to fit: it lives until the next request, and the shrink's `realloc` cost more than
        // rendering a short message.
        let mut out = Vec::with_capacity(m.wire_len_hint());
        m.write_wire(&mut out);
        WireJson(out)
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl crate::events::turn_event::RenderedMessages for Vec<WireJson> {
    fn count(&self) -> usize {
        self.len()
    }

    fn write_array(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, m) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(m.as_bytes());
        }
        out.push(b']');
    }
}

/// `head` (`{"role":…,"content":`), the content as a JSON string, `}`.
fn role_and_content(out: &mut Vec<u8>, head: &[u8], content: &str) {
    out.extend_from_slice(head);
    json_string(out, content);
    out.push(b'}');
}

/// `s` as a JSON string, escaped as serde_json escapes it (eight bytes a step where
/// serde_json goes a byte at a time: a request re-renders its newest messages, tool results
/// of kilobytes among them).
fn json_string(out: &mut Vec<u8>, s: &str) {
    push_json_string(out, s);
}

/// What `llm_call_started` counts in the messages of a request: tool messages, and messages
/// whose text holds a `<system-reminder>` block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub tool_messages: usize,
    pub reminders: usize,
}

impl Counts {
    fn add(&mut self, m: &Message) {
        static REMINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new("<system-reminder>"));
        self.tool_messages += usize::from(m.role() == Role::Tool);
        let text = m.text().unwrap_or_default();
        self.reminders += usize::from(REMINDER.find(text.as_bytes()).is_some());
    }
}

/// [`Counts`] over a request's messages during one turn: the history before the turn, which
/// the turn does not change, then the turn's own messages, which it only appends to. Each
/// message is looked at once, not on every request.
#[derive(Debug, Default)]
pub struct RunningCounts {
    seen: usize,
    counts: Counts,
}

impl RunningCounts {
    /// The counts of `history` followed by `turn`, of which the messages seen before must be
    /// unchanged. Fewer messages than last time start over.
    pub fn update(&mut self, history: &[Message], turn: &[Message]) -> Counts {
        let n = history.len() + turn.len();
        if n < self.seen {
            *self = RunningCounts::default();
        }
        for m in history.iter().chain(turn).skip(self.seen) {
            self.counts.add(m);
        }
        self.seen = n;
        self.counts
    }
}

/// The typed form of a host message, if it has one of our shapes (the key order is checked by
/// the caller, through the bytes).
fn typed(m: &Map<String, Value>) -> Option<Message> {
    let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(match m.get("role")?.as_str()? {
        "system" => Message::System(s("content")?),
        "user" => Message::User(s("content")?),
        "tool" => Message::Tool(ToolAnswer {
            call_id: s("tool_call_id")?.into(),
            name: s("name")?.into(),
            content: s("content")?.into(),
        }),
        "assistant" => Message::Assistant(AssistantMessage {
            content: s("content")?,
            tool_calls: match m.get("tool_calls") {
                None => None,
                Some(v) => Some(
                    v.as_array()?
                        .iter()
                        .map(|c| {
                            Some(HistoryCall {
                                id: c.get("id")?.as_str()?.into(),
                                name: c.pointer("/function/name")?.as_str()?.into(),
                                arguments: c.pointer("/function/arguments")?.as_str()?.to_owned(),
                            })
                        })
                        .collect::<Option<Vec<_>>>()?,
                ),
            },
            reasoning: match m.get("reasoning_content") {
                None => None,
                Some(v) => Some(v.as_str()?.to_owned()),
            },
        }),
        _ => return None,
    })
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::System(content) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("role", "system")?;
                m.serialize_entry("content", content)?;
                m.end()
            }
            Message::User(content) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("role", "user")?;
                m.serialize_entry("content", content)?;
                m.end()
            }
            Message::Assistant(a) => {
                let n =
                    2 + usize::from(a.tool_calls.is_some()) + usize::from(a.reasoning.is_some());
                let mut m = s.serialize_map(Some(n))?;
                m.serialize_entry("role", "assistant")?;
                m.serialize_entry("content", &a.content)?;
                if let Some(calls) = &a.tool_calls {
                    m.serialize_entry("tool_calls", calls)?;
                }
                if let Some(r) = &a.reasoning {
                    m.serialize_entry("reasoning_content", r)?;
                }
                m.end()
            }
            Message::Tool(t) => {
                let mut m = s.serialize_map(Some(4))?;
                m.serialize_entry("role", "tool")?;
                m.serialize_entry("tool_call_id", &t.call_id)?;
                m.serialize_entry("name", &t.name)?;
                m.serialize_entry("content", &*t.content)?;
                m.end()
            }
            Message::Host(map) => map.serialize(s),
        }
    }
}

impl Serialize for HistoryCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a HistoryCall);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("name", &self.0.name)?;
                m.serialize_entry("arguments", &self.0.arguments)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self))?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host(v: Value) -> Message {
        Message::from_host(v.as_object().unwrap().clone())
    }

    #[test]
    fn our_shapes_are_typed_and_serialize_as_given() {
        let cases = [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "a", "reasoning_content": "r"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type":
                "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "1", "name": "f", "content": "x"}),
        ];
        for v in cases {
            let m = host(v.clone());
            assert!(!matches!(m, Message::Host(_)), "{v} stays typed");
            assert_eq!(serde_json::to_string(&m).unwrap(), v.to_string());
        }
    }

    #[test]
    fn other_shapes_are_kept_byte_for_byte() {
        let cases = [
            json!({"role": "user", "content": [{"type": "text", "text": "x"}]}),
            json!({"content": "c", "role": "user"}),
            json!({"role": "assistant", "content": null, "tool_calls": []}),
            json!({"role": "tool", "tool_call_id": "1", "content": "x", "extra": 1}),
        ];
        for v in cases {
            let m = host(v.clone());
            assert!(matches!(m, Message::Host(_)), "{v} is kept");
            let mut out = Vec::new();
            m.write_wire(&mut out);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }

    /// The literal-key writer gives what `Serialize` gives through serde_json, for every shape
    /// and for strings that need escapes (quotes, backslashes, control characters, U+2028,
    /// non-ASCII, astral), empty strings, no calls, an empty call list and several calls.
    #[test]
    fn the_wire_writer_writes_what_serialize_writes() {
        let texts = [
            "",
            "plain",
            "q\"uo\\te\n\t\u{1}\u{1f}\u{7f}",
            "</script> \u{2028} caf\u{e9} \u{1f600}",
        ];
        let mut messages = Vec::new();
        for t in texts {
            messages.push(Message::System(t.into()));
            messages.push(Message::User(t.into()));
            messages.push(Message::Tool(ToolAnswer::new(t, t, t)));
            let call = |i: usize| HistoryCall {
                id: format!("{t}{i}").into(),
                name: t.into(),
                arguments: format!(r#"{{"p":"{i}"}}{t}"#),
            };
            for calls in [
                None,
                Some(vec![]),
                Some(vec![call(0)]),
                Some(vec![call(0), call(1)]),
            ] {
                for reasoning in [None, Some(t.to_owned())] {
                    messages.push(Message::Assistant(AssistantMessage {
                        content: t.into(),
                        tool_calls: calls.clone(),
                        reasoning,
                    }));
                }
            }
        }
        messages.push(host(json!({"role": "user", "content": [1], "x": "\u{1}"})));
        messages.push(host(json!({"content": "c", "role": "user"})));
        for m in &messages {
            let mut out = Vec::new();
            m.write_wire(&mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(m).unwrap()
            );
        }
    }

    #[test]
    fn counts_are_kept_as_the_list_grows() {
        let reminder = "<system-reminder>\nx\n</system-reminder>\nhi";
        let mut list = vec![
            Message::User(reminder.into()),
            Message::Tool(ToolAnswer::new("1", "f", "<system-reminder>")),
            host(json!({"role": "tool", "tool_call_id": "2", "content": 1})),
            Message::assistant_text("no reminder"),
        ];
        let mut running = RunningCounts::default();
        let expect = |tool_messages, reminders| Counts {
            tool_messages,
            reminders,
        };
        let (history, turn) = list.split_at(1);
        assert_eq!(running.update(history, turn), expect(2, 2));
        list.push(host(json!({"role": "user", "content": reminder, "x": 1})));
        let (history, turn) = list.split_at(1);
        assert_eq!(running.update(history, turn), expect(2, 3));
        assert_eq!(running.update(history, turn), expect(2, 3));
        assert_eq!(running.update(&list[3..], &[]), expect(0, 1));
    }

    #[test]
    fn calls_and_answers_read_the_same_from_either_form() {
        let v = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"k": 1}}}]});
        let m = host(v);
        let calls = m.calls().unwrap();
        assert_eq!((calls[0].id, calls[0].name), (Some("a"), Some("f")));
        assert_eq!(m.role(), Role::Assistant);
        let t = host(json!({"role": "tool", "tool_call_id": "a", "content": 1}));
        assert_eq!(t.tool_call_id(), Some("a"));
        assert_eq!(t.text(), None);
    }
}
