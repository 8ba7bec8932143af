//! The host's lifecycle hooks (docs/hooks.md): their C vtable, the request they read, their
//! adapter to [`HostHooks`], and their answer (`agentao_reply_hook`).

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use crate::events::transport::{Answer, Reply};
use crate::ffi::agent::{agent_ref, agentao_agent};
use crate::ffi::host::{adopt_opt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::reply::{agentao_reply, deliver, take};
use crate::ffi::{
    agentao_error, agentao_status, guard, in_callback, opt_str_arg, to_cstring, Fail,
};
use crate::hooks::protocol::parse_stdout;
use crate::hooks::{HookEvent, HookRequest, HostHooks};

/// A point of the agent loop where hooks run (`agentao_hook_request.event`, an `int32_t`).
/// The names are Claude Code's hook events.
#[repr(i32)]
pub(crate) enum agentao_hook_event {
    /// Before a planned tool call runs: may deny, ask, allow or rewrite its input.
    PreToolUse = 0,
    /// After a tool call succeeded: may add context for the model.
    PostToolUse = 1,
    /// After a tool call failed: may add context for the model.
    PostToolUseFailure = 2,
    /// Before the user's message reaches the model: may add context or block it.
    UserPromptSubmit = 3,
    /// On the model's final answer: may send the agent back to work.
    Stop = 4,
    /// Before the agent's first turn: may add context.
    SessionStart = 5,
    /// Before a full compaction summarises the older history (`trigger` `manual` or `auto`
    /// in the input): observes only, as in Claude Code.
    PreCompact = 6,
}

fn event_code(event: HookEvent) -> i32 {
    (match event {
        HookEvent::PreToolUse => agentao_hook_event::PreToolUse,
        HookEvent::PostToolUse => agentao_hook_event::PostToolUse,
        HookEvent::PostToolUseFailure => agentao_hook_event::PostToolUseFailure,
        HookEvent::UserPromptSubmit => agentao_hook_event::UserPromptSubmit,
        HookEvent::Stop => agentao_hook_event::Stop,
        HookEvent::SessionStart => agentao_hook_event::SessionStart,
        HookEvent::PreCompact => agentao_hook_event::PreCompact,
    }) as i32
}

/// One hook point the host is asked about. Borrowed for the `on_hook` call: copy what an
/// answer given later needs.
#[repr(C)]
pub struct agentao_hook_request {
    /// `sizeof(agentao_hook_request)` of this library: members are only appended.
    pub struct_size: u32,
    /// An `agentao_hook_event`.
    pub event: i32,
    /// The tool at `PreToolUse`, `PostToolUse` and `PostToolUseFailure`; NULL elsewhere.
    pub tool_name: *const c_char,
    /// The call's id at the tool points; NULL elsewhere.
    pub call_id: *const c_char,
    /// The hook input as a JSON object: exactly what a command hook reads on stdin
    /// (Claude Code's format: `session_id`, `cwd`, `hook_event_name`, `tool_input`, …).
    pub input_json: *const c_char,
}

/// The hooks' callback: decide about `request` (borrowed for the call) and answer `reply`
/// exactly once, before returning or later from any thread: `agentao_reply_hook` or
/// `agentao_reply_fail`.
pub(crate) type agentao_hook_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        request: *const agentao_hook_request,
        reply: *mut agentao_reply,
    ),
>;

/// A host's lifecycle hooks, passed to `agentao_agent_set_hooks` (copied). Asked at every hook
/// point of every turn (a sub-agent's tool calls too), after the command hooks of the config's
/// `hooks` section, and combined with them by the same rules (docs/hooks.md): deny > ask >
/// allow; a `PreToolUse` answer that fails (`agentao_reply_fail`, output that is not the
/// protocol, no answer within `reply_timeout_ms`) denies the call.
///
/// Threads: `on_hook` runs on a library thread where blocking is fine; the turn waits for the
/// answer, until it is cancelled or the config's `reply_timeout_ms` passes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_hooks {
    /// `sizeof(agentao_hooks)`; members may be appended in later versions.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Called exactly once with `userdata`: when other hooks (or NULL) replace these, or the
    /// agent is freed, and no turn uses them and every reply handed to `on_hook` is answered;
    /// or before `agentao_agent_set_hooks` returns when it fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// Required.
    pub(crate) on_hook: agentao_hook_fn,
}

host_capability!(agentao_hooks, minimum: on_hook, required: [on_hook]);

