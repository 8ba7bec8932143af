//! The Responses request: `store: false` and no `previous_response_id`, so the whole
//! conversation goes as `input` items each time; reasoning items go back whole (their
//! `encrypted_content` is what lets a stateless request continue the model's reasoning); a
//! tool call's history id `call_id|item_id` is split back into the two.
//!
//! The `input` items are rendered from a cache ([`crate::llm::sealed_conversation`]): each
//! message's items once; the tools array once per tool list and the instructions once per
//! text ([`crate::llm::typed_body`]).

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::events::push_json_string;
use crate::llm::fingerprint::PerList;
use crate::llm::request_body::RequestBody;
use crate::llm::sealed_conversation::{SealedConversation, Units};
use crate::llm::typed_body::{json_text, write_json, RenderedText, SharedTools, TypedBody};
#[cfg(test)]
use crate::llm::wire::conversation;
use crate::llm::wire::{image_url, text_of, WireSettings};
use crate::llm::{ChatRequest, Message};

/// The fewest output tokens the API accepts.
pub(crate) const MIN_OUTPUT_TOKENS: u32 = 16;

/// `(call_id, item_id)` of a history id.
pub(crate) fn split_id(id: &str) -> (&str, Option<&str>) {
    match id.split_once('|') {
        Some((call, item)) if !item.is_empty() => (call, Some(item)),
        Some((call, _)) => (call, None),
        None => (id, None),
    }
}

fn content_parts(content: Option<&Value>) -> Value {
    match content {
        Some(Value::Array(parts)) => Value::Array(
            parts
                .iter()
                .filter_map(|p| match image_url(p) {
                    Some(url) => {
                        Some(json!({"type": "input_image", "image_url": url, "detail": "auto"}))
                    }
                    None => p
                        .get("text")
                        .and_then(Value::as_str)
                        .map(|t| json!({"type": "input_text", "text": t})),
                })
                .collect(),
        ),
        other => json!([{"type": "input_text", "text": text_of(other)}]),
    }
}

fn assistant_items(m: &Map<String, Value>, out: &mut Vec<Value>) {
    if let Some(items) = m.get("openai_reasoning_items").and_then(Value::as_array) {
        out.extend(items.iter().cloned());
    }
    let text = text_of(m.get("content"));
    if !text.is_empty() {
        out.push(json!({"role": "assistant", "content": text}));
    }
    for c in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (call_id, item_id) = split_id(c.get("id").and_then(Value::as_str).unwrap_or_default());
        // Member by member: a JSON pointer parses its path on every call.
        let function = c.get("function");
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "{}".to_owned(),
        };
        let name = function.and_then(|f| f.get("name"));
        let mut call = json!({"type": "function_call", "call_id": call_id,
            "name": name.and_then(Value::as_str).unwrap_or_default(),
            "arguments": arguments});
        if let Some(item) = item_id {
            call["id"] = json!(item);
        }
        out.push(call);
    }
}

/// A message's items, appended to `out`.
fn message_items(m: &Map<String, Value>, out: &mut Vec<Value>) {
    match m.get("role").and_then(Value::as_str) {
        Some("assistant") => assistant_items(m, out),
        Some("tool") => {
            let (call_id, _) = split_id(
                m.get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            );
            out.push(json!({"type": "function_call_output", "call_id": call_id,
                "output": text_of(m.get("content"))}));
        }
        Some("system") => out.push(json!({"role": "system", "content": text_of(m.get("content"))})),
        _ => out.push(json!({"role": "user", "content": content_parts(m.get("content"))})),
    }
}

/// The `input` array, converted from scratch: what the cache's bytes must equal.
#[cfg(test)]
pub(crate) fn input(req: &ChatRequest<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    for m in conversation(req) {
        let Value::Object(m) = m else { continue };
        message_items(&m, &mut out);
    }
    out
}

/// A Chat Completions tool schema as a flat Responses function tool.
fn tool(schema: &Value) -> Value {
    let f = schema.get("function").unwrap_or(schema);
    let mut t = Map::new();
    t.insert("type".into(), json!("function"));
    t.insert("name".into(), f.get("name").cloned().unwrap_or(Value::Null));
    if let Some(d) = f.get("description") {
        t.insert("description".into(), d.clone());
    }
    t.insert(
        "parameters".into(),
        f.get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    );
    // Strict mode would require every schema to close its objects and list every property.
    t.insert("strict".into(), json!(false));
    Value::Object(t)
}

/// The body from scratch, as a map (the cache's reference in tests).
#[cfg(test)]
pub(crate) fn render(
    req: &ChatRequest<'_>,
    s: &WireSettings,
    temperature: Option<f64>,
) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), json!(s.model));
    if !req.system.is_empty() {
        body.insert("instructions".into(), json!(req.system));
    }
    body.insert("input".into(), Value::Array(input(req)));
    if !req.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(req.tools.iter().map(tool).collect()),
        );
        body.insert("tool_choice".into(), json!("auto"));
    }
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if let Some(t) = temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert(
        "max_output_tokens".into(),
        json!(s.max_tokens.max(MIN_OUTPUT_TOKENS)),
    );
    body
}

