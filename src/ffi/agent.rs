//! The agent handle and its entry points.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use super::boundary::Out;
use super::cancel::agentao_cancel_token;
use super::handle::BoxCastable;
use super::host_data::HostData;
use super::transport::{agentao_transport, FfiTransport};
use super::{
    agentao_error, agentao_status, guard, guard_out, guard_required_out, in_callback, opt_str_arg,
    out_string, required, status_of, str_arg, to_cstring, Fail, FfiResult,
};
use crate::agent::{Agent, Completion, TurnOptions, TurnResult};
use crate::events::JsonText;
use crate::permissions::{Mode, PermissionEngine};
use crate::turn::{DeltaSink, TurnOutcome, TurnStatus};

/// An agent: one session with its history, tools, permissions and transport. Thread-safe.
pub struct agentao_agent {
    pub(crate) agent: Agent,
    /// The session id as `agentao_agent_session_id` lends it.
    session_id: CString,
}

/// Completion of an asynchronous turn: called exactly once per accepted call, on a library
/// thread. `status` is `AGENTAO_STATUS_OK` for a turn that ended `ok`, `_CANCELLED` for a
/// cancelled one, and the failure's status otherwise. `outcome_json` (the TurnOutcome, see
/// `docs/c-api.md`) and `err` (NULL on OK) are borrowed for the call; `outcome_json` is NULL
/// only when the turn could not produce one (a contained panic).
pub(crate) type agentao_done_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        status: agentao_status,
        outcome_json: *const c_char,
        err: *const agentao_error,
    ),
>;

/// A text delta of a streaming turn: `{"type":"text_delta","text":"..."}`, borrowed for the
/// call, on a library thread, in order. Deltas are for display; the outcome is the result.
pub(crate) type agentao_delta_fn =
    Option<unsafe extern "C" fn(userdata: *mut c_void, delta_json: *const c_char)>;

/// A host-event observer: the event's JSON (v3 wire form), borrowed for the call.
pub(crate) type agentao_event_fn =
    Option<unsafe extern "C" fn(userdata: *mut c_void, event_json: *const c_char)>;

impl agentao_agent {
    pub(crate) fn from_agent(agent: Agent) -> Self {
        let session_id = to_cstring(agent.session_id());
        agentao_agent { agent, session_id }
    }
}

pub(crate) unsafe fn agent_ref<'a>(a: *const agentao_agent) -> FfiResult<&'a Agent> {
    Ok(&agentao_agent::try_ref(a)?.agent)
}

/// The shape of an agent entry point with a status: the panic boundary, then the agent
/// borrowed (a NULL agent is `NULL_ARGUMENT` before any other argument is looked at).
pub(crate) unsafe fn with_agent(
    agent: *const agentao_agent,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&Agent) -> FfiResult<()>,
) -> agentao_status {
    guard(err_out, || body(agent_ref(agent)?))
}

/// The shape of an agent entry point with one required `*_out`: `*out` NULLed and checked
/// first (see [`guard_required_out`]), then the agent borrowed.
pub(crate) unsafe fn with_agent_out<T>(
    agent: *const agentao_agent,
    out: *mut *mut T,
    out_name: &str,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&Agent, &Out<T>) -> FfiResult<()>,
) -> agentao_status {
    guard_required_out(out, out_name, err_out, |out| body(agent_ref(agent)?, out))
}

/// [`with_agent_out`] for the exports that open a handle on the agent (a stream): the body's
/// value becomes `*out`.
pub(crate) unsafe fn open_on_agent<T: BoxCastable>(
    agent: *const agentao_agent,
    out: *mut *mut T,
    out_name: &str,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&Agent) -> FfiResult<T>,
) -> agentao_status {
    with_agent_out(agent, out, out_name, err_out, |agent, out| {
        let handle = body(agent)?;
        out.write(|| handle.into_raw());
        Ok(())
    })
}

/// [`with_agent_out`] for the queries that look at the agent before their `*out`: a NULL agent
/// is reported even when `*out` is NULL too.
pub(crate) unsafe fn with_agent_then_out<T>(
    agent: *const agentao_agent,
    out: *mut *mut T,
    out_name: &str,
    err_out: *mut *mut agentao_error,
    body: impl FnOnce(&Agent, &Out<T>) -> FfiResult<()>,
) -> agentao_status {
    guard_out(out, err_out, |out| {
        let agent = agent_ref(agent)?;
        out.require(&format!("`{out_name}` is NULL"))?;
        body(agent, out)
    })
}

