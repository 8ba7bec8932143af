//! Work done once per distinct text rather than once per turn or request: the short SHA-256
//! digests the `llm_call_started` event carries, and the pre-rendered system message.
//!
//! A memo is process-wide and keyed by the text's length and a SipHash of its bytes: hashing ~1 KiB that way
//! costs ~2k instructions, against ~30k for the SHA-256 (and ~15k for JSON-escaping it), and no
//! copy of the text is kept. Two different texts of the same length would have to collide in
//! 64 bits to be mistaken for each other.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::{LazyLock, Mutex};

use sha2::{Digest, Sha256};

/// Identifies a text without keeping it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
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

/// Values computed once per distinct text for the whole process: agents with the same system
/// prompt or tool list share them, and an idle agent holds nothing. Bounded: a process that
/// sees more distinct texts than this starts over.
pub struct SharedMemo<T>(LazyLock<Mutex<HashMap<TextKey, T>>>);

const SHARED_MEMO_ENTRIES: usize = 256;

impl<T: Clone> Default for SharedMemo<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> SharedMemo<T> {
    pub const fn new() -> Self {
        SharedMemo(LazyLock::new(Default::default))
    }

    pub fn get_or(&self, key: TextKey, compute: impl FnOnce() -> T) -> T {
        if let Some(v) = self.lock().get(&key) {
            return v.clone();
        }
        // Computed outside the lock: other agents' turns do not wait for a digest.
        let v = compute();
        let mut map = self.lock();
        if map.len() >= SHARED_MEMO_ENTRIES {
            map.clear();
        }
        map.insert(key, v.clone());
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TextKey, T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
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
    fn memo_computes_once_per_distinct_text() {
        let memo = SharedMemo::new();
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
        assert_eq!(computed, 2);
    }

    #[test]
    fn memo_is_bounded() {
        let memo = SharedMemo::new();
        for i in 0..SHARED_MEMO_ENTRIES * 2 + 7 {
            let text = i.to_string();
            assert_eq!(memo.get_or(TextKey::of(text.as_bytes()), || i), i);
            assert!(memo.lock().len() <= SHARED_MEMO_ENTRIES);
        }
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
