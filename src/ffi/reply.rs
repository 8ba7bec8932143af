//! Answers to the transport's requests.

use std::ffi::c_char;

use super::answer::{self, Request};
use super::{agentao_error, agentao_status, guard, opt_str_arg, str_arg, Fail};
use crate::events::transport::{Answer, Confirmation, Reply};

/// The pending answer of one `confirm_tool`, `ask_user` or `on_max_iterations` call, or of
/// one host tool's `execute` (`agentao_reply_tool_result` / `_tool_error`). A request handle
/// (docs/c-api.md, "Answering a request"): valid until exactly one finishing call, one of the
/// `agentao_reply_*` functions, from any thread, before or after the callback returns. An
/// answer that arrives after the turn was cancelled is ignored safely; a second finishing call
/// returns `AGENTAO_STATUS_INVALID_ARGUMENT` and does nothing. A reply that is never answered keeps its
/// turn waiting until the turn is cancelled or the config's `reply_timeout_ms` passes (then the
/// request fails).
///
/// A pending reply keeps the transport's (or the host tool's) userdata alive: `userdata_free` runs only once every
/// reply handed to the host has been answered, even after `agentao_agent_free`. It may then
/// run on the thread that answers the last one, inside `agentao_reply_*`. A reply that is never
/// answered means `userdata_free` never runs.
pub struct agentao_reply {
    pub(crate) reply: Reply,
    /// What the host's answer may still need: the transport's userdata, or a host tool's
    /// userdata and call context.
    pub(crate) _keep_alive: std::sync::Arc<dyn Send + Sync>,
}

/// The answers to `confirm_tool` (passed to `agentao_reply_confirm` as an `int32_t`).
#[repr(i32)]
pub(crate) enum agentao_confirmation {
    /// Approve the call.
    Allow = 0,
    /// Decline it: the model is told it was not approved.
    Deny = 1,
    /// Decline because no person can approve: the model is told approval is unavailable.
    DenyUnavailable = 2,
}

const ALLOW: i32 = agentao_confirmation::Allow as i32;
const DENY: i32 = agentao_confirmation::Deny as i32;
const DENY_UNAVAILABLE: i32 = agentao_confirmation::DenyUnavailable as i32;

impl Request for agentao_reply {
    const NAME: &'static str = "reply";
}

/// Hands `reply` to the host as a handle; `None` (the request failed) when no handle can be
/// had.
pub(crate) fn issue(reply: agentao_reply) -> Option<*mut agentao_reply> {
    answer::issue(reply).ok()
}

pub(crate) unsafe fn take(reply: *mut agentao_reply) -> Result<Reply, Fail> {
    // The keep-alive drops here. Order does not matter: it can only be the last reference
    // once the agent and its turns are gone, and then nobody waits for the answer.
    Ok(answer::finish(reply)?.reply)
}

/// Delivers `text` as `answer(text)`; text that is not UTF-8 fails the request instead (with
/// `failure(why)`) so the waiting side never hangs, and the caller gets the UTF-8 status.
pub(crate) unsafe fn answer_text(
    reply: *mut agentao_reply,
    text: *const c_char,
    answer: impl FnOnce(String) -> Answer,
    failure: impl FnOnce(&str) -> String,
) -> Result<(), Fail> {
    let reply = take(reply)?;
    match str_arg(text, "text") {
        Ok(t) => deliver(reply, answer(t.to_owned())),
        Err(f) => {
            let _ = reply.answer(Answer::Fail(failure(&f.1)));
            Err(f)
        }
    }
}

pub(crate) fn deliver(reply: Reply, answer: Answer) -> Result<(), Fail> {
    reply.answer(answer).map_err(|e| {
        Fail(
            agentao_status::InvalidArgument,
            format!("{e}; the request was failed"),
        )
    })
}

/// Answers a `confirm_tool` request with `AGENTAO_CONFIRMATION_ALLOW`, `_DENY` or
/// `_DENY_UNAVAILABLE`. Consumes `reply` whatever the outcome; an unknown value or a reply of
/// another kind fails the request and returns `AGENTAO_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_confirm(
    reply: *mut agentao_reply,
    confirmation: i32,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let reply = take(reply)?;
        let c = match confirmation {
            ALLOW => Confirmation::Allow,
            DENY => Confirmation::Deny,
            DENY_UNAVAILABLE => Confirmation::DenyUnavailable,
            other => {
                let _ = reply.answer(Answer::Fail(format!("invalid confirmation value {other}")));
                return Err(Fail(
                    agentao_status::InvalidArgument,
                    format!("invalid confirmation value {other}"),
                ));
            }
        };
        deliver(reply, Answer::Confirm(c))
    })
}

/// Answers an `ask_user` request with `text` (borrowed, copied). Consumes `reply`. Invalid
/// UTF-8 fails the request and returns `AGENTAO_STATUS_INVALID_UTF8`.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_text(
    reply: *mut agentao_reply,
    text: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        answer_text(reply, text, Answer::Text, |why| why.to_owned())
    })
}

/// Answers an `on_max_iterations` request with a JSON object (borrowed, copied), e.g.
/// `{"action":"continue"}`. Consumes `reply`. Text that is not a JSON object fails the request
/// (the turn ends with status error) and returns `AGENTAO_STATUS_INVALID_JSON`.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_json(
    reply: *mut agentao_reply,
    json: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let reply = take(reply)?;
        let parsed = str_arg(json, "json").and_then(|s| {
            match serde_json::from_str::<serde_json::Value>(s) {
                Ok(v) if v.is_object() => Ok(s),
                Ok(_) => Err(Fail(
                    agentao_status::InvalidJson,
                    "the answer must be a JSON object".into(),
                )),
                Err(e) => Err(Fail(
                    agentao_status::InvalidJson,
                    format!("the answer is not JSON: {e}"),
                )),
            }
        });
        match parsed {
            Ok(s) => deliver(reply, Answer::Json(s.to_owned())),
            Err(f) => {
                let _ = reply.answer(Answer::Fail(f.1.clone()));
                Err(f)
            }
        }
    })
}

/// Fails a request with `message` (borrowed; NULL allowed): a failed confirmation or
/// max-iterations request ends the turn with status error (`AGENTAO_STATUS_HOST_ERROR`); a
/// failed question becomes the tool's error result and the turn goes on; a failed host tool call
/// completes with status `error` (error type `HostToolError`). Consumes `reply`.
///
/// Errors: `_NULL_ARGUMENT` (`reply` NULL); `_INVALID_UTF8` (`message` is not UTF-8: the
/// request is failed all the same, with a generic message).
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_fail(
    reply: *mut agentao_reply,
    message: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let reply = take(reply)?;
        // A message that is not UTF-8 still fails the request (with the generic text), so
        // the turn never waits on a reply the host meant to fail; the caller hears of it.
        let (msg, result) = match opt_str_arg(message, "message") {
            Ok(m) => (
                m.unwrap_or("the host failed the request").to_owned(),
                Ok(()),
            ),
            Err(f) => ("the host failed the request".to_owned(), Err(f)),
        };
        deliver(reply, Answer::Fail(msg))?;
        result
    })
}
