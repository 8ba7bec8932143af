//! A byte string that grows at its end (and is sometimes cut back), kept as sealed chunks that
//! every request shares and one open chunk still being appended to. The chat wire's
//! conversation lives in one: a request shares the sealed chunks (a reference count each) and
//! copies only the open one, at most [`CHUNK`] bytes and a message, so a request deep into a
//! long session copies no more than one early in it (copying the whole rendered history into
//! each body made the request at message 2,000 cost 2.7× the one at message 20).

use bytes::Bytes;

/// How many bytes the open chunk holds before it is sealed: what a request copies at most
/// (beyond a message longer than that), against one shared piece per sealed chunk in every
/// body (~7 pieces for 100 KB of history).
pub(crate) const CHUNK: usize = 16 * 1024;

/// Bytes in chunks: the sealed ones are never changed (a request may hold them), only dropped
/// or shortened by a cut, which shortens this string's own reference.
#[derive(Default)]
pub(crate) struct AppendedChunks {
    sealed: Vec<Bytes>,
    /// The sum of the sealed chunks' lengths.
    sealed_len: usize,
    open: Vec<u8>,
}

impl AppendedChunks {
    pub(crate) fn len(&self) -> usize {
        self.sealed_len + self.open.len()
    }

    /// Where bytes are appended; [`AppendedChunks::seal_if_full`] after each whole item, so a
    /// chunk never ends inside one.
    pub(crate) fn open_mut(&mut self) -> &mut Vec<u8> {
        &mut self.open
    }

    /// Seals the open chunk once it holds [`CHUNK`] bytes or more.
    pub(crate) fn seal_if_full(&mut self) {
        if self.open.len() < CHUNK {
            return;
        }
        let mut full = std::mem::take(&mut self.open);
        // A chunk lives as long as the conversation: not with the room its growth left.
        if full.capacity() - full.len() > full.len() / 8 {
            full.shrink_to_fit();
        }
        self.sealed_len += full.len();
        self.sealed.push(Bytes::from(full));
    }

    /// Keeps the first `len` bytes.
    pub(crate) fn truncate(&mut self, len: usize) {
        if len >= self.sealed_len {
            self.open.truncate(len - self.sealed_len);
            return;
        }
        self.open.clear();
        while let Some(last) = self.sealed.last_mut() {
            let start = self.sealed_len - last.len();
            if start < len {
                // A request holding the chunk keeps its own reference, whole.
                last.truncate(len - start);
                self.sealed_len = len;
                return;
            }
            self.sealed.pop();
            self.sealed_len = start;
        }
    }

    /// Whether the bytes from `at` on are `expected` (and there are that many).
    pub(crate) fn matches_at(&self, at: usize, expected: &[u8]) -> bool {
        if at + expected.len() > self.len() {
            return false;
        }
        let mut start = 0;
        let mut rest = expected;
        for piece in self.sealed.iter().map(|b| &b[..]).chain([&self.open[..]]) {
            let end = start + piece.len();
            if rest.is_empty() {
                break;
            }
            if end > at {
                let from = at.max(start) - start;
                let n = rest.len().min(piece.len() - from);
                if piece[from..from + n] != rest[..n] {
                    return false;
                }
                rest = &rest[n..];
            }
            start = end;
        }
        rest.is_empty()
    }

    /// The sealed chunks, in order (a request shares them).
    pub(crate) fn sealed(&self) -> &[Bytes] {
        &self.sealed
    }

    /// The open chunk, after the sealed ones (a request copies it).
    pub(crate) fn open(&self) -> &[u8] {
        &self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(c: &AppendedChunks) -> Vec<u8> {
        let mut out: Vec<u8> = c.sealed().iter().flat_map(|b| b.to_vec()).collect();
        out.extend_from_slice(c.open());
        out
    }

    fn append(c: &mut AppendedChunks, bytes: &[u8]) {
        c.open_mut().extend_from_slice(bytes);
        c.seal_if_full();
    }

    #[test]
    fn sealed_chunks_are_shared_and_the_open_one_stays_under_a_chunk() {
        let mut c = AppendedChunks::default();
        let item = [b'x'; 1000];
        let mut expected = Vec::new();
        for i in 0..100u8 {
            let mut it = item.to_vec();
            it[0] = i;
            append(&mut c, &it);
            expected.extend_from_slice(&it);
            assert!(c.open().len() < CHUNK);
        }
        assert_eq!(whole(&c), expected);
        assert_eq!(c.len(), expected.len());
        assert_eq!(c.sealed().len(), 100_000 / (CHUNK + 1000 - CHUNK % 1000));
        let held: Vec<Bytes> = c.sealed().to_vec();
        append(&mut c, b"more");
        assert_eq!(held[0].as_ptr(), c.sealed()[0].as_ptr(), "not copied");
    }

    #[test]
    fn a_cut_keeps_what_a_request_holds_and_appends_after_the_cut() {
        let mut c = AppendedChunks::default();
        let mut expected = Vec::new();
        for i in 0..40u32 {
            let it = format!("{i:0>999},");
            append(&mut c, it.as_bytes());
            expected.extend_from_slice(it.as_bytes());
        }
        let held: Vec<Bytes> = c.sealed().to_vec();
        let held_whole: Vec<u8> = held.iter().flat_map(|b| b.to_vec()).collect();
        for cut in [39_500, 30_000, CHUNK + 1000, CHUNK, 17, 0] {
            c.truncate(cut);
            expected.truncate(cut);
            assert_eq!(whole(&c), expected, "cut at {cut}");
            append(&mut c, b"tail");
            expected.extend_from_slice(b"tail");
            assert_eq!(whole(&c), expected);
        }
        assert_eq!(
            held.iter().flat_map(|b| b.to_vec()).collect::<Vec<_>>(),
            held_whole,
            "a held chunk is unchanged"
        );
        c.truncate(c.len() + 10);
        assert_eq!(whole(&c), expected);
    }

    #[test]
    fn matches_at_reads_across_chunks() {
        let mut c = AppendedChunks::default();
        let mut expected = Vec::new();
        for i in 0..50u32 {
            let it = format!("[{i:0>700}]");
            append(&mut c, it.as_bytes());
            expected.extend_from_slice(it.as_bytes());
        }
        assert!(c.sealed().len() >= 2);
        for (at, n) in [(0, 10), (CHUNK - 5, 10), (CHUNK - 5, 2 * CHUNK), (100, 0)] {
            let n = n.min(expected.len() - at);
            assert!(c.matches_at(at, &expected[at..at + n]), "{at} {n}");
            if n > 0 {
                let mut wrong = expected[at..at + n].to_vec();
                *wrong.last_mut().unwrap() ^= 1;
                assert!(!c.matches_at(at, &wrong));
            }
        }
        let end = expected.len();
        assert!(c.matches_at(end, b""));
        assert!(!c.matches_at(end - 1, b"]x"));
        assert!(!c.matches_at(end + 1, b""));
    }
}
