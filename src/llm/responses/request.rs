//! The Responses request: `store: false` and no `previous_response_id`, so the whole
//! conversation goes as `input` items each time; reasoning items go back whole (their
//! `encrypted_content` is what lets a stateless request continue the model's reasoning); a
//! tool call's history id `call_id|item_id` is split back into the two.

use serde_json::{json, Map, Value};

use crate::llm::wire::{conversation, image_url, text_of, WireSettings};
use crate::llm::ChatRequest;

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
        let arguments = match c.pointer("/function/arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "{}".to_owned(),
        };
        let mut call = json!({"type": "function_call", "call_id": call_id,
            "name": c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default(),
            "arguments": arguments});
        if let Some(item) = item_id {
            call["id"] = json!(item);
        }
        out.push(call);
    }
}

/// The `input` array.
pub(crate) fn input(req: &ChatRequest<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    for m in conversation(req) {
        let Value::Object(m) = m else { continue };
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => assistant_items(&m, &mut out),
            Some("tool") => {
                let (call_id, _) = split_id(
                    m.get("tool_call_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                );
                out.push(json!({"type": "function_call_output", "call_id": call_id,
                    "output": text_of(m.get("content"))}));
            }
            Some("system") => {
                out.push(json!({"role": "system", "content": text_of(m.get("content"))}))
            }
            _ => out.push(json!({"role": "user", "content": content_parts(m.get("content"))})),
        }
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
