//! The child's protocol: one command a line on stdin, one answer a line on stdout.
//!
//! - `run ADDR FILE N TEXT`: replay the bodies of FILE, N times, on one keep-alive connection;
//! - `fresh ADDR FILE TEXT`: send FILE's first body on a new connection (a fresh agent's first turn);
//! - `text ADDR FILE N`: as `run … N -`, but decoding every delta's text (`sse_text.rs`) instead of
//!   only finding line ends;
//! - `many ADDR FILE N`: N connections at once, each replaying FILE's bodies once (N turns in
//!   flight together: the floor of the scale rows).
//!
//! ADDR is the mock's `127.0.0.1:PORT` (each bench section has its own mock). TEXT, the rest of
//! the line, must occur in the last response of each replay (`-`: no check; a streamed answer is split across deltas).
//! The answer is `ok <wall_ns> <data lines> <cpu_ns>` or `err <message>`; a `text` command's adds
//! `<deltas> <text bytes> <FNV-1a 64 of the text, hex>` (the text of all N replays in order), so
//! the bench checks the decoded text without it crossing the pipe.

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
    Text {
        addr: SocketAddr,
        file: PathBuf,
        times: u32,
    },
    Many {
        addr: SocketAddr,
        file: PathBuf,
        connections: u32,
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
    pub decoded: Option<DecodedText>,
}

/// What a `text` command decoded: the deltas that carried content, and the text's length and hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedText {
    pub deltas: u64,
    pub bytes: u64,
    pub fnv1a64: u64,
}

impl DecodedText {
    pub fn of(deltas: u64, text: &str) -> DecodedText {
        let fnv1a64 = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        DecodedText {
            deltas,
            bytes: text.len() as u64,
            fnv1a64,
        }
    }
}

impl std::fmt::Display for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ok {} {} {}", self.wall_ns, self.lines, self.cpu_ns)?;
        if let Some(d) = self.decoded {
            write!(f, " {} {} {:016x}", d.deltas, d.bytes, d.fnv1a64)?;
        }
        Ok(())
    }
}

impl Command {
    pub fn parse(line: &str) -> Result<Command, String> {
        let line = line.trim_end_matches(['\n', '\r']);
        // TEXT is the rest of the line: an answer's text has spaces.
        let arity = if line.starts_with("run ") || line.starts_with("text ") {
            5
        } else {
            4
        };
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
            ["text", a, file, n] => Ok(Command::Text {
                addr: addr(a)?,
                file: PathBuf::from(file),
                times: n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("count {n:?}"))?,
            }),
            ["many", a, file, n] => Ok(Command::Many {
                addr: addr(a)?,
                file: PathBuf::from(file),
                connections: n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("count {n:?}"))?,
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
    fn parses_text() {
        assert_eq!(
            Command::parse("text 127.0.0.1:8080 /tmp/r.raw 3").unwrap(),
            Command::Text {
                addr: "127.0.0.1:8080".parse().unwrap(),
                file: "/tmp/r.raw".into(),
                times: 3,
            }
        );
    }

    #[test]
    fn parses_many() {
        assert_eq!(
            Command::parse("many 127.0.0.1:8080 /tmp/r.raw 10000").unwrap(),
            Command::Many {
                addr: "127.0.0.1:8080".parse().unwrap(),
                file: "/tmp/r.raw".into(),
                connections: 10000,
            }
        );
        assert!(Command::parse("many 127.0.0.1:1 f 0").is_err());
        assert!(Command::parse("many 127.0.0.1:1 f").is_err());
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
            "text 127.0.0.1:1 f 0",
            "text 127.0.0.1:1 f",
            "text 127.0.0.1:1 f 2 x",
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
            decoded: None,
        };
        assert_eq!(m.to_string(), "ok 5 2 3");
    }

    #[test]
    fn the_answer_line_of_a_text_command() {
        let m = Measured {
            wall_ns: 5,
            lines: 2,
            cpu_ns: 3,
            decoded: Some(DecodedText::of(1, "a")),
        };
        // FNV-1a 64 of "a", the published test vector.
        assert_eq!(m.to_string(), "ok 5 2 3 1 1 af63dc4c8601ec8c");
        assert_eq!(DecodedText::of(0, "").fnv1a64, 0xcbf2_9ce4_8422_2325);
    }
}
