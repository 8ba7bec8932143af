//! The C boundary: every `extern "C"` function, the panic boundary, handles, C strings and
//! status codes. Nothing outside this module is `unsafe`.
//!
//! Conventions (see `docs/c-api.md`): every fallible function returns [`agentao_status`] and
//! writes its outputs only on success (NULL on failure); `agentao_error **err_out` may be NULL;
//! strings passed in are borrowed for the call and copied; strings handed out belong to the
//! caller and are released with [`agentao_string_free`]; strings passed to callbacks are valid
//! until the callback returns.
//!
//! Plumbing: `boundary` has one helper per export shape (panic boundary, NULL checks, `*_out`
//! nulling), `handle` the typed handle casts, `host_data` the one wrapper for host userdata,
//! `strings` the C strings. Nothing below this module knows C exists.
//!
//! Host capabilities live in `host/`, one file each; `host` holds the one declaration rule
//! they share. Each capability file is declared here, at the place that keeps the generated
//! header in its order (cbindgen lists items in the order it reads them).

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

pub mod agent;
mod answer;
mod boundary;
pub mod cancel;
#[path = "host/compaction_controller.rs"]
pub mod compaction_controller;
#[path = "host/file_system.rs"]
pub mod file_system;
// Kept after the file system (the header's order), out of rustfmt's alphabetical group.
#[path = "host/shell_executor.rs"]
pub mod shell_executor;

pub mod context;
mod handle;
pub(crate) mod host;
mod host_data;
#[path = "host/host_tool.rs"]
pub mod host_tool;
pub mod images;
pub mod library;
#[path = "host/mcp_registry.rs"]
pub mod mcp_registry;
#[path = "host/memory_store.rs"]
pub mod memory_store;
pub mod preflight;
pub mod reply;
pub mod session;
#[path = "host/session_store.rs"]
pub mod session_store;
pub mod stream;
mod strings;
pub mod subagents;
#[path = "host/transport.rs"]
pub mod transport;
// Last: the header lists its items after everything it had before (additions only).
pub mod audit_sink;
// After the audit sink, for the same reason.
#[path = "host/hooks.rs"]
pub mod hooks;
pub mod skills;
pub mod telemetry;
// After telemetry, for the same reason.
pub mod run_handoff;

pub(crate) use boundary::{guard, guard_or, guard_out, guard_required_out, out_arg, required};
use handle::BoxCastable;
pub(crate) use strings::{opt_str_arg, out_string, str_arg, to_cstring, with_cstr, with_json};

use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;

use crate::agent::AgentError;

/// Status of every fallible call. Values are stable: new codes are appended, none renumbered.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr, strum::IntoStaticStr)]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
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
    /// No longer returned: earlier versions refused to stream through a transport without a
    /// `subscribe` slot. The value stays defined (and reserved) so existing code compiles.
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
    /// A session commit continued a version the store no longer holds: another agent
    /// committed first. Nothing was written; the in-memory session is unchanged.
    Conflict = 18,
    /// The session store failed or cannot be reached (the message says why).
    StoreUnavailable = 19,
    /// A session document or a stored session cannot be read: not JSON, truncated, not a
    /// session, or a `format_version` this library does not read (the message says which).
    CorruptSession = 20,
}

impl agentao_status {
    /// The C spelling without the `AGENTAO_STATUS_` prefix, derived from the variant name (the
    /// same rule cbindgen applies), as a static C string.
    fn name(self) -> &'static CStr {
        static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
        let names = NAMES.get_or_init(|| {
            (0..)
                .map_while(agentao_status::from_repr)
                .map(|s| to_cstring(s.into()))
                .collect()
        });
        names
            .get(self as usize)
            .map_or(c"UNKNOWN", CString::as_c_str)
    }
}

/// An error: a status and a message. Owned by the caller; release with `agentao_error_free`.
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
        AgentError::Store(e) => store_status(e),
        AgentError::Document(_) => agentao_status::CorruptSession,
    }
}

/// The status of a session store failure.
pub(crate) fn store_status(e: &crate::session_store::StoreError) -> agentao_status {
    use crate::session_store::StoreError;
    match e {
        StoreError::Conflict { .. } => agentao_status::Conflict,
        StoreError::Timeout { .. } => agentao_status::Timeout,
        StoreError::Unavailable(_) => agentao_status::StoreUnavailable,
        StoreError::Corrupt(_) => agentao_status::CorruptSession,
        StoreError::Invalid(_) => agentao_status::InvalidArgument,
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

thread_local! {
    static IN_CALLBACK: Cell<u32> = const { Cell::new(0) };
}

/// Marks the current thread as inside a host callback for the duration of `f`.
pub(crate) fn in_callback<R>(f: impl FnOnce() -> R) -> R {
    struct Reset<'c>(&'c Cell<u32>);
    impl Drop for Reset<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get().saturating_sub(1));
        }
    }
    // One thread-local lookup per callback, not two (in a shared library each is a call to
    // `__tls_get_addr`; two callbacks per streamed delta).
    IN_CALLBACK.with(|c| {
        c.set(c.get() + 1);
        let _reset = Reset(c);
        f()
    })
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
    if let Some(s) = std::ptr::NonNull::new(s) {
        guard_or((), || drop(CString::from_raw(s.as_ptr())));
    }
}

/// The status of an error. A NULL error is `AGENTAO_STATUS_NULL_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_error_status(err: *const agentao_error) -> agentao_status {
    agentao_error::with_ref_or(err, agentao_status::NullArgument, |e| e.status)
}

/// The message of an error, borrowed from the error object (valid until
/// `agentao_error_free`). A NULL error gives a static empty string.
#[no_mangle]
pub unsafe extern "C" fn agentao_error_message(err: *const agentao_error) -> *const c_char {
    agentao_error::with_ref_or(err, c"".as_ptr(), |e| e.message.as_ptr())
}

/// Releases an error. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn agentao_error_free(err: *mut agentao_error) {
    agentao_error::free_with(err, |_| ());
}

/// A short, static name of a status (for logs); never NULL, never freed.
#[no_mangle]
pub extern "C" fn agentao_status_name(status: i32) -> *const c_char {
    agentao_status::from_repr(status)
        .map_or(c"UNKNOWN", agentao_status::name)
        .as_ptr()
}

#[cfg(test)]
mod tests {
    use super::agentao_status;

    #[test]
    fn status_names_follow_the_variants() {
        assert_eq!(agentao_status::Ok.name().to_bytes(), b"OK");
        assert_eq!(
            agentao_status::InvalidUtf8.name().to_bytes(),
            b"INVALID_UTF8"
        );
        assert_eq!(
            agentao_status::EventsDropped.name().to_bytes(),
            b"EVENTS_DROPPED"
        );
        assert_eq!(
            agentao_status::CorruptSession.name().to_bytes(),
            b"CORRUPT_SESSION"
        );
        assert_eq!(agentao_status::from_repr(21), None);
        assert_eq!(agentao_status::from_repr(-1), None);
    }
}
