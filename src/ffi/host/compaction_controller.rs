//! The host's compaction controller (spec §5.10): its C vtable, the request it reads, its
//! adapter to [`CompactionController`], and its answers (`agentao_reply_compaction_*`).

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use crate::events::transport::{Answer, CompactionDecision, Reply};
use crate::ffi::agent::{agent_ref, agentao_agent};
use crate::ffi::host::{adopt_opt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::reply::{agentao_reply, deliver, take};
use crate::ffi::{
    agentao_error, agentao_status, guard, in_callback, opt_str_arg, str_arg, to_cstring, Fail,
};
use crate::turn::compaction::controller::{CompactionController, CompactionFacts};
use crate::turn::compaction::{Kind, Trigger};

/// What started a compaction (`agentao_compaction_request.trigger`, an `int32_t`).
#[repr(i32)]
pub(crate) enum agentao_compaction_trigger {
    /// The estimate passed 80 % of the window before an LLM call.
    Auto = 0,
    /// The provider refused the request as too long (the recovery ladder).
    Overflow = 1,
    /// The host asked: `agentao_agent_compact`.
    Manual = 2,
}

/// What a compaction does (`agentao_compaction_request.kind`, an `int32_t`).
#[repr(i32)]
pub(crate) enum agentao_compaction_kind {
    /// A summary replaces the older history; the recent messages are kept.
    Full = 0,
    /// A summary replaces all but the last exchange (the ladder's second rung).
    Minimal = 1,
}

/// One full compaction the controller is asked about. Borrowed for the `decide` call: copy
/// what an answer given later needs.
#[repr(C)]
pub struct agentao_compaction_request {
    /// `sizeof(agentao_compaction_request)` of this library: members are only appended.
    pub struct_size: u32,
    /// An `agentao_compaction_trigger`.
    pub trigger: i32,
    /// An `agentao_compaction_kind`.
    pub kind: i32,
    /// The events' `reason`: `threshold`, `api_overflow`, `api_overflow_after_compression`,
    /// `payload_too_large`, or the host's reason given to `agentao_agent_compact`.
    pub reason: *const c_char,
    /// The request's estimate now (system prompt, tools and history), in tokens.
    pub estimated_tokens: u64,
    /// The context window it is measured against.
    pub window: u64,
    /// How many messages the summary replaces.
    pub messages_to_summarize: u64,
    /// How many recent messages are kept verbatim after the summary.
    pub messages_kept: u64,
    /// The messages the summary replaces, as a JSON array in the format of
    /// `agentao_agent_history`: what a summary the host writes itself must cover.
    pub messages_json: *const c_char,
    /// NULL for the agent's own history; a foreground sub-agent's `child_task_id` when the
    /// sub-agent compacts its own (its events reach the parent stamped with the same id).
    pub child_task_id: *const c_char,
}

/// The controller's callback: decide about `request` (borrowed for the call) and answer
/// `reply` exactly once, before returning or later from any thread:
/// `agentao_reply_compaction_allow`, `_cancel`, `_summary`, or `agentao_reply_fail`.
pub(crate) type agentao_compaction_decide_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        request: *const agentao_compaction_request,
        reply: *mut agentao_reply,
    ),
>;

/// A host compaction policy, passed to `agentao_agent_set_compaction_controller` (copied).
/// Asked before every full compaction: automatic (above 80 % of the window), on the overflow
/// recovery ladder, on demand (`agentao_agent_compact`), and a foreground sub-agent's.
/// Microcompaction (no model call) is not asked.
///
/// Threads: `decide` runs on a library thread where blocking is fine; the turn (or
/// `agentao_agent_compact`) waits for the answer, until the turn is cancelled or the config's
/// `reply_timeout_ms` passes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_compaction_controller {
    /// `sizeof(agentao_compaction_controller)`; members may be appended in later versions.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Called exactly once with `userdata`: when another controller (or NULL) replaces this
    /// one, or the agent is freed, and no turn uses it and every reply handed to `decide` is
    /// answered; or before `agentao_agent_set_compaction_controller` returns when it fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// Required.
    pub(crate) decide: agentao_compaction_decide_fn,
}

host_capability!(agentao_compaction_controller, minimum: decide, required: [decide]);

type DecideFn =
    unsafe extern "C" fn(*mut c_void, *const agentao_compaction_request, *mut agentao_reply);

/// The host side: its userdata (kept alive by every reply it has not answered) and callback.
struct FfiController {
    data: Arc<HostData>,
    decide: DecideFn,
}

