//! The host transport vtable, its adapter to [`Transport`], and the broadcaster helper.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use super::handle::BoxCastable;
use super::host_data::HostData;
use super::reply::agentao_reply;
use super::{
    agentao_error, agentao_status, guard, guard_or, in_callback, str_arg, to_cstring, Fail,
};
use crate::events::transport::{Broadcaster, ConfirmRequest, Reply, Transport};

/// A listener a transport's `subscribe` receives: call it with each event's JSON (borrowed
/// for the call) and `listener_userdata`.
pub type agentao_listener_fn =
    Option<unsafe extern "C" fn(listener_userdata: *mut c_void, event_json: *const c_char)>;

/// The host transport: how the agent talks to its host (spec §1 of the reference). Copied by
/// `agentao_agent_new`; any slot may be NULL.
///
/// Threads: callbacks arrive on library threads; the one exception is the mode-change events
/// that `agentao_agent_set_permission_mode` emits on its caller's thread. `emit` calls of one agent never overlap and arrive in the canonical event order.
/// `confirm_tool`, `ask_user` and `on_max_iterations` run on a thread where blocking is fine;
/// each receives an `agentao_reply` that must be answered exactly once, before returning or
/// later from any thread (`agentao_reply_*`). Strings passed to callbacks are valid until the
/// callback returns.
///
/// A NULL slot behaves like the reference's NullTransport: `emit` discards, `confirm_tool`
/// approves, `ask_user` answers `"[ask_user: not available in non-interactive mode]"`,
/// `on_max_iterations` stops. A NULL `subscribe` means the transport cannot fan out, so
/// `agentao_agent_stream*` refuse with `AGENTAO_STATUS_NO_SUBSCRIBE`.
#[repr(C)]
pub struct agentao_transport {
    /// `sizeof(agentao_transport)`; a smaller value means the slots past it are NULL.
    pub struct_size: u32,
    pub userdata: *mut c_void,
    /// Called exactly once with `userdata`, when the agent, every turn and every pending
    /// request are gone: a reply the host still holds keeps it waiting, even after
    /// `agentao_agent_free` (it then runs inside the `agentao_reply_*` that answers the last
    /// one). Also called when `agentao_agent_new` fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// One event: `{"type": ..., "schema_version": 1, "data": {...}}`. Must return quickly.
    pub emit: Option<unsafe extern "C" fn(userdata: *mut c_void, event_json: *const c_char)>,
    /// Approve a tool call: answer with `agentao_reply_confirm` (allow / deny /
    /// deny-unavailable) or `agentao_reply_fail` (ends the turn with status error).
    pub confirm_tool: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            tool_name: *const c_char,
            description: *const c_char,
            args_json: *const c_char,
            call_id: *const c_char,
            reply: *mut agentao_reply,
        ),
    >,
    /// Answer a question from the model: `agentao_reply_text`, or `agentao_reply_fail` (the
    /// tool reports an error; the turn goes on). `hints_json` is
    /// `{"header": str|null, "options": [str]|null, "multiple": bool, "allow_custom": bool}`.
    pub ask_user: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            question: *const c_char,
            hints_json: *const c_char,
            reply: *mut agentao_reply,
        ),
    >,
    /// The iteration budget is spent. `pending_calls_json` is the last assistant message's
    /// tool calls, `[{"name": str, "args": str}]`. Answer with `agentao_reply_json`:
    /// `{"action": "stop"}`, `{"action": "continue"}` (a whole new budget) or
    /// `{"action": "new_instruction", "message": "..."}`; an unknown or missing action stops.
    pub on_max_iterations: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            count: u32,
            pending_calls_json: *const c_char,
            reply: *mut agentao_reply,
        ),
    >,
    /// Optional fan-out: register `listener`; write an id to `*subscription_out`. Its presence
    /// marks a transport that can fan out, which the streaming entry points require (as the
    /// reference's `astream` does); the library itself delivers stream deltas directly and does
    /// not call it today. `agentao_broadcaster_subscribe` fits this slot.
    pub subscribe: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            listener: agentao_listener_fn,
            listener_userdata: *mut c_void,
            subscription_out: *mut u64,
        ) -> agentao_status,
    >,
    /// Removes a subscription; must be idempotent.
    pub unsubscribe: Option<unsafe extern "C" fn(userdata: *mut c_void, subscription: u64)>,
}

