//! Host tools: the C descriptor, the call context a running call hands the host, and the
//! answers (`agentao_reply_tool_result` / `_error`).

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use crate::events::transport::{Answer, Reply};
use crate::ffi::agent::{agent_ref, agentao_agent, with_agent};
use crate::ffi::cancel::agentao_cancel_token;
use crate::ffi::host::{adopt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::reply::{agentao_reply, answer_text, deliver, take};
use crate::ffi::{
    agentao_error, agentao_status, guard, in_callback, opt_str_arg, str_arg, to_cstring, Fail,
    FfiResult,
};
use crate::tools::host::{
    HostCall, HostExecutor, HostTool, HostToolFlags, HostToolSpec, SpecError, HOST_FAILURE_TYPE,
};

/// One running call of a host tool, as its `execute` callback receives it. Owned by the
/// library: valid from the `execute` call until the host answers the call's reply (after that
/// it may be gone). Usable from any thread.
pub struct agentao_tool_call {
    call: Arc<HostCall>,
    call_id: CString,
    token: agentao_cancel_token,
}

/// A host tool's `execute`: run the call with `args_json` (a JSON object, borrowed for the
/// callback) and answer `reply` exactly once with `agentao_reply_tool_result`,
/// `agentao_reply_tool_error` or `agentao_reply_fail`, inside the callback or later from any
/// thread. `call` (call id, cancel token, output sink) is valid until the reply is answered.
///
/// Threads: runs on a library thread where blocking is fine. Calls of one tool in one batch
/// run one at a time unless the descriptor sets `reentrant`; calls of different read-only tools
/// in one batch may run at the same time.
pub(crate) type agentao_tool_execute_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        args_json: *const c_char,
        call: *const agentao_tool_call,
        reply: *mut agentao_reply,
    ),
>;

/// A host tool (spec §2.1), passed to `agentao_agent_add_tool`, which copies it. Every string
/// is borrowed for that call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_tool_desc {
    /// `sizeof(agentao_tool_desc)`: members may be appended in later versions.
    pub(crate) struct_size: u32,
    /// The name the model calls. Not empty, not starting with `mcp_`, not `plan_save` or
    /// `plan_finalize`.
    pub(crate) name: *const c_char,
    /// Sent to the model, and to `confirm_tool` as its `description`.
    pub(crate) description: *const c_char,
    /// The arguments' JSON Schema, sent verbatim as `function.parameters`: a JSON object
    /// (its `type`, when given, `"object"`). Its `required` list decides which `null`
    /// arguments are dropped.
    pub(crate) parameters_json: *const c_char,
    /// Admitted in read-only mode, and eligible for parallel batches.
    pub(crate) is_read_only: bool,
    /// When no rule decides the call, ask the host (`confirm_tool`) first.
    pub(crate) requires_confirmation: bool,
    /// Whether a sub-agent receives the tool too; otherwise its name is left out of every
    /// sub-agent's tool set (docs/subagents.md).
    pub(crate) copies_to_subagents: bool,
    /// Two calls of this tool in one parallel batch may run at the same time.
    pub(crate) reentrant: bool,
    /// Passed to `execute`; owned by the library once `agentao_agent_add_tool` succeeds.
    pub(crate) userdata: *mut c_void,
    /// Optional; called exactly once with `userdata`, on some thread, when the tool is gone:
    /// removed or replaced (and no turn uses it any more), or its agent freed, and every reply
    /// handed to `execute` answered; or before `agentao_agent_add_tool` returns when it fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// Required.
    pub(crate) execute: agentao_tool_execute_fn,
}

// `execute` is required too, checked with the tool's name in the message.
host_capability!(agentao_tool_desc, minimum: execute, required: []);

/// The host side of a tool: its userdata and callback.
struct FfiExecutor {
    data: Arc<HostData>,
    execute: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        *const agentao_tool_call,
        *mut agentao_reply,
    ),
}

/// What a reply handed to `execute` keeps alive until the host answers it.
struct CallKeepAlive {
    _data: Arc<HostData>,
    _call: Arc<agentao_tool_call>,
}

