//! The host transport: its C vtable, its adapter to [`Transport`], and the broadcaster
//! helper.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use crate::events::transport::{
    Answer, Broadcaster, ConfirmRequest, Confirmation, Reply, Transport, NON_INTERACTIVE_ANSWER,
};
use crate::events::JsonText;
use crate::ffi::handle::BoxCastable;
use crate::ffi::host::{adopt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::reply::agentao_reply;
use crate::ffi::{
    agentao_error, agentao_status, guard, in_callback, out_arg, required, str_arg, to_cstring,
    with_cstr, with_json, FfiResult,
};

/// A listener a transport's `subscribe` receives: call it with each event's JSON (borrowed
/// for the call) and `listener_userdata`.
pub(crate) type agentao_listener_fn =
    Option<unsafe extern "C" fn(listener_userdata: *mut c_void, event_json: *const c_char)>;

/// The host transport: how the agent talks to its host (spec §1 of the reference). Copied by
/// `agentao_agent_new`; any slot may be NULL.
///
/// Threads: callbacks arrive on library threads; the one exception is the mode-change events
/// that `agentao_agent_set_permission_mode` emits on its caller's thread. `emit` calls of one
/// agent never overlap and arrive in the canonical event order.
/// `confirm_tool`, `ask_user` and `on_max_iterations` run on a thread where blocking is fine;
/// each receives an `agentao_reply` that must be answered exactly once, before returning or
/// later from any thread (`agentao_reply_*`). Strings passed to callbacks are valid until the
/// callback returns.
///
/// A NULL slot behaves like the reference's NullTransport: `emit` discards, `confirm_tool`
/// approves, `ask_user` answers `"[ask_user: not available in non-interactive mode]"`,
/// `on_max_iterations` stops. `subscribe` may be NULL too: the streaming entry points
/// (`agentao_agent_stream*`) deliver deltas themselves and work with any transport.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_transport {
    /// `sizeof(agentao_transport)`; a smaller value means the slots past it are NULL.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Called exactly once with `userdata`, when the agent, every turn and every pending
    /// request are gone: a reply the host still holds keeps it waiting, even after
    /// `agentao_agent_free` (it then runs inside the `agentao_reply_*` that answers the last
    /// one). Also called when `agentao_agent_new` fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// One event: `{"type": ..., "schema_version": 1, "data": {...}}`. Must return quickly.
    pub emit: Option<unsafe extern "C" fn(userdata: *mut c_void, event_json: *const c_char)>,
    /// Approve a tool call: answer with `agentao_reply_confirm` (allow / deny /
    /// deny-unavailable) or `agentao_reply_fail` (ends the turn with status error).
    pub(crate) confirm_tool: Option<
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
    pub(crate) ask_user: Option<
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
    pub(crate) on_max_iterations: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            count: u32,
            pending_calls_json: *const c_char,
            reply: *mut agentao_reply,
        ),
    >,
    /// Optional fan-out: register `listener`; write an id to `*subscription_out`. The library
    /// does not call it: stream deltas go straight to the stream, so streaming works whether
    /// or not this slot is set (earlier versions required it and refused with
    /// `AGENTAO_STATUS_NO_SUBSCRIBE`). `agentao_broadcaster_subscribe` fits this slot (a host that wants the
    /// broadcaster to release `listener_userdata` calls `agentao_broadcaster_subscribe_with_free`
    /// from its own `subscribe` instead).
    pub(crate) subscribe: Option<
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

host_capability!(agentao_transport, minimum: userdata_free, required: []);

/// The host's transport as the library keeps it: a copy of the C struct (slots past
/// `struct_size` NULL) with its userdata. Shared by the agent and every reply handle the host
/// holds: dropped when the last of them is gone, and that is when `userdata_free` runs, so a
/// host answering a reply after `agentao_agent_free` still has its userdata.
pub(crate) type HostTransport = HostData<agentao_transport>;

/// The copied vtable behind an agent.
pub(crate) struct FfiTransport {
    host: Arc<HostTransport>,
}

