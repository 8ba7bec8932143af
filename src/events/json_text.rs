//! JSON text as the event writer hands it out: a `&str` followed in memory by a NUL byte, so
//! the C boundary lends it as a `const char*` in place instead of copying it into a C string
//! (which cost two copies per streamed delta, the event and the stream item), and string
//! escaping that writes straight into a `String`, so a text delta needs no UTF-8 check of the
//! buffer it was written into (serde_json only writes to `io::Write`, i.e. bytes).

/// JSON text the library wrote, with a NUL byte after it (not part of the text).
///
/// JSON never holds a raw NUL: U+0000 in a string is written `\u0000` (serde_json and
/// [`push_json_string`] alike) and nothing outside a string can be one, so C sees the whole
/// text (`the_writer_never_writes_a_nul_inside` checks every writer method on control
/// characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonText<'a> {
    /// The text and its NUL; built only by [`JsonText::terminated`].
    with_nul: &'a str,
}

impl<'a> JsonText<'a> {
    /// `buf` is the text followed by one NUL byte.
    pub(crate) fn terminated(buf: &'a str) -> Self {
        debug_assert!(buf.ends_with('\0'), "JSON text without its NUL");
        JsonText { with_nul: buf }
    }

    pub fn as_str(self) -> &'a str {
        self.with_nul.strip_suffix('\0').unwrap_or(self.with_nul)
    }

    /// The text's bytes and the NUL after them.
    pub fn with_nul(self) -> &'a [u8] {
        self.with_nul.as_bytes()
    }
}

