//! Counts the SSE `data:` lines of a response body as its frames arrive: the work any SSE reader
//! must do (find each line end), and the figure the bench compares with the deltas it saw. A line
//! counts when its newline arrives, as `raw_exchange` in `bench.c` counts, and a frame may end
//! anywhere, even inside `data:`.

const DATA: &[u8] = b"data:";

#[derive(Debug, Default)]
pub struct DataLineCounter {
    /// The first bytes of the current line, until there are enough to tell.
    head: [u8; DATA.len()],
    head_len: usize,
    /// The current line's kind is known (its head is complete); skip to its newline.
    told: bool,
    is_data: bool,
    lines: u64,
}

impl DataLineCounter {
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            if self.told {
                let Some(nl) = memchr::memchr(b'\n', chunk) else {
                    return;
                };
                self.end_line();
                chunk = &chunk[nl + 1..];
                continue;
            }
            let b = chunk[0];
            chunk = &chunk[1..];
            if b == b'\n' {
                self.end_line();
                continue;
            }
            self.head[self.head_len] = b;
            self.head_len += 1;
            if self.head_len == DATA.len() {
                self.told = true;
                self.is_data = self.head == DATA;
            }
        }
    }

    fn end_line(&mut self) {
        if self.is_data {
            self.lines += 1;
        }
        self.head_len = 0;
        self.told = false;
        self.is_data = false;
    }

    /// The `data:` lines ended so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_in_pieces(body: &[u8], piece: usize) -> u64 {
        let mut c = DataLineCounter::default();
        body.chunks(piece).for_each(|p| c.feed(p));
        c.lines()
    }

    const BODY: &[u8] = b"data: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":2}\r\n\r\ndat\nxdata: no\ndata: [DONE]\n\n";

    #[test]
    fn counts_data_lines_only() {
        assert_eq!(count_in_pieces(BODY, BODY.len()), 3);
    }

    #[test]
    fn the_count_does_not_depend_on_where_frames_split() {
        for piece in 1..BODY.len() {
            assert_eq!(count_in_pieces(BODY, piece), 3, "pieces of {piece}");
        }
    }

    #[test]
    fn a_line_counts_when_its_newline_arrives() {
        let mut c = DataLineCounter::default();
        c.feed(b"data: {}");
        assert_eq!(c.lines(), 0);
        c.feed(b"\n");
        assert_eq!(c.lines(), 1);
    }
}
