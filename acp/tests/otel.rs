//! `agentao-acp` exports OpenTelemetry spans when the environment asks for it
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`): a prompt's turn, read back from a real Jaeger
//! (`scripts/jaeger.sh`; run by the `89-otel` step, skipped where Jaeger cannot run); and
//! the last turn's spans reach a collector even when the client hangs up right after it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::Client;
use serde_json::{json, Value};

fn jaeger() -> Option<(String, String)> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/jaeger.sh");
    let out = Command::new(&script)
        .arg("start")
        .output()
        .expect("scripts/jaeger.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.code() == Some(3) {
        assert!(
            std::env::var_os("AGENTAO_JAEGER_REQUIRED").is_none(),
            "Jaeger is required: {stdout}"
        );
        eprintln!("SKIPPED: Jaeger {stdout}");
        return None;
    }
    assert!(out.status.success(), "scripts/jaeger.sh start: {stdout}");
    let query = Command::new(&script).arg("query").output().unwrap();
    Some((
        stdout.lines().last().unwrap_or_default().to_owned(),
        String::from_utf8_lossy(&query.stdout).trim().to_owned(),
    ))
}

/// GET on loopback, the body as JSON (`Connection: close`, HTTP/1.0 so there is no chunking).
fn get_json(url: &str) -> Option<Value> {
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.contains(" 200 ")
        .then(|| serde_json::from_str(body).ok())?
}

/// A server on `dir/script.json` (written by the caller) with `env`, after one prompt that
/// ended its turn; and the session's workspace.
fn one_prompt(dir: &std::path::Path, env: &[(&str, &str)]) -> (Client, tempfile::TempDir) {
    let (script, sessions) = (dir.join("script.json"), dir.join("sessions"));
    let mut c = Client::spawn_env(
        &[
            "--script",
            script.to_str().unwrap(),
            "--sessions-dir",
            sessions.to_str().unwrap(),
        ],
        env,
    );
    c.initialize();
    let work = tempfile::tempdir().unwrap();
    let session = c.new_session(work.path());
    let id = c.prompt(&session, "hello");
    let r = c.until_response(id, |_, _| {});
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    (c, work)
}

#[test]
#[ignore]
fn a_prompt_is_a_trace_in_jaeger_when_the_environment_names_a_collector() {
    let Some((otlp, query)) = jaeger() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [{"text": "traced answer"}]}).to_string(),
    )
    .unwrap();
    let service = format!("agentao-acp-test-{}", uuid::Uuid::new_v4().simple());
    let (_c, _work) = one_prompt(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp),
            ("OTEL_SERVICE_NAME", &service),
        ],
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let found = get_json(&format!("{query}/api/traces?service={service}"))
            .and_then(|v| v["data"].as_array().cloned())
            .unwrap_or_default();
        let spans: Vec<Value> = found
            .iter()
            .flat_map(|t| t["spans"].as_array().cloned().unwrap_or_default())
            .collect();
        if spans.iter().any(|s| s["operationName"] == "chat scripted") || Instant::now() > deadline
        {
            break spans;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let names: Vec<&str> = spans
        .iter()
        .filter_map(|s| s["operationName"].as_str())
        .collect();
    assert!(names.contains(&"invoke_agent agentao"), "{names:?}");
    assert!(names.contains(&"chat scripted"), "{names:?}");
    let turn = spans
        .iter()
        .find(|s| s["operationName"] == "invoke_agent agentao")
        .unwrap();
    let tags: Vec<&str> = turn["tags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["key"].as_str())
        .collect();
    for key in [
        "gen_ai.conversation.id",
        "gen_ai.provider.name",
        "agentao.turn.status",
    ] {
        assert!(tags.contains(&key), "{key} missing: {tags:?}");
    }
    let everything = spans.iter().map(Value::to_string).collect::<String>();
    assert!(
        !everything.contains("traced answer"),
        "the answer's text is not in a span"
    );
}

/// An OTLP collector: every post answered with an empty 200.
fn collector() -> (String, common::http::Received) {
    common::http::serve(|_, _| ("application/x-protobuf", Vec::new()))
}

#[test]
fn the_last_turns_spans_reach_the_collector_when_the_client_hangs_up_at_once() {
    let (otlp, seen) = collector();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, json!({"responses": [{"text": "hi"}]}).to_string()).unwrap();
    let (c, _work) = one_prompt(dir.path(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)]);
    // Hang up at once (the exporter posts once a second) and wait for the server to exit.
    drop(c);
    let seen = seen.lock().unwrap();
    let turns = seen
        .iter()
        .filter(|(path, body)| {
            path == "/v1/traces"
                && body
                    .windows(b"invoke_agent agentao".len())
                    .any(|w| w == b"invoke_agent agentao")
        })
        .count();
    let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(turns, 1, "requests: {paths:?}");
}
