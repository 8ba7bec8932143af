//! Our real HTTP path (`LlmClient` → reqwest → SSE parser → assembler → retry policy) against the
//! loopback mock of the OpenAI wire. Each test scripts one exchange and checks the pieces the turn
//! loop would see, the assembled response, the error, and what the server received.
//! The cases that must hold on both HTTP clients (retry-after, a close mid-stream, a slow first
//! byte, chunk boundaries, cancel, keep-alive, large bodies) are in `tests/model_http.rs`, which
//! runs each on the lean lane and on reqwest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentao::cancel::CancelToken;
use agentao::config::LlmConfig;
use agentao::llm::{ChatRequest, LlmClient, LlmError, LlmResponse, Message, Piece};
use mock_openai::{render_sse, MockServer};
use serde_json::{json, Value};

mod common;

fn config(server: &MockServer, extra: Value) -> LlmConfig {
    common::openai_llm_config(&server.base_url(), extra)
}

fn client(server: &MockServer, extra: Value) -> LlmClient {
    LlmClient::new(&config(server, extra)).expect("client")
}

#[derive(Debug, Clone, PartialEq)]
enum P {
    Text(String),
    Reasoning(String),
    Retry {
        retry: u32,
        delay: Duration,
        reason: String,
    },
}

fn owned(p: Piece<'_>) -> P {
    match p {
        Piece::Text(t) => P::Text(t.text.to_owned()),
        Piece::Reasoning(r) => P::Reasoning(r.to_owned()),
        Piece::Retry {
            retry,
            delay,
            reason,
            ..
        } => P::Retry {
            retry,
            delay,
            reason,
        },
    }
}

struct Outcome {
    pieces: Vec<P>,
    error: Option<LlmError>,
    response: LlmResponse,
    cancelled: bool,
}

impl Outcome {
    fn texts(&self) -> Vec<&str> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                P::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn retries(&self) -> Vec<(u32, Duration, String)> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                P::Retry {
                    retry,
                    delay,
                    reason,
                } => Some((*retry, *delay, reason.clone())),
                _ => None,
            })
            .collect()
    }
}

fn user_history() -> Vec<Message> {
    vec![Message::User("Hello?".into())]
}

async fn run_with(client: &LlmClient, tools: &Arc<Vec<Value>>, cancel: &CancelToken) -> Outcome {
    let history = user_history();
    let req = ChatRequest {
        system: "You are a test.",
        history: &history,
        history_version: agentao::llm::MessagesVersion::unknown(),
        transcript_version: agentao::llm::MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools,
    };
    let mut call = client.start(&req, cancel);
    let mut pieces = Vec::new();
    let mut error = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), call.next())
            .await
            .expect("no call may hang")
        {
            Ok(Some(p)) => pieces.push(owned(p)),
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let cancelled = call.was_cancelled();
    Outcome {
        pieces,
        error,
        response: call.finish(),
        cancelled,
    }
}

async fn run(client: &LlmClient) -> Outcome {
    run_with(client, &Arc::default(), &CancelToken::new()).await
}

async fn serve(script: Value, extra: Value) -> (MockServer, Outcome) {
    let server = MockServer::start(script).expect("mock starts");
    let c = client(&server, extra);
    let out = run(&c).await;
    (server, out)
}

