//! `agentao-acp --store sqlite:PATH`: sessions committed by one server process are listed and
//! loaded by another (and by two at once), every message validated against the ACP schema.

mod common;

use std::path::Path;

use common::Client;
use serde_json::{json, Value};

fn server(dir: &Path, script: &Value, store: &str) -> Client {
    let path = dir.join(format!("script-{}.json", fastrand_name()));
    std::fs::write(&path, script.to_string()).unwrap();
    let mut c = Client::spawn(&["--script", path.to_str().unwrap(), "--store", store]);
    c.initialize();
    c
}

fn fastrand_name() -> String {
    format!(
        "{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

fn list(c: &mut Client, cwd: Option<&Path>) -> Vec<Value> {
    let params = match cwd {
        Some(d) => json!({"cwd": d}),
        None => json!({}),
    };
    let id = c.request("session/list", params);
    let r = c.until_response(id, |_, v| panic!("unexpected {v}"));
    r["result"]["sessions"].as_array().unwrap().clone()
}

fn load(c: &mut Client, session: &str, cwd: &Path) -> (Value, Vec<Value>) {
    let id = c.request(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let mut replayed = Vec::new();
    let r = c.until_response(id, |_, v| replayed.push(v["params"]["update"].clone()));
    (r, replayed)
}

#[test]
fn sessions_in_a_store_are_listed_and_loaded_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let store = format!("sqlite:{}", dir.path().join("sessions.db").display());
    let work = work.canonicalize().unwrap();

    // Process one: a session with two prompts, committed after each.
    let mut one = server(
        dir.path(),
        &json!({"responses": [{"text": "first answer"}, {"text": "second answer"}]}),
        &store,
    );
    let caps = one.initialize();
    assert_eq!(
        caps["agentCapabilities"]["loadSession"],
        json!(true),
        "{caps}"
    );
    let s = one.new_session(&work);
    for text in ["question one", "question two"] {
        let id = one.prompt(&s, text);
        let r = one.until_response(id, |_, _| {});
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    }
    // Process two, while process one still runs: it lists and loads the session.
    let mut two = server(
        dir.path(),
        &json!({"responses": [{"text": "third answer"}]}),
        &store,
    );
    let listed = list(&mut two, Some(&work));
    assert!(
        listed
            .iter()
            .any(|x| x["sessionId"] == json!(s) && x["cwd"] == json!(work)),
        "{listed:?}"
    );
    assert!(list(&mut two, Some(Path::new("/elsewhere"))).is_empty());
    let (r, replayed) = load(&mut two, &s, &work);
    assert!(r["result"]["configOptions"].is_array(), "{r}");
    let texts: Vec<&Value> = replayed
        .iter()
        .filter(|u| {
            u["sessionUpdate"] == "user_message_chunk"
                || u["sessionUpdate"] == "agent_message_chunk"
        })
        .map(|u| &u["content"]["text"])
        .collect();
    assert_eq!(
        texts,
        [
            &json!("question one"),
            &json!("first answer"),
            &json!("question two"),
            &json!("second answer")
        ]
    );
    // It continues the session: a third prompt, committed as the next version.
    let id = two.prompt(&s, "question three");
    assert_eq!(
        two.until_response(id, |_, _| {})["result"]["stopReason"],
        "end_turn"
    );
    drop(two);

    // Process one's copy is now behind: its next prompt still answers, but its commit
    // conflicts and nothing of process two's is overwritten.
    let id = one.prompt(&s, "stale");
    let r = one.until_response(id, |_, _| {});
    assert!(r.get("result").is_some() || r.get("error").is_some(), "{r}");
    drop(one);

    // A third process loads what process two committed.
    let mut three = server(dir.path(), &json!({"responses": []}), &store);
    let (_, replayed) = load(&mut three, &s, &work);
    let users: Vec<&Value> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .map(|u| &u["content"]["text"])
        .collect();
    assert_eq!(users.last(), Some(&&json!("question three")), "{users:?}");
    assert!(!users.contains(&&json!("stale")), "{users:?}");

    // An id the store does not hold is an invalid-params error.
    let id = three.request(
        "session/load",
        json!({"sessionId": "nobody", "cwd": work, "mcpServers": []}),
    );
    assert_eq!(
        three.until_response(id, |_, v| panic!("{v}"))["error"]["code"],
        -32602
    );
    eprintln!("schema-validated messages: {}", three.validated);
}

#[test]
fn a_bad_store_url_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"responses": []}"#).unwrap();
    let out = std::process::Command::new(common::bin())
        .args([
            "--script",
            script.to_str().unwrap(),
            "--store",
            "mysql://nowhere",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown store URL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
