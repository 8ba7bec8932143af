//! Figures, printed (never asserted, as timing on a shared machine is no contract here):
//! - the first `session/update` of a prompt after the model's first delta, end to end through
//!   the real binary and a loopback OpenAI-style server;
//! - the server's own cost per streamed chunk (event in, `session/update` line out), in process.
//!
//! `cargo test --release -p agentao-acp --test latency -- --nocapture` for the real figures.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentao::events::transport::Transport;
use agentao::events::turn_event::Text;
use agentao::events::TurnEvent;
use agentao_acp::rpc::{Outbox, Pending};
use agentao_acp::transport::AcpTransport;
use common::Client;
use serde_json::json;

fn chunk(content: &str, finish: Option<&str>) -> String {
    let v = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

/// A loopback server: each request gets the stream headers, a pause, then the first delta
/// (its send time goes to `sent`), then the end of the stream.
fn serve(listener: TcpListener, sent: std::sync::mpsc::Sender<Instant>, requests: usize) {
    for stream in listener.incoming().take(requests) {
        let mut s = stream.unwrap();
        s.set_nodelay(true).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
        )
        .unwrap();
        s.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let first = chunk("Hi", None);
        let t0 = Instant::now();
        s.write_all(first.as_bytes()).unwrap();
        s.flush().unwrap();
        sent.send(t0).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let _ = s.write_all(chunk(" there", Some("stop")).as_bytes());
        let _ = s.write_all(b"data: [DONE]\n\n");
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn first_update_after_first_model_delta() {
    const PROMPTS: usize = 30;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = channel();
    std::thread::spawn(move || serve(listener, tx, PROMPTS));
    std::env::set_var("AGENTAO_ACP_TEST_KEY", "sk-loopback");
    let dir = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{port}/v1");
    let mut c = Client::spawn(&[
        "--provider",
        "openai",
        "--base-url",
        &base,
        "--model",
        "m",
        "--api-key-env",
        "AGENTAO_ACP_TEST_KEY",
        "--no-persist",
    ]);
    c.initialize();
    let s = c.new_session(dir.path());
    let mut lat = Vec::new();
    for _ in 0..PROMPTS {
        let id = c.prompt(&s, "hi");
        let mut first = None;
        loop {
            let (t, v) = c.recv_timed(common::TIMEOUT).expect("a message");
            if first.is_none() && v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                assert_eq!(v["params"]["update"]["content"]["text"], "Hi");
                first = Some(t);
            }
            if v["id"] == json!(id) {
                assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
                break;
            }
        }
        let t0 = rx.recv_timeout(common::TIMEOUT).unwrap();
        lat.push(first.expect("a chunk").duration_since(t0));
    }
    let p50 = percentile(&mut lat, 0.5);
    let p90 = percentile(&mut lat, 0.9);
    println!(
        "first session/update after the first model delta (loopback, {PROMPTS} prompts): \
         p50 {p50:?}, p90 {p90:?}, min {:?}, max {:?}",
        lat[0],
        lat[lat.len() - 1]
    );
    eprintln!("schema-validated messages: {}", c.validated);
}

/// A sink that counts lines, so the writer thread does the real formatting and batching work.
struct CountingSink(Arc<std::sync::atomic::AtomicUsize>);

impl Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.iter().filter(|&&b| b == b'\n').count();
        self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// CPU time this thread has run, from the scheduler's own accounting (Linux), so a loaded
/// machine's waiting is not counted as our cost.
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

#[test]
fn server_overhead_per_streamed_chunk() {
    const CHUNKS: usize = 200_000;
    let lines = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (out, writer) = Outbox::start(CountingSink(lines.clone()));
    let t = AcpTransport::new(
        "3f1c9a2e-0000-4000-8000-000000000000".into(),
        std::env::temp_dir(),
        out.clone(),
        Arc::new(Pending::default()),
    );
    // One model delta as the library hands it to the server: a typed event, observed.
    let text = "Hello, wor";
    let ev = TurnEvent::LlmText {
        chunk: Text::new(text),
    };
    for _ in 0..1000 {
        t.observe(&ev);
    }
    let start = Instant::now();
    let cpu0 = thread_cpu();
    for _ in 0..CHUNKS {
        t.observe(&ev);
    }
    let produced = start.elapsed();
    let cpu = thread_cpu().zip(cpu0).map(|(b, a)| b - a);
    drop(t);
    out.close();
    drop(out);
    writer.join().unwrap();
    let total = start.elapsed();
    assert_eq!(
        lines.load(std::sync::atomic::Ordering::Relaxed),
        CHUNKS + 1000
    );
    let per = |d: Duration| d.as_secs_f64() * 1e6 / CHUNKS as f64;
    println!(
        "server overhead per streamed chunk ({CHUNKS} chunks): {:.2} us CPU on the turn's thread; \
         wall clock {:.2} us on the turn's thread, {:.2} us until written",
        cpu.map_or(f64::NAN, per),
        per(produced),
        per(total)
    );
}
