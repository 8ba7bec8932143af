//! The SSE framing parser (`llm::sse::SseParser`).
//!
//! Asserts, for any byte stream:
//! - no panic, and every `advance` makes progress (so a stream can never spin the reader);
//! - the events equal those of a plain line-by-line model of the WHATWG rules the parser
//!   implements (CRLF/LF/CR line ends, comments, `data` joined with `\n`, other fields ignored,
//!   a last event without its blank line completed by `finish`);
//! - the events do not depend on how the stream is cut into network reads;
//! - the event data never exceeds the input (bounded output);
//! - `next_event` (the whole-event path the library reads with) gives the same events as
//!   `advance`, however the stream is cut;
//! - round trip: payloads encoded as `data:` lines (any line end, keep-alive comments between)
//!   come back exactly.
#![no_main]

use agentao::llm::sse::SseParser;
use libfuzzer_sys::fuzz_target;

/// Feeds `input` in pieces whose lengths cycle through `cuts` to `step`, which reads from
/// the start of what it is given and says how much it consumed and the event it completed;
/// returns the events.
fn feed(
    input: &[u8],
    cuts: &[usize],
    mut step: impl FnMut(&mut SseParser, &[u8]) -> (usize, Option<Vec<u8>>),
) -> Vec<Vec<u8>> {
    let mut p = SseParser::default();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut k = 0;
    while pos < input.len() {
        let len = cuts[k % cuts.len()].clamp(1, input.len() - pos);
        k += 1;
        let piece = &input[pos..pos + len];
        let mut at = 0;
        while at < piece.len() {
            let (n, event) = step(&mut p, &piece[at..]);
            assert!(
                n > 0 && at + n <= piece.len(),
                "consumed {n} of {}",
                piece.len() - at
            );
            at += n;
            out.extend(event);
        }
        pos += len;
    }
    if p.finish() {
        out.push(p.data().to_vec());
    }
    out
}

/// The events of `input`, through `advance`.
fn parse(input: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    feed(input, cuts, |p, rest| {
        let (n, ready) = p.advance(rest);
        (n, ready.then(|| p.data().to_vec()))
    })
}

/// As [`parse`], through `next_event`.
fn parse_next_event(input: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    feed(input, cuts, |p, rest| {
        let (n, data) = p.next_event(rest);
        (n, data.map(<[u8]>::to_vec))
    })
}

/// The WHATWG event-stream rules, restricted to `data`, written for clarity.
fn model(input: &[u8]) -> Vec<Vec<u8>> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'\n' => {
                lines.push(&input[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&input[start..i]);
                if input.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let tail = &input[start..];
    let mut events = Vec::new();
    let mut data = Vec::new();
    let mut data_lines = 0;
    for line in lines
        .iter()
        .copied()
        .chain((!tail.is_empty()).then_some(tail))
    {
        if line.is_empty() {
            if data_lines > 0 {
                events.push(std::mem::take(&mut data));
                data_lines = 0;
            }
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if data_lines > 0 {
                data.push(b'\n');
            }
            data.extend_from_slice(value);
            data_lines += 1;
        }
    }
    if data_lines > 0 {
        events.push(data);
    }
    events
}

fuzz_target!(|data: &[u8]| {
    let (cut_bytes, input) = data.split_at(data.len().min(4));
    let cuts: Vec<usize> = cut_bytes
        .iter()
        .map(|b| *b as usize % 17 + 1)
        .chain([usize::MAX])
        .collect();

    let whole = parse(input, &[usize::MAX]);
    assert_eq!(whole, model(input), "parser and model disagree");
    assert_eq!(
        whole,
        parse(input, &cuts),
        "result depends on read boundaries"
    );
    assert_eq!(whole, parse(input, &[1]), "byte-at-a-time differs");
    assert_eq!(whole, parse_next_event(input, &cuts), "next_event differs");
    assert_eq!(whole, parse_next_event(input, &[usize::MAX]), "next_event differs");
    let total: usize = whole.iter().map(Vec::len).sum();
    assert!(
        total <= input.len(),
        "{total} bytes of data from {} of input",
        input.len()
    );

    // Round trip: NUL-separated payloads (without CR) encoded as an event stream.
    let payloads: Vec<&[u8]> = input
        .split(|b| *b == 0)
        .filter(|p| !p.contains(&b'\r'))
        .collect();
    let ends: [&[u8]; 3] = [b"\n", b"\r\n", b"\r"];
    let mut wire = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let end = ends[(cut_bytes.first().copied().unwrap_or(0) as usize + i) % 3];
        if i % 2 == 1 {
            wire.extend_from_slice(b": keep-alive");
            wire.extend_from_slice(end);
        }
        for line in p.split(|b| *b == b'\n') {
            wire.extend_from_slice(if i % 3 == 2 { b"data:" } else { b"data: " });
            if i % 3 == 2 && line.first() == Some(&b' ') {
                wire.push(b' ');
            }
            wire.extend_from_slice(line);
            wire.extend_from_slice(end);
        }
        wire.extend_from_slice(end);
    }
    let back = parse(&wire, &cuts);
    assert_eq!(back, payloads, "round trip");
});