/// A finished turn as the entry points that hand out its result report it: the outcome of a
/// turn that ended `ok`, otherwise its status and message.
pub(crate) fn turn_ended_ok(result: &TurnResult) -> Result<TurnOutcome, Fail> {
    match turn_status(result) {
        (agentao_status::Ok, _, Some(o)) => Ok(o),
        (s, msg, _) => Err(Fail(s, msg.unwrap_or_default())),
    }
}

/// A change to the agent's permission engine: a refused change (`Err` text) is
/// `INVALID_ARGUMENT`, no engine `NO_ENGINE`.
fn change_engine(
    agent: &Agent,
    f: impl FnOnce(&mut PermissionEngine) -> Result<(), String>,
) -> FfiResult<()> {
    agent
        .with_engine(f)?
        .map_err(|m| Fail(agentao_status::InvalidArgument, m))
}

pub(crate) unsafe fn turn_options(
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
) -> TurnOptions {
    TurnOptions {
        max_iterations: u32::try_from(max_iterations).ok(),
        cancel: cancel.as_ref().map(|c| c.token.clone()),
        images: Vec::new(),
    }
}

/// The status a finished turn reports, and its error message.
pub(crate) fn turn_status(
    result: &TurnResult,
) -> (agentao_status, Option<String>, Option<TurnOutcome>) {
    match result {
        Ok(o) if o.status == TurnStatus::Cancelled => (
            agentao_status::Cancelled,
            Some(format!(
                "the turn was cancelled: {}",
                o.error.as_deref().unwrap_or("cancelled")
            )),
            Some(o.clone()),
        ),
        Ok(o) => (agentao_status::Ok, None, Some(o.clone())),
        Err((e, o)) => (status_of(e), Some(e.to_string()), o.clone()),
    }
}

/// Creates an agent from a config JSON document (borrowed; see `docs/config.md`) and a
/// transport vtable (borrowed and copied; NULL means the built-in null transport).
///
/// On success `*agent_out` owns a new agent; release it with `agentao_agent_free`. On failure
/// `*agent_out` is NULL, the status says why (`AGENTAO_STATUS_INVALID_CONFIG` with a message
/// naming the field, `_INVALID_JSON`, `_INVALID_UTF8`, `_NULL_ARGUMENT`, `_INVALID_ARGUMENT`
/// for a bad `struct_size`), and the transport's `userdata_free` has already been called.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_new(
    config_json: *const c_char,
    transport: *const agentao_transport,
    agent_out: *mut *mut agentao_agent,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_out(agent_out, err_out, |agent_out| {
        let transport = FfiTransport::adopt_arg(transport)?;
        agent_out.require("`agent_out` is NULL")?;
        let json = str_arg(config_json, "config_json")?;
        let agent = Agent::new(json, transport)?;
        agent_out.write(|| agentao_agent::from_agent(agent).into_raw());
        Ok(())
    })
}

/// Releases the agent handle. A turn still running is cancelled (reason `"session-closed"`)
/// without waiting: its completion still fires (with `AGENTAO_STATUS_CANCELLED`), and the
/// transport's `userdata_free` runs once that turn and every pending request are gone. Streams
/// opened on the agent stay valid until freed; a host-event stream then gives the events it
/// holds and `AGENTAO_STATUS_CLOSED`. NULL is a no-op.
/// Background sub-agents are cancelled too, and this call blocks up to 5 seconds for them to
/// settle; one still running then is stopped at its next await point.
/// Then the processes that `run_shell_command` started in the background (`is_background`)
/// for this agent or any of its sub-agents are ended: each one's whole process group is killed
/// (`SIGKILL`), and one a still-finishing turn starts later is killed as it starts. Not
/// ended: a process that left its group (`setsid`), members of a group whose leader had
/// already exited, and what a host shell executor started (the host's to end).
/// With a telemetry exporter, when this was the last agent using it (no other agent with the
/// same telemetry settings, no turn of this one still finishing), the call then blocks until
/// the spans not yet sent are posted, at most the exporter's `timeout_ms` (10 s by default):
/// a host that exits right after it loses none. Others still using the exporter: no wait.
/// Allowed inside a callback of the agent's own turn (that turn then ends cancelled; the
/// background agents are then stopped, and the spans left to the exporter, without the wait).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_free(agent: *mut agentao_agent) {
    let mut closing = None;
    agentao_agent::free_with(agent, |a| {
        a.agent.cancel_active("session-closed");
        a.agent.close_background();
        a.agent.end_processes();
        closing = a.agent.telemetry_closing();
    });
    // After the drop: the agent's tracer gave up its open spans and its hold on the queue.
    if let Some(closing) = closing {
        super::guard_or((), || closing.wait_if_last(!super::reentrant()));
    }
}

