//! Cancellation tokens as handles: refcounted, thread-safe, usable inside callbacks.

use std::ffi::{c_char, c_void};

use super::handle::BoxCastable;
use super::host_data::HostData;
use super::{
    agentao_error, agentao_status, guard, guard_or, guard_required_out, opt_str_arg, out_arg,
    out_string, required,
};
use crate::cancel::{CancelToken, DEFAULT_REASON};

/// A token's watch: called once when the token is cancelled, with the reason (borrowed for the
/// call).
pub(crate) type agentao_cancel_fn =
    Option<unsafe extern "C" fn(userdata: *mut c_void, reason: *const c_char)>;

/// A cancellation token. Thread-safe; every handle from `agentao_cancel_token_new` or
/// `agentao_cancel_token_child` is released with `agentao_cancel_token_free`, and the token
/// lives as long as any handle or running turn uses it.
pub struct agentao_cancel_token {
    pub(crate) token: CancelToken,
}

/// A new, uncancelled token. Never NULL except on allocation failure (which aborts).
#[no_mangle]
pub extern "C" fn agentao_cancel_token_new() -> *mut agentao_cancel_token {
    agentao_cancel_token {
        token: CancelToken::new(),
    }
    .into_raw()
}

/// Cancels the token with `reason` (borrowed; NULL means `"user-cancel"`). Idempotent: the
/// first reason wins. Non-blocking; any thread, including inside callbacks. Cancelling a token
/// passed to a turn wakes that turn at once (a pending confirmation or question is abandoned,
/// the HTTP body stops being read). NULL token: no-op.
#[no_mangle]
pub unsafe extern "C" fn agentao_cancel_token_cancel(
    token: *const agentao_cancel_token,
    reason: *const c_char,
) {
    // A clone of our own: the cancel runs the token's watches, and one of them may free this
    // handle.
    let Some(tok) = agentao_cancel_token::with_ref_or(token, None, |t| Some(t.token.clone()))
    else {
        return;
    };
    let reason = opt_str_arg(reason, "reason")
        .ok()
        .flatten()
        .unwrap_or(DEFAULT_REASON);
    guard_or((), || tok.cancel(reason));
}

/// Whether the token is cancelled. NULL: false.
#[no_mangle]
pub unsafe extern "C" fn agentao_cancel_token_is_cancelled(
    token: *const agentao_cancel_token,
) -> bool {
    agentao_cancel_token::with_ref_or(token, false, |t| t.token.is_cancelled())
}

/// Writes a copy of the reason (`""` while not cancelled) to `*reason_out`; release it with
/// `agentao_string_free`.
#[no_mangle]
pub unsafe extern "C" fn agentao_cancel_token_reason(
    token: *const agentao_cancel_token,
    reason_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_required_out(reason_out, "reason_out", err_out, |reason_out| {
        let token = agentao_cancel_token::try_ref(token)?;
        reason_out.write(|| out_string(token.token.reason()));
        Ok(())
    })
}

/// A new token linked one way under `parent`: cancelling the parent cancels the child (with
/// the parent's reason), never the reverse. Release it with `agentao_cancel_token_free`.
/// NULL parent: NULL.
#[no_mangle]
pub unsafe extern "C" fn agentao_cancel_token_child(
    parent: *const agentao_cancel_token,
) -> *mut agentao_cancel_token {
    agentao_cancel_token::with_ref_or(parent, std::ptr::null_mut(), |p| {
        agentao_cancel_token {
            token: p.token.child(),
        }
        .into_raw()
    })
}

/// Releases this handle. The token itself stays valid for turns and other handles that use
/// it. NULL is a no-op. Freeing does not cancel.
#[no_mangle]
pub unsafe extern "C" fn agentao_cancel_token_free(token: *mut agentao_cancel_token) {
    agentao_cancel_token::free_with(token, |_| ());
}

/// Watches the token, so a host learns of its cancel without polling: `callback(userdata,
/// reason)` runs once when the token is cancelled (by `agentao_cancel_token_cancel`, a parent's
/// cancel, or the library cancelling a turn's token), on the thread that cancels it and inside
/// that call, with no lock of the library held; when the token already is cancelled it runs at
/// once, on this thread, before this call returns, and `*watch_id_out` is 0. Otherwise
/// `*watch_id_out` receives an id (never 0) for `agentao_cancel_token_unwatch`.
///
/// Ownership: `userdata_free` (may be NULL) runs exactly once: right after the callback, when
/// the watch is removed, or when the token is gone uncancelled (its last handle freed and no
/// turn using it), and also when this call fails (before it returns: nothing is registered).
/// Release what the watch uses there, not after `unwatch` or a failed call. (A failed call
/// used to leave `userdata` the host's; the rule is now the one of every registration.)
///
/// Threads: any thread, including inside callbacks. The callback must return quickly and must
/// not block: it runs inside someone's cancel, possibly on a library thread; a blocking entry
/// point called from it is refused with `_REENTRANT`. It may cancel tokens, remove watches and
/// free token handles, the one being cancelled included.
///
/// Errors: `_NULL_ARGUMENT` (`token`, `callback` or `watch_id_out` NULL).
#[no_mangle]
pub unsafe extern "C" fn agentao_cancel_token_watch(
    token: *const agentao_cancel_token,
    callback: agentao_cancel_fn,
    userdata: *mut c_void,
    userdata_free: Option<unsafe extern "C" fn(*mut c_void)>,
    watch_id_out: *mut u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // The userdata is the library's from this call on, as at every registration: a refused
        // watch drops it here, which runs its finalizer.
        let host = HostData::new(userdata, userdata_free);
        // A clone: on a cancelled token the callback runs now, and may free this handle.
        let token = agentao_cancel_token::try_ref(token)?.token.clone();
        let callback = required(callback, "callback")?;
        let id_out = out_arg(watch_id_out, "watch_id_out")?;
        let host = host.with(callback);
        *id_out = token.on_cancel(move |reason| host.call_json(reason));
        Ok(())
    })
}

/// Removes a watch that has not run: its callback never runs and its `userdata_free` runs now,
/// on this thread. True when it was removed; false when it already ran or is running (its
/// `userdata_free` then runs after the callback), was removed before, or `watch_id` is 0 or
/// unknown. NULL token: false. Any thread, including inside callbacks.
#[no_mangle]
pub unsafe extern "C" fn agentao_cancel_token_unwatch(
    token: *const agentao_cancel_token,
    watch_id: u64,
) -> bool {
    agentao_cancel_token::with_ref_or(token, false, |t| {
        watch_id != 0 && t.token.remove_callback(watch_id)
    })
}
