//! The C boundary: every `extern "C"` function, the panic boundary, handles, C strings and
//! status codes. Nothing outside this module is `unsafe`.
//!
//! Conventions (see `docs/c-api.md`): every fallible function returns [`agentao_status`] and
//! writes its outputs only on success (NULL on failure); `agentao_error **err_out` may be NULL;
//! strings passed in are borrowed for the call and copied; strings handed out belong to the
//! caller and are released with [`agentao_string_free`]; strings passed to callbacks are valid
//! until the callback returns.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

pub mod agent;
pub mod cancel;
mod handle;
mod host_data;
pub mod host_tools;

use handle::BoxCastable;
pub mod library;
pub mod memory;
pub mod preflight;
pub mod reply;
pub mod stream;
pub mod transport;

use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};

use crate::agent::AgentError;

/// Status of every fallible call. Values are stable: new codes are appended, none renumbered.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum agentao_status {
    Ok = 0,
    /// A required pointer argument was NULL.
    NullArgument = 1,
    /// An argument is out of range or malformed (the message says which).
    InvalidArgument = 2,
    /// A string argument is not valid UTF-8.
    InvalidUtf8 = 3,
    /// A JSON argument does not parse.
    InvalidJson = 4,
    /// The agent config is invalid (the message names the field).
    InvalidConfig = 5,
    /// Another turn is running on this agent.
    TurnInProgress = 6,
    /// The transport has no `subscribe`, which the streaming entry point requires.
    NoSubscribe = 7,
    /// A host-event stream with the same session filter is already open.
    StreamSubscribe = 8,
    /// The turn was cancelled.
    Cancelled = 9,
    /// A wait ran out of time (a pull stream's `next`, or a reply past the configured timeout).
    Timeout = 10,
    /// A blocking call was made from inside a library callback or a library thread.
    Reentrant = 11,
    /// A panic inside the library was contained.
    Panic = 12,
    /// An internal failure (the message explains).
    Internal = 13,
    /// The host failed a request (`agentao_reply_fail` on a confirmation or max-iterations
    /// request): the turn ended with status `error`.
    HostError = 14,
    /// A pull stream has delivered its last item.
    Closed = 15,
    /// The agent has no permission engine (configure `permissions`).
    NoEngine = 16,
    /// A host-event stream reports a gap: events were dropped at this point because a
    /// cancelled turn found the stream full (the message says how many). The stream goes on.
    EventsDropped = 17,
}

impl agentao_status {
    /// Every status, in code order: the one list `from_code` and `name` read.
    const ALL: [(agentao_status, &'static CStr); 18] = [
        (agentao_status::Ok, c"OK"),
        (agentao_status::NullArgument, c"NULL_ARGUMENT"),
        (agentao_status::InvalidArgument, c"INVALID_ARGUMENT"),
        (agentao_status::InvalidUtf8, c"INVALID_UTF8"),
        (agentao_status::InvalidJson, c"INVALID_JSON"),
        (agentao_status::InvalidConfig, c"INVALID_CONFIG"),
        (agentao_status::TurnInProgress, c"TURN_IN_PROGRESS"),
        (agentao_status::NoSubscribe, c"NO_SUBSCRIBE"),
        (agentao_status::StreamSubscribe, c"STREAM_SUBSCRIBE"),
        (agentao_status::Cancelled, c"CANCELLED"),
        (agentao_status::Timeout, c"TIMEOUT"),
        (agentao_status::Reentrant, c"REENTRANT"),
        (agentao_status::Panic, c"PANIC"),
        (agentao_status::Internal, c"INTERNAL"),
        (agentao_status::HostError, c"HOST_ERROR"),
        (agentao_status::Closed, c"CLOSED"),
        (agentao_status::NoEngine, c"NO_ENGINE"),
        (agentao_status::EventsDropped, c"EVENTS_DROPPED"),
    ];

    fn from_code(code: i32) -> Option<agentao_status> {
        Self::ALL
            .iter()
            .map(|&(s, _)| s)
            .find(|&s| s as i32 == code)
    }

    /// The C spelling without the `AGENTAO_STATUS_` prefix.
    fn name(self) -> &'static CStr {
        Self::ALL
            .iter()
            .find(|&&(s, _)| s == self)
            .map_or(c"UNKNOWN", |&(_, n)| n)
    }
}

