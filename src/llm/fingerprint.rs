//! Work done once per distinct text rather than once per turn or request: the short SHA-256
//! digests the `llm_call_started` event carries, and the pre-rendered system message.
//!
//! A memo is keyed by the text's length and a SipHash of its bytes: hashing ~1 KiB that way
//! costs ~2k instructions, against ~30k for the SHA-256 (and ~15k for JSON-escaping it), and no
//! copy of the text is kept. Two different texts of the same length would have to collide in
//! 64 bits to be mistaken for each other.

use std::hash::{DefaultHasher, Hasher};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// Identifies a text without keeping it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TextKey {
    len: usize,
    hash: u64,
}

impl TextKey {
    pub fn of(text: &[u8]) -> TextKey {
        let mut h = DefaultHasher::new();
        h.write(text);
        TextKey {
            len: text.len(),
            hash: h.finish(),
        }
    }

    /// A list of names, each ended by a byte no UTF-8 text contains (so `["ab"]` and
    /// `["a", "b"]` differ).
    pub fn of_names<'n>(names: impl IntoIterator<Item = &'n str>) -> TextKey {
        let mut h = DefaultHasher::new();
        let mut len = 0;
        for n in names {
            h.write(n.as_bytes());
            h.write_u8(0xff);
            len += n.len() + 1;
        }
        TextKey {
            len,
            hash: h.finish(),
        }
    }
}

/// The last value computed for one key (a text of an agent rarely changes).
pub struct Memo<T>(Mutex<Option<(TextKey, T)>>);

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo(Mutex::new(None))
    }
}

impl<T: Clone> Memo<T> {
    pub fn get_or(&self, key: TextKey, compute: impl FnOnce() -> T) -> T {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some((k, v)) if *k == key => v.clone(),
            _ => {
                let v = compute();
                *slot = Some((key, v.clone()));
                v
            }
        }
    }
}

/// The first 8 bytes of the SHA-256 of `data`, in lowercase hex.
pub fn hex16(data: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(16);
    for b in &Sha256::digest(data)[..8] {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_recomputes_only_for_another_text() {
        let memo = Memo::default();
        let mut computed = 0;
        for text in [
            "a prompt",
            "a prompt",
            "another prompt",
            "another prompt",
            "a prompt",
        ] {
            let v = memo.get_or(TextKey::of(text.as_bytes()), || {
                computed += 1;
                hex16(text.as_bytes())
            });
            assert_eq!(v, hex16(text.as_bytes()));
        }
        assert_eq!(computed, 3);
    }

    #[test]
    fn name_lists_differ_by_boundaries() {
        assert!(TextKey::of_names(["ab"]) != TextKey::of_names(["a", "b"]));
        assert!(TextKey::of_names(["a", "b"]) == TextKey::of_names(["a", "b"]));
    }

    #[test]
    fn hex16_is_the_sha256_prefix() {
        // sha256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(hex16(b"abc"), "ba7816bf8f01cfea");
    }
}
