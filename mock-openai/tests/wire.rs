//! The mock's wire, read with a raw blocking TCP client: exact framing, faults, keep-alive,
//! the pre-rendered mode and the binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mock_openai::{render_sse, render_sse_all, MockServer, UsageChoices, WireOptions};
use serde_json::{json, Value};

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The body ended where its framing said (false: the connection closed mid-body).
    complete: bool,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    /// The `data:` payloads of the SSE body (LF or CRLF, with or without the space).
    fn data(&self) -> Vec<String> {
        self.text()
            .replace("\r\n", "\n")
            .split("\n\n")
            .filter_map(|ev| {
                let lines: Vec<&str> = ev
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|l| l.strip_prefix(' ').unwrap_or(l))
                    .collect();
                (!lines.is_empty()).then(|| lines.join("\n"))
            })
            .collect()
    }

    fn chunks(&self) -> Vec<Value> {
        self.data()
            .iter()
            .filter(|d| d.as_str() != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }
}

fn connect(server: &MockServer) -> BufReader<TcpStream> {
    let s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(s)
}

fn send(conn: &mut BufReader<TcpStream>, method: &str, path: &str, body: &str, extra: &str) {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}\r\n{body}",
        body.len()
    );
    conn.get_mut().write_all(req.as_bytes()).unwrap();
}

fn read_line(conn: &mut BufReader<TcpStream>) -> Option<String> {
    let mut l = String::new();
    match conn.read_line(&mut l) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(l.trim_end_matches(['\r', '\n']).to_owned()),
    }
}

fn read_response(conn: &mut BufReader<TcpStream>) -> Response {
    let status_line = read_line(conn).expect("status line");
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let l = read_line(conn).expect("header line");
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut r = Response {
        status,
        headers,
        body: Vec::new(),
        complete: false,
    };
    if r.header("transfer-encoding") == Some("chunked") {
        loop {
            let Some(size) = read_line(conn) else {
                return r;
            };
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            if size == 0 {
                r.complete = read_line(conn).is_some();
                return r;
            }
            let mut buf = vec![0; size + 2];
            if conn.read_exact(&mut buf).is_err() {
                return r;
            }
            r.body.extend_from_slice(&buf[..size]);
        }
    }
    let len: usize = r.header("content-length").unwrap().parse().unwrap();
    let mut buf = vec![0; len];
    conn.read_exact(&mut buf).unwrap();
    r.body = buf;
    r.complete = true;
    r
}

fn post(server: &MockServer, body: &str) -> Response {
    let mut c = connect(server);
    send(
        &mut c,
        "POST",
        "/v1/chat/completions",
        body,
        "connection: close\r\n",
    );
    read_response(&mut c)
}

fn at_eof(conn: &mut BufReader<TcpStream>) -> bool {
    let mut b = [0u8; 1];
    matches!(conn.read(&mut b), Ok(0))
}

const REQ: &str = r#"{"model":"m-1","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