impl HostExecutor for FfiExecutor {
    fn start(&self, args_json: &str, call: Arc<HostCall>, reply: Reply) {
        let ctx = Arc::new(agentao_tool_call {
            call_id: to_cstring(&call.call_id),
            token: agentao_cancel_token {
                token: call.cancel.clone(),
            },
            call,
        });
        let args = to_cstring(args_json);
        let Some(reply) = crate::ffi::reply::issue(agentao_reply {
            reply,
            _keep_alive: Arc::new(CallKeepAlive {
                _data: self.data.clone(),
                _call: ctx.clone(),
            }),
        }) else {
            return;
        };
        // SAFETY: the host's callback with its own userdata; `args` lives for the call, `ctx`
        // as long as the reply (which holds it) is unanswered, and the reply is the host's.
        in_callback(|| unsafe {
            (self.execute)(self.data.ptr(), args.as_ptr(), Arc::as_ptr(&ctx), reply)
        });
    }
}

unsafe fn desc_str<'a>(p: *const c_char, member: &str) -> FfiResult<&'a str> {
    str_arg(p, &format!("desc->{member}"))
}

/// Takes a descriptor (see [`adopt`]) and validates it; every failure releases the userdata.
unsafe fn read_desc(desc: *const agentao_tool_desc) -> FfiResult<HostTool> {
    if desc.is_null() {
        return Err(Fail(agentao_status::NullArgument, "`desc` is NULL".into()));
    }
    let (data, d) = adopt(desc)?;
    let name = desc_str(d.name, "name")?;
    let Some(execute) = d.execute else {
        return Err(Fail(
            agentao_status::NullArgument,
            format!("host tool '{name}': `execute` is NULL"),
        ));
    };
    let description = desc_str(d.description, "description")?;
    let parameters = desc_str(d.parameters_json, "parameters_json")?;
    let flags = HostToolFlags {
        read_only: d.is_read_only,
        requires_confirmation: d.requires_confirmation,
        copies_to_subagents: d.copies_to_subagents,
        reentrant: d.reentrant,
    };
    let spec = HostToolSpec::parse(name, description, parameters, flags).map_err(|e| match e {
        SpecError::Json(m) => Fail(agentao_status::InvalidJson, m),
        SpecError::Invalid(m) => Fail(agentao_status::InvalidArgument, m),
    })?;
    let executor = FfiExecutor {
        data: Arc::new(data),
        execute,
    };
    Ok(HostTool::new(spec, Arc::new(executor)))
}

/// Registers a host tool on `agent` (spec §2.2): right after `agentao_agent_new`, or between
/// turns; the model is offered it from the next turn on. `desc` and its strings are borrowed
/// and copied. A name already in use (a built-in or another host tool) is refused unless
/// `replace` is true, in which case the tool replaces it.
///
/// Ownership: the library owns `desc->userdata` from the call on and releases it with
/// `desc->userdata_free`; on failure nothing is registered and `userdata_free` has run before
/// this returns (earlier versions left `userdata` with the host on failure; docs/c-api.md,
/// "Host capabilities").
///
/// Errors (the message names the tool): `AGENTAO_STATUS_NULL_ARGUMENT` (NULL agent, desc,
/// name, description, parameters or execute), `_INVALID_ARGUMENT` (a `struct_size` that ends
/// before `execute`; a larger one, from a newer header, is read up to this one's members; an
/// empty, `mcp_`-prefixed or reserved name,
/// a schema that is not a JSON object schema, a duplicate name without `replace`),
/// `_INVALID_JSON` (the schema does not parse), `_INVALID_UTF8`, `_TURN_IN_PROGRESS`.
///
/// Threads: any thread; not inside a callback of this agent's running turn (that turn is in
/// progress).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_add_tool(
    agent: *mut agentao_agent,
    desc: *const agentao_tool_desc,
    replace: bool,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from here, so a NULL agent releases the userdata too.
        let tool = read_desc(desc)?;
        agent_ref(agent)?.add_tool(Arc::new(tool), replace)?;
        Ok(())
    })
}

/// Removes the tool called `name` (borrowed) from `agent`, between turns; a built-in can be
/// removed too. `*removed_out` (may be NULL) is true when a tool was removed, false when there
/// was none by that name. A host tool's `userdata_free` runs once no turn uses it and every
/// reply handed to its `execute` is answered.
///
/// Errors: `AGENTAO_STATUS_NULL_ARGUMENT`, `_INVALID_UTF8`, `_INVALID_ARGUMENT` (a reserved
/// name), `_TURN_IN_PROGRESS`. Threads: as `agentao_agent_add_tool`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_remove_tool(
    agent: *mut agentao_agent,
    name: *const c_char,
    removed_out: *mut bool,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    if !removed_out.is_null() {
        *removed_out = false;
    }
    with_agent(agent, err_out, |agent| {
        let removed = agent.remove_tool(str_arg(name, "name")?)?;
        if !removed_out.is_null() {
            *removed_out = removed;
        }
        Ok(())
    })
}

