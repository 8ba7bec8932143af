//! agentao-acp driven by the official Rust ACP client, the `agent-client-protocol` crate
//! (pinned in `acp/Cargo.toml`), through the scenario of `tests/acp-python/client.py` and
//! `tests/acp-node/client.mjs`: `initialize` with the SDK's defaults
//! (`InitializeRequest::new(ProtocolVersion::V1)`), `session/new` with `_meta` and
//! `additionalDirectories`, a prompt whose `agent_message_chunk` text streams and that ends
//! `end_turn`, a second prompt stopped by a `session/cancel` carrying `_meta` (the latency from the
//! cancel to the `cancelled` response is printed as a FIGURE line), and `session/list`.
//!
//! The client answers `session/request_permission` (with `cancelled`, as the Python client does),
//! but the scripted model of this scenario calls no tool, so no permission request is made: the
//! Python scenario has none either.
//!
//! Transport: the crate's `Lines` over the child's pipes (tokio's process and line reader, the
//! crate's `futures` sink/stream adapters), which is what its `ByteStreams` does over
//! `futures::io`; it spares a `tokio-util` `compat` feature that would rebuild the library's
//! dependencies for the test profile. The crate 5.x is multi-threaded (`Send` futures), so no
//! `LocalSet` is needed.
//!
//! The crate's 5.x API is the builder (`Client.v1().on_receive_…().connect_with(transport, …)`);
//! the `ClientSideConnection` of its 0.x line is gone.
//!
//! Every wire type of the crate fits the server here: nothing had to be sent raw. Its
//! `initialize` sends a full `clientCapabilities` with an `auth` member newer than the server's
//! reference schema, which the server takes like any unknown field.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, ListSessionsRequest, NewSessionRequest,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Client, Lines};
use futures::StreamExt;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(30);
/// The contract is 100 ms; the bound leaves room for a loaded 2-core machine, as the Python and
/// TypeScript clients' bound does.
const CANCEL_BOUND: Duration = Duration::from_millis(500);

fn meta() -> Map<String, Value> {
    let Value::Object(m) = json!({"trace": "acp-rust"}) else {
        unreachable!()
    };
    m
}

fn text(s: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(s))]
}

