//! The model request's HTTP transport: what reqwest did
//! for us and any replacement must keep doing — a keep-alive connection the server closed
//! between two turns is replaced silently, and a proxy from the environment is used; a redirect
//! is not followed (the request carries credentials) but fails the call. Each test runs against
//! a loopback stub written with `std::net` so it controls the wire: when a connection closes,
//! what the status is, who receives what. They pass on reqwest and on the lean lane alike
//! (`src/llm/http_lane/`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use agentao::cancel::CancelToken;
use agentao::llm::{ChatRequest, LlmClient, LlmError, Message, Piece};
use serde_json::json;

mod common;

fn client_for(base_url: &str) -> LlmClient {
    LlmClient::new(&common::openai_llm_config(base_url, json!({}))).expect("client")
}

/// What one model call showed its caller: the text, the retries announced, the error.
#[derive(Debug, Default)]
struct Turn {
    text: String,
    retries: usize,
    error: Option<LlmError>,
}

async fn call(client: &LlmClient) -> Turn {
    let history = vec![Message::User("Hello?".into())];
    let req = ChatRequest {
        system: "You are a test.",
        history: &history,
        history_version: agentao::llm::MessagesVersion::unknown(),
        transcript_version: agentao::llm::MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let cancel = CancelToken::new();
    let mut call = client.start(&req, &cancel);
    let mut turn = Turn::default();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), call.next())
            .await
            .expect("no call may hang")
        {
            Ok(Some(Piece::Text(t))) => turn.text.push_str(t.text),
            Ok(Some(Piece::Retry { .. })) => turn.retries += 1,
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                turn.error = Some(e);
                break;
            }
        }
    }
    turn
}

/// One request as the stub read it.
#[derive(Debug, Clone)]
struct Received {
    /// `POST /v1/chat/completions HTTP/1.1`, or the absolute form a proxy receives.
    request_line: String,
    body: Vec<u8>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Received> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let mut content_length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        request_line: request_line.trim_end().to_owned(),
        body,
    })
}

/// A keep-alive SSE answer saying `text`.
fn sse_answer(text: &str) -> Vec<u8> {
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    );
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A stub that answers each request with `answer(request)`; `after_answer` runs on the
/// connection once the answer is written (it may close it). Reports each request as it comes.
fn stub(
    answer: impl Fn(&Received) -> Vec<u8> + Send + Sync + 'static,
    after_answer: impl Fn(&TcpStream) + Send + Sync + 'static,
) -> (u16, mpsc::Receiver<Received>) {
    let (port, rx, _) = counting_stub(answer, after_answer);
    (port, rx)
}

/// [`stub`], also counting the connections it accepted.
fn counting_stub(
    answer: impl Fn(&Received) -> Vec<u8> + Send + Sync + 'static,
    after_answer: impl Fn(&TcpStream) + Send + Sync + 'static,
) -> (u16, mpsc::Receiver<Received>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    let answer = Arc::new(answer);
    let after_answer = Arc::new(after_answer);
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = connections.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            accepted.fetch_add(1, Ordering::SeqCst);
            let (tx, answer, after_answer) = (tx.clone(), answer.clone(), after_answer.clone());
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                while let Some(req) = read_request(&mut reader) {
                    let _ = stream.write_all(&answer(&req));
                    after_answer(&stream);
                    if tx.send(req).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, rx, connections)
}