/// A message of our own shapes (a user's text, an assistant's text and calls, a tool's answer)
/// written straight as its items, each preceded by `,`: the bytes [`message_items`] and
/// serde_json give it, without building it as a map, then its items as maps (a tool's output
/// was copied twice, and the maps were most of a request's rendering on this wire). `false`:
/// not one of them (a host's message, a system note), left to the general way.
pub(super) fn write_items(m: &Message, out: &mut Vec<u8>) -> bool {
    match m {
        Message::User(text) => {
            out.extend_from_slice(br#",{"role":"user","content":[{"type":"input_text","text":"#);
            push_json_string(out, text);
            out.extend_from_slice(b"}]}");
        }
        Message::Tool(t) => {
            out.extend_from_slice(br#",{"type":"function_call_output","call_id":"#);
            push_json_string(out, split_id(&t.call_id).0);
            out.extend_from_slice(br#","output":"#);
            push_json_string(out, &t.content);
            out.push(b'}');
        }
        Message::Assistant(a) => {
            if !a.content.is_empty() {
                out.extend_from_slice(br#",{"role":"assistant","content":"#);
                push_json_string(out, &a.content);
                out.push(b'}');
            }
            for c in a.tool_calls.iter().flatten() {
                let (call_id, item_id) = split_id(&c.id);
                out.extend_from_slice(br#",{"type":"function_call","call_id":"#);
                push_json_string(out, call_id);
                out.extend_from_slice(br#","name":"#);
                push_json_string(out, &c.name);
                out.extend_from_slice(br#","arguments":"#);
                push_json_string(out, &c.arguments);
                if let Some(item) = item_id {
                    out.extend_from_slice(br#","id":"#);
                    push_json_string(out, item);
                }
                out.push(b'}');
            }
        }
        Message::System(_) | Message::Host(_) => return false,
    }
    true
}

/// A message's items, each preceded by `,`, through its map and [`message_items`]: every shape.
pub(super) fn write_items_as_maps(m: &Message, out: &mut Vec<u8>) {
    let mut items = Vec::new();
    if let Ok(Value::Object(m)) = serde_json::to_value(m) {
        message_items(&m, &mut items);
    }
    for item in &items {
        out.push(b',');
        write_json(out, item);
    }
}

/// The Responses wire's units: one message each (its items, each preceded by `,`); nothing
/// merges.
pub(crate) struct Items;

impl Units for Items {
    type Part = Vec<u8>;
    type Key = ();
    const MERGES: bool = false;

    fn part(m: &Message) -> Vec<u8> {
        let mut out = Vec::new();
        if !write_items(m, &mut out) {
            write_items_as_maps(m, &mut out);
        }
        out
    }

    fn key(_: &Vec<u8>) -> Option<()> {
        Some(())
    }

    fn write_unit(parts: &[&Vec<u8>], out: &mut Vec<u8>) {
        for p in parts {
            out.extend_from_slice(p);
        }
    }
}

/// What one agent keeps between requests on this wire.
#[derive(Default)]
pub(crate) struct RenderCache {
    conversation: SealedConversation<Items>,
    instructions: Option<RenderedText>,
    tools: Option<PerList<Bytes>>,
}

/// The tools arrays of this wire, per tool list.
static TOOLS: SharedTools = SharedTools::new();

pub(crate) fn render_body(
    req: &ChatRequest<'_>,
    s: &WireSettings,
    temperature: Option<f64>,
    cache: &mut RenderCache,
) -> RequestBody {
    cache.conversation.sync(req);
    let mut body = TypedBody::new(&s.extra_body, 1024);
    body.value("model", &s.model);
    if !req.system.is_empty() {
        body.shared(
            "instructions",
            json_text(&mut cache.instructions, req.system),
        );
    }
    let tail = req.tail.map(|t| Items::part(&Message::User(t.to_owned())));
    body.array("input", |a| cache.conversation.write(tail.as_ref(), a));
    if !req.tools.is_empty() {
        body.shared("tools", TOOLS.get(&mut cache.tools, req.tools, tool));
        body.raw("tool_choice", br#""auto""#);
    }
    body.raw("stream", b"true");
    body.raw("store", b"false");
    body.raw("include", br#"["reasoning.encrypted_content"]"#);
    if let Some(t) = temperature {
        body.value("temperature", &json!(t));
    }
    body.value("max_output_tokens", &s.max_tokens.max(MIN_OUTPUT_TOKENS));
    body.finish()
}