/// What the scenario saw, asserted after the connection is closed.
#[derive(Debug)]
struct Seen {
    protocol_version: ProtocolVersion,
    session_id: String,
    first_stop: StopReason,
    first_text: String,
    cancel_stop: StopReason,
    cancel_latency: Duration,
    listed: Vec<String>,
    permission_requests: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_rust_client_runs_the_sdk_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().canonicalize().unwrap();
    let extra = work.join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let script = work.join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"text": "hello from agentao"},
            {"repeat": 3, "text": "x".repeat(400), "chunk_size": 1, "delay_ms": 20}]})
        .to_string(),
    )
    .unwrap();

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentao-acp"))
        .arg("--script")
        .arg(&script)
        .arg("--sessions-dir")
        .arg(work.join("sessions"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("agentao-acp starts");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();

    // One JSON-RPC message a line, each way; what the SDK sends is kept to check the wire.
    let sent = Arc::new(Mutex::new(Vec::<Value>::new()));
    let log = sent.clone();
    let outgoing = futures::sink::unfold(stdin, move |mut w, line: String| {
        log.lock()
            .unwrap()
            .push(serde_json::from_str(&line).expect("the SDK writes JSON lines"));
        async move {
            w.write_all(line.as_bytes()).await?;
            w.write_all(b"\n").await?;
            w.flush().await?;
            Ok::<_, std::io::Error>(w)
        }
    });
    let incoming = futures::stream::unfold(BufReader::new(stdout).lines(), |mut l| async move {
        l.next_line().await.transpose().map(|r| (r, l))
    });
    let transport = Lines::new(Box::pin(outgoing), incoming.boxed());

    // Agent message chunks' text, as the client's handler receives them.
    let (chunks_tx, mut chunks) = mpsc::unbounded_channel::<String>();
    let (perm_tx, mut perms) = mpsc::unbounded_channel::<()>();

    let seen = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                if let SessionUpdate::AgentMessageChunk(c) = n.update {
                    if let ContentBlock::Text(t) = c.content {
                        let _ = chunks_tx.send(t.text);
                    }
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |_r: RequestPermissionRequest, responder, _cx| {
                let _ = perm_tx.send(());
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Cancelled,
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |cx: ConnectionTo<Agent>| {
            let init = cx
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;

            let session = cx
                .send_request(
                    NewSessionRequest::new(work.clone())
                        .additional_directories(vec![extra.clone()])
                        .meta(meta()),
                )
                .block_task()
                .await?;
            let sid = session.session_id;

            let first = cx
                .send_request(PromptRequest::new(sid.clone(), text("hi")).meta(meta()))
                .block_task()
                .await?;
            // Every update is dispatched before the response that follows it.
            let mut first_text = String::new();
            while let Ok(t) = chunks.try_recv() {
                first_text.push_str(&t);
            }

            // A turn that streams slowly, stopped by a cancel with `_meta`.
            let running = cx
                .send_request(PromptRequest::new(sid.clone(), text("talk")))
                .block_task();
            let streaming = tokio::time::timeout(WAIT, chunks.recv()).await;
            assert!(matches!(streaming, Ok(Some(_))), "the second turn streams");
            let t0 = Instant::now();
            cx.send_notification(CancelNotification::new(sid.clone()).meta(meta()))?;
            let cancelled = tokio::time::timeout(WAIT, running)
                .await
                .expect("the cancelled turn answers")?;
            let cancel_latency = t0.elapsed();

            let listed = cx
                .send_request(ListSessionsRequest::new().meta(meta()))
                .block_task()
                .await?;
            let mut permission_requests = 0;
            while perms.try_recv().is_ok() {
                permission_requests += 1;
            }
            Ok(Seen {
                protocol_version: init.protocol_version,
                session_id: sid.to_string(),
                first_stop: first.stop_reason,
                first_text,
                cancel_stop: cancelled.stop_reason,
                cancel_latency,
                listed: listed
                    .sessions
                    .iter()
                    .map(|s| s.session_id.to_string())
                    .collect(),
                permission_requests,
            })
        })
        .await
        .expect("the scenario runs over the Rust SDK");

    println!(
        "FIGURE acp-rust/cancel-with-meta: {:.1} ms to the cancelled response",
        seen.cancel_latency.as_secs_f64() * 1000.0
    );
    assert_eq!(seen.protocol_version, ProtocolVersion::V1, "{seen:?}");
    assert!(!seen.session_id.is_empty(), "{seen:?}");
    assert_eq!(seen.first_stop, StopReason::EndTurn, "{seen:?}");
    assert_eq!(seen.first_text, "hello from agentao", "{seen:?}");
    assert_eq!(seen.cancel_stop, StopReason::Cancelled, "{seen:?}");
    assert!(seen.cancel_latency < CANCEL_BOUND, "{seen:?}");
    assert!(seen.listed.contains(&seen.session_id), "{seen:?}");
    assert_eq!(seen.permission_requests, 0, "{seen:?}");

    // On the wire: the SDK's `initialize` defaults, and the `_meta` the cancel carried.
    let sent = sent.lock().unwrap();
    let find = |method: &str| {
        sent.iter()
            .find(|m| m["method"] == method)
            .unwrap_or_else(|| panic!("no {method} in {sent:?}"))
            .clone()
    };
    let init = find("initialize");
    println!("acp-rust: initialize sent {}", init["params"]);
    assert_eq!(init["params"]["protocolVersion"], 1, "{init}");
    let cancel = find("session/cancel");
    assert!(cancel.get("id").is_none(), "a notification: {cancel}");
    assert_eq!(cancel["params"]["_meta"]["trace"], "acp-rust", "{cancel}");
    assert_eq!(
        cancel["params"]["sessionId"],
        seen.session_id.as_str(),
        "{cancel}"
    );
    let new = find("session/new");
    assert_eq!(new["params"]["_meta"]["trace"], "acp-rust", "{new}");
    assert_eq!(
        new["params"]["additionalDirectories"][0],
        extra.display().to_string(),
        "{new}"
    );

    drop(child);
}