/// An error: a status and a message. Owned by the caller; release with [`agentao_error_free`].
pub struct agentao_error {
    status: agentao_status,
    message: CString,
}

impl agentao_error {
    pub(crate) fn new(status: agentao_status, message: &str) -> Self {
        agentao_error {
            status,
            message: to_cstring(message),
        }
    }
}

/// A CString from text that may hold NUL bytes (they are replaced, never truncate).
pub(crate) fn to_cstring(s: &str) -> CString {
    CString::new(s)
        .unwrap_or_else(|_| CString::new(s.replace('\0', "\u{fffd}")).unwrap_or_default())
}

pub(crate) fn status_of(e: &AgentError) -> agentao_status {
    match e {
        AgentError::InvalidConfig(_) => agentao_status::InvalidConfig,
        AgentError::InvalidArgument(_) => agentao_status::InvalidArgument,
        AgentError::InvalidJson(_) => agentao_status::InvalidJson,
        AgentError::TurnInProgress => agentao_status::TurnInProgress,
        AgentError::NoSubscribe => agentao_status::NoSubscribe,
        AgentError::StreamSubscribe(_) => agentao_status::StreamSubscribe,
        AgentError::Reentrant => agentao_status::Reentrant,
        AgentError::Timeout(_) => agentao_status::Timeout,
        AgentError::HostError(_) => agentao_status::HostError,
        AgentError::Panic(_) => agentao_status::Panic,
        AgentError::Internal(_) => agentao_status::Internal,
        AgentError::NoEngine(_) => agentao_status::NoEngine,
    }
}

/// A failure on its way out: status plus message.
pub(crate) struct Fail(pub agentao_status, pub String);

impl From<AgentError> for Fail {
    fn from(e: AgentError) -> Self {
        Fail(status_of(&e), e.to_string())
    }
}

pub(crate) type FfiResult<T> = Result<T, Fail>;

/// Stores an error object in `*err_out` (if given) and returns the status.
pub(crate) unsafe fn set_error(err_out: *mut *mut agentao_error, fail: Fail) -> agentao_status {
    if !err_out.is_null() {
        *err_out = agentao_error::new(fail.0, &fail.1).into_raw();
    }
    fail.0
}

/// Clears `*err_out` (if given) at the start of a call.
pub(crate) unsafe fn clear_error(err_out: *mut *mut agentao_error) {
    if !err_out.is_null() {
        *err_out = std::ptr::null_mut();
    }
}

/// Borrows a C string argument as UTF-8.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, name: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(Fail(
            agentao_status::NullArgument,
            format!("`{name}` is NULL"),
        ));
    }
    CStr::from_ptr(p).to_str().map_err(|e| {
        Fail(
            agentao_status::InvalidUtf8,
            format!("`{name}` is not valid UTF-8: {e}"),
        )
    })
}

/// Like [`str_arg`], but NULL is `None`.
pub(crate) unsafe fn opt_str_arg<'a>(p: *const c_char, name: &str) -> FfiResult<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        str_arg(p, name).map(Some)
    }
}

/// Hands a string to the caller (release with `agentao_string_free`).
pub(crate) fn out_string(s: &str) -> *mut c_char {
    to_cstring(s).into_raw()
}

/// Runs a status-returning body behind the panic boundary, handling `err_out`.
pub(crate) fn guard(
    err_out: *mut *mut agentao_error,
    body: impl FnOnce() -> FfiResult<()>,
) -> agentao_status {
    // SAFETY: err_out is either NULL or a valid `agentao_error **` per the API contract.
    unsafe { clear_error(err_out) };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|p| {
        Err(Fail(
            agentao_status::Panic,
            format!(
                "panic contained at the C boundary: {}",
                crate::agent::panic_message(p)
            ),
        ))
    });
    match result {
        Ok(()) => agentao_status::Ok,
        // SAFETY: as above.
        Err(f) => unsafe { set_error(err_out, f) },
    }
}

/// A `T **..._out` parameter as [`guard_out`] hands it to the body: already NULLed, so every
/// failure leaves NULL there; written only on success.
pub(crate) struct Out<T>(*mut *mut T);

