//! Cancellation tokens as handles: refcounted, thread-safe, usable inside callbacks.

use std::ffi::c_char;

use super::handle::BoxCastable;
use super::{agentao_error, agentao_status, guard_required_out, opt_str_arg, out_string};
use crate::cancel::{CancelToken, DEFAULT_REASON};

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
    agentao_cancel_token::with_ref_or(token, (), |t| {
        let reason = opt_str_arg(reason, "reason")
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_REASON);
        t.token.cancel(reason);
    });
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
