//! JSON text as the event writer hands it out: a `&str` followed in memory by a NUL byte, so
//! the C boundary lends it as a `const char*` in place instead of copying it into a C string
//! (issue 12: two copies per streamed delta, the event and the stream item), and string
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

/// Appends `s` as a JSON string (quotes included), byte for byte as serde_json writes it.
pub(crate) fn push_json_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut start = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let e = ESCAPE[b as usize];
        if e == 0 {
            continue;
        }
        // `i` is at an ASCII byte, so both slices end on char boundaries.
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

    #[test]
    fn the_text_and_its_nul() {
        let j = JsonText::terminated("{\"a\":1}\0");
        assert_eq!(j.as_str(), "{\"a\":1}");
        assert_eq!(j.with_nul(), b"{\"a\":1}\0");
    }
}
