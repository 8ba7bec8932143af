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

    #[test]
    fn byte_at_a_time() {
        let input = b"data: {\"x\":1}\r\n\r\ndata: [DONE]\r\n\r\n";
        let parts: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(events(&parts), ["{\"x\":1}", "[DONE]"]);
    }
}