/// The copied vtable behind an agent.
pub(crate) struct FfiTransport {
    vtable: Arc<Vtable>,
}

/// The host's slots and userdata. Shared by the agent's transport and every reply handle the
/// host holds: dropped when the last of them is gone, and that is when `userdata_free` runs, so
/// a host answering a reply after `agentao_agent_free` still has its userdata.
pub(crate) struct Vtable {
    userdata: *mut c_void,
    userdata_free: Option<unsafe extern "C" fn(*mut c_void)>,
    emit: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
    confirm_tool: Option<
        unsafe extern "C" fn(
            *mut c_void,
            *const c_char,
            *const c_char,
            *const c_char,
            *const c_char,
            *mut agentao_reply,
        ),
    >,
    ask_user:
        Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, *mut agentao_reply)>,
    on_max_iterations:
        Option<unsafe extern "C" fn(*mut c_void, u32, *const c_char, *mut agentao_reply)>,
    subscribe: Option<
        unsafe extern "C" fn(
            *mut c_void,
            agentao_listener_fn,
            *mut c_void,
            *mut u64,
        ) -> agentao_status,
    >,
}

// SAFETY: the host promises (header docs) that its callbacks and userdata may be used from
// library threads; the library serializes `emit` itself.
unsafe impl Send for Vtable {}
unsafe impl Sync for Vtable {}

impl Drop for Vtable {
    fn drop(&mut self) {
        if let Some(free) = self.userdata_free {
            // SAFETY: called once, with the userdata the host registered.
            in_callback(|| unsafe { free(self.userdata) });
        }
    }
}

impl FfiTransport {
    /// Copies a host vtable, honouring `struct_size`.
    pub(crate) unsafe fn from_vtable(t: *const agentao_transport) -> Result<FfiTransport, Fail> {
        let size = (*t).struct_size as usize;
        let base =
            std::mem::offset_of!(agentao_transport, userdata_free) + std::mem::size_of::<usize>();
        if size < base {
            return Err(Fail(
                agentao_status::InvalidArgument,
                format!("transport.struct_size is {size}; set it to sizeof(agentao_transport)"),
            ));
        }
        macro_rules! slot {
            ($field:ident) => {
                if size
                    >= std::mem::offset_of!(agentao_transport, $field)
                        + std::mem::size_of::<usize>()
                {
                    (*t).$field
                } else {
                    None
                }
            };
        }
        Ok(FfiTransport {
            vtable: Arc::new(Vtable {
                userdata: (*t).userdata,
                userdata_free: (*t).userdata_free,
                emit: slot!(emit),
                confirm_tool: slot!(confirm_tool),
                ask_user: slot!(ask_user),
                on_max_iterations: slot!(on_max_iterations),
                subscribe: slot!(subscribe),
            }),
        })
    }

    /// A reply handle for the host; it keeps the userdata alive until it is answered.
    fn reply_ptr(&self, reply: Reply) -> *mut agentao_reply {
        Box::into_raw(Box::new(agentao_reply {
            reply,
            _keep_alive: self.vtable.clone(),
        }))
    }
}

impl Transport for FfiTransport {
    fn emit(&self, event: &CStr) {
        if let Some(f) = self.vtable.emit {
            // SAFETY: host callback with its own userdata and a string valid for the call.
            in_callback(|| unsafe { f(self.vtable.userdata, event.as_ptr()) });
        }
    }

    fn confirm_tool(&self, req: ConfirmRequest, reply: Reply) {
        let Some(f) = self.vtable.confirm_tool else {
            let _ = reply.answer(crate::events::transport::Answer::Confirm(
                crate::events::transport::Confirmation::Allow,
            ));
            return;
        };
        let (name, desc, args, id) = (
            to_cstring(&req.tool_name),
            to_cstring(&req.description),
            to_cstring(&req.args_json),
            to_cstring(&req.call_id),
        );
        // SAFETY: as above; the reply pointer is owned by the host until it answers.
        in_callback(|| unsafe {
            f(
                self.vtable.userdata,
                name.as_ptr(),
                desc.as_ptr(),
                args.as_ptr(),
                id.as_ptr(),
                self.reply_ptr(reply),
            )
        });
    }

