//! The Messages request: the conversation converted from its Chat Completions shape. The
//! system prompt goes to `system`; a system message later in the history becomes user text;
//! consecutive messages of one role merge (a user message's `tool_result` blocks first, as the
//! API requires them); a leading assistant message gets a synthetic user turn before it;
//! signed thinking blocks go back whole; tool ids are forced into `[A-Za-z0-9_-]{1,64}` the
//! same way wherever they appear, so a call and its result still match.
//!
//! The conversation is rendered from a cache ([`crate::llm::sealed_conversation`]): each
//! message's blocks once, a turn once another role follows it; the tools array once per tool
//! list and the system prompt once per text ([`crate::llm::typed_body`]).

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::events::push_json_string;
use crate::llm::fingerprint::{hex16, PerList};
use crate::llm::request_body::RequestBody;
use crate::llm::sealed_conversation::{SealedConversation, Units};
use crate::llm::typed_body::{json_text, write_json, RenderedText, SharedTools, TypedBody};
#[cfg(test)]
use crate::llm::wire::conversation;
use crate::llm::wire::{image_url, text_of, WireSettings};
use crate::llm::{ChatRequest, Message};

/// The text of the user turn put before a leading assistant message.
pub(crate) const SYNTHETIC_USER: &str = "(conversation continues)";

/// The longest tool id the API accepts.
const MAX_ID: usize = 64;

/// `id` as the API accepts it: unchanged when it already fits; else its allowed characters
/// (others become `_`) cut to leave room for a digest of the whole id, so two ids that differ
/// only where they were cut or replaced still differ.
pub(crate) fn tool_id(id: &str) -> String {
    let fits = !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        return id.to_owned();
    }
    let digest = hex16(id.as_bytes());
    let keep = MAX_ID - digest.len() - 1;
    let mut out: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(keep)
        .collect();
    out.push('_');
    out.push_str(&digest);
    out
}

/// One message of the outgoing copy: a role and its content blocks.
#[cfg(test)]
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A Chat Completions image URL as an `image` block: a data URL becomes a base64 source,
/// anything else a URL source.
fn image_block(url: &str) -> Value {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((media, data)) = rest.split_once(";base64,") {
            return json!({"type": "image", "source": {
                "type": "base64", "media_type": media, "data": data}});
        }
    }
    json!({"type": "image", "source": {"type": "url", "url": url}})
}

/// A user message's blocks: its text, and its images as `image` blocks.
fn user_blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match image_url(p) {
                Some(url) => Some(image_block(url)),
                None => p.get("text").and_then(Value::as_str).and_then(text_block),
            })
            .collect(),
        other => text_block(&text_of(other)).into_iter().collect(),
    }
}

fn assistant_blocks(m: &Map<String, Value>) -> Vec<Value> {
    let mut blocks: Vec<Value> = m
        .get("anthropic_thinking_blocks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    blocks.extend(text_block(&text_of(m.get("content"))));
    for c in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
        let name = c.pointer("/function/name").and_then(Value::as_str);
        let input = match c.pointer("/function/arguments") {
            Some(Value::String(s)) => serde_json::from_str::<Value>(s)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({})),
            Some(v @ Value::Object(_)) => v.clone(),
            _ => json!({}),
        };
        blocks.push(json!({"type": "tool_use", "id": tool_id(id),
            "name": name.unwrap_or_default(), "input": input}));
    }
    blocks
}

/// A message's role in the outgoing copy and its blocks (none: it is left out).
fn message_blocks(m: &Map<String, Value>) -> (&'static str, Vec<Value>) {
    match m.get("role").and_then(Value::as_str) {
        Some("assistant") => ("assistant", assistant_blocks(m)),
        Some("tool") => {
            let id = m.get("tool_call_id").and_then(Value::as_str);
            let text = text_of(m.get("content"));
            let block = json!({"type": "tool_result",
                "tool_use_id": tool_id(id.unwrap_or_default()),
                "content": if text.is_empty() { "(empty)".to_owned() } else { text }});
            ("user", vec![block])
        }
        // A system message inside the history is context the model should read as a turn.
        Some("system") => ("user", user_blocks(m.get("content"))),
        _ => ("user", user_blocks(m.get("content"))),
    }
}