/// The agent's session id (UUID), borrowed: valid until `agentao_agent_free`. NULL agent: NULL.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_session_id(agent: *const agentao_agent) -> *const c_char {
    agentao_agent::with_ref_or(agent, std::ptr::null(), |a| a.session_id.as_ptr())
}

/// Runs one turn and blocks until it ends. `message` is borrowed; `max_iterations < 0` uses the
/// config's value; `cancel` (may be NULL) is linked one way to the turn.
///
/// On `AGENTAO_STATUS_OK` `*text_out` receives the answer (release with
/// `agentao_string_free`). A cancelled turn returns `_CANCELLED`, a host failure `_HOST_ERROR`,
/// a reply past its timeout `_TIMEOUT`; `*text_out` is then NULL and the full TurnOutcome is
/// readable with `agentao_agent_last_turn`. Another turn running: `_TURN_IN_PROGRESS`. Called
/// from inside a library callback or thread: `_REENTRANT` (never a deadlock).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_chat(
    agent: *mut agentao_agent,
    message: *const c_char,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    text_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    // The same turn with no images: one body for both entry points.
    super::images::agentao_agent_chat_images(
        agent,
        message,
        std::ptr::null(),
        0,
        max_iterations,
        cancel,
        text_out,
        err_out,
    )
}

/// Starts one turn and returns at once; `on_done(userdata, ...)` fires exactly once when it
/// ends (see `agentao_done_fn`), on a library thread. Arguments as `agentao_agent_chat`.
/// If the call itself fails (e.g. `_TURN_IN_PROGRESS`), `on_done` is not called.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_run(
    agent: *mut agentao_agent,
    message: *const c_char,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    on_done: agentao_done_fn,
    userdata: *mut c_void,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        start(
            agent,
            message,
            max_iterations,
            cancel,
            None,
            on_done,
            userdata,
            Vec::new(),
            Completion::Host,
        )
    })
}

/// Like `agentao_agent_run`, and each text delta also goes to `on_delta(userdata, json)`,
/// in order, before `on_done`. Works with any transport: the library delivers the deltas
/// itself, so a transport needs no `subscribe` slot (earlier versions refused a transport
/// without one with `AGENTAO_STATUS_NO_SUBSCRIBE`; that status no longer occurs here).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_stream(
    agent: *mut agentao_agent,
    message: *const c_char,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    on_delta: agentao_delta_fn,
    on_done: agentao_done_fn,
    userdata: *mut c_void,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let on_delta = required(on_delta, "on_delta")?;
        start(
            agent,
            message,
            max_iterations,
            cancel,
            Some(on_delta),
            on_done,
            userdata,
            Vec::new(),
            Completion::Host,
        )
    })
}

/// The body of `agentao_agent_run` and `agentao_agent_stream` (and their `_images` and
/// `_handoff` forms): `completion` says where `on_done` runs.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn start(
    agent: *mut agentao_agent,
    message: *const c_char,
    max_iterations: i32,
    cancel: *const agentao_cancel_token,
    on_delta: agentao_delta_fn,
    on_done: agentao_done_fn,
    userdata: *mut c_void,
    images: Vec<crate::llm::image::ImageInput>,
    completion: Completion,
) -> FfiResult<()> {
    let agent = agent_ref(agent)?;
    let message = str_arg(message, "message")?.to_owned();
    let done = HostData::borrowed(userdata).with(required(on_done, "on_done")?);
    let deltas = match on_delta {
        None => DeltaSink::None,
        Some(f) => {
            let host = HostData::borrowed(userdata).with(f);
            DeltaSink::Callback(Arc::new(move |json: JsonText<'_>| {
                host.call_json_text(json)
            }))
        }
    };
    agent.spawn_turn(
        message,
        TurnOptions {
            images,
            ..turn_options(max_iterations, cancel)
        },
        deltas,
        completion,
        move |result| {
            let done = done;
            let (status, msg, outcome) = turn_status(&result);
            let json = outcome.map(|o| to_cstring(&o.to_json()));
            let err = msg.map(|m| agentao_error::new(status, &m));
            let json_ptr = json.as_ref().map_or(std::ptr::null(), |j| j.as_ptr());
            let err_ptr = err
                .as_ref()
                .map_or(std::ptr::null(), |e| e as *const agentao_error);
            let f = *done.callbacks();
            // SAFETY: host callback; both pointers live until it returns.
            in_callback(|| unsafe { f(done.ptr(), status, json_ptr, err_ptr) });
        },
    )?;
    Ok(())
}