#[test]
fn text_stream_framing() {
    let s = MockServer::start(json!({"responses": [
        {"text": "abc", "chunk_size": 2, "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    ]}))
    .unwrap();
    assert_eq!(s.base_url(), format!("http://127.0.0.1:{}/v1", s.port()));
    let r = post(&s, REQ);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(r.complete);
    let data = r.data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let c = r.chunks();
    assert_eq!(c.len(), 4, "{data:?}");
    for ch in &c {
        assert_eq!(ch["object"], "chat.completion.chunk");
        assert_eq!(ch["model"], "m-1", "the request's model is echoed");
        assert_eq!(ch["id"], c[0]["id"]);
    }
    assert_eq!(
        c[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": "ab"})
    );
    assert_eq!(c[0]["choices"][0]["finish_reason"], Value::Null);
    assert_eq!(c[0]["usage"], Value::Null);
    assert_eq!(c[1]["choices"][0]["delta"], json!({"content": "c"}));
    assert_eq!(c[2]["choices"][0]["delta"], json!({}));
    assert_eq!(c[2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(c[3]["choices"], json!([]));
    assert_eq!(
        c[3]["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 2})
    );
    assert_eq!(s.request_count(), 1);
    assert_eq!(
        s.requests(),
        vec![serde_json::from_str::<Value>(REQ).unwrap()]
    );
}

#[test]
fn reasoning_and_tool_call_fragments() {
    let s = MockServer::start(json!({"model": "scripted-model", "responses": [{
    "reasoning": "think",
    "tool_calls": [
        {"id": "c1", "name": "read_file", "arguments": "{\"a\": 1}", "arg_chunks": 2},
        {"id": "c2", "name": "glob", "arguments": {"p": "*"}, "arguments_as_object": true},
        {"id": "c3", "name": "x", "arguments": "{}", "index": null}
    ]}]}))
    .unwrap();
    let c = post(&s, REQ).chunks();
    let delta = |i: usize| c[i]["choices"][0]["delta"].clone();
    assert_eq!(c[0]["model"], "scripted-model", "the script's model wins");
    assert_eq!(
        delta(0),
        json!({"role": "assistant", "content": null, "reasoning_content": "think"})
    );
    assert_eq!(
        delta(1)["tool_calls"],
        json!([{"index": 0, "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"a\""}}])
    );
    assert_eq!(
        delta(2)["tool_calls"],
        json!([{"index": 0, "function": {"arguments": ": 1}"}}])
    );
    assert_eq!(
        delta(3)["tool_calls"],
        json!([{"index": 1, "id": "c2", "type": "function", "function": {"name": "glob", "arguments": {"p": "*"}}}])
    );
    assert_eq!(
        delta(4)["tool_calls"],
        json!([{"id": "c3", "type": "function", "function": {"name": "x", "arguments": "{}"}}])
    );
    assert_eq!(c[5]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(c.len(), 6);
}

#[test]
fn http_error_with_headers_and_body() {
    let s = MockServer::start(json!({"responses": [
        {"fault": {"type": "http_error", "status": 429, "message": "slow down",
                   "error_type": "requests", "code": "rate_limit_exceeded",
                   "headers": {"Retry-After": "0.2", "x-ratelimit-remaining-requests": 0}}}
    ]}))
    .unwrap();
    let r = post(&s, REQ);
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("0.2"));
    assert_eq!(r.header("x-ratelimit-remaining-requests"), Some("0"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        v,
        json!({"error": {"message": "slow down", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})
    );
}

#[test]
fn drop_closes_mid_body() {
    let s = MockServer::start(json!({"responses": [
        {"text": "abcdef", "chunk_size": 1, "fault": {"type": "drop", "after_events": 2}}
    ]}))
    .unwrap();
    let mut c = connect(&s);
    // Keep-alive requested: the drop closes anyway.
    send(&mut c, "POST", "/v1/chat/completions", REQ, "");
    let r = read_response(&mut c);
    assert_eq!(r.status, 200);
    assert!(!r.complete, "the chunked body must stay unfinished");
    assert_eq!(r.chunks().len(), 2);
    assert!(!r.text().contains("[DONE]"));
    assert!(at_eof(&mut c));
}

#[test]
fn drop_before_any_event() {
    let s = MockServer::start(json!({"responses": [{"text": "x", "fault": {"type": "drop"}}]}))
        .unwrap();
    let r = post(&s, REQ);
    assert_eq!(r.status, 200);
    assert!(!r.complete);
    assert!(r.body.is_empty());
}

#[test]
fn in_stream_error_then_close() {
    let s = MockServer::start(json!({"responses": [
        {"text": "abc", "chunk_size": 1, "fault": {"type": "in_stream_error", "after_events": 1,
            "message": "overloaded", "code": "server_error", "error_type": "server_error"}}
    ]}))
    .unwrap();
    let mut c = connect(&s);
    send(&mut c, "POST", "/v1/chat/completions", REQ, "");
    let r = read_response(&mut c);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(r.complete);
    let data = r.data();
    assert_eq!(data.len(), 2, "{data:?}");
    let err: Value = serde_json::from_str(&data[1]).unwrap();
    assert_eq!(
        err,
        json!({"error": {"message": "overloaded", "type": "server_error", "param": null, "code": "server_error"}})
    );
    assert!(at_eof(&mut c));
}

#[test]
fn malformed_line_first() {
    let s = MockServer::start(json!({"responses": [
        {"text": "ok", "fault": {"type": "malformed", "line": "data: {oops"}}
    ]}))
    .unwrap();
    let r = post(&s, REQ);
    assert!(r.text().starts_with("data: {oops\n\n"), "{}", r.text());
    assert_eq!(r.data()[1..].len(), 3);
}

#[test]
fn stall_and_delay_are_honoured() {
    let s = MockServer::start(json!({"responses": [
        {"text": "x", "fault": {"type": "stall", "ms": 300}},
        {"text": "abc", "chunk_size": 1, "delay_ms": 100}
    ]}))
    .unwrap();
    let t = Instant::now();
    let r = post(&s, REQ);
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(r.chunks()[0]["choices"][0]["delta"]["content"], "x");
    let t = Instant::now();
    let r = post(&s, REQ);
    // Three text events and the finish: four delays.
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(r.chunks().len(), 4);
    // Sleeping is not server work.
    assert!(
        s.server_busy_nanos() < 200_000_000,
        "{}",
        s.server_busy_nanos()
    );
}

/// `end_after_done_ms`: `[DONE]` comes at once, the chunked body's end that long after it, and
/// `responses_written` counts the response only once its end is out.
#[test]
fn the_body_end_can_come_after_done() {
    let s = MockServer::start(json!({"wire": {"end_after_done_ms": 300},
        "responses": [{"text": "a"}]}))
    .unwrap();
    let mut c = connect(&s);
    send(&mut c, "POST", "/v1/chat/completions", REQ, "");
    let t = Instant::now();
    while read_line(&mut c).expect("the stream") != "data: [DONE]" {}
    let done_at = t.elapsed();
    assert_eq!(
        read_line(&mut c).as_deref(),
        Some(""),
        "the event's blank line"
    );
    assert_eq!(read_line(&mut c).as_deref(), Some(""), "the chunk's CRLF");
    assert_eq!(s.responses_written(), 0, "the end is not written yet");
    assert_eq!(read_line(&mut c).as_deref(), Some("0"), "the last chunk");
    let end_at = t.elapsed();
    assert!(
        end_at >= done_at + Duration::from_millis(250),
        "[DONE] at {done_at:?}, the end at {end_at:?}"
    );
    assert_eq!(read_line(&mut c).as_deref(), Some(""));
    let give_up = Instant::now() + Duration::from_secs(10);
    while s.responses_written() == 0 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(s.responses_written(), 1);
    assert!(WireOptions::from_value(&json!({"end_after_done_ms": -1})).is_err());
}

#[test]
fn stall_with_keepalives_sends_only_comments() {
    let s = MockServer::start(json!({
        "wire": {"keepalive_comments": true, "keepalive_interval_ms": 20},
        "responses": [{"text": "x", "fault": {"type": "stall", "ms": 200}}]
    }))
    .unwrap();
    let r = post(&s, REQ);
    let text = r.text();
    assert!(text.matches(": keep-alive\n\n").count() >= 5, "{text}");
    assert_eq!(r.chunks().len(), 2);
}

#[test]
fn wire_options_crlf_no_space_no_done_usage_choices() {
    let s = MockServer::start(json!({
        "wire": {"crlf": true, "no_space": true, "omit_done": true, "keepalive_comments": true,
                 "usage_choices": "absent"},
        "responses": [{"text": "a", "usage": {"prompt_tokens": 1}}]
    }))
    .unwrap();
    let r = post(&s, REQ);
    let text = r.text();
    assert!(text.starts_with(": keep-alive\r\n\r\ndata:{"), "{text}");
    assert!(!text.contains("[DONE]"));
    assert!(!text.replace("\r\n", "").contains('\n'));
    let c = r.chunks();
    assert_eq!(c.len(), 3);
    assert!(c[2].get("choices").is_none());
    assert_eq!(c[2]["usage"]["prompt_tokens"], 1);

    let s = MockServer::builder()
        .wire(WireOptions {
            usage_choices: UsageChoices::Null,
            ..Default::default()
        })
        .start(json!({"responses": [{"text": "a", "usage": {"prompt_tokens": 1}}]}))
        .unwrap();
    let c = post(&s, REQ).chunks();
    assert_eq!(c[2]["choices"], Value::Null);
    assert!(WireOptions::from_value(&json!({"bogus": true})).is_err());
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let s = MockServer::start(json!({"responses": [{"text": "one"}, {"text": "two"}]})).unwrap();
    let mut c = connect(&s);
    send(&mut c, "POST", "/v1/chat/completions", r#"{"n":1}"#, "");
    let r1 = read_response(&mut c);
    assert!(r1.complete);
    assert_eq!(r1.header("connection"), None);
    send(&mut c, "POST", "/v1/chat/completions", r#"{"n":2}"#, "");
    let r2 = read_response(&mut c);
    assert_eq!(r1.chunks()[0]["choices"][0]["delta"]["content"], "one");
    assert_eq!(r2.chunks()[0]["choices"][0]["delta"]["content"], "two");
    assert_eq!(s.requests(), vec![json!({"n": 1}), json!({"n": 2})]);
    // The script is exhausted now.
    send(
        &mut c,
        "POST",
        "/v1/chat/completions",
        "{}",
        "connection: close\r\n",
    );
    let r3 = read_response(&mut c);
    assert_eq!(
        r3.chunks()[0]["choices"][0]["delta"]["content"],
        "(script exhausted)"
    );
    assert!(at_eof(&mut c));
    assert_eq!(s.request_count(), 3);
}

#[test]
fn chunked_request_body_and_expect_continue() {
    let s = MockServer::start(json!({"responses": [{"text": "ok"}]})).unwrap();
    let mut c = connect(&s);
    let req = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\
               expect: 100-continue\r\nconnection: close\r\n\r\n";
    c.get_mut().write_all(req.as_bytes()).unwrap();
    assert_eq!(read_line(&mut c).unwrap(), "HTTP/1.1 100 Continue");
    assert_eq!(read_line(&mut c).unwrap(), "");
    c.get_mut()
        .write_all(b"5\r\n{\"a\":\r\n3\r\n17}\r\n0\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c);
    assert_eq!(r.status, 200);
    assert_eq!(s.requests(), vec![json!({"a": 17})]);
}

#[test]
fn other_routes() {
    let s = MockServer::start(json!({"model": "mm", "responses": []})).unwrap();
    let mut c = connect(&s);
    send(&mut c, "GET", "/v1/models", "", "");
    let r = read_response(&mut c);
    assert_eq!(r.status, 200);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["data"][0]["id"], "mm");
    send(&mut c, "POST", "/v1/nope", "{}", "");
    assert_eq!(read_response(&mut c).status, 404);
    send(&mut c, "GET", "/v1/chat/completions", "", "");
    assert_eq!(read_response(&mut c).status, 405);
    assert_eq!(s.request_count(), 0);
}

#[test]
fn bad_script_is_invalid_input() {
    let e = MockServer::start(json!({"responses": [{"bogus": 1}]})).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("bogus"), "{e}");
    let e = MockServer::start(json!({"wire": {"crlf": 1}, "responses": []})).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn drop_stops_the_server() {
    let s = MockServer::start(json!({"responses": [{"text": "x", "fault": {"type": "stall"}}]}))
        .unwrap();
    let addr = s.addr();
    // A connection stuck in an endless stall must not keep the server alive.
    let mut c = connect(&s);
    send(&mut c, "POST", "/v1/chat/completions", REQ, "");
    let _ = read_line(&mut c);
    let t = Instant::now();
    drop(s);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn prerendered_matches_the_scripted_rendering() {
    let script = json!({"responses": [{"reasoning": "r", "text": "hello world", "chunk_size": 4,
        "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}],
        "usage": {"prompt_tokens": 1}}]});
    let body = render_sse(script.clone()).unwrap();
    let scripted = MockServer::start(script).unwrap();
    let live = post(&scripted, REQ);
    let pre = MockServer::start_prerendered(body.clone()).unwrap();
    let mut c = connect(&pre);
    for _ in 0..3 {
        send(&mut c, "POST", "/v1/chat/completions", REQ, "");
        let r = read_response(&mut c);
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string().as_str())
        );
        assert_eq!(r.body, body.as_ref());
        // Same events apart from id, model and created.
        let strip = |mut v: Value| {
            for k in ["id", "model", "created"] {
                v.as_object_mut().unwrap().remove(k);
            }
            v
        };
        let a: Vec<Value> = r.chunks().into_iter().map(strip).collect();
        let b: Vec<Value> = live.chunks().into_iter().map(strip).collect();
        assert_eq!(a, b);
        assert_eq!(r.data().last().unwrap(), "[DONE]");
    }
    assert_eq!(pre.request_count(), 3);
    assert!(pre.requests().is_empty(), "bodies are not kept by default");
    assert!(pre.server_busy_nanos() > 0);

    let rec = MockServer::builder()
        .record_bodies(true)
        .start_prerendered(Bytes::from_static(b"data: [DONE]\n\n"))
        .unwrap();
    let r = post(&rec, "{\"x\":1}");
    assert_eq!(r.text(), "data: [DONE]\n\n");
    assert_eq!(rec.requests(), vec![json!({"x": 1})]);
}

#[test]
fn prerendered_bodies_follow_tool_results_and_stats_report_busy_time() {
    let script = json!({"responses": [
        {"tool_calls": [{"id": "a", "name": "read_file", "arguments": {"file_path": "x"}}]},
        {"text": "final"}]});
    let bodies = render_sse_all(script).unwrap();
    assert_eq!(bodies.len(), 2);
    let s = MockServer::builder()
        .start_prerendered_many(bodies.clone())
        .unwrap();
    let r = post(&s, r#"{"messages":[{"role":"user","content":"q"}]}"#);
    assert_eq!(r.body, bodies[0].as_ref());
    let two = r#"{"messages":[{"role":"tool","content":"1"},{"role":"tool","content":"2"}]}"#;
    let r = post(&s, two);
    assert_eq!(r.body, bodies[1].as_ref(), "past the end: the last body");
    let busy = s.server_busy_nanos();
    assert!(busy > 0);
    let mut c = connect(&s);
    let mut stats = || {
        send(&mut c, "GET", "/v1/_stats", "", "");
        let r = read_response(&mut c);
        assert_eq!(r.status, 200);
        serde_json::from_slice::<Value>(&r.body).unwrap()
    };
    let v = stats();
    assert_eq!(v["requests"], 2);
    assert!(v["busy_nanos"].as_u64().unwrap() >= busy);
    assert_eq!(stats(), v, "stats requests are not counted");
    assert!(MockServer::builder()
        .start_prerendered_many(vec![])
        .is_err());
}

#[test]
fn works_inside_an_async_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = MockServer::start(json!({"responses": [{"text": "a"}]})).unwrap();
        let addr = s.addr();
        let r = tokio::task::spawn_blocking(move || {
            let mut c = BufReader::new(TcpStream::connect(addr).unwrap());
            send(
                &mut c,
                "POST",
                "/v1/chat/completions",
                "{}",
                "connection: close\r\n",
            );
            read_response(&mut c)
        })
        .await
        .unwrap();
        assert_eq!(r.status, 200);
        drop(s); // Drop inside the runtime must not panic.
    });
}

// ---------------------------------------------------------------------------------------------
// The binary

fn spawn_bin(dir: &tempfile::TempDir, script: Value, extra: &[&str]) -> (std::process::Child, u16) {
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let port_file = dir.path().join("port");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock-openai"))
        .arg("--script")
        .arg(&script_path)
        .arg("--port-file")
        .arg(&port_file)
        .arg("--requests-out")
        .arg(dir.path().join("requests.jsonl"))
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(line, format!("listening on http://127.0.0.1:{port}/v1\n"));
    (child, port)
}

fn post_port(port: u16, body: &str) -> Response {
    let mut c = BufReader::new(TcpStream::connect(("127.0.0.1", port)).unwrap());
    send(
        &mut c,
        "POST",
        "/v1/chat/completions",
        body,
        "connection: close\r\n",
    );
    read_response(&mut c)
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the binary did not exit"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn binary_exits_when_stdin_closes_and_dumps_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, port) = spawn_bin(&dir, json!({"responses": [{"text": "hi"}]}), &[]);
    let r = post_port(port, r#"{"first":true}"#);
    assert_eq!(r.chunks()[0]["choices"][0]["delta"]["content"], "hi");
    post_port(port, r#"{"second":true}"#);
    drop(child.stdin.take());
    assert!(wait_exit(&mut child).success());
    let lines = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    assert_eq!(lines, "{\"first\":true}\n{\"second\":true}\n");
}

#[test]
fn binary_exits_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, port) = spawn_bin(
        &dir,
        json!({"responses": [{"text": "hi"}]}),
        &["--no-stdin"],
    );
    post_port(port, r#"{"n":1}"#);
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(wait_exit(&mut child).success());
    let lines = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    assert_eq!(lines, "{\"n\":1}\n");
}

#[test]
fn binary_rejects_bad_arguments() {
    let out = Command::new(env!("CARGO_BIN_EXE_mock-openai"))
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"));
}

#[test]
fn stall_before_headers() {
    let s = MockServer::start(json!({
        "wire": {"stall_before_headers": true},
        "responses": [{"text": "x", "fault": {"type": "stall", "ms": 250}}]
    }))
    .unwrap();
    let mut c = connect(&s);
    let t = Instant::now();
    send(
        &mut c,
        "POST",
        "/v1/chat/completions",
        REQ,
        "connection: close\r\n",
    );
    let status = read_line(&mut c).unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
}

#[test]
fn serves_every_conformance_transcript_script() {
    use agentao::llm::script::{Fault, Script};
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/conformance/transcripts"
    );
    let mut n = 0;
    for e in std::fs::read_dir(dir)
        .expect("tests/conformance/transcripts")
        .flatten()
    {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let script = v["model_script"].clone();
        let parsed = Script::from_value(script.clone()).unwrap();
        let s = MockServer::start(script).unwrap();
        for (i, want) in parsed.responses.iter().enumerate() {
            let r = post(&s, REQ);
            if let Some(Fault::HttpError { status, .. }) = &want.fault {
                assert_eq!(r.status, *status, "{} #{i}", p.display());
                continue;
            }
            assert_eq!(r.status, 200, "{} #{i}", p.display());
            let text: String = r
                .chunks()
                .iter()
                .filter_map(|c| {
                    c["choices"][0]["delta"]["content"]
                        .as_str()
                        .map(str::to_owned)
                })
                .collect();
            assert_eq!(text, want.text_chunks.concat(), "{} #{i}", p.display());
        }
        assert_eq!(s.request_count(), parsed.responses.len());
        n += 1;
    }
    assert_eq!(n, 10);
}

/// Each typed wire gets its own pre-rendered body, picked by its own tool-result marker; a
/// server without typed bodies does not answer those paths.
#[test]
fn prerendered_typed_wires_follow_their_own_tool_results() {
    use mock_openai::{render_wire_sse_all, Wire};
    let script = json!({"responses": [
        {"tool_calls": [{"id": "a", "name": "read_file", "arguments": {"file_path": "x"}}]},
        {"text": "final"}]});
    let anthropic = render_wire_sse_all(Wire::Anthropic, script.clone()).unwrap();
    let responses = render_wire_sse_all(Wire::Responses, script.clone()).unwrap();
    assert_eq!((anthropic.len(), responses.len()), (2, 2));
    assert!(String::from_utf8_lossy(&anthropic[1]).contains("\"text\":\"final\""));
    let s = MockServer::builder()
        .start_prerendered_wires(
            render_sse_all(script.clone()).unwrap(),
            anthropic.clone(),
            responses.clone(),
        )
        .unwrap();
    let ask = |path: &str, body: &str| {
        let mut c = connect(&s);
        send(&mut c, "POST", path, body, "connection: close\r\n");
        read_response(&mut c)
    };
    let r = ask(
        "/v1/messages",
        r#"{"messages":[{"role":"user","content":"q"}]}"#,
    );
    assert_eq!(r.body, anthropic[0].as_ref());
    let r = ask(
        "/v1/messages",
        r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}"#,
    );
    assert_eq!(r.body, anthropic[1].as_ref());
    // A chat wire's tool message is not a Responses tool result.
    let r = ask(
        "/v1/responses",
        r#"{"input":[{"role":"tool","content":"x"}]}"#,
    );
    assert_eq!(r.body, responses[0].as_ref());
    let r = ask(
        "/v1/responses",
        r#"{"input":[{"type":"function_call_output","call_id":"a","output":"x"}]}"#,
    );
    assert_eq!(r.body, responses[1].as_ref());
    let chat_only = MockServer::builder()
        .start_prerendered_many(render_sse_all(script).unwrap())
        .unwrap();
    let mut c = connect(&chat_only);
    send(
        &mut c,
        "POST",
        "/v1/messages",
        "{}",
        "connection: close\r\n",
    );
    assert_eq!(read_response(&mut c).status, 404);
}
