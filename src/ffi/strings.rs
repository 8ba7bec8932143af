//! C strings in and out: borrowed arguments, caller-owned results, strings lent to callbacks.

use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};

use super::{agentao_status, Fail, FfiResult};
use crate::events::JsonText;

/// A CString from text that may hold NUL bytes (they are replaced, never truncate).
pub(crate) fn to_cstring(s: &str) -> CString {
    CString::new(s)
        .unwrap_or_else(|_| CString::new(s.replace('\0', "\u{fffd}")).unwrap_or_default())
}

/// Hands a string to the caller (release with `agentao_string_free`).
pub(crate) fn out_string(s: &str) -> *mut c_char {
    to_cstring(s).into_raw()
}

/// A thread's buffer may keep this much between calls; a larger event is copied into a buffer
/// of its own, so one huge event does not pin memory on every library thread.
const KEEP_CAPACITY: usize = 64 * 1024;

thread_local! {
    static LEND_BUF: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Lends `s` to C as a NUL-terminated string for the duration of `f`. The library's JSON is
/// built as `&str`; this copies it into a per-thread buffer, so once the buffer is warm a
/// callback costs no allocation. A nested call (a callback that triggers another on the same
/// thread) finds the buffer taken and uses a fresh one.
pub(crate) fn with_cstr<R>(s: &str, f: impl FnOnce(*const c_char) -> R) -> R {
    let mut buf = LEND_BUF.try_with(Cell::take).unwrap_or_default();
    buf.clear();
    if memchr::memchr(0, s.as_bytes()).is_some() {
        // serde_json escapes U+0000, so only text from elsewhere gets here; C would stop at it.
        buf.extend_from_slice(s.replace('\0', "\u{fffd}").as_bytes());
    } else {
        buf.extend_from_slice(s.as_bytes());
    }
    buf.push(0);
    let result = f(buf.as_ptr().cast());
    if buf.capacity() <= KEEP_CAPACITY {
        let _ = LEND_BUF.try_with(|b| b.set(buf));
    }
    result
}

/// Lends JSON the library wrote to C for the duration of `f`: it already has its NUL after it
/// (and none inside, JSON escapes U+0000), so it is passed in place, without the copy of
/// [`with_cstr`] (two per streamed delta otherwise). Inlined: out of line, every delta paid
/// a call and the slice match (~10 instructions a delta).
#[inline]
pub(crate) fn with_json<R>(json: JsonText<'_>, f: impl FnOnce(*const c_char) -> R) -> R {
    match json.with_nul() {
        bytes @ [.., 0] => f(bytes.as_ptr().cast()),
        // Not built that way (JsonText always ends in its NUL); copied, as any other string.
        _ => with_cstr(json.as_str(), f),
    }
}

/// Borrows a C string argument as UTF-8; NULL is `NULL_ARGUMENT`, bad UTF-8 `INVALID_UTF8`.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, name: &str) -> FfiResult<&'a str> {
    opt_str_arg(p, name)?.ok_or_else(|| Fail::null(name))
}

/// Like [`str_arg`], but NULL is `None`.
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn opt_str_arg<'a>(p: *const c_char, name: &str) -> FfiResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    CStr::from_ptr(p).to_str().map(Some).map_err(|e| {
        Fail(
            agentao_status::InvalidUtf8,
            format!("`{name}` is not valid UTF-8: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lent_strings_are_terminated_nested_and_nul_safe() {
        let read = |p: *const c_char| {
            // SAFETY: with_cstr lends a NUL-terminated string for the call.
            unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
        };
        let outer = with_cstr("{\"a\":1}", |p| {
            let inner = with_cstr("x", read);
            assert_eq!(inner, "x");
            read(p)
        });
        assert_eq!(outer, "{\"a\":1}");
        assert_eq!(with_cstr("a\0b", read), "a\u{fffd}b");
        let big = "y".repeat(KEEP_CAPACITY * 2);
        assert_eq!(with_cstr(&big, read).len(), big.len());
        assert_eq!(with_cstr("", read), "");
    }

    /// The event writer's JSON reaches C in place: the pointer is the text's own, and C reads
    /// the whole text, whatever it escapes.
    #[test]
    fn json_is_lent_in_place() {
        let read = |p: *const c_char| {
            // SAFETY: with_json lends a NUL-terminated string for the call.
            unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
        };
        let mut w = crate::events::EventWriter::default();
        for text in ["", "abcd", "a\0b\u{1}\"\\ é 😀"] {
            let item = w.text_delta(text).json();
            let at = with_json(item, |p| p as usize);
            assert_eq!(at, item.as_str().as_ptr() as usize, "no copy");
            assert_eq!(with_json(item, read), item.as_str());
        }
    }
}