type OnHookFn = unsafe extern "C" fn(*mut c_void, *const agentao_hook_request, *mut agentao_reply);

/// The host side: its userdata (kept alive by every reply it has not answered) and callback.
struct FfiHooks {
    data: Arc<HostData>,
    on_hook: OnHookFn,
}

impl HostHooks for FfiHooks {
    fn on_hook(&self, request: HookRequest, reply: Reply) {
        let tool = request.tool_name.as_deref().map(to_cstring);
        let call = request.call_id.as_deref().map(to_cstring);
        let input = to_cstring(&request.input_json);
        let c_request = agentao_hook_request {
            struct_size: std::mem::size_of::<agentao_hook_request>() as u32,
            event: event_code(request.event),
            tool_name: tool.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            call_id: call.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            input_json: input.as_ptr(),
        };
        // No handle to be had: the reply drops unanswered, which the waiting side reads as a
        // failed hook.
        let Some(reply) = crate::ffi::reply::issue(agentao_reply {
            reply,
            _keep_alive: self.data.clone(),
        }) else {
            return;
        };
        // SAFETY: the host's callback with its own userdata; `c_request` and its strings live
        // for the call; the reply is the host's until it answers.
        in_callback(|| unsafe { (self.on_hook)(self.data.ptr(), &c_request, reply) });
    }
}

/// Sets the agent's host hooks (`hooks` is copied), or removes them when `hooks` is NULL (the
/// config's command hooks, if any, still run). Between turns: they apply from the next turn on.
///
/// Ownership: the library owns `hooks->userdata` from the call on; on failure `userdata_free`
/// has run before this returns. Previous hooks' `userdata_free` runs once no turn uses them and
/// every reply handed to them is answered.
///
/// Errors: `AGENTAO_STATUS_NULL_ARGUMENT` (NULL agent; NULL `on_hook`), `_INVALID_ARGUMENT` (a
/// `struct_size` that ends before `on_hook`), `_TURN_IN_PROGRESS`.
///
/// Threads: any thread; not inside a callback of this agent's running turn.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_hooks(
    agent: *mut agentao_agent,
    hooks: *const agentao_hooks,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from here: every failure below releases the userdata.
        let adopted = match adopt_opt(hooks)? {
            Some((data, v)) => {
                let Some(on_hook) = v.on_hook else {
                    return Err(Fail(
                        agentao_status::NullArgument,
                        "agentao_hooks.on_hook is NULL".into(),
                    ));
                };
                Some(Arc::new(FfiHooks {
                    data: Arc::new(data),
                    on_hook,
                }) as Arc<dyn HostHooks>)
            }
            None => None,
        };
        agent_ref(agent)?.set_host_hooks(adopted)?;
        Ok(())
    })
}

/// Answers `on_hook` with `output_json` (borrowed, copied): a JSON object in Claude Code's hook
/// output format, the one a command hook prints (`{"hookSpecificOutput": {"permissionDecision":
/// "deny", "permissionDecisionReason": "…"}}`, `{"decision": "block", "reason": "…"}`,
/// `{"hookSpecificOutput": {"additionalContext": "…"}}`, `{"continue": false, "stopReason":
/// "…"}`; docs/hooks.md). NULL or an empty string: no opinion. Consumes `reply`. An answer
/// after the turn was cancelled is ignored. Any thread.
///
/// Errors (the request is then failed, which at `PreToolUse` denies the call):
/// `AGENTAO_STATUS_INVALID_UTF8`, `_INVALID_ARGUMENT` (output that is not a JSON object of
/// that format, with the reason; a reply of another kind).
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_hook(
    reply: *mut agentao_reply,
    output_json: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let reply = take(reply)?;
        let checked = opt_str_arg(output_json, "output_json").and_then(|o| {
            let o = o.unwrap_or("");
            match parse_stdout(o) {
                Ok(_) if !o.trim().is_empty() && !o.trim_start().starts_with('{') => Err(Fail(
                    agentao_status::InvalidArgument,
                    "the hook output is not a JSON object".into(),
                )),
                Ok(_) => Ok(o),
                Err(e) => Err(Fail(
                    agentao_status::InvalidArgument,
                    format!("the hook output: {e}"),
                )),
            }
        });
        match checked {
            Ok(o) => deliver(reply, Answer::Hook(o.to_owned())),
            Err(f) => {
                let _ = reply.answer(Answer::Fail(format!("the answer was refused: {}", f.1)));
                Err(f)
            }
        }
    })
}
