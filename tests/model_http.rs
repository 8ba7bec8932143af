//! The model's HTTP clients, one conformance suite: every case runs against both clients
//! behind `ModelHttp` (`src/llm/model_http.rs`), the lean lane and reqwest, on the same
//! loopback `mock-openai` over plain `http://` (reqwest is forced there with
//! `HttpClientChoice::Reqwest`). What one client does, the other must do: the same pieces,
//! byte for byte, the same retries, the same error classes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentao::cancel::CancelToken;
use agentao::config::LlmConfig;
use agentao::llm::{ChatRequest, HttpClientChoice, LlmClient, LlmError, Message, Piece};
use mock_openai::{Hostile, MockServer};
use serde_json::{json, Value};

mod common;

const CLIENTS: [HttpClientChoice; 2] = [HttpClientChoice::Auto, HttpClientChoice::Reqwest];

fn client(server: &MockServer, choice: HttpClientChoice, extra: Value) -> LlmClient {
    let mut config = common::openai_llm_config(&server.base_url(), extra);
    match &mut config {
        LlmConfig::OpenAi(c) => c.http_client = choice,
        other => panic!("an OpenAI config, not {other:?}"),
    }
    LlmClient::new(&config).expect("client")
}

/// What one call showed its caller.
#[derive(Debug, Default, PartialEq)]
struct Call {
    texts: Vec<String>,
    retries: Vec<(u32, Duration, String)>,
    error: Option<(String, bool, bool)>,
    content: String,
}

fn error_of(e: &LlmError) -> (String, bool, bool) {
    (e.class.to_string(), e.retryable, e.streamed)
}

async fn call_with(client: &LlmClient, history: &[Message]) -> (Call, Option<LlmError>) {
    let req = ChatRequest {
        system: "You are a test.",
        history,
        history_version: agentao::llm::MessagesVersion::unknown(),
        transcript_version: agentao::llm::MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let cancel = CancelToken::new();
    let mut call = client.start(&req, &cancel);
    let mut out = Call::default();
    let mut error = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), call.next())
            .await
            .expect("no call may hang")
        {
            Ok(Some(Piece::Text(t))) => out.texts.push(t.text.to_owned()),
            Ok(Some(Piece::Retry {
                retry,
                delay,
                reason,
                ..
            })) => out.retries.push((retry, delay, reason.to_string())),
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                out.error = Some(error_of(&e));
                error = Some(e);
                break;
            }
        }
    }
    out.content = call.finish().content;
    (out, error)
}

async fn call(client: &LlmClient) -> Call {
    call_with(client, &[Message::User("Hello?".into())]).await.0
}

/// Runs `script` once per client, each on a fresh server; the calls and the servers.
async fn on_both(script: Value, extra: Value) -> Vec<(HttpClientChoice, Call, MockServer)> {
    let mut all = Vec::new();
    for choice in CLIENTS {
        let server = MockServer::start(script.clone()).expect("mock starts");
        let out = call(&client(&server, choice, extra.clone())).await;
        all.push((choice, out, server));
    }
    all
}

/// The same call on every client.
fn same(all: &[(HttpClientChoice, Call, MockServer)]) {
    for (choice, out, _) in &all[1..] {
        assert_eq!(out, &all[0].1, "{choice:?} differs from {:?}", all[0].0);
    }
}

const CHUNKS: [&str; 5] = ["Grüß ", "dich, ", "世界", " 🎉", " done."];

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_answer_is_byte_identical_on_both_clients() {
    let all = on_both(json!({"responses": [{"chunks": CHUNKS}]}), json!({})).await;
    for (choice, out, server) in &all {
        assert_eq!(out.texts, CHUNKS, "{choice:?}");
        assert_eq!(out.error, None, "{choice:?}");
        assert_eq!(server.request_count(), 1);
    }
    same(&all);
}