/// Writes the last turn's TurnOutcome JSON to `*outcome_json_out` (`"null"` before the first
/// turn); release it with `agentao_string_free`. The last turn may be another caller's.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_last_turn(
    agent: *const agentao_agent,
    outcome_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    json_getter(agent, outcome_json_out, "outcome_json_out", err_out, |a| {
        a.last_turn()
            .map_or_else(|| "null".to_owned(), |o| o.to_json())
    })
}

/// Writes the conversation history (a JSON array of chat messages) to `*history_json_out`;
/// release it with `agentao_string_free`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_history(
    agent: *const agentao_agent,
    history_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    json_getter(
        agent,
        history_json_out,
        "history_json_out",
        err_out,
        Agent::history_json,
    )
}

/// Replaces the history with `history_json` (borrowed): a JSON array of message objects with
/// `role` system / user / assistant / tool. Between turns only (`_TURN_IN_PROGRESS`).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_history(
    agent: *mut agentao_agent,
    history_json: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent(agent, err_out, |agent| {
        let json = str_arg(history_json, "history_json")?;
        agent.set_history_json(json)?;
        Ok(())
    })
}

/// Writes the permission snapshot `{"mode", "rules", "loaded_sources"}` to `*json_out`
/// (`default:no-engine` when no engine is configured); release with `agentao_string_free`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_active_permissions(
    agent: *const agentao_agent,
    json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    json_getter(agent, json_out, "json_out", err_out, |a| {
        serde_json::to_string(&a.active_permissions()).unwrap_or_default()
    })
}

/// Switches the permission mode (`"read-only"`, `"workspace-write"`, `"full-access"`,
/// `"plan"`), effective for the next decision; writes the previous mode to `*previous_out`
/// (may be NULL; release with `agentao_string_free`). Emits `readonly_mode_changed` and
/// `permission_mode_changed` through the transport. No engine: `AGENTAO_STATUS_NO_ENGINE`.
/// Binds the sub-agents too: a running child, foreground or background, is held to the new
/// mode from its next call (children decide against the agent's engine, never a copy).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_permission_mode(
    agent: *mut agentao_agent,
    mode: *const c_char,
    previous_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_out(previous_out, err_out, |previous_out| {
        let agent = agent_ref(agent)?;
        let mode_str = str_arg(mode, "mode")?;
        let mode = Mode::parse(mode_str).ok_or_else(|| {
            Fail(
                agentao_status::InvalidArgument,
                format!("unknown permission mode '{mode_str}'"),
            )
        })?;
        let previous = agent.set_permission_mode(mode)?;
        previous_out.write(|| out_string(previous.as_str()));
        Ok(())
    })
}

/// Adds a host-event observer: `observer(userdata, event_json)` runs inline for every host
/// event of this agent, in order, never concurrently with another observer call of the same
/// agent, on a library thread. Writes the registration id to `*id_out`.
///
/// Ownership: the library owns `userdata` from the call on: `userdata_free` (may be NULL) runs
/// exactly once, when the observer is removed or the agent is gone, or before this returns
/// when it fails (NULL `agent`, `observer` or `id_out`: `AGENTAO_STATUS_NULL_ARGUMENT`; nothing
/// is registered). Earlier versions left `userdata` with the host on failure (docs/c-api.md,
/// "Host capabilities").
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_add_host_event_observer(
    agent: *mut agentao_agent,
    observer: agentao_event_fn,
    userdata: *mut c_void,
    userdata_free: Option<unsafe extern "C" fn(*mut c_void)>,
    id_out: *mut u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        super::host::observer::add(agent, observer, userdata, userdata_free, id_out)
    })
}

