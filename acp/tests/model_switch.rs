//! A model switch (`session/set_model`) takes the reasoning the earlier model left in the
//! history out of the next request, as the reference does on a model or provider switch
//! (`reasoning_content`, `anthropic_thinking_blocks`, `openai_reasoning_items`): another model
//! cannot read it, and a wire that checks signed or encrypted reasoning refuses it. Checked on
//! the bodies a loopback Chat Completions server receives.

mod common;

use common::Client;
use serde_json::{json, Value};

/// Every request answered with reasoning, then "answer".
fn chat_stream(_: &str, _: &[u8]) -> (&'static str, Vec<u8>) {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut body = String::new();
    for c in [
        chunk(
            json!({"role": "assistant", "reasoning_content": "deep thought"}),
            Value::Null,
        ),
        chunk(json!({"content": "answer"}), Value::Null),
        chunk(json!({}), json!("stop")),
    ] {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    ("text/event-stream", body.into_bytes())
}

/// The assistant messages' `reasoning_content` values in a request body.
fn reasoning_sent(body: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(body).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m.get("reasoning_content").cloned().unwrap_or(Value::Null))
        .collect()
}

#[test]
fn a_model_switch_sends_no_reasoning_of_the_earlier_model() {
    let (url, seen) = common::http::serve(chat_stream);
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let base_url = format!("{url}/v1");
    let mut c = Client::spawn_env(
        &[
            "--provider",
            "openai",
            "--model",
            "m1",
            "--base-url",
            &base_url,
            "--sessions-dir",
            sessions.to_str().unwrap(),
        ],
        &[("OPENAI_API_KEY", "test-key")],
    );
    c.initialize();
    let work = tempfile::tempdir().unwrap();
    let s = c.new_session(work.path());
    // One prompt; the reasoning values of the request it made.
    let ask = |c: &mut Client, text: &str| {
        let id = c.prompt(&s, text);
        let r = c.until_response(id, |_, _| {});
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
        let last = seen.lock().unwrap().last().unwrap().1.clone();
        let model = serde_json::from_slice::<Value>(&last).unwrap()["model"].clone();
        (model, reasoning_sent(&last))
    };
    let set_model = |c: &mut Client, model: &str| {
        let id = c.request("session/set_model", json!({"sessionId": s, "model": model}));
        assert_eq!(c.until_response(id, |_, _| {})["result"]["model"], model);
    };
    ask(&mut c, "one");
    // The same model: its reasoning goes back whole.
    let thought = json!("deep thought");
    assert_eq!(ask(&mut c, "two"), (json!("m1"), vec![thought.clone()]));
    // Another model: both earlier answers go, without the first model's reasoning.
    set_model(&mut c, "m2");
    assert_eq!(
        ask(&mut c, "three"),
        (json!("m2"), vec![Value::Null, Value::Null])
    );
    // Setting the model a session already has changes nothing: the new reasoning stays.
    set_model(&mut c, "m2");
    let sent = vec![Value::Null, Value::Null, thought];
    assert_eq!(ask(&mut c, "four"), (json!("m2"), sent));
}
