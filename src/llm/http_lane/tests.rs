//! Unit tests of the lean HTTP lane: which endpoints take it, pooled connections, late ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use super::*;

fn lane(url: &str) -> Option<Lane> {
    lane_with(url, &HeaderMap::new())
}

fn lane_with(url: &str, headers: &HeaderMap) -> Option<Lane> {
    Lane::for_url(
        &url::Url::parse(url).unwrap(),
        Duration::from_secs(5),
        headers,
    )
}

#[test]
fn only_plain_http_without_credentials_takes_the_lane() {
    // The proxy variables are read too; the test runner's environment sets none.
    if PROXY_VARIABLES
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        return;
    }
    let l = lane("http://127.0.0.1:8080/v1/chat/completions?x=1").unwrap();
    assert_eq!(l.headers[HOST], "127.0.0.1:8080");
    assert_eq!(l.path, "/v1/chat/completions?x=1");
    let l = lane("http://[::1]/v1/chat/completions").unwrap();
    assert_eq!(l.headers[HOST], "[::1]");
    assert!(matches!(l.idle.target, Target::Addr(a) if a.port() == 80));
    let l = lane("http://localhost:80/chat/completions").unwrap();
    assert_eq!(l.headers[HOST], "localhost");
    assert!(matches!(l.idle.target, Target::Name(ref n, 80) if n == "localhost"));
    assert!(lane("https://127.0.0.1/v1/chat/completions").is_none());
    assert!(lane("http://user:pw@127.0.0.1/v1/chat/completions").is_none());
    assert!(lane("http://127.0.0.1/v1/chat/completions#f").is_none());
}

/// A server answering each request of each connection with a small body; the head of
/// each request goes to the channel.
fn server() -> (u16, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                while let Some(request) = read_request(&mut reader) {
                    let answer = format!("connection {n}");
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = tx.send(request);
                }
            });
        }
    });
    (port, rx)
}

/// The head and body of the next request on a connection; `None` at its end.
fn read_request(reader: &mut BufReader<std::net::TcpStream>) -> Option<String> {
    let mut head = String::new();
    let mut len = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(format!("{head}{}", String::from_utf8_lossy(&body)))
}

async fn body_of(mut r: LaneResponse) -> String {
    let mut out = Vec::new();
    while let Some(c) = r.chunk().await.unwrap() {
        out.extend_from_slice(&c);
    }
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn requests_share_one_connection_and_carry_the_headers_and_body() {
    let (port, rx) = server();
    let mut headers = HeaderMap::new();
    headers.insert("authorization", HeaderValue::from_static("Bearer k"));
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    let l = lane_with(
        &format!("http://127.0.0.1:{port}/v1/chat/completions"),
        &headers,
    )
    .unwrap();
    for _ in 0..3 {
        let r = l
            .post(Bytes::from_static(b"{\"a\":1}").into())
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(body_of(r).await, "connection 0");
        let head = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
        for h in [
            &format!("host: 127.0.0.1:{port}\r\n"),
            "authorization: Bearer k\r\n",
            "content-type: application/json\r\n",
            "content-length: 7\r\n",
        ] {
            assert!(head.contains(h), "{h:?} in {head}");
        }
        assert!(head.ends_with("\r\n\r\n{\"a\":1}"), "{head}");
    }
    // Dropped unread: still kept.
    drop(l.post(RequestBody::default()).await.unwrap());
    let r = l.post(RequestBody::default()).await.unwrap();
    assert_eq!(body_of(r).await, "connection 0");
}

#[tokio::test]
async fn a_body_in_pieces_goes_out_whole_with_its_length() {
    let (port, rx) = server();
    let l = lane(&format!("http://127.0.0.1:{port}/v1/chat/completions")).unwrap();
    let tools = Bytes::from(vec![b'x'; 9_000]);
    let body = RequestBody::spliced(
        b"{\"messages\":[],\"tools\":}".to_vec(),
        vec![
            (13, Bytes::from_static(b"{\"role\":\"system\"}")),
            (23, tools),
        ],
    );
    let whole = body.to_bytes();
    let r = l.post(body).await.unwrap();
    assert_eq!(body_of(r).await, "connection 0");
    let head = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        head.contains(&format!("content-length: {}\r\n", whole.len())),
        "{}",
        &head[..200]
    );
    assert!(head.ends_with(std::str::from_utf8(&whole).unwrap()));
    assert!(whole.starts_with(b"{\"messages\":[{\"role\":\"system\"}],\"tools\":xxx"));
}

/// A runtime of its own for each lane of a test: a pooled connection must not depend on
/// the runtime that made it.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The answer to one request of a new lane on its own runtime, the lane dropped after.
fn answer_of_a_new_lane(port: u16) -> String {
    runtime().block_on(async {
        let l = lane(&format!("http://127.0.0.1:{port}/v1")).unwrap();
        let r = l.post(RequestBody::default()).await;
        body_of(r.unwrap()).await
    })
}