impl FfiTransport {
    /// Takes a host vtable (see [`adopt`]): on failure the userdata is released, as the
    /// header promises for a failed `agentao_agent_new`.
    ///
    /// # Safety
    /// `t` is non-NULL and points to an `agentao_transport` at least `struct_size` bytes long
    /// (and at least up to `userdata_free` whatever `struct_size` says).
    /// The transport argument of an entry point that makes an agent: NULL is the built-in
    /// null transport (no error); otherwise adopted first, so its finalizer runs exactly once
    /// whatever fails after.
    ///
    /// # Safety
    /// As for [`FfiTransport::copy`] when `t` is non-NULL.
    pub(crate) unsafe fn adopt_arg(
        t: *const agentao_transport,
    ) -> FfiResult<Option<Arc<dyn Transport>>> {
        if t.is_null() {
            return Ok(None);
        }
        Ok(Some(Arc::new(FfiTransport::copy(t)?)))
    }

    pub(crate) unsafe fn copy(t: *const agentao_transport) -> FfiResult<FfiTransport> {
        let (data, copy) = adopt(t)?;
        Ok(FfiTransport {
            host: Arc::new(data.with(copy)),
        })
    }

    fn slots(&self) -> &agentao_transport {
        self.host.callbacks()
    }

    /// A reply handle for the host; it keeps the userdata alive until it is answered. `None`
    /// (the request has failed) when no handle can be had.
    fn reply_ptr(&self, reply: Reply) -> Option<*mut agentao_reply> {
        crate::ffi::reply::issue(agentao_reply {
            reply,
            _keep_alive: self.host.clone(),
        })
    }
}

impl Transport for FfiTransport {
    fn emit(&self, event: &str) {
        if let Some(f) = self.slots().emit {
            // SAFETY: host callback with its own userdata and a string valid for the call.
            with_cstr(event, |e| in_callback(|| unsafe { f(self.host.ptr(), e) }));
        }
    }

    fn emit_json(&self, event: JsonText<'_>) {
        if let Some(f) = self.slots().emit {
            // SAFETY: as in `emit`; the event's own NUL-terminated buffer lives for the call.
            with_json(event, |e| in_callback(|| unsafe { f(self.host.ptr(), e) }));
        }
    }

    /// A host's `subscribe` listeners hear only what its `emit` passes on, so without an
    /// `emit` nobody hears an event.
    fn listens(&self) -> bool {
        self.slots().emit.is_some()
    }

    /// The slots are copied when the transport is made and never change.
    fn always_listens(&self) -> bool {
        self.listens()
    }

    fn confirm_tool(&self, req: ConfirmRequest, reply: Reply) {
        let Some(f) = self.slots().confirm_tool else {
            let _ = reply.answer(Answer::Confirm(Confirmation::Allow));
            return;
        };
        let Some(reply) = self.reply_ptr(reply) else {
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
                self.host.ptr(),
                name.as_ptr(),
                desc.as_ptr(),
                args.as_ptr(),
                id.as_ptr(),
                reply,
            )
        });
    }

    fn ask_user(&self, question: &str, hints_json: &str, reply: Reply) {
        let Some(f) = self.slots().ask_user else {
            let _ = reply.answer(Answer::Text(NON_INTERACTIVE_ANSWER.to_owned()));
            return;
        };
        let Some(reply) = self.reply_ptr(reply) else {
            return;
        };
        let (q, h) = (to_cstring(question), to_cstring(hints_json));
        // SAFETY: as above.
        in_callback(|| unsafe { f(self.host.ptr(), q.as_ptr(), h.as_ptr(), reply) });
    }

    fn on_max_iterations(&self, count: u32, pending_json: &str, reply: Reply) {
        let Some(f) = self.slots().on_max_iterations else {
            let _ = reply.answer(Answer::Json(r#"{"action":"stop"}"#.into()));
            return;
        };
        let Some(reply) = self.reply_ptr(reply) else {
            return;
        };
        let p = to_cstring(pending_json);
        // SAFETY: as above.
        in_callback(|| unsafe { f(self.host.ptr(), count, p.as_ptr(), reply) });
    }

    fn supports_subscribe(&self) -> bool {
        self.slots().subscribe.is_some()
    }
}

/// A ready-made fan-out for hosts that write their own transport: keep one in your userdata,
/// call `agentao_broadcaster_notify` from your `emit`, and forward your `subscribe` /
/// `unsubscribe` slots to it. Thread-safe.
pub struct agentao_broadcaster {
    /// Shared with each delivery in flight, so a listener may free the broadcaster.
    inner: Arc<Broadcaster>,
}

/// A new broadcaster; release with `agentao_broadcaster_free`.
#[no_mangle]
pub extern "C" fn agentao_broadcaster_new() -> *mut agentao_broadcaster {
    agentao_broadcaster {
        inner: Arc::new(Broadcaster::default()),
    }
    .into_raw()
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
        let b = agentao_broadcaster::try_ref(b)?;
        let event = str_arg(event_json, "event_json")?;
        // The delivery's own handle: a listener that frees `b` leaves it valid until the end.
        let inner = b.inner.clone();
        inner.notify(event);
        Ok(())
    })
}