impl<T> Out<T> {
    pub(crate) fn is_null(&self) -> bool {
        self.0.is_null()
    }

    /// `NULL_ARGUMENT` with `message` when the caller passed no pointer.
    pub(crate) fn require(&self, message: &str) -> FfiResult<()> {
        if self.0.is_null() {
            return Err(Fail(agentao_status::NullArgument, message.into()));
        }
        Ok(())
    }

    /// Stores the value `make` builds; for an optional output the caller left NULL nothing is
    /// built, so nothing is allocated and leaked.
    pub(crate) fn write(&self, make: impl FnOnce() -> *mut T) {
        if !self.0.is_null() {
            // SAFETY: `guard_out` built this from the caller's valid-or-NULL `T **`.
            unsafe { *self.0 = make() };
        }
    }
}

/// [`guard`] for the export shape with one `*_out` result: `*out` is NULLed before anything
/// else runs, then `body` gets it as an [`Out`].
pub(crate) fn guard_out<T>(
    out: *mut *mut T,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&Out<T>) -> FfiResult<()>,
) -> agentao_status {
    let out = Out(out);
    out.write(std::ptr::null_mut);
    guard(err_out, || body(&out))
}

/// Runs a body that has no status behind the panic boundary; a panic yields `fallback`.
pub(crate) fn guard_or<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(fallback)
}

thread_local! {
    static IN_CALLBACK: Cell<u32> = const { Cell::new(0) };
}

/// Marks the current thread as inside a host callback for the duration of `f`.
pub(crate) fn in_callback<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_CALLBACK.with(|c| c.set(c.get().saturating_sub(1)));
        }
    }
    IN_CALLBACK.with(|c| c.set(c.get() + 1));
    let _reset = Reset;
    f()
}

/// Whether a blocking entry point must refuse with REENTRANT here.
pub(crate) fn reentrant() -> bool {
    IN_CALLBACK.with(|c| c.get() > 0) || crate::agent::on_runtime_thread()
}

/// Releases a string the library handed out. NULL is a no-op.
///
/// Ownership: takes back a string returned through a `char **..._out` parameter. Never pass
/// a string you allocated yourself, a string given to a callback, or a static string such as
/// `agentao_version()`.
#[no_mangle]
pub unsafe extern "C" fn agentao_string_free(s: *mut c_char) {
    if !s.is_null() {
        guard_or((), || drop(CString::from_raw(s)));
    }
}

/// The status of an error. A NULL error is `AGENTAO_STATUS_NULL_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_error_status(err: *const agentao_error) -> agentao_status {
    if err.is_null() {
        return agentao_status::NullArgument;
    }
    (*err).status
}

/// The message of an error, borrowed from the error object (valid until
/// `agentao_error_free`). A NULL error gives a static empty string.
#[no_mangle]
pub unsafe extern "C" fn agentao_error_message(err: *const agentao_error) -> *const c_char {
    if err.is_null() {
        return c"".as_ptr();
    }
    (*err).message.as_ptr()
}

/// Releases an error. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn agentao_error_free(err: *mut agentao_error) {
    agentao_error::free_with(err, |_| ());
}

/// A short, static name of a status (for logs); never NULL, never freed.
#[no_mangle]
pub extern "C" fn agentao_status_name(status: i32) -> *const c_char {
    agentao_status::from_code(status)
        .map_or(c"UNKNOWN", agentao_status::name)
        .as_ptr()
}

#[cfg(test)]
mod tests {
    use super::agentao_status;

    #[test]
    fn status_table_is_in_code_order_and_complete() {
        for (i, &(s, _)) in agentao_status::ALL.iter().enumerate() {
            assert_eq!(s as i32, i as i32);
            assert_eq!(agentao_status::from_code(i as i32), Some(s));
        }
        let last = agentao_status::ALL.len() as i32;
        assert_eq!(agentao_status::from_code(last), None);
        assert_eq!(agentao_status::from_code(-1), None);
        assert_eq!(
            agentao_status::EventsDropped.name().to_bytes(),
            b"EVENTS_DROPPED"
        );
    }
}