#[test]
fn a_dropped_lanes_connection_serves_the_next_lane_on_another_runtime() {
    let (port, _rx) = server();
    assert_eq!(answer_of_a_new_lane(port), "connection 0");
    assert_eq!(answer_of_a_new_lane(port), "connection 0");
    // A lane to another target does not take it.
    let (other, _rx) = server();
    assert_eq!(answer_of_a_new_lane(other), "connection 0");
    let l = runtime().block_on(async {
        let l = lane(&format!("http://localhost:{port}/v1")).unwrap();
        let r = l.post(RequestBody::default()).await;
        (body_of(r.unwrap()).await, l)
    });
    assert_eq!(
        l.0, "connection 1",
        "a name is not the same target as its address"
    );
}

#[test]
fn the_pool_keeps_at_most_its_cap_per_endpoint() {
    let (port, _rx) = server();
    let rt = runtime();
    let n = PER_ENDPOINT + 2;
    let url = format!("http://127.0.0.1:{port}/v1");
    // `n` lanes alive at once: a connection each, all idle in their lanes' slots.
    let lanes: Vec<Lane> = (0..n).map(|_| lane(&url).unwrap()).collect();
    let mut seen = Vec::new();
    for l in &lanes {
        let r = rt.block_on(l.post(RequestBody::default()));
        seen.push(rt.block_on(body_of(r.unwrap())));
    }
    assert_eq!(seen.len(), n);
    seen.dedup();
    assert_eq!(
        seen.len(),
        n,
        "each lane alive at once has its own connection"
    );
    drop(lanes);
    let lanes: Vec<Lane> = (0..n).map(|_| lane(&url).unwrap()).collect();
    let mut answers = Vec::new();
    for l in &lanes {
        let r = rt.block_on(l.post(RequestBody::default()));
        answers.push(rt.block_on(body_of(r.unwrap())));
    }
    let new = (n..n + 2)
        .map(|i| format!("connection {i}"))
        .collect::<Vec<_>>();
    let reused = answers.iter().filter(|a| !new.contains(a)).count();
    assert_eq!(reused, PER_ENDPOINT, "{answers:?}");
}

#[tokio::test]
async fn a_lane_dropped_mid_response_closes_its_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let l = lane(&format!("http://127.0.0.1:{port}/v1")).unwrap();
    // The server answers with half of its body and waits.
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = [0; 4096];
        let _ = s.read(&mut head).unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf.")
            .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let read = s.read(&mut [0; 1]).unwrap();
        (read, listener.accept())
    });
    let mut r = l.post(RequestBody::default()).await.unwrap();
    assert_eq!(&r.chunk().await.unwrap().unwrap()[..], b"half.");
    drop(r);
    drop(l);
    // Off the test runtime's one thread: the server's end reads EOF, and no pooled
    // connection is left for a new lane (it connects again).
    let next = tokio::task::spawn_blocking(move || {
        let l = lane(&format!("http://127.0.0.1:{port}/v1")).unwrap();
        runtime().block_on(async {
            let sent = l.post(RequestBody::default());
            tokio::time::timeout(Duration::from_millis(500), sent)
                .await
                .is_err()
        })
    });
    let (read, accepted) = server.join().unwrap();
    assert_eq!(read, 0, "EOF: the client closed its end");
    assert!(accepted.is_ok(), "the next lane connected anew");
    assert!(next.await.unwrap(), "nobody answers the new connection");
}

const DONE: &[u8] = b"data: [DONE]\n\n";

/// A server that answers each request with a stream of `[DONE]` alone, and writes the end
/// of the chunked body `end` later, or never (it then reports when the client closed).
struct LateEnd {
    port: u16,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    /// When the connection's end was written, or when the client's close was read.
    events: std::sync::mpsc::Receiver<Ended>,
}

enum Ended {
    Terminator,
    ClosedByClient(std::time::Instant),
}

fn late_end_server(end: Option<Duration>) -> LateEnd {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (tx, events) = std::sync::mpsc::channel();
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                while read_request(&mut reader).is_some() {
                    let mut answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n"
                        .to_vec();
                    answer.extend_from_slice(format!("{:x}\r\n", DONE.len()).as_bytes());
                    answer.extend_from_slice(DONE);
                    answer.extend_from_slice(b"\r\n");
                    stream.write_all(&answer).unwrap();
                    let Some(end) = end else {
                        stream
                            .set_read_timeout(Some(Duration::from_secs(10)))
                            .unwrap();
                        if let Ok(0) = stream.read(&mut [0; 1]) {
                            let _ = tx.send(Ended::ClosedByClient(std::time::Instant::now()));
                        }
                        return;
                    };
                    std::thread::sleep(end);
                    stream.write_all(b"0\r\n\r\n").unwrap();
                    let _ = tx.send(Ended::Terminator);
                }
            });
        }
    });
    LateEnd {
        port,
        accepted,
        events,
    }
}

