//! The child's protocol: one command a line on stdin, one answer a line on stdout.
//!
//! - `run ADDR FILE N TEXT`: replay the bodies of FILE, N times, on one keep-alive connection;
//! - `fresh ADDR FILE TEXT`: send FILE's first body on a new connection (a fresh agent's first turn).
//!
//! ADDR is the mock's `127.0.0.1:PORT` (each bench section has its own mock). TEXT, the rest of
//! the line, must occur in the last response of each replay (`-`: no check; a streamed answer is split across deltas).
//! The answer is `ok <wall_ns> <data lines> <cpu_ns>` or `err <message>`.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run {
        addr: SocketAddr,
        file: PathBuf,
        times: u32,
        text: ExpectedText,
    },
    Fresh {
        addr: SocketAddr,
        file: PathBuf,
        text: ExpectedText,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectedText {
    Unchecked,
    Contains(String),
}

impl ExpectedText {
    fn parse(word: &str) -> ExpectedText {
        match word {
            "-" => ExpectedText::Unchecked,
            text => ExpectedText::Contains(text.to_owned()),
        }
    }
}

/// What a command measured: its wall time, the `data:` lines read, and this process's CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub wall_ns: u64,
    pub lines: u64,
    pub cpu_ns: u64,
}

impl std::fmt::Display for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ok {} {} {}", self.wall_ns, self.lines, self.cpu_ns)
    }
}

impl Command {
    pub fn parse(line: &str) -> Result<Command, String> {
        let line = line.trim_end_matches(['\n', '\r']);
        // TEXT is the rest of the line: an answer's text has spaces.
        let arity = if line.starts_with("run ") { 5 } else { 4 };
        let words: Vec<&str> = line.splitn(arity, ' ').collect();
        let addr = |w: &str| {
            w.parse::<SocketAddr>()
                .map_err(|e| format!("address {w:?}: {e}"))
        };
        match words.as_slice() {
            ["run", a, file, n, text] => Ok(Command::Run {
                addr: addr(a)?,
                file: PathBuf::from(file),
                times: n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("count {n:?}"))?,
                text: ExpectedText::parse(text),
            }),
            ["fresh", a, file, text] => Ok(Command::Fresh {
                addr: addr(a)?,
                file: PathBuf::from(file),
                text: ExpectedText::parse(text),
            }),
            _ => Err(format!("unknown command {line:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_run_and_fresh() {
        assert_eq!(
            Command::parse("run 127.0.0.1:8080 /tmp/r.raw 20 hello\n").unwrap(),
            Command::Run {
                addr: "127.0.0.1:8080".parse().unwrap(),
                file: "/tmp/r.raw".into(),
                times: 20,
                text: ExpectedText::Contains("hello".into()),
            }
        );
        assert_eq!(
            Command::parse("fresh 127.0.0.1:1 f Hello from it.").unwrap(),
            Command::Fresh {
                addr: "127.0.0.1:1".parse().unwrap(),
                file: "f".into(),
                text: ExpectedText::Contains("Hello from it.".into()),
            }
        );
    }

    #[test]
    fn a_dash_checks_nothing() {
        let Command::Run { text, .. } = Command::parse("run 127.0.0.1:1 f 2 -").unwrap() else {
            panic!("not a run");
        };
        assert_eq!(text, ExpectedText::Unchecked);
    }

    #[test]
    fn rejects_bad_commands() {
        for bad in [
            "",
            "run 127.0.0.1:1 f 0 -",
            "run localhost f 1 -",
            "fresh 127.0.0.1:1 f",
            "stop",
        ] {
            assert!(Command::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_answer_line() {
        let m = Measured {
            wall_ns: 5,
            lines: 2,
            cpu_ns: 3,
        };
        assert_eq!(m.to_string(), "ok 5 2 3");
    }
}