/// Removes an observer; true when it was registered. Idempotent.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_remove_host_event_observer(
    agent: *mut agentao_agent,
    id: u64,
) -> bool {
    agentao_agent::with_ref_or(agent, false, |a| a.agent.host_events().remove_observer(id))
}

/// The shape of the JSON getters: one required string output.
pub(crate) unsafe fn json_getter(
    agent: *const agentao_agent,
    out: *mut *mut c_char,
    out_name: &str,
    err_out: *mut *mut agentao_error,
    f: impl FnOnce(&Agent) -> String,
) -> agentao_status {
    with_agent_out(agent, out, out_name, err_out, |agent, out| {
        out.write(|| out_string(&f(agent)));
        Ok(())
    })
}

fn parse_json_arg(text: &str, name: &str) -> FfiResult<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| Fail(agentao_status::InvalidJson, format!("`{name}`: {e}")))
}

/// Injects permission rules (`rules_json`: a JSON list in the permissions.json rule format,
/// borrowed) labelled `injected:<source_name>`, evaluated with the user rules. All or nothing:
/// an invalid rule is `AGENTAO_STATUS_INVALID_ARGUMENT` naming it, and nothing is added. Takes
/// effect from the next decision, the running sub-agents' included. No engine:
/// `AGENTAO_STATUS_NO_ENGINE`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_add_permission_rules(
    agent: *mut agentao_agent,
    rules_json: *const c_char,
    source_name: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent(agent, err_out, |agent| {
        let rules = parse_json_arg(str_arg(rules_json, "rules_json")?, "rules_json")?;
        let source = str_arg(source_name, "source_name")?;
        change_engine(agent, |e| e.add_rules(&rules, source))
    })
}

/// Run-scope rules (`allow_json`, `deny_json`: JSON lists or `null`, borrowed): deny rules are
/// checked right after the hardline floor, before any mode preset; allow rules join the user
/// rules. Recorded as the source `injected:<source_name>` (NULL: `run-spec`). Binds the
/// running sub-agents from their next call. Errors as `agentao_agent_add_permission_rules`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_add_run_rules(
    agent: *mut agentao_agent,
    allow_json: *const c_char,
    deny_json: *const c_char,
    source_name: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent(agent, err_out, |agent| {
        let list = |p: *const c_char, name: &str| -> FfiResult<serde_json::Value> {
            match opt_str_arg(p, name)? {
                Some(t) => parse_json_arg(t, name),
                None => Ok(serde_json::Value::Null),
            }
        };
        let (allow, deny) = (
            list(allow_json, "allow_json")?,
            list(deny_json, "deny_json")?,
        );
        let source = opt_str_arg(source_name, "source_name")?.unwrap_or("run-spec");
        change_engine(agent, |e| e.add_run_rules(&allow, &deny, source))
    })
}

/// Adds a source label (hosts use `injected:<name>`) to the permission snapshot's
/// `loaded_sources`; it adds no rule. An empty or duplicate label is ignored. The running
/// sub-agents' next decisions report it too.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_add_permission_source(
    agent: *mut agentao_agent,
    label: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    with_agent(agent, err_out, |agent| {
        let label = str_arg(label, "label")?;
        change_engine(agent, |e| {
            e.add_loaded_source(label);
            Ok(())
        })
    })
}

/// Writes the session's provider-reported token totals to `*usage_json_out`:
/// `{"prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_creation_tokens",
/// "reasoning_tokens", "cost_usd"}` (failed attempts that reported usage included; sub-agents'
/// rolled up). `cost_usd` is the cost by the config's `llm.prices` table, `null` when it
/// prices none of the models used. Release with `agentao_string_free`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_usage(
    agent: *const agentao_agent,
    usage_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    json_getter(agent, usage_json_out, "usage_json_out", err_out, |a| {
        let u = a.usage();
        serde_json::json!({
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_creation_tokens": u.cache_creation_tokens,
            "reasoning_tokens": u.reasoning_tokens,
            "cost_usd": a.cost_usd(),
        })
        .to_string()
    })
}