impl LateEnd {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn pooled(&self) -> usize {
        pool().count(&Target::Addr(SocketAddr::from(([127, 0, 0, 1], self.port))))
    }
}

/// A runtime whose workers run its tasks whoever drives it, as the library's own.
fn worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A new lane's request read to `[DONE]`, as a turn does.
async fn response_to_done(url: &str) -> (Lane, LaneResponse) {
    let l = lane(url).unwrap();
    let mut r = l.post(RequestBody::default()).await.unwrap();
    assert_eq!(&r.chunk().await.unwrap().unwrap()[..], DONE);
    (l, r)
}

/// A new lane's request read to `[DONE]` and dropped, the lane kept.
async fn read_to_done(url: &str) -> Lane {
    response_to_done(url).await.0
}

fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        if std::time::Instant::now() > give_up {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Where and in which order the lane and its response are dropped.
enum Dropped {
    /// The response, then the lane, on a worker of the runtime.
    OnTheRuntime,
    /// The response on the runtime, the lane on a thread of none (a host's).
    OnAHostThread,
    /// The lane first (an agent freed while its turn's task lets go of the response),
    /// then the response, on a thread of no runtime.
    ResponseLast,
}

/// The lane dropped at once after `[DONE]`; the end of the body comes 150 ms later.
fn a_late_end_leaves_the_connection_to_the_next_lane(dropped: Dropped) {
    let s = late_end_server(Some(Duration::from_millis(150)));
    let url = s.url();
    let rt = worker_runtime();
    let (l, r) = rt.block_on(response_to_done(&url));
    match dropped {
        Dropped::OnTheRuntime => rt.block_on(async { drop((r, l)) }),
        Dropped::OnAHostThread => {
            rt.block_on(async { drop(r) });
            drop(l);
        }
        Dropped::ResponseLast => {
            drop(l);
            drop(r);
        }
    }
    assert!(wait_until(|| s.pooled() == 1), "the connection was pooled");
    assert!(matches!(
        s.events.recv_timeout(Duration::from_secs(5)),
        Ok(Ended::Terminator)
    ));
    let l = runtime().block_on(read_to_done(&url));
    assert_eq!(s.accepted(), 1, "the next lane took the same connection");
    drop(l);
}

#[test]
fn a_late_end_leaves_the_connection_to_the_next_lane_dropped_on_the_runtime() {
    a_late_end_leaves_the_connection_to_the_next_lane(Dropped::OnTheRuntime);
}

#[test]
fn a_late_end_leaves_the_connection_to_the_next_lane_dropped_on_a_host_thread() {
    a_late_end_leaves_the_connection_to_the_next_lane(Dropped::OnAHostThread);
}

#[test]
fn a_late_end_leaves_the_connection_to_the_next_lane_when_the_response_outlives_the_lane() {
    a_late_end_leaves_the_connection_to_the_next_lane(Dropped::ResponseLast);
}

#[test]
fn a_connection_whose_end_never_comes_is_closed_after_the_settle_limit() {
    let s = late_end_server(None);
    let url = s.url();
    let rt = worker_runtime();
    let l = rt.block_on(read_to_done(&url));
    let dropped = std::time::Instant::now();
    drop(l);
    let Ok(Ended::ClosedByClient(at)) = s.events.recv_timeout(Duration::from_secs(10)) else {
        panic!("the client never closed the connection");
    };
    let waited = at.duration_since(dropped);
    assert!(
        waited >= SETTLE_LIMIT && waited < SETTLE_LIMIT * 3,
        "closed after {waited:?}"
    );
    assert_eq!(s.pooled(), 0);
    // The next lane connects anew.
    drop(rt.block_on(read_to_done(&url)));
    assert_eq!(s.accepted(), 2);
}

#[test]
fn a_connection_of_a_runtime_shut_down_is_closed_at_once() {
    let s = late_end_server(None);
    let url = s.url();
    let rt = worker_runtime();
    let l = rt.block_on(read_to_done(&url));
    drop(rt);
    let dropped = std::time::Instant::now();
    drop(l);
    let Ok(Ended::ClosedByClient(at)) = s.events.recv_timeout(Duration::from_secs(10)) else {
        panic!("the client never closed the connection");
    };
    assert!(at.duration_since(dropped) < SETTLE_LIMIT, "closed at once");
    assert_eq!(s.pooled(), 0);
}
