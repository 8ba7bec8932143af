//! A byte-wise Server-Sent Events parser (the WHATWG line and field rules) that hands out one
//! event at a time and allocates nothing once its buffers are warm.
//!
//! Lines may end in CRLF, LF or a bare CR, and a CRLF may be split across two network reads.
//! Comment lines (`:` keep-alives) are skipped, `data:` may omit the space, several `data` lines
//! join with `\n`, and other fields (`event`, `id`, `retry`) are ignored: the chat-completions
//! wire only uses `data`. We keep this in-house rather than use an SSE crate because those
//! allocate an owned event per delta, and the per-delta budget is one string, the host's.

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    data_lines: usize,
    /// The previous byte was a CR, so a leading LF of the next input belongs to it.
    skip_lf: bool,
    ready: bool,
    /// Bound on one line and on one event's data (`None`: unbounded).
    limit: Option<usize>,
    overflow: bool,
}

/// Where the value of a `data:` line at the start of `input` begins (one space dropped).
fn value_at(input: &[u8]) -> Option<usize> {
    let rest = input.strip_prefix(b"data:")?;
    Some(5 + usize::from(rest.first() == Some(&b' ')))
}

impl SseParser {
    /// A parser that refuses a line or an event's data longer than `limit` bytes: once that
    /// happens it consumes nothing more and [`SseParser::overflowed`] is true.
    pub(crate) fn with_limit(limit: usize) -> Self {
        SseParser {
            limit: Some(limit),
            ..Default::default()
        }
    }

    /// Whether a line or an event exceeded the limit (the stream cannot go on).
    pub(crate) fn overflowed(&self) -> bool {
        self.overflow
    }

    fn over(&self, len: usize) -> bool {
        self.limit.is_some_and(|l| len > l)
    }

    /// Consumes bytes until one event is complete or the input is exhausted. Returns how many
    /// bytes were consumed and whether an event is ready in [`SseParser::data`].
    pub fn advance(&mut self, input: &[u8]) -> (usize, bool) {
        if self.ready {
            self.clear_event();
        }
        let mut i = 0;
        while i < input.len() && !self.overflow {
            if self.skip_lf {
                self.skip_lf = false;
                if input[i] == b'\n' {
                    i += 1;
                    continue;
                }
            }
            let rest = &input[i..];
            match memchr::memchr2(b'\n', b'\r', rest) {
                None => {
                    if self.over(self.line.len() + rest.len()) {
                        self.overflow = true;
                        return (input.len(), false);
                    }
                    self.line.extend_from_slice(rest);
                    return (input.len(), false);
                }
                Some(end) => {
                    if self.over(self.line.len() + end) {
                        self.overflow = true;
                        return (input.len(), false);
                    }
                    self.skip_lf = rest[end] == b'\r';
                    let dispatched = if self.line.is_empty() {
                        self.process_line(&rest[..end])
                    } else {
                        self.line.extend_from_slice(&rest[..end]);
                        let line = std::mem::take(&mut self.line);
                        let d = self.process_line(&line);
                        self.line = line;
                        self.line.clear();
                        d
                    };
                    i += end + 1;
                    if dispatched {
                        self.ready = true;
                        return (i, true);
                    }
                }
            }
        }
        (i, false)
    }