/// Whether a block goes first in a user turn (the API wants the results before the rest).
fn is_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// The synthetic user turn before a leading assistant message.
fn synthetic_turn() -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": SYNTHETIC_USER}]})
}

/// The `messages` array, converted from scratch: what the cache's bytes must equal.
#[cfg(test)]
pub(crate) fn messages(req: &ChatRequest<'_>) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::new();
    for m in conversation(req) {
        let Value::Object(m) = m else { continue };
        let (role, blocks) = message_blocks(&m);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.blocks.extend(blocks),
            _ => turns.push(Turn { role, blocks }),
        }
    }
    if turns.first().is_none_or(|t| t.role == "assistant") {
        turns.insert(
            0,
            Turn {
                role: "user",
                blocks: vec![json!({"type": "text", "text": SYNTHETIC_USER})],
            },
        );
    }
    turns
        .into_iter()
        .map(|mut t| {
            if t.role == "user" {
                // Stable: the results keep their order, and so does the rest.
                t.blocks.sort_by_key(|b| !is_result(b));
            }
            json!({"role": t.role, "content": t.blocks})
        })
        .collect()
}

/// A Chat Completions tool schema as a Messages tool.
fn tool(schema: &Value) -> Value {
    let f = schema.get("function").unwrap_or(schema);
    let mut t = Map::new();
    t.insert("name".into(), f.get("name").cloned().unwrap_or(Value::Null));
    if let Some(d) = f.get("description") {
        t.insert("description".into(), d.clone());
    }
    t.insert(
        "input_schema".into(),
        f.get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    );
    Value::Object(t)
}

/// The body from scratch, as a map (the cache's reference in tests).
#[cfg(test)]
pub(crate) fn render(
    req: &ChatRequest<'_>,
    s: &WireSettings,
    max_tokens: u32,
) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), json!(s.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !req.system.is_empty() {
        body.insert("system".into(), json!(req.system));
    }
    body.insert("messages".into(), Value::Array(messages(req)));
    if !req.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(req.tools.iter().map(tool).collect()),
        );
        body.insert("tool_choice".into(), json!({"type": "auto"}));
    }
    body.insert("stream".into(), json!(true));
    body
}

/// One message's share of a turn: its role and its blocks as JSON, each preceded by `,`.
#[derive(Default)]
pub(crate) struct TurnPart {
    /// `None`: the message has no blocks and is left out.
    role: Option<&'static str>,
    /// The `tool_result` blocks, which go first in a user turn.
    results: Vec<u8>,
    /// The other blocks.
    others: Vec<u8>,
}

/// A message's blocks through its map and [`message_blocks`]: every shape.
pub(super) fn write_blocks_as_maps(m: &Message, part: &mut TurnPart) {
    let Ok(Value::Object(m)) = serde_json::to_value(m) else {
        return;
    };
    let (role, blocks) = message_blocks(&m);
    if blocks.is_empty() {
        return;
    }
    part.role = Some(role);
    for b in &blocks {
        // Only a user turn puts its results first: an assistant's blocks keep their order.
        let out = if role == "user" && is_result(b) {
            &mut part.results
        } else {
            &mut part.others
        };
        out.push(b',');
        write_json(out, b);
    }
}