/// What a byte of a string becomes in JSON: 0 itself, `u` `\u00XX`, else `\` and that byte.
/// The same set and spellings as serde_json's `format_escaped_str` (`"`, `\`, the short forms
/// of backspace, form feed, newline, return and tab, `\u00xx` in lowercase hex for the other
/// control characters; DEL, `/` and non-ASCII as they are), so events keep their bytes.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = b'u';
        c += 1;
    }
    t[0x08] = b'b';
    t[0x0c] = b'f';
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// How many bytes at the start of `b` a JSON string holds as they are: the index of the first
/// `"`, `\` or control character (the bytes [`ESCAPE`] rewrites, and those that end a run of
/// plain content when a JSON string is read), or `b.len()`.
///
/// Eight bytes a step (a streamed delta's text is scanned here when it is read and again when
/// it is written; a byte at a time was ~5 instructions a byte, each time). In each 64-bit word
/// the lowest flagged byte is exact: a borrow only runs upwards from a byte that is flagged
/// itself, so it can only flag bytes after the first. `every_byte_is_scanned_as_the_table_says`
/// checks every byte value at every position of a word and after it.
#[inline]
pub(crate) fn plain_len(b: &[u8]) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    /// The bytes of `w` that are zero flagged (exact up to the lowest one).
    fn zero_bytes(w: u64) -> u64 {
        w.wrapping_sub(LO) & !w
    }
    let mut words = b.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
        let control = w.wrapping_sub(LO * 0x20) & !w;
        let quote = zero_bytes(w ^ (LO * u64::from(b'"')));
        let backslash = zero_bytes(w ^ (LO * u64::from(b'\\')));
        let hits = (control | quote | backslash) & HI;
        if hits != 0 {
            return at + (hits.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let rest = words.remainder();
    at + rest
        .iter()
        .position(|&c| ESCAPE[usize::from(c)] != 0)
        .unwrap_or(rest.len())
}

/// Where JSON text is written: the event writer's `String`, or the byte buffer of an event's
/// fields.
pub(crate) trait JsonOut {
    fn push_text(&mut self, s: &str);
    fn push_ascii(&mut self, b: u8);
}

impl JsonOut for String {
    fn push_text(&mut self, s: &str) {
        self.push_str(s);
    }
    fn push_ascii(&mut self, b: u8) {
        self.push(char::from(b));
    }
}

impl JsonOut for Vec<u8> {
    fn push_text(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }
    fn push_ascii(&mut self, b: u8) {
        self.push(b);
    }
}

/// Appends `s` as a JSON string (quotes included), byte for byte as serde_json writes it.
pub(crate) fn push_json_string(out: &mut impl JsonOut, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_ascii(b'"');
    let mut start = 0;
    loop {
        let i = start + plain_len(&s.as_bytes()[start..]);
        // `i` is at an ASCII byte or the end, so both slices end on char boundaries.
        out.push_text(&s[start..i]);
        let Some(&b) = s.as_bytes().get(i) else {
            break;
        };
        let e = ESCAPE[usize::from(b)];
        out.push_ascii(b'\\');
        if e == b'u' {
            out.push_text("u00");
            out.push_ascii(HEX[usize::from(b >> 4)]);
            out.push_ascii(HEX[usize::from(b & 0xf)]);
        } else {
            out.push_ascii(e);
        }
        start = i + 1;
    }
    out.push_ascii(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(s: &str) -> String {
        let mut out = String::new();
        push_json_string(&mut out, s);
        out
    }

    /// Every ASCII character alone, after and before text, and non-ASCII text of every width,
    /// against serde_json's own escaping.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut cases: Vec<String> = Vec::new();
        for c in (0u8..0x80).map(char::from) {
            cases.push(c.to_string());
            cases.push(format!("ab{c}"));
            cases.push(format!("{c}cd"));
            cases.push(format!("é{c}😀{c}{c}x"));
        }
        cases.extend(
            [
                "",
                "plain",
                "a\"b\\c/d",
                "\u{7f}\u{80}\u{a0}\u{2028}\u{2029}\u{feff}\u{fffd}",
                "😀 astral 𝄞 and é ü 中文",
                "\0\u{1}\u{1f} \u{1b}[0m",
            ]
            .map(str::to_owned),
        );
        for s in &cases {
            assert_eq!(ours(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    /// The old byte-at-a-time escaping, kept to compare the new one with.
    fn old_push_json_string(out: &mut String, s: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push('"');
        let mut start = 0;
        for (i, &b) in s.as_bytes().iter().enumerate() {
            let e = ESCAPE[b as usize];
            if e == 0 {
                continue;
            }
            out.push_str(&s[start..i]);
            out.push('\\');
            if e == b'u' {
                out.push_str("u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            } else {
                out.push(char::from(e));
            }
            start = i + 1;
        }
        out.push_str(&s[start..]);
        out.push('"');
    }

    /// Every byte value at every position of a 24-byte run (three words, then remainders),
    /// among plain bytes of several kinds, and followed by special bytes (a borrow must not
    /// move the first hit): `plain_len` is the first position the table flags.
    ///
    /// A byte can only reach the bytes above it through the borrows of the three subtractions
    /// (`w - 0x20`, `(w ^ '"') - 1`, `(w ^ '\\') - 1`, per byte), so what it does to them
    /// depends only on which side of each operand's edges it lies: the bytes followed by
    /// special ones are those at every edge (each operand 0x00, 0x01, 0x7f, 0x80 or 0xff), where
    /// all 256 values made this test take 35 seconds in a debug build.
    #[test]
    fn every_byte_is_scanned_as_the_table_says() {
        let table = |b: &[u8]| {
            b.iter()
                .position(|&c| ESCAPE[usize::from(c)] != 0)
                .unwrap_or(b.len())
        };
        let at_an_edge = |v: u8| {
            [v, v ^ b'"', v ^ b'\\', v.wrapping_sub(0x20)]
                .iter()
                .any(|x| [0x00, 0x01, 0x7f, 0x80, 0xff].contains(x))
        };
        for fill in [b'a', 0x7f, 0x80, 0xff, 0x21, 0x23, 0x5b, 0x5d, 0x20] {
            for len in 0..=24 {
                for at in 0..len {
                    for v in 0..=255u8 {
                        let mut b = vec![fill; len];
                        b[at] = v;
                        assert_eq!(plain_len(&b), table(&b), "{b:?}");
                        if !at_an_edge(v) {
                            continue;
                        }
                        for after in [0x00u8, 0x1f, b'"', b'\\', 0x80, 0x21] {
                            for k in at + 1..len {
                                let mut c = b.clone();
                                c[k] = after;
                                assert_eq!(plain_len(&c), table(&c), "{c:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Every string in `v` (keys and values), as the transcripts' messages and deltas hold them.
    fn strings_of(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|v| strings_of(v, out)),
            serde_json::Value::Object(m) => m.iter().for_each(|(k, v)| {
                out.push(k.clone());
                strings_of(v, out);
            }),
            _ => {}
        }
    }

    /// The word-at-a-time escaping writes what the byte-at-a-time one wrote: every ASCII
    /// character after runs of every length and before non-ASCII text, astral text, a huge
    /// string, and every conformance transcript's whole text and each string in it.
    #[test]
    fn the_escaping_is_the_old_escaping() {
        let mut cases: Vec<String> = vec![String::new()];
        for c in (0u8..0x80).map(char::from) {
            for pad in 0..17 {
                cases.push(format!("{}{c}{}", "x".repeat(pad), "é".repeat(pad % 5)));
                cases.push(format!("{}{c}{c}😀{c}", "ü".repeat(pad)));
            }
        }
        cases.push("😀𝄞中é".repeat(1000));
        cases.push(format!("{}\u{1}{}", "a".repeat(1 << 20), "\"".repeat(3)));
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/transcripts");
        for entry in std::fs::read_dir(&dir).expect("the conformance transcripts") {
            let text = std::fs::read_to_string(entry.expect("an entry").path()).expect("a file");
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                strings_of(&v, &mut cases);
            }
            cases.push(text);
        }
        assert!(cases.len() > 4000);
        for s in &cases {
            let (mut new, mut old) = (String::new(), String::new());
            push_json_string(&mut new, s);
            old_push_json_string(&mut old, s);
            assert_eq!(new, old);
        }
    }

    #[test]
    fn the_text_and_its_nul() {
        let j = JsonText::terminated("{\"a\":1}\0");
        assert_eq!(j.as_str(), "{\"a\":1}");
        assert_eq!(j.with_nul(), b"{\"a\":1}\0");
    }
}