    /// [`SseParser::advance`] returning the ready event's data: borrowed from `input` when the
    /// event is one whole `data:` line and its blank line at the start of `input` (what a
    /// server streams; the line is searched once and its data not copied), after an `event:`
    /// line if it has one (the typed wires' servers name every event), else from the parser
    /// after the general path. Same events as `advance` however the input is cut
    /// (`the_whole_event_path_gives_the_same_events`).
    pub fn next_event<'a>(&'a mut self, input: &'a [u8]) -> (usize, Option<&'a [u8]>) {
        // The name line, skipped as the general path skips it (the wires read the type in the
        // data); what follows it is read below, or by the general path at the next call.
        let named = self.name_line_end(input).unwrap_or(0);
        let rest = &input[named..];
        // `data:value` and an empty line, both ended by LF or both by CRLF, at the start of
        // `input`; anything else (other fields, comments, bare CR, several data lines, a line
        // cut by the read, past the limit) goes to the general path.
        if let Some(at) = self.value_start(rest) {
            if let Some(len) = memchr::memchr2(b'\n', b'\r', &rest[at..]) {
                if let Some(n) = self.event_end(rest, at, len) {
                    return (named + n, Some(&rest[at..at + len]));
                }
            }
        }
        if named > 0 {
            return (named, None);
        }
        let (n, ready) = self.advance(input);
        (n, ready.then(|| self.data()))
    }

    /// The bytes an `event:` line ended by LF takes at the start of `input`, if the parser
    /// stands at an event's start and the line is within the limit: the general path would
    /// take them and change nothing but the position.
    fn name_line_end(&mut self, input: &[u8]) -> Option<usize> {
        if !input.starts_with(b"event:") {
            return None;
        }
        if self.ready {
            self.clear_event();
        }
        if self.skip_lf || self.overflow || !self.line.is_empty() || self.data_lines != 0 {
            return None;
        }
        let end = memchr::memchr2(b'\n', b'\r', input)?;
        (input[end] == b'\n' && !self.over(end)).then_some(end + 1)
    }

    /// Where the value of a `data:` line at the start of `input` begins, if the parser stands
    /// at an event's start (a dispatched event is cleared): for a reader that knows where the
    /// value ends without searching for the line end ([`SseParser::event_end`]).
    pub(crate) fn value_start(&mut self, input: &[u8]) -> Option<usize> {
        if self.ready {
            self.clear_event();
        }
        if self.skip_lf || self.overflow || !self.line.is_empty() || self.data_lines != 0 {
            return None;
        }
        value_at(input)
    }

    /// The bytes a whole event takes whose value is `input[at..at + len]`, if the value holds
    /// no CR or LF (the caller's promise) and its line and an empty line end right after it,
    /// both with LF or both with CRLF, within the limit; else `None` (the general path reads it).
    #[inline]
    pub(crate) fn event_end(&self, input: &[u8], at: usize, len: usize) -> Option<usize> {
        let ends = match input.get(at + len..)? {
            [b'\n', b'\n', ..] => 2,
            [b'\r', b'\n', b'\r', b'\n', ..] => 4,
            _ => return None,
        };
        if self.over(at + len) || self.over(len + 1) {
            return None;
        }
        Some(at + len + ends)
    }

    /// At end of input: completes a last event that lacked its blank line.
    pub fn finish(&mut self) -> bool {
        if self.ready {
            self.clear_event();
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line);
        }
        if self.data_lines > 0 {
            self.ready = true;
            true
        } else {
            false
        }
    }

    /// The data of the ready event.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    fn clear_event(&mut self) {
        self.data.clear();
        self.data_lines = 0;
        self.ready = false;
    }

    fn process_line(&mut self, line: &[u8]) -> bool {
        if line.is_empty() {
            return self.data_lines > 0;
        }
        if line[0] == b':' {
            return false;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.over(self.data.len() + value.len() + 1) {
                self.overflow = true;
                return false;
            }
            if self.data_lines > 0 {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.data_lines += 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(parts: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for part in parts {
            let mut pos = 0;
            while pos < part.len() {
                let (n, ready) = p.advance(&part[pos..]);
                pos += n;
                if ready {
                    out.push(String::from_utf8(p.data().to_vec()).unwrap());
                }
            }
        }
        if p.finish() {
            out.push(String::from_utf8(p.data().to_vec()).unwrap());
        }
        out
    }

    #[test]
    fn line_endings_and_splits() {
        assert_eq!(
            events(&[b"data: a\r\n\r\ndata:b\n\ndata: c\r\rdata: d"]),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            events(&[b"data: a\r", b"\n\r", b"\ndata: b\n", b"\n"]),
            ["a", "b"]
        );
    }

    #[test]
    fn comments_multiline_and_other_fields() {
        assert_eq!(
            events(&[
                b": keep-alive\n\nevent: x\nid: 3\ndata: 1\ndata: 2\n\n: OPENROUTER PROCESSING\n\n"
            ]),
            ["1\n2"]
        );
    }

    #[test]
    fn lines_and_events_over_the_limit_overflow() {
        let mut p = SseParser::with_limit(12);
        assert_eq!(p.advance(b"data: 1234"), (10, false));
        assert!(!p.overflowed());
        p.advance(b"56789 and more without a newline");
        assert!(p.overflowed());
        let mut p = SseParser::with_limit(10);
        let (_, ready) = p.advance(b"data:12345\ndata:12345\ndata:12345\n\n");
        assert!(!ready && p.overflowed(), "data lines join past the limit");
        let mut p = SseParser::with_limit(12);
        assert_eq!(p.advance(b"data: 1234\n\n"), (12, true));
        assert!(!p.overflowed());
    }

    /// Every event of `input` (cut into reads of `cut` bytes) by `next_event`, and by `advance`.
    fn both_ways(input: &[u8], cut: usize, limit: Option<usize>) -> [Vec<Vec<u8>>; 2] {
        let fresh = || match limit {
            Some(l) => SseParser::with_limit(l),
            None => SseParser::default(),
        };
        let (mut fast, mut general) = (fresh(), fresh());
        let (mut by_fast, mut by_general) = (Vec::new(), Vec::new());
        for part in input.chunks(cut) {
            let mut pos = 0;
            while pos < part.len() && !fast.overflowed() {
                let (n, data) = fast.next_event(&part[pos..]);
                assert!(n > 0);
                pos += n;
                by_fast.extend(data.map(<[u8]>::to_vec));
            }
            let mut pos = 0;
            while pos < part.len() && !general.overflowed() {
                let (n, ready) = general.advance(&part[pos..]);
                pos += n;
                if ready {
                    by_general.push(general.data().to_vec());
                }
            }
        }
        assert_eq!(fast.overflowed(), general.overflowed());
        if fast.finish() {
            by_fast.push(fast.data().to_vec());
        }
        if general.finish() {
            by_general.push(general.data().to_vec());
        }
        [by_fast, by_general]
    }

    #[test]
    fn the_whole_event_path_gives_the_same_events() {
        let chunk = br#"{"id":"c","choices":[{"delta":{"content":"abcd"}}]}"#;
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for (line_end, space) in [("\n", " "), ("\r\n", " "), ("\r", ""), ("\n", "")] {
            let mut wire = Vec::new();
            for i in 0..5 {
                wire.extend_from_slice(format!("data:{space}").as_bytes());
                wire.extend_from_slice(chunk);
                wire.extend_from_slice(line_end.as_bytes());
                if i == 2 {
                    wire.extend_from_slice(
                        format!(": keep-alive{line_end}data: 2nd line{line_end}").as_bytes(),
                    );
                }
                wire.extend_from_slice(line_end.as_bytes());
            }
            wire.extend_from_slice(
                format!("data:{line_end}{line_end}data: [DONE]{line_end}{line_end}").as_bytes(),
            );
            inputs.push(wire);
        }
        inputs.push(
            b"data: a\n\ndata: b\r\n\r\ndata: c\n\r\ndata: d\r\n\ndata:e\r\rdata: f".to_vec(),
        );
        inputs.push(b"event: x\ndata: a\n\nid: 1\ndata: b\n\ndata: c\ndata: d\n\ndata".to_vec());
        inputs.push(
            b"event: a\ndata: 1\n\nevent:b\r\ndata: 2\r\n\r\nevent: c\nid: 3\ndata: 3\n\nevent: d\n\nevent: e\rdata: 4\n\nevent: f\ndata: 5\r\n\nevent: g\n: c\ndata: 6\n\nevent: h\nevent: i\ndata: 7\n\n"
                .to_vec(),
        );
        let mut fast = 0;
        for input in &inputs {
            for cut in 1..=input.len() {
                for limit in [None, Some(7), Some(60), Some(62)] {
                    let [a, b] = both_ways(input, cut, limit);
                    assert_eq!(
                        a,
                        b,
                        "cut {cut}, limit {limit:?}: {:?}",
                        String::from_utf8_lossy(input)
                    );
                }
            }
            let mut p = SseParser::default();
            let (_, data) = p.next_event(input);
            fast += usize::from(data.is_some_and(|d| {
                d.as_ptr_range().start > input.as_ptr()
                    && d.as_ptr_range().end <= input.as_ptr_range().end
            }));
        }
        assert_eq!(
            fast, 6,
            "the common framings, named or not, take the whole-event path"
        );
    }

    #[test]
    fn byte_at_a_time() {
        let input = b"data: {\"x\":1}\r\n\r\ndata: [DONE]\r\n\r\n";
        let parts: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(events(&parts), ["{\"x\":1}", "[DONE]"]);
    }
}
