//! `agentao-acp --store postgres://…`: two server processes share sessions through one
//! PostgreSQL (the server `scripts/postgres.sh` runs; skipped, saying why, where it cannot).

mod common;

use std::path::Path;
use std::process::Command;

use common::Client;
use serde_json::{json, Value};

fn postgres_url() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(root.join("scripts/postgres.sh"))
        .arg("start")
        .env("AGENTAO_PG_DIR", root.join("build/pg"))
        .output()
        .expect("scripts/postgres.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.code() == Some(3) {
        assert!(
            std::env::var_os("AGENTAO_PG_REQUIRED").is_none(),
            "PostgreSQL is required: {stdout}"
        );
        eprintln!("SKIPPED: PostgreSQL {stdout}");
        return None;
    }
    assert!(out.status.success(), "scripts/postgres.sh start: {stdout}");
    stdout.lines().last().map(str::to_owned)
}

fn server(dir: &Path, script: &Value, store: &str) -> Client {
    let path = dir.join(format!("script-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&path, script.to_string()).unwrap();
    let mut c = Client::spawn(&["--script", path.to_str().unwrap(), "--store", store]);
    c.initialize();
    c
}

#[test]
fn two_server_processes_share_sessions_through_postgres() {
    let Some(store) = postgres_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let work = work.canonicalize().unwrap();

    let mut one = server(
        dir.path(),
        &json!({"responses": [{"text": "first answer"}]}),
        &store,
    );
    let s = one.new_session(&work);
    let id = one.prompt(&s, "question one");
    assert_eq!(
        one.until_response(id, |_, _| {})["result"]["stopReason"],
        "end_turn"
    );

    // Another process, the first still running: it finds the session and continues it.
    let mut two = server(
        dir.path(),
        &json!({"responses": [{"text": "second answer"}]}),
        &store,
    );
    let id = two.request("session/list", json!({"cwd": work}));
    let listed = two.until_response(id, |_, v| panic!("unexpected {v}"));
    let listed = listed["result"]["sessions"].as_array().unwrap().clone();
    assert!(
        listed.iter().any(|x| x["sessionId"] == json!(s)),
        "{listed:?}"
    );
    let id = two.request(
        "session/load",
        json!({"sessionId": s, "cwd": work, "mcpServers": []}),
    );
    let mut replayed = Vec::new();
    two.until_response(id, |_, v| replayed.push(v["params"]["update"].clone()));
    assert!(
        replayed
            .iter()
            .any(|u| u["content"]["text"] == json!("first answer")),
        "{replayed:?}"
    );
    let id = two.prompt(&s, "question two");
    assert_eq!(
        two.until_response(id, |_, _| {})["result"]["stopReason"],
        "end_turn"
    );
    drop(two);
    drop(one);

    // A third process sees both turns.
    let mut three = server(dir.path(), &json!({"responses": []}), &store);
    let id = three.request(
        "session/load",
        json!({"sessionId": s, "cwd": work, "mcpServers": []}),
    );
    let mut users = Vec::new();
    three.until_response(id, |_, v| {
        if v["params"]["update"]["sessionUpdate"] == "user_message_chunk" {
            users.push(v["params"]["update"]["content"]["text"].clone());
        }
    });
    assert_eq!(users, [json!("question one"), json!("question two")]);
}