impl CompactionController for FfiController {
    fn decide(&self, facts: CompactionFacts, reply: Reply) {
        let reason = to_cstring(&facts.reason);
        let messages = to_cstring(&facts.messages_json);
        let child = facts.child_task_id.as_deref().map(to_cstring);
        let request = agentao_compaction_request {
            struct_size: std::mem::size_of::<agentao_compaction_request>() as u32,
            trigger: match facts.trigger {
                Trigger::Auto => agentao_compaction_trigger::Auto,
                Trigger::Overflow => agentao_compaction_trigger::Overflow,
                Trigger::Manual => agentao_compaction_trigger::Manual,
            } as i32,
            kind: match facts.kind {
                Kind::Minimal => agentao_compaction_kind::Minimal,
                Kind::Full | Kind::Micro => agentao_compaction_kind::Full,
            } as i32,
            reason: reason.as_ptr(),
            estimated_tokens: facts.estimated_tokens,
            window: facts.window,
            messages_to_summarize: facts.to_summarize as u64,
            messages_kept: facts.kept as u64,
            messages_json: messages.as_ptr(),
            child_task_id: child.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        };
        // No handle to be had: the reply drops unanswered, which the waiting side reads as a
        // failed controller.
        let Some(reply) = crate::ffi::reply::issue(agentao_reply {
            reply,
            _keep_alive: self.data.clone(),
        }) else {
            return;
        };
        // SAFETY: the host's callback with its own userdata; `request` and its strings live
        // for the call; the reply is the host's until it answers.
        in_callback(|| unsafe { (self.decide)(self.data.ptr(), &request, reply) });
    }
}

/// Sets the agent's compaction controller (`controller` is copied), or removes it when
/// `controller` is NULL (the library then compacts without asking). Between turns: it applies
/// from the next turn on, and to `agentao_agent_compact`.
///
/// Ownership: the library owns `controller->userdata` from the call on; on failure
/// `userdata_free` has run before this returns. A previous controller's `userdata_free` runs
/// once no turn uses it and every reply handed to it is answered.
///
/// Errors: `AGENTAO_STATUS_NULL_ARGUMENT` (NULL agent; NULL `decide`), `_INVALID_ARGUMENT` (a
/// `struct_size` that ends before `decide`), `_TURN_IN_PROGRESS`.
///
/// Threads: any thread; not inside a callback of this agent's running turn.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_compaction_controller(
    agent: *mut agentao_agent,
    controller: *const agentao_compaction_controller,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from here: every failure below releases the userdata.
        let adopted = match adopt_opt(controller)? {
            Some((data, v)) => {
                let Some(decide) = v.decide else {
                    return Err(Fail(
                        agentao_status::NullArgument,
                        "agentao_compaction_controller.decide is NULL".into(),
                    ));
                };
                Some(Arc::new(FfiController {
                    data: Arc::new(data),
                    decide,
                }) as Arc<dyn CompactionController>)
            }
            None => None,
        };
        agent_ref(agent)?.set_compaction_controller(adopted)?;
        Ok(())
    })
}

/// Answers a controller's `decide`: compact as the library would (the model writes the
/// summary). Consumes `reply`; a reply of another kind fails that request and returns
/// `AGENTAO_STATUS_INVALID_ARGUMENT`. An answer after the turn was cancelled is ignored. Any
/// thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_compaction_allow(
    reply: *mut agentao_reply,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        deliver(take(reply)?, Answer::Compaction(CompactionDecision::Allow))
    })
}

/// Answers a controller's `decide`: no compaction. `compaction_settled` reports status
/// `cancelled` with detail `cancelled by the compaction controller[: <reason>]` (`reason`
/// borrowed, may be NULL); no other compaction is tried in that turn, which goes on with its
/// history as it is (on the recovery ladder: the provider's error ends the turn). Consumes
/// `reply`. A `reason` that is not UTF-8 still cancels (without the reason) and returns
/// `AGENTAO_STATUS_INVALID_UTF8`; a reply of another kind: `_INVALID_ARGUMENT`. Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_compaction_cancel(
    reply: *mut agentao_reply,
    reason: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let reply = take(reply)?;
        let (reason, result) = match opt_str_arg(reason, "reason") {
            Ok(r) => (r.map(str::to_owned), Ok(())),
            Err(f) => (None, Err(f)),
        };
        deliver(
            reply,
            Answer::Compaction(CompactionDecision::Cancel(reason)),
        )?;
        result
    })
}

/// Answers a controller's `decide` with the summary itself (`summary` borrowed, copied): it
/// replaces the summarised messages instead of the model's summary, closed by the same end
/// marker, with the same events; no model is called. A summary that does not make the history
/// smaller fails the compaction (status `failed`), as the model's would. Consumes `reply`.
///
/// Errors (the request is then failed, which cancels the compaction):
/// `AGENTAO_STATUS_NULL_ARGUMENT` (`summary` NULL), `_INVALID_UTF8`, `_INVALID_ARGUMENT` (an
/// empty or blank summary; a reply of another kind). Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_compaction_summary(
    reply: *mut agentao_reply,
    summary: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let reply = take(reply)?;
        let text = str_arg(summary, "summary").and_then(|s| {
            if s.trim().is_empty() {
                Err(Fail(
                    agentao_status::InvalidArgument,
                    "the summary is empty".into(),
                ))
            } else {
                Ok(s)
            }
        });
        match text {
            Ok(s) => deliver(
                reply,
                Answer::Compaction(CompactionDecision::Summary(s.to_owned())),
            ),
            Err(f) => {
                let _ = reply.answer(Answer::Fail(format!("the answer was refused: {}", f.1)));
                Err(f)
            }
        }
    })
}