    fn ask_user(&self, question: &str, hints_json: &str, reply: Reply) {
        let Some(f) = self.vtable.ask_user else {
            let _ = reply.answer(crate::events::transport::Answer::Text(
                crate::events::transport::NON_INTERACTIVE_ANSWER.to_owned(),
            ));
            return;
        };
        let (q, h) = (to_cstring(question), to_cstring(hints_json));
        // SAFETY: as above.
        in_callback(|| unsafe {
            f(
                self.vtable.userdata,
                q.as_ptr(),
                h.as_ptr(),
                self.reply_ptr(reply),
            )
        });
    }

    fn on_max_iterations(&self, count: u32, pending_json: &str, reply: Reply) {
        let Some(f) = self.vtable.on_max_iterations else {
            let _ = reply.answer(crate::events::transport::Answer::Json(
                r#"{"action":"stop"}"#.into(),
            ));
            return;
        };
        let p = to_cstring(pending_json);
        // SAFETY: as above.
        in_callback(|| unsafe {
            f(
                self.vtable.userdata,
                count,
                p.as_ptr(),
                self.reply_ptr(reply),
            )
        });
    }

    fn supports_subscribe(&self) -> bool {
        self.vtable.subscribe.is_some()
    }
}

/// A ready-made fan-out for hosts that write their own transport: keep one in your userdata,
/// call `agentao_broadcaster_notify` from your `emit`, and forward your `subscribe` /
/// `unsubscribe` slots to it. Thread-safe.
pub struct agentao_broadcaster {
    inner: Broadcaster,
}

/// A new broadcaster; release with `agentao_broadcaster_free`.
#[no_mangle]
pub extern "C" fn agentao_broadcaster_new() -> *mut agentao_broadcaster {
    Box::into_raw(Box::new(agentao_broadcaster {
        inner: Broadcaster::default(),
    }))
}

/// Delivers `event_json` (borrowed) to every listener, in registration order, on the calling
/// thread. Subscriptions made or removed during delivery count from the next event.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_notify(
    b: *const agentao_broadcaster,
    event_json: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        if b.is_null() {
            return Err(Fail(
                agentao_status::NullArgument,
                "`broadcaster` is NULL".into(),
            ));
        }
        str_arg(event_json, "event_json")?;
        (*b).inner.notify(CStr::from_ptr(event_json));
        Ok(())
    })
}

struct CListener {
    f: unsafe extern "C" fn(*mut c_void, *const c_char),
    data: HostData,
}

/// Registers a listener; writes its id to `*subscription_out`. Matches the vtable's
/// `subscribe` slot when `userdata` is the broadcaster.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_subscribe(
    b: *mut c_void,
    listener: agentao_listener_fn,
    listener_userdata: *mut c_void,
    subscription_out: *mut u64,
) -> agentao_status {
    guard(std::ptr::null_mut(), || {
        let (Some(f), false, false) = (listener, b.is_null(), subscription_out.is_null()) else {
            return Err(Fail(agentao_status::NullArgument, "NULL argument".into()));
        };
        let b = &*(b as *const agentao_broadcaster);
        let l = Arc::new(CListener {
            f,
            data: HostData::borrowed(listener_userdata),
        });
        *subscription_out = b.inner.subscribe(Arc::new(move |ev: &CStr| {
            // SAFETY: the host's listener with its own userdata.
            in_callback(|| unsafe { (l.f)(l.data.ptr(), ev.as_ptr()) })
        }));
        Ok(())
    })
}

/// Removes a listener; idempotent. Matches the vtable's `unsubscribe` slot.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_unsubscribe(b: *mut c_void, subscription: u64) {
    if !b.is_null() {
        guard_or((), || {
            (*(b as *const agentao_broadcaster))
                .inner
                .unsubscribe(subscription)
        });
    }
}

/// Releases a broadcaster. NULL is a no-op. No listener is called after this returns.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_free(b: *mut agentao_broadcaster) {
    agentao_broadcaster::free_with(b, |_| ());
}
