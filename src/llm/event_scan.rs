//! What the typed wires' fast paths (`anthropic/fast_event.rs`, `responses/fast_event.rs`) read
//! an event's JSON with: the scanner of `text_chunk.rs`, plus a reader of any value they skip
//! and of a plain non-negative integer. Both say "here it is" or "not sure" (`None`): every
//! value they accept is one serde_json accepts and reads the same way, so a fast path built on
//! them can leave anything unusual to its wire's general decoder.

use std::borrow::Cow;

use super::assembly::Assembler;
use super::text_chunk::Scanner;
use super::wire::Flow;
use super::{LlmError, LlmResponse};

/// Nesting a skipped value may have on the fast path (serde_json's limit is 128; events nest 3
/// or 4 deep).
const MAX_DEPTH: usize = 16;

/// Digits of an integer the fast path skips or reads: serde_json reads a longer one as a float
/// and refuses one past `f64`'s range (a whole event then fails), so those go its way.
const MAX_DIGITS: usize = 19;

/// A string value (after whitespace), `None` for anything else.
pub(super) fn string<'a>(s: &mut Scanner<'a>) -> Option<Cow<'a, str>> {
    s.ws();
    if s.peek()? != b'"' {
        return None;
    }
    s.string()
}

/// A plain non-negative integer that fits a `u64` (what `Value::as_u64` reads), followed by
/// what may follow a value.
pub(super) fn u64_value(s: &mut Scanner<'_>) -> Option<u64> {
    s.ws();
    let b = s.bytes();
    let end = digits_end(b, s.pos)?;
    let n = b[s.pos..end]
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    s.pos = end;
    // At most MAX_DIGITS (19) digits: the sum cannot overflow.
    Some(n)
}

/// Any JSON value, skipped: strings, plain integers, literals, and arrays and objects of them
/// up to [`MAX_DEPTH`]; `None` for a float, an escaped key, deeper nesting or a malformed byte.
pub(super) fn skip_value(s: &mut Scanner<'_>) -> Option<()> {
    skip_at(s, 0)
}

fn skip_at(s: &mut Scanner<'_>, depth: usize) -> Option<()> {
    s.ws();
    match s.peek()? {
        b'"' => s.string().map(drop),
        b'-' | b'0'..=b'9' => integer(s),
        b'{' if depth < MAX_DEPTH => s.object(|s, _| skip_at(s, depth + 1)),
        b'[' if depth < MAX_DEPTH => {
            s.pos += 1;
            s.ws();
            if s.peek()? == b']' {
                s.pos += 1;
                return Some(());
            }
            loop {
                skip_at(s, depth + 1)?;
                s.ws();
                match s.peek()? {
                    b',' => s.pos += 1,
                    b']' => {
                        s.pos += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        }
        b'{' | b'[' => None,
        _ => (s.literal(b"null") || s.literal(b"true") || s.literal(b"false")).then_some(()),
    }
}

/// `-?(0|[1-9][0-9]*)`, skipped.
fn integer(s: &mut Scanner<'_>) -> Option<()> {
    let b = s.bytes();
    let start = s.pos + usize::from(b.get(s.pos) == Some(&b'-'));
    s.pos = digits_end(b, start)?;
    Some(())
}

/// The end of `0|[1-9][0-9]*` at `start`, of at most [`MAX_DIGITS`] digits and followed by
/// what may follow a value.
fn digits_end(b: &[u8], start: usize) -> Option<usize> {
    let len = b
        .get(start..)?
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    if len == 0 || len > MAX_DIGITS || (b[start] == b'0' && len > 1) {
        return None;
    }
    match b.get(start + len) {
        Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') => Some(start + len),
        _ => None,
    }
}

/// Reads a whole event: one object (its members handed to `member`), then only whitespace.
pub(super) fn whole_object<'a>(
    text: &'a str,
    member: impl FnMut(&mut Scanner<'a>, &'a str) -> Option<()>,
) -> Option<()> {
    let mut s = Scanner { text, pos: 0 };
    s.object(member)?;
    s.ws();
    (s.pos == text.len()).then_some(())
}

/// Sets `slot` once: a key given twice is left to serde_json (whose map keeps the last).
pub(super) fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value?);
    Some(())
}

/// A typed wire's decoder part way through a sequence of SSE data payloads, as one attempt
/// reads them (up to the terminal event or an in-stream error, then the end of the body), with
/// the trace of each event's outcome so far. `Clone`, so that the tests decode a prefix that
/// many sequences share once.
#[derive(Clone)]
pub(super) struct Trace<D> {
    dec: D,
    asm: Assembler,
    text: String,
    ended: bool,
}

impl<D: Default + std::fmt::Debug> Trace<D> {
    pub(super) fn new() -> Self {
        Trace {
            dec: D::default(),
            asm: Assembler::default(),
            text: String::new(),
            ended: false,
        }
    }

    /// Decodes the next payload; nothing once the stream has ended.
    pub(super) fn feed(
        &mut self,
        data: &[u8],
        decode: impl Fn(&mut D, &[u8], &mut Assembler) -> Result<Flow, LlmError>,
    ) {
        if self.ended {
            return;
        }
        let r = decode(&mut self.dec, data, &mut self.asm);
        self.text.push_str(&format!("{r:?}\n"));
        self.ended = !matches!(r, Ok(Flow::More));
    }