#[tokio::test(flavor = "multi_thread")]
async fn chunk_boundaries_anywhere_give_the_same_pieces() {
    for split in [1, 2, 3, 5, 7, 64] {
        let script = json!({"wire": {"split_bytes": split}, "responses": [{"chunks": CHUNKS}]});
        let all = on_both(script, json!({})).await;
        for (choice, out, _) in &all {
            assert_eq!(out.texts, CHUNKS, "{choice:?}, split every {split} bytes");
        }
        same(&all);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_request_honours_retry_after() {
    let script = json!({"responses": [
        {"fault": {"type": "http_error", "status": 429, "message": "Rate limit reached for requests",
                   "error_type": "requests", "code": "rate_limit_exceeded", "headers": {"Retry-After": "0.2"}}},
        {"fault": {"type": "http_error", "status": 500, "message": "oops", "headers": {"Retry-After": "0"}}},
        {"text": "Hello after two retries.", "chunk_size": 6}
    ]});
    for choice in CLIENTS {
        let server = MockServer::start(script.clone()).expect("mock starts");
        let c = client(&server, choice, json!({}));
        let t = Instant::now();
        let out = call(&c).await;
        let elapsed = t.elapsed();
        assert_eq!(out.error, None, "{choice:?}");
        assert_eq!(
            out.retries,
            [
                (1, Duration::from_millis(200), "status=429".to_owned()),
                (2, Duration::ZERO, "status=500".to_owned())
            ],
            "{choice:?}"
        );
        assert!(
            elapsed >= Duration::from_millis(200),
            "{choice:?} slept {elapsed:?}"
        );
        assert_eq!(
            out.texts,
            ["Hello ", "after ", "two re", "tries."],
            "{choice:?}"
        );
        assert_eq!(server.request_count(), 3);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_closing_mid_stream_is_a_connection_error_after_the_text() {
    let script = json!({"responses": [
        {"text": "half an answer", "chunk_size": 5, "fault": {"type": "drop", "after_events": 2}},
        {"text": "unused"}
    ]});
    let all = on_both(script, json!({})).await;
    for (choice, out, server) in &all {
        assert_eq!(out.texts, ["half ", "an an"], "{choice:?}");
        assert_eq!(
            out.error,
            Some(("APIConnectionError".to_owned(), true, true)),
            "{choice:?}"
        );
        assert!(
            out.retries.is_empty(),
            "{choice:?}: a streamed error is not retried"
        );
        assert_eq!(out.content, "half an an");
        assert_eq!(server.request_count(), 1);
    }
    same(&all);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_first_byte_hits_the_read_timeout() {
    for before_headers in [true, false] {
        let script = json!({"wire": {"stall_before_headers": before_headers},
                            "responses": [{"text": "late", "fault": {"type": "stall", "ms": 3000}}]});
        for choice in CLIENTS {
            let server = MockServer::start(script.clone()).expect("mock starts");
            let c = client(
                &server,
                choice,
                json!({"read_timeout_ms": 200, "max_attempts": 1}),
            );
            let t = Instant::now();
            let out = call(&c).await;
            let what = format!("{choice:?}, stall before the headers: {before_headers}");
            assert_eq!(
                out.error,
                Some(("APITimeoutError".to_owned(), true, false)),
                "{what}"
            );
            assert!(out.texts.is_empty(), "{what}");
            assert!(
                t.elapsed() < Duration::from_millis(1500),
                "{what}: {:?}",
                t.elapsed()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_stream_ends_the_call_quietly_and_promptly() {
    for choice in CLIENTS {
        let server = MockServer::builder()
            .start_hostile(Hostile::EndlessText {
                chunk: 8,
                interval_ms: 20,
            })
            .expect("mock starts");
        let c = client(&server, choice, json!({}));
        let history = [Message::User("Hello?".into())];
        let req = ChatRequest {
            system: "s",
            history: &history,
            history_version: agentao::llm::MessagesVersion::unknown(),
            transcript_version: agentao::llm::MessagesVersion::unknown(),
            transcript: &[],
            tail: None,
            tools: &Arc::default(),
        };
        let cancel = CancelToken::new();
        let mut call = c.start(&req, &cancel);
        let mut texts = Vec::new();
        match call.next().await {
            Ok(Some(Piece::Text(t))) => texts.push(t.text.to_owned()),
            other => panic!("{choice:?}: expected text, got {other:?}"),
        }
        let token = cancel.clone();
        let cancelled_at = Instant::now() + Duration::from_millis(100);
        tokio::spawn(async move {
            tokio::time::sleep_until(cancelled_at.into()).await;
            token.cancel("test-cancel");
        });
        loop {
            match tokio::time::timeout(Duration::from_secs(5), call.next())
                .await
                .expect("next() must return after the cancel")
            {
                Ok(Some(Piece::Text(t))) => texts.push(t.text.to_owned()),
                Ok(Some(other)) => panic!("{choice:?}: unexpected {other:?}"),
                Ok(None) => break,
                Err(e) => panic!("{choice:?}: a cancel must end the call quietly: {e:?}"),
            }
        }
        let late = Instant::now().saturating_duration_since(cancelled_at);
        assert!(
            late < Duration::from_millis(200),
            "{choice:?}: next() took {late:?} after the cancel"
        );
        assert!(call.was_cancelled(), "{choice:?}");
        assert_eq!(
            call.finish().content,
            texts.concat(),
            "{choice:?}: what arrived is kept"
        );
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_request_reuses_the_kept_alive_connection() {
    let script = json!({"responses": [{"text": "one"}, {"text": "two"}]});
    for choice in CLIENTS {
        // hyper (under reqwest) hands a finished connection back to its pool from the
        // connection's own task, a moment after the body's end was read: a second request sent
        // in that moment opens another. A host's next request comes later than that; on a
        // loaded machine "later" can exceed any fixed pause, so a client that never reuses is
        // told apart by three tries with growing pauses, not by one.
        let mut connections = Vec::new();
        for pause_ms in [100, 500, 2000] {
            let server = MockServer::start(script.clone()).expect("mock starts");
            let c = client(&server, choice, json!({}));
            assert_eq!(call(&c).await.texts, ["one"], "{choice:?}");
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
            assert_eq!(call(&c).await.texts, ["two"], "{choice:?}");
            assert_eq!(server.request_count(), 2);
            connections.push(server.accepted_connections());
            if server.accepted_connections() == 1 {
                break;
            }
        }
        assert_eq!(
            connections.last(),
            Some(&1),
            "{choice:?}: one connection for both (connections per try: {connections:?})"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn large_bodies_cross_both_ways_intact() {
    // 4 MiB of request (a long user message) and 1 MiB of answer in 16 KiB deltas.
    let big_message: String = "0123456789abcdef".repeat(4 * 1024 * 1024 / 16);
    let answer: String = "the quick brown fox jumps over ".repeat(1024 * 1024 / 31);
    let script = json!({"responses": [{"text": answer, "chunk_size": 16 * 1024}]});
    for choice in CLIENTS {
        let server = MockServer::builder()
            .record_bodies(true)
            .start(script.clone())
            .expect("mock starts");
        let c = client(&server, choice, json!({}));
        let (out, _) = call_with(&c, &[Message::User(big_message.clone())]).await;
        assert_eq!(out.error, None, "{choice:?}");
        assert_eq!(out.content, answer, "{choice:?}");
        let received = server.requests();
        assert_eq!(received.len(), 1);
        let sent = received[0]["messages"][1]["content"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            sent.len(),
            big_message.len(),
            "{choice:?}: the request arrived whole"
        );
        assert!(
            sent == big_message,
            "{choice:?}: the request arrived unchanged"
        );
    }
}