fn ok(out: &Outcome) {
    if let Some(e) = &out.error {
        panic!("unexpected error: {e:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Stream shapes

#[tokio::test(flavor = "multi_thread")]
async fn plain_text_pieces_equal_the_scripted_chunks() {
    let (server, out) = serve(
        json!({"responses": [{"text": "Hello after two retries.", "chunk_size": 6,
                              "usage": {"prompt_tokens": 12, "completion_tokens": 4}}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.pieces.len(), 4, "{:?}", out.pieces);
    assert_eq!(out.texts(), ["Hello ", "after ", "two re", "tries."]);
    let r = &out.response;
    assert_eq!(r.content, "Hello after two retries.");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(r.model, "mock-model");
    let u = r.usage.expect("usage");
    assert_eq!((u.prompt_tokens, u.completion_tokens), (12, 4));
    assert!(r.first_token.is_some());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn explicit_chunks_including_unicode() {
    let (_s, out) = serve(
        json!({"responses": [{"chunks": ["Grüß ", "dich, ", "世界", " 🎉"]}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["Grüß ", "dich, ", "世界", " 🎉"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn reasoning_pieces_come_before_text() {
    let (_s, out) = serve(
        json!({"responses": [{"reasoning": "Let me think.", "reasoning_chunk_size": 5,
                              "text": "Answer.", "chunk_size": 3}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(
        out.pieces,
        vec![
            P::Reasoning("Let m".into()),
            P::Reasoning("e thi".into()),
            P::Reasoning("nk.".into()),
            P::Text("Ans".into()),
            P::Text("wer".into()),
            P::Text(".".into()),
        ]
    );
    assert_eq!(out.response.reasoning, "Let me think.");
    assert_eq!(out.response.content, "Answer.");
    assert!(out.response.first_reasoning.unwrap() <= out.response.first_token.unwrap());
}

fn calls(r: &LlmResponse) -> Vec<(String, String, String)> {
    r.tool_calls
        .iter()
        .map(|c| {
            (
                c.id.to_string(),
                c.name.to_string(),
                c.raw_arguments.clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_fragmented_across_deltas() {
    let (server, out) = serve(
        json!({"responses": [{"tool_calls": [
            {"id": "call_a", "name": "read_file", "arguments": {"file_path": "data.csv"}, "arg_chunks": 4},
            {"id": "call_b", "name": "list_directory", "arguments": {"directory_path": "."}, "arg_chunks": 2}
        ]}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert!(out.pieces.is_empty(), "{:?}", out.pieces);
    assert_eq!(
        calls(&out.response),
        vec![
            (
                "call_a".into(),
                "read_file".into(),
                r#"{"file_path": "data.csv"}"#.into()
            ),
            (
                "call_b".into(),
                "list_directory".into(),
                r#"{"directory_path": "."}"#.into()
            ),
        ]
    );
    assert_eq!(out.response.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_call_whole_in_one_chunk_with_text() {
    let (_s, out) = serve(
        json!({"responses": [{"text": "Reading.", "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": "{\"file_path\":\"a\"}"}
        ], "finish_reason": "stop"}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["Reading."]);
    assert_eq!(
        calls(&out.response),
        vec![(
            "c1".into(),
            "read_file".into(),
            r#"{"file_path":"a"}"#.into()
        )]
    );
    // Ollama-style: calls with finish_reason stop are still assembled.
    assert_eq!(out.response.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_call_arguments_as_an_object() {
    let (_s, out) = serve(
        json!({"responses": [{"tool_calls": [
            {"id": "c1", "name": "glob", "arguments": {"pattern": "*.rs"}, "arguments_as_object": true}
        ]}]}),
        json!({}),
    )
    .await;
    ok(&out);
    let c = calls(&out.response);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].0.as_str(), c[0].1.as_str()), ("c1", "glob"));
    let args: Value = serde_json::from_str(&c[0].2).expect("arguments are JSON");
    assert_eq!(args, json!({"pattern": "*.rs"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_without_index() {
    // Gemini-style: no `index`; each call opens with its id, arguments-only deltas continue it.
    let (_s, out) = serve(
        json!({"responses": [{"tool_calls": [
            {"id": "g1", "name": "read_file", "arguments": "{\"file_path\": \"a\"}", "arg_chunks": 3, "index": null},
            {"id": "g2", "name": "glob", "arguments": "{\"pattern\": \"*\"}", "arg_chunks": 2, "index": null}
        ], "finish_reason": "stop"}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(
        calls(&out.response),
        vec![
            (
                "g1".into(),
                "read_file".into(),
                r#"{"file_path": "a"}"#.into()
            ),
            ("g2".into(), "glob".into(), r#"{"pattern": "*"}"#.into()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reused_index_zero_with_different_ids() {
    // Ollama-style: parallel calls all say index 0, each complete in one chunk.
    let (_s, out) = serve(
        json!({"responses": [{"tool_calls": [
            {"id": "o1", "name": "read_file", "arguments": "{\"file_path\": \"a\"}", "index": 0},
            {"id": "o2", "name": "read_file", "arguments": "{\"file_path\": \"b\"}", "index": 0}
        ]}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(
        calls(&out.response),
        vec![
            (
                "o1".into(),
                "read_file".into(),
                r#"{"file_path": "a"}"#.into()
            ),
            (
                "o2".into(),
                "read_file".into(),
                r#"{"file_path": "b"}"#.into()
            ),
        ]
    );
}

async fn usage_with_choices(mode: &str) {
    let (_s, out) = serve(
        json!({"wire": {"usage_choices": mode},
               "responses": [{"text": "hi", "usage": {"prompt_tokens": 7, "completion_tokens": 1,
                   "prompt_tokens_details": {"cached_tokens": 3},
                   "completion_tokens_details": {"reasoning_tokens": 0}}}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["hi"]);
    let u = out
        .response
        .usage
        .unwrap_or_else(|| panic!("usage with choices {mode}"));
    assert_eq!(
        (u.prompt_tokens, u.completion_tokens, u.cache_read_tokens),
        (7, 1, 3)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_only_chunk_with_choices_null() {
    usage_with_choices("null").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_only_chunk_without_choices() {
    usage_with_choices("absent").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_is_added_to_the_client_totals() {
    let server = MockServer::start(json!({"responses": [
        {"text": "a", "usage": {"prompt_tokens": 10, "completion_tokens": 2}},
        {"text": "b", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    ]}))
    .unwrap();
    let c = client(&server, json!({}));
    ok(&run(&c).await);
    ok(&run(&c).await);
    let total = c.usage.snapshot();
    assert_eq!((total.prompt_tokens, total.completion_tokens), (15, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn crlf_line_ends_and_keepalive_comments() {
    let (_s, out) = serve(
        json!({"wire": {"crlf": true, "keepalive_comments": true},
               "responses": [{"reasoning": "r", "text": "one two three", "chunk_size": 4}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.pieces[0], P::Reasoning("r".into()));
    assert_eq!(out.texts(), ["one ", "two ", "thre", "e"]);
    assert_eq!(out.response.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test(flavor = "multi_thread")]
async fn data_without_space() {
    let (_s, out) = serve(
        json!({"wire": {"no_space": true}, "responses": [{"text": "abc", "chunk_size": 1}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["a", "b", "c"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_done_ends_at_eof() {
    let (server, out) = serve(
        json!({"wire": {"omit_done": true}, "responses": [{"text": "no done", "chunk_size": 3}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["no ", "don", "e"]);
    assert_eq!(out.response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_finish_reason_is_none() {
    let (server, out) = serve(
        json!({"responses": [{"text": "cut", "finish_reason": null}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["cut"]);
    assert_eq!(out.response.finish_reason, None);
    assert_eq!(
        server.request_count(),
        1,
        "a missing finish reason is not retried"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_line_is_skipped() {
    let (_s, out) = serve(
        json!({"responses": [{"text": "fine", "fault": {"type": "malformed", "line": "data: {not json"}}]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["fine"]);
}

// ---------------------------------------------------------------------------------------------
// Errors and retries

#[tokio::test(flavor = "multi_thread")]
async fn in_stream_server_error_is_retried() {
    let (server, out) = serve(
        json!({"responses": [
            {"text": "never", "fault": {"type": "in_stream_error", "after_events": 0,
                "message": "The server had an error", "code": "server_error", "error_type": "server_error"}},
            {"text": "recovered"}
        ]}),
        json!({}),
    )
    .await;
    ok(&out);
    let retries = out.retries();
    assert_eq!(retries.len(), 1, "{:?}", out.pieces);
    assert_eq!(retries[0].2, "status=500");
    assert_eq!(out.texts(), ["recovered"]);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn in_stream_error_after_text_is_not_retried() {
    let (server, out) = serve(
        json!({"responses": [
            {"text": "partial answer", "chunk_size": 8, "fault": {"type": "in_stream_error", "after_events": 1,
                "message": "upstream died", "code": "server_error"}},
            {"text": "unused"}
        ]}),
        json!({}),
    )
    .await;
    assert_eq!(out.texts(), ["partial "]);
    let e = out.error.clone().expect("error");
    assert!(e.streamed);
    assert!(e.message.contains("upstream died"), "{e:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn in_stream_error_without_retryable_code_fails_at_once() {
    let (server, out) = serve(
        json!({"responses": [
            {"text": "x", "fault": {"type": "in_stream_error", "after_events": 0,
                "message": "content policy", "code": "content_filter"}},
            {"text": "unused"}
        ]}),
        json!({}),
    )
    .await;
    let e = out.error.clone().expect("error");
    assert!(!e.retryable);
    assert!(!e.streamed);
    assert!(e.message.contains("content policy"));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn vllm_shaped_in_stream_error_with_retryable_code_is_retried() {
    // BUG (src/llm/openai/decode.rs, `ChunkSeed::visit_map`): for the vLLM error shape
    // `{"object":"error","message":…,"type":…,"code":503}` only `message` is kept; the top-level
    // `code` and `type` fall into the `_ => IgnoredAny` arm, so `in_stream_error` sees no code and
    // classifies the error as a non-retryable APIError. The policy (spec §4.6: "error chunks
    // inside a 200 stream (… or a numeric retryable `code`)") says 503 is retried.
    // Fix: capture top-level `code` and `type` in visit_map and pass them with the message.
    let (server, out) = serve(
        json!({"responses": [
            {"text": "never", "fault": {"type": "malformed",
                "line": "data: {\"object\":\"error\",\"message\":\"engine overloaded\",\"type\":\"ServiceUnavailableError\",\"param\":null,\"code\":503}"}},
            {"text": "recovered"}
        ]}),
        json!({}),
    )
    .await;
    assert!(
        out.error.is_none(),
        "vLLM error with code 503 was not retried: {:?}",
        out.error
    );
    assert_eq!(out.retries().len(), 1);
    assert_eq!(out.texts(), ["recovered"]);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn vllm_shaped_in_stream_error_is_an_error() {
    let (_s, out) = serve(
        json!({"responses": [
            {"text": "never", "fault": {"type": "malformed",
                "line": "data: {\"object\":\"error\",\"message\":\"bad things\",\"code\":400}"}}
        ]}),
        json!({}),
    )
    .await;
    let e = out.error.clone().expect("error");
    assert!(e.message.contains("bad things"));
    assert!(out.texts().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn retried_500_then_success() {
    let (server, out) = serve(
        json!({"responses": [
            {"fault": {"type": "http_error", "status": 500, "message": "The server had an error while processing your request."}},
            {"text": "after retry"}
        ]}),
        json!({}),
    )
    .await;
    ok(&out);
    assert_eq!(out.pieces.len(), 2, "{:?}", out.pieces);
    match &out.pieces[0] {
        P::Retry { retry, reason, .. } => {
            assert_eq!(*retry, 1);
            assert_eq!(reason, "status=500");
        }
        other => panic!("expected a retry first, got {other:?}"),
    }
    assert_eq!(out.pieces[1], P::Text("after retry".into()));
    assert_eq!(server.request_count(), 2);
    assert_eq!(
        server.requests()[0],
        server.requests()[1],
        "a retry resends the same body"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn quota_429_is_not_retried() {
    let (server, out) = serve(
        json!({"responses": [
            {"fault": {"type": "http_error", "status": 429, "message": "You exceeded your current quota",
                       "error_type": "insufficient_quota", "code": "insufficient_quota"}},
            {"text": "unused"}
        ]}),
        json!({}),
    )
    .await;
    let e = out.error.clone().expect("error");
    assert_eq!(e.status, Some(429));
    assert!(!e.retryable);
    assert!(e.message.contains("exceeded your current quota"));
    assert!(out.retries().is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_request_400_is_not_retried() {
    let (server, out) = serve(
        json!({"responses": [
            {"fault": {"type": "http_error", "status": 400, "message": "Invalid schema for function 'x'",
                       "code": "invalid_function_parameters"}},
            {"text": "unused"}
        ]}),
        json!({}),
    )
    .await;
    let e = out.error.clone().expect("error");
    assert_eq!(e.status, Some(400));
    assert_eq!(e.class, "BadRequestError");
    assert!(e.message.contains("Invalid schema for function 'x'"), "{e}");
    assert!(e.to_string().contains("400"));
    assert!(!e.retryable && !e.streamed);
    assert!(out.pieces.is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_stop_after_max_attempts() {
    let (server, out) = serve(
        json!({"responses": [{"repeat": 5, "fault": {"type": "http_error", "status": 503, "message": "busy {i}"}}]}),
        json!({"max_attempts": 3}),
    )
    .await;
    let e = out.error.clone().expect("error");
    assert_eq!(e.status, Some(503));
    assert!(e.message.contains("busy 3"), "{e}");
    assert_eq!(out.retries().len(), 2);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn drop_before_any_text_is_retried() {
    let (server, out) = serve(
        json!({"responses": [
            {"reasoning": "hm", "text": "lost", "fault": {"type": "drop", "after_events": 1}},
            {"text": "second try"}
        ]}),
        json!({}),
    )
    .await;
    ok(&out);
    let r = out.retries();
    assert_eq!(r.len(), 1, "{:?}", out.pieces);
    assert_eq!(r[0].2, "APIConnectionError");
    assert_eq!(out.texts(), ["second try"]);
    assert_eq!(out.response.content, "second try");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn stall_then_success_is_retried() {
    let (server, out) = serve(
        json!({"responses": [
            {"text": "late", "fault": {"type": "stall", "ms": 2000}},
            {"text": "on time"}
        ]}),
        json!({"read_timeout_ms": 200}),
    )
    .await;
    ok(&out);
    assert_eq!(out.retries()[0].2, "APITimeoutError");
    assert_eq!(out.texts(), ["on time"]);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn keepalive_comments_do_not_hide_a_stall() {
    let server = MockServer::start(json!({
        "wire": {"keepalive_comments": true, "keepalive_interval_ms": 30},
        "responses": [{"text": "late", "fault": {"type": "stall", "ms": 3000}}]
    }))
    .unwrap();
    let c = client(&server, json!({"read_timeout_ms": 250, "max_attempts": 1}));
    let t = Instant::now();
    let out = run(&c).await;
    assert_eq!(out.error.expect("timeout").class, "APITimeoutError");
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_stream_within_read_timeout_is_fine() {
    let (_s, out) = serve(
        json!({"responses": [{"text": "slow but steady", "chunk_size": 5, "delay_ms": 100}]}),
        json!({"read_timeout_ms": 300}),
    )
    .await;
    ok(&out);
    assert_eq!(out.texts(), ["slow ", "but s", "teady"]);
}

/// Cancels from another task 150 ms after the call has started waiting (after the first piece
/// when `first_piece`), then checks that `next()` ends quietly within 100 ms.
async fn cancel_while(script: Value, first_piece: bool) {
    let server = MockServer::start(script).unwrap();
    let c = client(&server, json!({}));
    let cancel = CancelToken::new();
    let history = user_history();
    let req = ChatRequest {
        system: "s",
        history: &history,
        history_version: agentao::llm::MessagesVersion::unknown(),
        transcript_version: agentao::llm::MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let mut call = c.start(&req, &cancel);
    let mut texts = Vec::new();
    if first_piece {
        match call.next().await.expect("first piece") {
            Some(Piece::Text(t)) => texts.push(t.text.to_owned()),
            other => panic!("expected text, got {other:?}"),
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
    let token = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let at = Instant::now();
        token.cancel("test-cancel");
        let _ = tx.send(at);
    });
    loop {
        match tokio::time::timeout(Duration::from_secs(5), call.next())
            .await
            .expect("next() must return after cancel")
        {
            Ok(Some(Piece::Text(t))) => texts.push(t.text.to_owned()),
            Ok(Some(other)) => panic!("unexpected {other:?}"),
            Ok(None) => break,
            Err(e) => panic!("cancel must end the call quietly: {e:?}"),
        }
    }
    let returned = Instant::now();
    let cancelled_at = rx.await.expect("cancel sent");
    assert!(
        returned.duration_since(cancelled_at) < Duration::from_millis(100),
        "next() took {:?} after the cancel",
        returned.duration_since(cancelled_at)
    );
    assert!(call.was_cancelled());
    let r = call.finish();
    assert_eq!(r.content, texts.concat(), "what arrived is kept");
    assert_eq!(texts.is_empty(), !first_piece);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_stream_while_the_server_is_slow() {
    cancel_while(
        json!({"responses": [{"text": "abcdefghij", "chunk_size": 1, "delay_ms": 400}]}),
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_while_the_server_stalls_after_the_headers() {
    cancel_while(
        json!({"responses": [{"text": "never", "fault": {"type": "stall", "ms": 10000}}]}),
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_during_backoff_ends_promptly() {
    let server = MockServer::start(json!({"responses": [
        {"fault": {"type": "http_error", "status": 503, "message": "busy", "headers": {"Retry-After": "5"}}},
        {"text": "unused"}
    ]}))
    .unwrap();
    let c = client(&server, json!({}));
    let cancel = CancelToken::new();
    let token = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        token.cancel("test-cancel");
    });
    let t = Instant::now();
    let out = run_with(&c, &Arc::default(), &cancel).await;
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(out.retries().len(), 1);
    // Either shape ends the call; the second request is never sent.
    assert!(out.cancelled || out.error.is_some());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn stall_before_the_response_head_times_out() {
    let server = MockServer::start(json!({
        "wire": {"stall_before_headers": true},
        "responses": [{"text": "late", "fault": {"type": "stall", "ms": 3000}}]
    }))
    .unwrap();
    let c = client(&server, json!({"read_timeout_ms": 200, "max_attempts": 1}));
    let t = Instant::now();
    let out = run(&c).await;
    let e = out.error.clone().expect("timeout error");
    assert_eq!(e.class, "APITimeoutError");
    assert!(e.retryable);
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_before_the_response_head() {
    let server = MockServer::start(json!({
        "wire": {"stall_before_headers": true},
        "responses": [{"text": "never", "fault": {"type": "stall", "ms": 10000}}]
    }))
    .unwrap();
    let c = client(&server, json!({}));
    let cancel = CancelToken::new();
    let token = cancel.clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let at = Instant::now();
        token.cancel("test-cancel");
        let _ = tx.send(at);
    });
    let out = run_with(&c, &Arc::default(), &cancel).await;
    let lag = Instant::now().duration_since(rx.await.unwrap());
    assert!(out.error.is_none(), "{:?}", out.error);
    assert!(out.cancelled);
    assert!(out.pieces.is_empty());
    assert!(lag < Duration::from_millis(100), "{lag:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_refused_is_retried_then_fails() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = LlmClient::new(&common::openai_llm_config(
        &format!("http://127.0.0.1:{port}/v1"),
        json!({"max_attempts": 2}),
    ))
    .unwrap();
    let out = run(&c).await;
    let e = out.error.clone().expect("connection error");
    assert_eq!(e.class, "APIConnectionError");
    assert!(e.retryable && !e.streamed);
    assert_eq!(out.retries().len(), 1);
    assert_eq!(out.retries()[0].2, "APIConnectionError");
}

#[tokio::test(flavor = "multi_thread")]
async fn prerendered_server_serves_repeated_calls() {
    let body = render_sse(
        json!({"responses": [{"text": "same answer", "chunk_size": 5,
        "usage": {"prompt_tokens": 2, "completion_tokens": 3}}]}),
    )
    .unwrap();
    let server = MockServer::start_prerendered(body).unwrap();
    let c = client(&server, json!({}));
    for _ in 0..5 {
        let out = run(&c).await;
        ok(&out);
        assert_eq!(out.texts(), ["same ", "answe", "r"]);
    }
    assert_eq!(server.request_count(), 5);
    assert!(server.server_busy_nanos() > 0);
    assert_eq!(c.usage.snapshot().completion_tokens, 15);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tokens_repair_switches_to_max_completion_tokens() {
    let (server, out) = serve(
        json!({"responses": [
            {"fault": {"type": "http_error", "status": 400, "code": "unsupported_parameter",
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."}},
            {"text": "ok"}
        ]}),
        json!({}),
    )
    .await;
    ok(&out);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].get("max_tokens").is_none());
    assert_eq!(reqs[1]["max_completion_tokens"], 65536);
}

#[tokio::test(flavor = "multi_thread")]
async fn unsupported_temperature_is_dropped_once() {
    let (server, out) = serve(
        json!({"responses": [
            {"fault": {"type": "http_error", "status": 400, "code": "unsupported_value",
                "message": "Unsupported value: 'temperature' does not support 0.5 with this model. Only the default (1) value is supported."}},
            {"text": "ok"}
        ]}),
        json!({"temperature": 0.5}),
    )
    .await;
    ok(&out);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["temperature"], 0.5);
    assert!(reqs[1].get("temperature").is_none());
}

// ---------------------------------------------------------------------------------------------
// The request body

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn request_body_without_tools() {
    let (server, out) = serve(json!({"responses": [{"text": "ok"}]}), json!({})).await;
    ok(&out);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let b = &reqs[0];
    assert_eq!(
        keys(b),
        [
            "model",
            "messages",
            "stream",
            "stream_options",
            "max_tokens"
        ]
    );
    assert_eq!(b["model"], "mock-model");
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
    assert_eq!(b["max_tokens"], 65536);
    assert_eq!(
        b["messages"],
        json!([{"role": "system", "content": "You are a test."}, {"role": "user", "content": "Hello?"}])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn request_body_with_tools_and_temperature() {
    let server = MockServer::start(json!({"responses": [{"text": "ok"}]})).unwrap();
    let c = client(&server, json!({"temperature": 0.5, "max_tokens": 1000}));
    let tools = Arc::new(vec![
        json!({"type": "function", "function": {"name": "read_file",
        "description": "Read", "parameters": {"type": "object", "properties": {}}}}),
    ]);
    ok(&run_with(&c, &tools, &CancelToken::new()).await);
    let b = &server.requests()[0];
    assert_eq!(
        keys(b),
        [
            "model",
            "messages",
            "stream",
            "stream_options",
            "temperature",
            "tools",
            "tool_choice",
            "max_tokens"
        ]
    );
    assert_eq!(b["temperature"], 0.5);
    assert_eq!(b["tools"], json!(*tools));
    assert_eq!(b["tool_choice"], "auto");
    assert_eq!(b["max_tokens"], 1000);
}

#[tokio::test(flavor = "multi_thread")]
async fn extra_body_keys_win() {
    let server = MockServer::start(json!({"responses": [{"text": "ok"}]})).unwrap();
    let c = client(
        &server,
        json!({"temperature": 0.1, "extra_body": {"reasoning_effort": "low", "max_tokens": 7,
               "temperature": 0.9, "stream_options": {"include_usage": false}}}),
    );
    ok(&run(&c).await);
    let b = &server.requests()[0];
    assert_eq!(b["reasoning_effort"], "low");
    assert_eq!(b["max_tokens"], 7);
    assert_eq!(b["temperature"], 0.9);
    assert_eq!(b["stream_options"], json!({"include_usage": false}));
    assert_eq!(b["model"], "mock-model");
    // Every key once, structural keys first, extra_body keys after.
    let k = keys(b);
    assert_eq!(&k[..3], ["model", "messages", "stream"]);
    assert_eq!(k.len(), 7, "{k:?}");
    assert_eq!(k.last(), Some(&"stream_options"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_whole_json_completion_is_decoded() {
    // A server that ignores `stream` and answers one chat.completion document.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let _ = sock.read(&mut buf).await.unwrap();
        let body = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"whole answer","tool_calls":[{"id":"t1","type":"function","function":{"name":"read_file","arguments":"{\"file_path\":\"a\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let resp = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        sock.write_all(resp.as_bytes()).await.unwrap();
    });
    let config = agentao::config::AgentConfig::from_json(
        &json!({"working_directory": std::env::temp_dir(), "llm": {"provider": "openai",
            "base_url": format!("http://127.0.0.1:{port}/v1"), "api_key": "k", "model": "m"}})
        .to_string(),
    )
    .unwrap();
    let client = agentao::llm::LlmClient::new(&config.llm).unwrap();
    let req = agentao::llm::ChatRequest {
        system: "s",
        history: &[],
        history_version: agentao::llm::MessagesVersion::unknown(),
        transcript_version: agentao::llm::MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let mut call = client.start(&req, &agentao::cancel::CancelToken::new());
    let mut text = String::new();
    while let Some(p) = call.next().await.unwrap() {
        if let agentao::llm::Piece::Text(t) = p {
            text.push_str(t.text);
        }
    }
    let r = call.finish();
    assert_eq!(text, "whole answer");
    assert_eq!(&*r.tool_calls[0].name, "read_file");
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.usage.unwrap().prompt_tokens, 3);
}
