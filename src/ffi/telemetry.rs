//! The host's trace context and the telemetry exporter's status (docs/observability.md).

use std::ffi::c_char;

use super::agent::{agentao_agent, json_getter, with_agent};
use super::{agentao_error, agentao_status, opt_str_arg};
use crate::agent::{Agent, AgentError};

/// Which trace parent a setter sets: the agent's or the next turn's.
type SetParent = fn(&Agent, Option<&str>, Option<&str>) -> Result<(), AgentError>;

/// The two setters' shared checks: the strings read (NULL is none), then `set`.
///
/// # Safety
/// As the setters: `agent` NULL or live; the strings NULL or NUL-terminated.
unsafe fn set_parent(
    agent: *mut agentao_agent,
    traceparent: *const c_char,
    tracestate: *const c_char,
    err_out: *mut *mut agentao_error,
    set: SetParent,
) -> agentao_status {
    with_agent(agent, err_out, |agent| {
        let tp = opt_str_arg(traceparent, "traceparent")?;
        let ts = opt_str_arg(tracestate, "tracestate")?;
        set(agent, tp, ts)?;
        Ok(())
    })
}

/// Makes every later turn of the agent a child of the host's span: `traceparent` is a W3C
/// `traceparent` header value (`00-<32 hex>-<16 hex>-<2 hex>`), `tracestate` (may be NULL)
/// its `tracestate`, passed on to the agent's spans. NULL `traceparent` clears it (each turn
/// then starts a trace of its own). Both borrowed; effective from the next turn. With no
/// exporter configured (docs/observability.md) the value is checked and otherwise unused.
///
/// Threads: any thread, also from a callback. Errors: NULL `agent` is
/// `AGENTAO_STATUS_NULL_ARGUMENT`; a malformed `traceparent` or `tracestate` (or a `tracestate`
/// without a `traceparent`) is `AGENTAO_STATUS_INVALID_ARGUMENT` with the reason, and changes
/// nothing; bad UTF-8 is `AGENTAO_STATUS_INVALID_UTF8`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_traceparent(
    agent: *mut agentao_agent,
    traceparent: *const c_char,
    tracestate: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    // SAFETY: the caller's pointers, as this function's contract states.
    unsafe {
        set_parent(
            agent,
            traceparent,
            tracestate,
            err_out,
            Agent::set_trace_parent,
        )
    }
}

/// As `agentao_agent_set_traceparent`, for the next turn only: the next turn's span is a
/// child of this one (it wins over the agent's), and later turns go back to the agent's.
/// NULL `traceparent` withdraws a value set for the next turn. Same threads and errors.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_turn_traceparent(
    agent: *mut agentao_agent,
    traceparent: *const c_char,
    tracestate: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    // SAFETY: the caller's pointers, as this function's contract states.
    unsafe {
        set_parent(
            agent,
            traceparent,
            tracestate,
            err_out,
            Agent::set_turn_trace_parent,
        )
    }
}

/// Writes the trace id (32 lowercase hex digits) of the turn that runs, else of the last
/// turn, to `*trace_id_out`; an empty string before the first turn or when no exporter is
/// configured. Release with `agentao_string_free`.
///
/// Threads: any thread; from inside a callback of a turn (`emit`, `confirm_tool`, a host
/// tool, …) it is that turn's trace. Errors: NULL `agent` or `trace_id_out` is
/// `AGENTAO_STATUS_NULL_ARGUMENT` (`*trace_id_out` is NULL then).
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_trace_id(
    agent: *const agentao_agent,
    trace_id_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    json_getter(agent, trace_id_out, "trace_id_out", err_out, |a| {
        a.trace_id().unwrap_or_default()
    })
}

/// Writes the telemetry exporter's status to `*json_out`: `{"enabled": bool,
/// "exported_spans", "dropped_spans", "failed_exports": counts since the exporter started,
/// "last_error": string|null}` (`enabled` false and zeros when no exporter is configured).
/// Agents with the same telemetry settings share one exporter, and so its counts. Release
/// with `agentao_string_free`. Threads: any. Errors: NULL `agent` or `json_out` is
/// `AGENTAO_STATUS_NULL_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_telemetry_status(
    agent: *const agentao_agent,
    json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    json_getter(agent, json_out, "json_out", err_out, |a| {
        let stats = a.telemetry_stats();
        let s = stats.clone().unwrap_or_default();
        serde_json::json!({
            "enabled": stats.is_some(),
            "exported_spans": s.exported_spans,
            "dropped_spans": s.dropped_spans,
            "failed_exports": s.failed_exports,
            "last_error": s.last_error,
        })
        .to_string()
    })
}