    /// The end of the body: each event's outcome and the decoder's and assembler's whole state
    /// after the last (`Debug`), and the response.
    pub(super) fn finish(
        mut self,
        at_eof: impl Fn(&mut D, &mut Assembler) -> Result<(), LlmError>,
    ) -> (String, LlmResponse) {
        if !self.ended {
            let r = at_eof(&mut self.dec, &mut self.asm);
            self.text.push_str(&format!("{r:?}\n"));
        }
        self.text
            .push_str(&format!("{:?}\n{:?}", self.dec, self.asm));
        (self.text, self.asm.finish())
    }
}

/// A typed wire's decoder applied to a sequence of SSE data payloads ([`Trace`]). What the
/// wires' `decode_for_fuzzing` hooks return.
pub(super) fn decode_trace<'a, D: Default + std::fmt::Debug>(
    events: impl IntoIterator<Item = &'a [u8]>,
    decode: impl Fn(&mut D, &[u8], &mut Assembler) -> Result<Flow, LlmError>,
    at_eof: impl Fn(&mut D, &mut Assembler) -> Result<(), LlmError>,
) -> (String, LlmResponse) {
    let mut t = Trace::new();
    for data in events {
        t.feed(data, &decode);
    }
    t.finish(at_eof)
}

/// Decodes a corpus stream, and each sequence made of it with one event replaced by one of its
/// single-byte mutations (a few bytes that matter to JSON at each position) or truncations, by
/// every path, and asserts that each path leaves the same trace as the first. The events
/// before the changed one are decoded once for all its variants (each sequence decoded whole
/// made these tests ~45 s each in a debug build).
#[cfg(test)]
pub(super) fn assert_paths_agree_on_mutations<D, P: Copy + std::fmt::Debug>(
    events: &[Vec<u8>],
    paths: &[P],
    decode: impl Fn(&mut D, &[u8], &mut Assembler, P) -> Result<Flow, LlmError>,
    at_eof: impl Fn(&mut D, &mut Assembler) -> Result<(), LlmError> + Copy,
) where
    D: Default + std::fmt::Debug + Clone,
{
    const BYTES: &[u8] = b"\"\\{}[],:1.-x \x01\xff";
    let traces = |prefix: &[Trace<D>], event: &[u8], rest: &[Vec<u8>]| -> Vec<String> {
        paths
            .iter()
            .zip(prefix)
            .map(|(&path, t)| {
                let mut t = t.clone();
                let by = |d: &mut D, data: &[u8], a: &mut Assembler| decode(d, data, a, path);
                t.feed(event, by);
                for e in rest {
                    t.feed(e, by);
                }
                t.finish(at_eof).0
            })
            .collect()
    };
    let mut prefix: Vec<Trace<D>> = paths.iter().map(|_| Trace::new()).collect();
    for (i, e) in events.iter().enumerate() {
        // The stream itself once, then the variants of each event.
        let mut variants = if i == 0 { vec![e.clone()] } else { Vec::new() };
        for j in 0..e.len() {
            for &b in BYTES {
                if e[j] != b {
                    let mut v = e.clone();
                    v[j] = b;
                    variants.push(v);
                }
            }
            variants.push(e[..j].to_vec());
        }
        for v in &variants {
            let seen = traces(&prefix, v, &events[i + 1..]);
            for (path, trace) in paths.iter().zip(&seen).skip(1) {
                assert_eq!(
                    trace,
                    &seen[0],
                    "{path:?} on {:?}",
                    events[..i]
                        .iter()
                        .chain([v])
                        .chain(&events[i + 1..])
                        .map(|e| String::from_utf8_lossy(e))
                        .collect::<Vec<_>>()
                );
            }
        }
        for (&path, t) in paths.iter().zip(&mut prefix) {
            t.feed(e, |d: &mut D, data: &[u8], a: &mut Assembler| {
                decode(d, data, a, path)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text` is skipped whole; inside an event a value is always followed by
    /// something (a space here).
    fn skips(text: &str) -> bool {
        let text = &format!("{text} ");
        let mut s = Scanner { text, pos: 0 };
        skip_value(&mut s).is_some() && {
            s.ws();
            s.pos == text.len()
        }
    }

    /// Whatever is skipped serde_json parses; what is refused goes to serde_json anyway.
    #[test]
    fn skipped_values_are_json_and_doubtful_ones_are_refused() {
        for ok in [
            r#""a\nb""#,
            "0",
            "-12",
            "null",
            "true",
            "[]",
            "[1, \"x\", [null], {}]",
            r#"{"a":{"b":[{"c":false}]}}"#,
            "9999999999999999999",
        ] {
            assert!(skips(ok), "{ok}");
            assert!(
                serde_json::from_str::<serde_json::Value>(ok).is_ok(),
                "{ok}"
            );
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        let long = "1".repeat(400);
        for refused in [
            "1.5",
            "1e3",
            "01",
            "-",
            "[1,]",
            "{\"a\"}",
            "nul",
            "[1 2]",
            "{\"\\u0061\":1}",
            &deep,
            &long,
            "\"\\ud800\"",
        ] {
            assert!(!skips(refused), "{refused}");
        }
        assert!(
            serde_json::from_str::<serde_json::Value>(&long).is_err(),
            "a 400-digit integer fails the whole event in serde_json"
        );
    }

    #[test]
    fn integers_read_as_as_u64_reads_them() {
        for (text, want) in [
            ("0,", Some(0)),
            ("18446744073709551615}", None),
            ("1234567890123456789]", Some(1_234_567_890_123_456_789)),
            ("-1,", None),
            ("1.0,", None),
            ("7", None),
        ] {
            let mut s = Scanner { text, pos: 0 };
            assert_eq!(u64_value(&mut s), want, "{text}");
        }
    }
}