/// Registers `listener` with its data on `b`; the data is dropped (and its finalizer run) when
/// the subscription is removed, the broadcaster is freed, or registration fails.
unsafe fn subscribe(
    b: *const agentao_broadcaster,
    listener: HostData<crate::ffi::host_data::JsonFn>,
    subscription_out: *mut u64,
) -> FfiResult<()> {
    let b = agentao_broadcaster::try_ref(b)?;
    let out = out_arg(subscription_out, "subscription_out")?;
    *out = b
        .inner
        .subscribe(Arc::new(move |ev: &str| listener.call_json(ev)));
    Ok(())
}

/// Registers a listener; writes its id to `*subscription_out`. Matches the vtable's
/// `subscribe` slot when `userdata` is the broadcaster. `listener_userdata` stays the host's:
/// the broadcaster never releases it (see `agentao_broadcaster_subscribe_with_free`).
/// NULL `b`, `listener` or `subscription_out`: `AGENTAO_STATUS_NULL_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_subscribe(
    b: *mut c_void,
    listener: agentao_listener_fn,
    listener_userdata: *mut c_void,
    subscription_out: *mut u64,
) -> agentao_status {
    guard(std::ptr::null_mut(), || {
        let f = required(listener, "listener")?;
        subscribe(
            b.cast(),
            HostData::borrowed(listener_userdata).with(f),
            subscription_out,
        )
    })
}

/// Like `agentao_broadcaster_subscribe`, and the broadcaster owns `listener_userdata`:
/// `listener_userdata_free(listener_userdata)` (may be NULL) runs exactly once, after the last
/// call of the listener, when the subscription is removed (`agentao_broadcaster_unsubscribe`,
/// or on the thread that finishes a delivery still in flight then) or the broadcaster is freed.
/// If this call fails (a NULL argument: `AGENTAO_STATUS_NULL_ARGUMENT`), it runs before the
/// call returns. Writes the subscription id to `*subscription_out`.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_subscribe_with_free(
    b: *mut agentao_broadcaster,
    listener: agentao_listener_fn,
    listener_userdata: *mut c_void,
    listener_userdata_free: Option<unsafe extern "C" fn(listener_userdata: *mut c_void)>,
    subscription_out: *mut u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from the start, so every failure below releases it.
        let data = HostData::new(listener_userdata, listener_userdata_free);
        let f = required(listener, "listener")?;
        subscribe(b, data.with(f), subscription_out)
    })
}

/// Removes a listener; idempotent. Matches the vtable's `unsubscribe` slot.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_unsubscribe(b: *mut c_void, subscription: u64) {
    agentao_broadcaster::with_ref_or(b.cast(), (), |b| b.inner.unsubscribe(subscription));
}

/// Releases a broadcaster. NULL is a no-op. No listener is called after this returns, also
/// when a listener calls it in the middle of a delivery (the delivery stops there); each
/// `agentao_broadcaster_subscribe_with_free` finalizer has run by then, except those of the
/// listeners of that delivery, which run on its thread when it ends (as for `unsubscribe`).
///
/// Threads: no other thread may be inside a call on `b` (as with any handle): free it where
/// no `emit` can come any more, e.g. in the transport's `userdata_free`, which runs after the
/// agent's last callback.
#[no_mangle]
pub unsafe extern "C" fn agentao_broadcaster_free(b: *mut agentao_broadcaster) {
    agentao_broadcaster::free_with(b, |b| b.inner.close());
}
