//! Work done once per distinct text rather than once per turn or request: the short SHA-256
//! digests the `llm_call_started` event carries, and the pre-rendered system message.
//!
//! A memo is process-wide (agents with the same system prompt or tool list share an entry, and
//! an idle agent holds nothing) and keyed by the whole text: a hit costs a SipHash and a
//! compare of the text (~2k instructions for 1 KiB, against ~30k for the SHA-256 and ~15k for
//! JSON-escaping it). Keying by the text itself, not by a hash of it, means one agent's text
//! can never be mistaken for another's, however it was chosen.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A value worked out from one tool-schema list (`ToolRegistry::schemas`, rebuilt whenever the
/// tools change, shared by clones of the registry), found again by the list's address: no
/// hash or compare of the list's text. The weak pointer keeps that address from being reused
/// while the entry exists.
#[derive(Clone)]
pub(crate) struct PerList<T> {
    list: Weak<Vec<Value>>,
    pub(crate) value: T,
}

impl<T> PerList<T> {
    pub(crate) fn new(list: &Arc<Vec<Value>>, value: T) -> Self {
        PerList {
            list: Arc::downgrade(list),
            value,
        }
    }

    pub(crate) fn of(&self, list: &Arc<Vec<Value>>) -> bool {
        std::ptr::eq(self.list.as_ptr(), Arc::as_ptr(list))
    }

    /// Whether the list is still held by someone (an entry of a dropped list can go).
    pub(crate) fn is_live(&self) -> bool {
        self.list.strong_count() > 0
    }
}

/// Values computed once per distinct text for the whole process. Bounded in entries and in
/// bytes of text: a process that sees more starts over.
pub(crate) struct SharedMemo<T>(LazyLock<Mutex<Entries<T>>>);

struct Entries<T> {
    map: HashMap<Box<[u8]>, T>,
    text_bytes: usize,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries {
            map: HashMap::new(),
            text_bytes: 0,
        }
    }
}

const MAX_ENTRIES: usize = 256;
const MAX_TEXT_BYTES: usize = 4 << 20;

impl<T: Clone> Default for SharedMemo<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> SharedMemo<T> {
    pub(crate) const fn new() -> Self {
        SharedMemo(LazyLock::new(Default::default))
    }

    pub(crate) fn get_or(&self, text: &[u8], compute: impl FnOnce() -> T) -> T {
        if let Some(v) = self.lock().map.get(text) {
            return v.clone();
        }
        // Computed outside the lock: other agents' turns do not wait for a digest.
        let v = compute();
        let mut e = self.lock();
        if e.map.len() >= MAX_ENTRIES || e.text_bytes + text.len() > MAX_TEXT_BYTES {
            e.map.clear();
            e.text_bytes = 0;
        }
        if text.len() <= MAX_TEXT_BYTES && e.map.insert(text.into(), v.clone()).is_none() {
            e.text_bytes += text.len();
        }
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The first 8 bytes of the SHA-256 of `data`, in lowercase hex.
pub(crate) fn hex16(data: &[u8]) -> String {
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
            let v = memo.get_or(text.as_bytes(), || {
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
        for i in 0..MAX_ENTRIES * 2 + 7 {
            let text = i.to_string();
            assert_eq!(memo.get_or(text.as_bytes(), || i), i);
            assert!(memo.lock().map.len() <= MAX_ENTRIES);
        }
        let big = vec![b'x'; MAX_TEXT_BYTES / 2 + 1];
        for n in 0..3u8 {
            let mut text = big.clone();
            text[0] = n;
            assert_eq!(memo.get_or(&text, || n as usize), n as usize);
            assert!(memo.lock().text_bytes <= MAX_TEXT_BYTES);
        }
    }

    /// A list is found by its address while it lives; a copy of it is another list.
    #[test]
    fn per_list_is_the_lists_address() {
        let list = Arc::new(vec![Value::from(1)]);
        let copy = Arc::new((*list).clone());
        let entry = PerList::new(&list, 7);
        assert!(entry.of(&list) && entry.of(&list.clone()) && !entry.of(&copy));
        assert!(entry.is_live());
        drop(list);
        assert!(!entry.is_live() && !entry.of(&copy));
    }

    #[test]
    fn hex16_is_the_sha256_prefix() {
        // sha256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(hex16(b"abc"), "ba7816bf8f01cfea");
    }
}