/// The call's id (the model's `tool_call_id`), borrowed from `call`. NULL call: NULL.
#[no_mangle]
pub unsafe extern "C" fn agentao_tool_call_id(call: *const agentao_tool_call) -> *const c_char {
    if call.is_null() {
        return std::ptr::null();
    }
    (*call).call_id.as_ptr()
}

/// The turn's cancellation token, borrowed from `call`: never free it. Poll it with
/// `agentao_cancel_token_is_cancelled`; once it is cancelled the call is over (it reports
/// `Tool execution cancelled.`) and a later answer is ignored. NULL call: NULL.
#[no_mangle]
pub unsafe extern "C" fn agentao_tool_call_cancel_token(
    call: *const agentao_tool_call,
) -> *const agentao_cancel_token {
    if call.is_null() {
        return std::ptr::null();
    }
    &(*call).token
}

/// Streams `chunk` (borrowed, copied) as a `tool_output` event of this call, in order, before
/// the call's `tool_complete`: one event per call while the host keeps up. Under back-pressure
/// (more than 256 chunks of the call waiting for the host) later chunks are merged into the
/// last waiting one, and past 64 KiB waiting they are skipped and replaced in the stream by a
/// notice of how many bytes were not streamed. Any thread, until the reply is answered. Returns
/// `AGENTAO_STATUS_CLOSED` (the chunk is dropped) once the call has ended (answered or
/// cancelled); `_NULL_ARGUMENT`, `_INVALID_UTF8` for bad input.
#[no_mangle]
pub unsafe extern "C" fn agentao_tool_call_output(
    call: *const agentao_tool_call,
    chunk: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        if call.is_null() {
            return Err(Fail(agentao_status::NullArgument, "`call` is NULL".into()));
        }
        let chunk = str_arg(chunk, "chunk")?;
        if chunk.is_empty() || (*call).call.output(chunk) {
            return Ok(());
        }
        Err(Fail(
            agentao_status::Closed,
            "the call has ended; the chunk was dropped".into(),
        ))
    })
}

/// Answers a host tool's call with its result `text` (borrowed, copied): the model reads it
/// (after the usual post-processing) and the call completes `ok`. Consumes `reply`. Text that
/// is not UTF-8 fails the call (status `error`, error type `HostToolError`) and returns
/// `AGENTAO_STATUS_INVALID_UTF8`; a reply of another kind fails that request and returns
/// `_INVALID_ARGUMENT`. An answer after the turn was cancelled is ignored.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_tool_result(
    reply: *mut agentao_reply,
    text: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        answer_text(reply, text, Answer::ToolResult, |why| {
            format!("the tool's result: {why}")
        })
    })
}

/// Answers a host tool's call with a failure (spec §2.4): the model reads
/// `Error executing <name>: <message>`, the call completes with status `error`, and the host
/// event's `error_type` is `error_type` (NULL: `HostToolError`). Both strings are borrowed and
/// copied; `message` NULL means a generic text. Consumes `reply`. Invalid UTF-8 still fails
/// the call, and returns `AGENTAO_STATUS_INVALID_UTF8`; a reply of another kind fails that
/// request and returns `_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_reply_tool_error(
    reply: *mut agentao_reply,
    error_type: *const c_char,
    message: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let reply = take(reply)?;
        let parts = opt_str_arg(error_type, "error_type")
            .and_then(|t| Ok((t, opt_str_arg(message, "message")?)));
        match parts {
            Ok((t, m)) => deliver(
                reply,
                Answer::ToolError {
                    error_type: t.unwrap_or(HOST_FAILURE_TYPE).to_owned(),
                    message: m.unwrap_or("the host tool failed").to_owned(),
                },
            ),
            Err(f) => {
                let _ = reply.answer(Answer::Fail(f.1.clone()));
                Err(f)
            }
        }
    })
}
