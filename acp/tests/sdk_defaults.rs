//! What ACP SDKs send with their defaults: `_meta` on any message, optional objects left out,
//! fields newer than the reference's schema (`additionalDirectories`), `session/list`. The
//! server takes them, and never drops a message it cannot read without telling the client.

mod common;

use std::time::{Duration, Instant};

use common::Client;
use serde_json::{json, Value};

fn slow_script() -> Value {
    json!({"responses": [
        {"repeat": 5, "text": "x".repeat(400), "chunk_size": 1, "delay_ms": 20}]})
}

fn wait_streaming(c: &mut Client) {
    loop {
        let v = c.recv();
        if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            return;
        }
    }
}

#[test]
fn initialize_and_session_new_take_what_sdks_send() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let mut c = Client::scripted(dir.path(), &json!({"responses": [{"text": "hi"}]}), &[]);
    // The Python SDK leaves out an all-default `clientCapabilities`.
    let id = c.request("initialize", json!({"protocolVersion": 1}));
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    let id = c.request(
        "initialize",
        json!({"protocolVersion": 1, "_meta": {"trace": "t1"},
               "clientCapabilities": {"fs": {"readTextFile": true, "_meta": {}}, "terminal": false,
                                      "_meta": {"x": 1}},
               "clientInfo": {"name": "py", "version": "0.12.1"}, "someNewField": true}),
    );
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    assert_eq!(
        r["result"]["agentCapabilities"]["sessionCapabilities"]["list"],
        json!({}),
        "session/list is advertised: {r}"
    );

    let id = c.request(
        "session/new",
        json!({"cwd": dir.path(), "mcpServers": [], "_meta": {"k": "v"},
               "additionalDirectories": [other.path()]}),
    );
    let r = c.until_response(id, |_, v| panic!("{v}"));
    let s = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    // `mcpServers` left out.
    let id = c.request("session/new", json!({"cwd": dir.path()}));
    let r = c.until_response(id, |_, v| panic!("{v}"));
    assert!(r["result"]["sessionId"].is_string(), "{r}");
    // A relative additional directory is still refused.
    let id = c.request(
        "session/new",
        json!({"cwd": dir.path(), "additionalDirectories": ["rel"]}),
    );
    assert_eq!(c.until_response(id, |_, _| {})["error"]["code"], -32602);

    let id = c.request(
        "session/prompt",
        json!({"sessionId": s, "_meta": {}, "prompt": [
            {"type": "text", "text": "hello", "_meta": {}, "annotations": {"priority": 1}}]}),
    );
    let r = c.until_response(id, |_, _| {});
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let id = c.request(
        "session/set_mode",
        json!({"sessionId": s, "modeId": "read-only", "_meta": {}}),
    );
    assert_eq!(
        c.until_response(id, |_, _| {})["result"]["modeId"],
        "read-only"
    );
    // A credential never rides along on a config change, lenient or not.
    let id = c.request(
        "session/set_config_option",
        json!({"sessionId": s, "configId": "model", "value": "scripted/x", "apiKey": "sk-1"}),
    );
    assert_eq!(c.until_response(id, |_, _| {})["error"]["code"], -32602);
}

#[test]
fn a_cancel_with_meta_stops_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::scripted(dir.path(), &slow_script(), &["--no-persist"]);
    c.initialize();
    let s = c.new_session(dir.path());
    let mut figures = Vec::new();
    for meta in [json!({}), json!({"requestId": 7, "nested": {"a": [1]}})] {
        let id = c.prompt(&s, "talk");
        wait_streaming(&mut c);
        let t0 = Instant::now();
        c.notify("session/cancel", json!({"sessionId": s, "_meta": meta}));
        let r = c.until_response(id, |_, _| {});
        figures.push(t0.elapsed());
        assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    }
    // A request form with extra fields, too.
    let id = c.prompt(&s, "talk");
    wait_streaming(&mut c);
    let t0 = Instant::now();
    let cid = c.request(
        "session/cancel",
        json!({"sessionId": s, "_meta": {}, "reason": "user"}),
    );
    let mut answered = None;
    let r = c.until_response(id, |_, v| {
        if v["id"] == json!(cid) {
            answered = Some(v);
        }
    });
    figures.push(t0.elapsed());
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    if answered.is_none() {
        answered = Some(c.until_response(cid, |_, _| {}));
    }
    assert_eq!(answered.unwrap()["result"], json!({}));
    println!("FIGURE acp/cancel-with-meta: session/cancel -> cancelled response: {figures:?}");
    // The contract is 100 ms; the bound leaves room for a loaded 2-core machine.
    assert!(
        figures.iter().all(|d| *d < Duration::from_millis(500)),
        "{figures:?}"
    );
}

#[test]
fn an_unreadable_cancel_is_reported_to_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::scripted(dir.path(), &slow_script(), &["--no-persist"]);
    c.initialize();
    let s = c.new_session(dir.path());
    let id = c.prompt(&s, "talk");
    wait_streaming(&mut c);
    c.notify("session/cancel", json!({"session": s}));
    let mut told = None;
    let r = c.until_response(id, |c, v| {
        if v.get("error").is_some() && v["id"].is_null() && told.is_none() {
            told = Some(v);
            // The client tries again, properly.
            let s = s.clone();
            c.notify("session/cancel", json!({"sessionId": s}));
        }
    });
    let told = told.expect("the client is told its cancel was not understood");
    let message = told["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("session/cancel") && message.contains("sessionId"),
        "{told}"
    );
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    // A cancel for a session this server does not know is said so as well.
    c.notify("session/cancel", json!({"sessionId": "nope"}));
    let v = c.recv();
    assert!(
        v["id"].is_null() && v["error"]["message"].as_str().unwrap().contains("nope"),
        "{v}"
    );
}

#[test]
fn session_list_names_live_and_saved_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let a_dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [{"repeat": 10, "text": "hi"}]});
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    let a = c.new_session(a_dir.path());
    let b = c.new_session(dir.path());
    let id = c.prompt(&a, "hello");
    c.until_response(id, |_, _| {});
    let list = |c: &mut Client, params: Value| -> Vec<(String, String)> {
        let id = c.request("session/list", params);
        let r = c.until_response(id, |_, v| panic!("{v}"));
        let mut v: Vec<(String, String)> = r["result"]["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|s| {
                (
                    s["sessionId"].as_str().unwrap().to_owned(),
                    s["cwd"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let cwd = |p: &std::path::Path| p.display().to_string();
    let mut want = vec![(a.clone(), cwd(a_dir.path())), (b.clone(), cwd(dir.path()))];
    want.sort();
    assert_eq!(list(&mut c, json!({})), want);
    assert_eq!(
        list(&mut c, json!({"cwd": a_dir.path(), "_meta": {}})),
        vec![(a.clone(), cwd(a_dir.path()))]
    );
    drop(c);
    // A new process knows the saved one (b never prompted, so it was never saved).
    let mut c = Client::scripted(dir.path(), &script, &[]);
    c.initialize();
    assert_eq!(list(&mut c, json!({})), vec![(a, cwd(a_dir.path()))]);
}
