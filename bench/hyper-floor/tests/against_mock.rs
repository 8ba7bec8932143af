//! The `hyper-floor` binary driven over its pipes, as `bench.c` drives it, against the real
//! `mock-openai` serving a pre-rendered stream.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use mock_openai::{render_sse, MockServer};
use serde_json::json;

const CHUNKS: u64 = 50;

struct Floor {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Floor {
    fn start() -> Floor {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hyper-floor"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let from = BufReader::new(child.stdout.take().unwrap());
        Floor { child, to, from }
    }

    fn ask(&mut self, command: &str) -> Vec<String> {
        writeln!(self.to, "{command}").unwrap();
        let mut answer = String::new();
        self.from.read_line(&mut answer).unwrap();
        answer.split_whitespace().map(str::to_owned).collect()
    }
}

fn stream_mock() -> (MockServer, u64) {
    let script = json!({"responses": [{"repeat_text": {"unit": "abcd", "count": CHUNKS}}]});
    let body = render_sse(script).unwrap();
    // The deltas, then the finish, usage and [DONE] lines: counted here without the crate's counter.
    let expected = body
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"data:"))
        .count() as u64;
    assert!(expected > CHUNKS);
    (MockServer::start_prerendered(body).unwrap(), expected)
}

#[test]
fn run_and_fresh_read_every_data_line_and_eof_exits() {
    let (mock, per_response) = stream_mock();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("requests.raw");
    std::fs::write(
        &file,
        b"{\"model\":\"m\",\"stream\":true}\n{\"model\":\"m\",\"n\":2}\n",
    )
    .unwrap();
    let addr = mock.addr();
    let mut floor = Floor::start();

    let run = floor.ask(&format!("run {addr} {} 3 abcd", file.display()));
    assert_eq!(run[0], "ok", "{run:?}");
    assert_eq!(run.len(), 4, "{run:?}");
    assert_eq!(run[2].parse::<u64>().unwrap(), 3 * 2 * per_response);
    assert!(run[1].parse::<u64>().unwrap() > 0 && run[3].parse::<u64>().unwrap() > 0);
    assert_eq!(mock.request_count(), 6);

    let fresh = floor.ask(&format!("fresh {addr} {} -", file.display()));
    assert_eq!(fresh[0], "ok", "{fresh:?}");
    assert_eq!(fresh[2].parse::<u64>().unwrap(), per_response);
    assert_eq!(mock.request_count(), 7);

    let missing = floor.ask(&format!(
        "run {addr} {} 1 not-in-the-answer",
        file.display()
    ));
    assert_eq!(missing[0], "err", "{missing:?}");
    let no_file = floor.ask(&format!("fresh {addr} {}/none -", dir.path().display()));
    assert_eq!(no_file[0], "err", "{no_file:?}");

    drop(floor.to);
    assert!(floor.child.wait().unwrap().success());
}

#[test]
fn text_decodes_every_delta_and_answers_the_texts_hash() {
    let (mock, per_response) = stream_mock();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("requests.raw");
    std::fs::write(&file, b"{\"model\":\"m\",\"stream\":true}\n").unwrap();
    let mut floor = Floor::start();

    let text = floor.ask(&format!("text {} {} 2", mock.addr(), file.display()));
    assert_eq!(text[0], "ok", "{text:?}");
    assert_eq!(text.len(), 7, "{text:?}");
    assert_eq!(text[2].parse::<u64>().unwrap(), 2 * per_response);
    assert_eq!(text[4].parse::<u64>().unwrap(), 2 * CHUNKS);
    // What bench.c checks: the decoded text of both replays is the mock's, twice.
    let expected = "abcd".repeat(2 * CHUNKS as usize);
    assert_eq!(text[5].parse::<u64>().unwrap(), expected.len() as u64);
    let fnv = expected.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    assert_eq!(text[6], format!("{fnv:016x}"));
    assert_eq!(mock.request_count(), 2);
}