fn next_request(rx: &mpsc::Receiver<Received>) -> Received {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the stub received a request")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_connection_closed_by_the_server_between_turns_is_replaced_silently() {
    // The server closes every connection right after its answer, without `connection: close`:
    // the client pools it as keep-alive and finds it dead at the next turn.
    let (port, rx) = stub(
        |_| sse_answer("hi"),
        |s| {
            thread::sleep(Duration::from_millis(20));
            let _ = s.shutdown(std::net::Shutdown::Both);
        },
    );
    let client = client_for(&format!("http://127.0.0.1:{port}/v1"));
    let first = call(&client).await;
    assert!(first.error.is_none(), "{:?}", first.error);
    assert_eq!(first.text, "hi");
    next_request(&rx);
    // Let the close reach the client's socket.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = call(&client).await;
    assert!(second.error.is_none(), "{:?}", second.error);
    assert_eq!(second.text, "hi");
    assert_eq!(
        second.retries, 0,
        "the dead connection must not cost a retry"
    );
    next_request(&rx);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_is_refused_and_its_target_receives_nothing() {
    // The audit's server answered 307 to another origin, and the conversation went there with
    // the configured `llm.headers` (reqwest strips only `Authorization`). Another origin, and
    // the same server under another path: neither is followed, on the lane or on reqwest.
    let (target_port, to_target) = stub(|_| sse_answer("leaked"), |_| {});
    let elsewhere = format!("http://localhost:{target_port}/v1/chat/completions");
    for location in [elsewhere.as_str(), "/v2/chat/completions"] {
        for status in [301, 302, 303, 307, 308] {
            let head = format!(
                "HTTP/1.1 {status} Moved\r\nlocation: {location}\r\ncontent-length: 0\r\n\r\n"
            );
            let (port, rx) = stub(move |_| head.clone().into_bytes(), |_| {});
            // Credentials in the URL keep a client off the lane (`Lane::for_url`).
            for base in [
                format!("http://127.0.0.1:{port}/v1"),
                format!("http://user:pw@127.0.0.1:{port}/v1"),
            ] {
                let client = LlmClient::new(&common::openai_llm_config(
                    &base,
                    json!({"headers": {"api-key": "AZURE-SECRET", "x-api-key": "SECRET"}}),
                ))
                .expect("client");
                let turn = call(&client).await;
                let e = turn.error.expect("a redirect is an error");
                assert_eq!(e.status, Some(status), "{base}");
                assert!(!e.retryable, "{base}: {status}");
                assert_eq!(
                    e.message,
                    format!(
                        "The endpoint redirected to {location} (HTTP {status}); redirects are not \
                         followed, the request carries the conversation and credentials: set \
                         llm.base_url to the final URL."
                    ),
                    "{base}"
                );
                assert_eq!(turn.retries, 0, "{base}: {status}");
                let asked = next_request(&rx);
                assert_eq!(asked.request_line, "POST /v1/chat/completions HTTP/1.1");
                let body: serde_json::Value = serde_json::from_slice(&asked.body).unwrap();
                assert_eq!(body["model"], "mock-model");
                assert!(
                    rx.recv_timeout(Duration::from_millis(100)).is_err(),
                    "{base}: {status} to {location} was sent again"
                );
                assert!(
                    to_target.try_recv().is_err(),
                    "{base}: {status} was followed to {location}"
                );
            }
        }
    }
    assert!(to_target.recv_timeout(Duration::from_millis(200)).is_err());
}

/// A keep-alive answer whose body is `body` as SSE.
fn sse_body_answer(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn text_event(text: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    )
}

/// Three calls on one client; the stub must have seen them on one connection.
async fn three_calls_on_one_connection(body: String) {
    let (port, rx, connections) = counting_stub(move |_| sse_body_answer(&body), |_| {});
    let client = client_for(&format!("http://127.0.0.1:{port}/v1"));
    for _ in 0..3 {
        let turn = call(&client).await;
        assert!(turn.error.is_none(), "{:?}", turn.error);
        assert_eq!(turn.text, "hi");
        next_request(&rx);
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one kept-alive connection"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_response_read_to_its_end_leaves_its_connection_for_the_next_call() {
    // No `[DONE]`: the stream is read to the body's end.
    three_calls_on_one_connection(text_event("hi")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_dropped_after_done_leaves_its_connection_for_the_next_call() {
    // The call stops reading at `[DONE]`; the comments after it are never read by the caller.
    let tail = ": after the end\n\n".repeat(64);
    three_calls_on_one_connection(format!("{}data: [DONE]\n\n{tail}", text_event("hi"))).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_closing_mid_body_is_todays_connection_error() {
    // The head promises more than the server sends before it closes the connection.
    let (port, _rx) = stub(
        |_| {
            let part = text_event("hi");
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{part}",
                part.len() + 100
            )
            .into_bytes()
        },
        |s| {
            thread::sleep(Duration::from_millis(20));
            let _ = s.shutdown(std::net::Shutdown::Both);
        },
    );
    let client = client_for(&format!("http://127.0.0.1:{port}/v1"));
    let turn = call(&client).await;
    assert_eq!(turn.text, "hi");
    let e = turn.error.expect("the cut body is an error");
    assert_eq!(e.class, "APIConnectionError");
    assert_eq!(
        e.message,
        "Connection dropped while reading the response body: Connection error: end of file before message length reached"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_todays_connection_error() {
    let unreachable = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = unreachable.local_addr().unwrap().port();
    drop(unreachable);
    let client = LlmClient::new(&common::openai_llm_config(
        &format!("http://127.0.0.1:{port}/v1"),
        json!({"max_attempts": 1}),
    ))
    .expect("client");
    let e = call(&client).await.error.expect("nobody listens");
    assert_eq!(e.class, "APIConnectionError");
    assert_eq!(
        e.message,
        "Connection error: Connection refused (os error 111)"
    );
}

/// The environment variable the child of [`a_proxy_from_the_environment_is_used`] reads.
const CHILD_MODEL_URL: &str = "AGENTAO_LANE_TEST_MODEL_URL";

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_from_the_environment_is_used() {
    // The proxy stub answers whatever it is sent; the model URL names a port nobody listens
    // on, so only a request through the proxy can succeed.
    let (proxy_port, rx) = stub(|_| sse_answer("proxied"), |_| {});
    let unreachable = TcpListener::bind("127.0.0.1:0").unwrap();
    let model_url = format!(
        "http://127.0.0.1:{}/v1",
        unreachable.local_addr().unwrap().port()
    );
    drop(unreachable);
    // The proxy variable is set for a child process only: setting it here would reach every
    // other test of this binary.
    for var in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args(["--exact", "the_child_of_the_proxy_test", "--ignored"])
            .args(["--test-threads", "1", "--nocapture"])
            .env(CHILD_MODEL_URL, &model_url)
            .env(var, format!("http://127.0.0.1:{proxy_port}"));
        for other in [
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            if other != var {
                child.env_remove(other);
            }
        }
        let out = child.output().unwrap();
        assert!(
            out.status.success(),
            "{var}: the child failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{var}: the child test did not run"
        );
        let received = next_request(&rx);
        assert_eq!(
            received.request_line,
            format!("POST {model_url}/chat/completions HTTP/1.1"),
            "{var}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by a_proxy_from_the_environment_is_used in a child process with a proxy set"]
async fn the_child_of_the_proxy_test() {
    let url = std::env::var(CHILD_MODEL_URL).expect("run by the proxy test");
    let turn = call(&client_for(&url)).await;
    assert!(turn.error.is_none(), "{:?}", turn.error);
    assert_eq!(turn.text, "proxied");
}

// Connections shared between clients (`src/llm/lane_pool.rs`): a dropped client (a freed
// agent) leaves its idle connection to the next client on the same endpoint.

/// Calls once on a new client for `url`, then drops the client.
async fn call_on_a_new_client(url: &str) -> Turn {
    let client = client_for(url);
    let turn = call(&client).await;
    drop(client);
    turn
}

fn ok(turn: &Turn, text: &str) {
    assert!(turn.error.is_none(), "{:?}", turn.error);
    assert_eq!(turn.text, text);
    assert_eq!(turn.retries, 0);
}

/// Three clients one after the other: the stub must have seen them on one connection.
async fn three_clients_on_one_connection(answer: Vec<u8>) {
    let (port, rx, connections) = counting_stub(move |_| answer.clone(), |_| {});
    let url = format!("http://127.0.0.1:{port}/v1");
    for _ in 0..3 {
        ok(&call_on_a_new_client(&url).await, "hi");
        next_request(&rx);
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one shared connection"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_client_takes_the_connection_a_dropped_client_left() {
    three_clients_on_one_connection(sse_answer("hi")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_dropped_after_done_leaves_its_connection_to_the_next_client() {
    // The call stops reading at `[DONE]`; the rest of the body arrived with it.
    let tail = ": after the end\n\n".repeat(64);
    let body = format!("{}data: [DONE]\n\n{tail}", text_event("hi"));
    three_clients_on_one_connection(sse_body_answer(&body)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_left_mid_response_is_never_pooled() {
    // The first answer promises more body than it sends, and the rest never comes.
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (port, rx, connections) = counting_stub(
        move |_| {
            if !first.swap(false, Ordering::SeqCst) {
                return sse_answer("hi");
            }
            let part = text_event("half");
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{part}",
                part.len() + 100
            )
            .into_bytes()
        },
        |_| {},
    );
    let url = format!("http://127.0.0.1:{port}/v1");
    let client = client_for(&url);
    let history = vec![Message::User("Hello?".into())];
    let req = ChatRequest {
        system: "You are a test.",
        history: &history,
        history_version: agentao::llm::MessagesVersion::unknown(),
        transcript_version: agentao::llm::MessagesVersion::unknown(),
        transcript: &[],
        tail: None,
        tools: &Arc::default(),
    };
    let cancel = CancelToken::new();
    let mut half = client.start(&req, &cancel);
    loop {
        match tokio::time::timeout(Duration::from_secs(10), half.next())
            .await
            .expect("the first delta comes")
        {
            Ok(Some(Piece::Text(t))) => {
                assert_eq!(t.text, "half");
                break;
            }
            Ok(Some(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    // The turn is cancelled mid-response, then its agent freed.
    cancel.cancel("test");
    drop(half);
    next_request(&rx);
    drop(client);
    ok(&call_on_a_new_client(&url).await, "hi");
    next_request(&rx);
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "the next client connected anew"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pooled_connection_the_server_closed_is_replaced_silently() {
    let close = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let closing = close.clone();
    let (port, rx, connections) = counting_stub(
        |_| sse_answer("hi"),
        move |s| {
            // Closes the connection once the test says so (its client is gone by then).
            let t0 = std::time::Instant::now();
            while !closing.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(5) {
                thread::sleep(Duration::from_millis(5));
            }
            let _ = s.shutdown(std::net::Shutdown::Both);
        },
    );
    let url = format!("http://127.0.0.1:{port}/v1");
    ok(&call_on_a_new_client(&url).await, "hi");
    // The connection is in the pool now; the server closes it there.
    close.store(true, Ordering::SeqCst);
    next_request(&rx);
    tokio::time::sleep(Duration::from_millis(100)).await;
    ok(&call_on_a_new_client(&url).await, "hi");
    next_request(&rx);
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn different_endpoints_never_share_a_connection() {
    let (a, rx_a, conns_a) = counting_stub(|_| sse_answer("a"), |_| {});
    let (b, rx_b, conns_b) = counting_stub(|_| sse_answer("b"), |_| {});
    ok(
        &call_on_a_new_client(&format!("http://127.0.0.1:{a}/v1")).await,
        "a",
    );
    next_request(&rx_a);
    ok(
        &call_on_a_new_client(&format!("http://127.0.0.1:{b}/v1")).await,
        "b",
    );
    next_request(&rx_b);
    assert_eq!(conns_b.load(Ordering::SeqCst), 1);
    // Another path on the same server is the same endpoint: the path goes with the request.
    ok(
        &call_on_a_new_client(&format!("http://127.0.0.1:{a}/v2")).await,
        "a",
    );
    assert_eq!(
        next_request(&rx_a).request_line,
        "POST /v2/chat/completions HTTP/1.1"
    );
    assert_eq!(conns_a.load(Ordering::SeqCst), 1);
    assert!(rx_b.try_recv().is_err(), "nothing of a's went to b");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_clients_each_get_their_own_connection() {
    let (port, rx, connections) = counting_stub(
        |_| {
            // Both requests are in flight at once.
            thread::sleep(Duration::from_millis(100));
            sse_answer("hi")
        },
        |_| {},
    );
    let url = format!("http://127.0.0.1:{port}/v1");
    ok(&call_on_a_new_client(&url).await, "hi");
    next_request(&rx);
    // One idle connection in the pool, two clients at once: one takes it, one connects.
    let (c1, c2) = (client_for(&url), client_for(&url));
    let (t1, t2) = tokio::join!(call(&c1), call(&c2));
    ok(&t1, "hi");
    ok(&t2, "hi");
    next_request(&rx);
    next_request(&rx);
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}