/// A message of our own shapes (a user's text, an assistant's text and calls, a tool's answer)
/// written straight as its blocks: the bytes [`message_blocks`] and serde_json give it,
/// without building it as a map, then its blocks as maps (a tool's output was copied twice,
/// and the maps were most of a request's rendering on this wire). `false`: not one of them (a
/// host's message, a system note), left to the general way.
pub(super) fn write_blocks(m: &Message, part: &mut TurnPart) -> bool {
    match m {
        Message::User(text) => {
            if !text.is_empty() {
                part.role = Some("user");
                text_block_to(&mut part.others, text);
            }
        }
        Message::Tool(t) => {
            part.role = Some("user");
            let out = &mut part.results;
            out.extend_from_slice(br#",{"type":"tool_result","tool_use_id":"#);
            push_json_string(out, &tool_id(&t.call_id));
            out.extend_from_slice(br#","content":"#);
            push_json_string(
                out,
                if t.content.is_empty() {
                    "(empty)"
                } else {
                    &t.content
                },
            );
            out.push(b'}');
        }
        Message::Assistant(a) => {
            let out = &mut part.others;
            if !a.content.is_empty() {
                text_block_to(out, &a.content);
            }
            for c in a.tool_calls.iter().flatten() {
                out.extend_from_slice(br#",{"type":"tool_use","id":"#);
                push_json_string(out, &tool_id(&c.id));
                out.extend_from_slice(br#","name":"#);
                push_json_string(out, &c.name);
                out.extend_from_slice(br#","input":"#);
                match serde_json::from_str::<Value>(&c.arguments) {
                    Ok(input @ Value::Object(_)) => write_json(out, &input),
                    _ => out.extend_from_slice(b"{}"),
                }
                out.push(b'}');
            }
            if !out.is_empty() {
                part.role = Some("assistant");
            }
        }
        Message::System(_) | Message::Host(_) => return false,
    }
    true
}

/// `,{"type":"text","text":…}`.
fn text_block_to(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(br#",{"type":"text","text":"#);
    push_json_string(out, text);
    out.push(b'}');
}

/// The Messages wire's units: a turn is a run of messages of one role.
pub(crate) struct Turns;

impl Units for Turns {
    type Part = TurnPart;
    type Key = &'static str;
    const MERGES: bool = true;

    fn part(m: &Message) -> TurnPart {
        let mut part = TurnPart::default();
        if !write_blocks(m, &mut part) {
            write_blocks_as_maps(m, &mut part);
        }
        part
    }

    fn key(p: &TurnPart) -> Option<&'static str> {
        p.role
    }

    fn write_unit(parts: &[&TurnPart], out: &mut Vec<u8>) {
        let Some(role) = parts.iter().find_map(|p| p.role) else {
            return;
        };
        out.extend_from_slice(br#",{"role":"#);
        write_json(out, role);
        out.extend_from_slice(br#","content":["#);
        let mut first = true;
        let blocks = parts.iter().map(|p| &p.results[..]);
        for b in blocks.chain(parts.iter().map(|p| &p.others[..])) {
            if b.is_empty() {
                continue;
            }
            // Each block list starts with its `,`; the content's first block goes without.
            out.extend_from_slice(if first { &b[1..] } else { b });
            first = false;
        }
        out.extend_from_slice(b"]}");
    }

    fn write_lead(first: Option<&'static str>, out: &mut Vec<u8>) {
        if first != Some("user") {
            out.push(b',');
            write_json(out, &synthetic_turn());
        }
    }
}

/// What one agent keeps between requests on this wire.
#[derive(Default)]
pub(crate) struct RenderCache {
    conversation: SealedConversation<Turns>,
    system: Option<RenderedText>,
    tools: Option<PerList<Bytes>>,
}

/// The tools arrays of this wire, per tool list.
static TOOLS: SharedTools = SharedTools::new();

/// The body: never a `temperature` (the wire's models reject it with thinking on).
pub(crate) fn render_body(
    req: &ChatRequest<'_>,
    s: &WireSettings,
    max_tokens: u32,
    cache: &mut RenderCache,
) -> RequestBody {
    cache.conversation.sync(req);
    let mut body = TypedBody::new(&s.extra_body, 1024);
    body.value("model", &s.model);
    body.value("max_tokens", &max_tokens);
    if !req.system.is_empty() {
        body.shared("system", json_text(&mut cache.system, req.system));
    }
    let tail = req.tail.map(|t| Turns::part(&Message::User(t.to_owned())));
    body.array("messages", |a| cache.conversation.write(tail.as_ref(), a));
    if !req.tools.is_empty() {
        body.shared("tools", TOOLS.get(&mut cache.tools, req.tools, tool));
        body.raw("tool_choice", br#"{"type":"auto"}"#);
    }
    body.raw("stream", b"true");
    body.finish()
}
