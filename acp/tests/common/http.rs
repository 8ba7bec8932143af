//! A loopback HTTP/1.1 peer for the tests that need a server the agent talks to (an OTLP
//! collector, a model endpoint): every request's path and body are kept, and a function of
//! them gives the answer.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// What the peer received: each request's path and body, in order.
pub type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An answer: its content type and body (status 200, keep-alive).
pub type Answer = fn(path: &str, body: &[u8]) -> (&'static str, Vec<u8>);

/// Starts the peer; returns its `http://127.0.0.1:PORT` and what it receives.
pub fn serve(answer: Answer) -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Received = Arc::default();
    let kept = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                while let Some((path, body)) = read_request(&mut r) {
                    let (content_type, reply) = answer(&path, &body);
                    kept.lock().unwrap().push((path, body));
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
                        reply.len()
                    );
                    if w.write_all(head.as_bytes()).is_err() || w.write_all(&reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

/// The next request's path and body; `None` at the end of the connection.
fn read_request(r: &mut impl BufRead) -> Option<(String, Vec<u8>)> {
    let mut head = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some((head.split(' ').nth(1).unwrap_or_default().to_owned(), body))
}
