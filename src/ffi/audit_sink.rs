//! The audit sink's C surface: host events of any number of agents into PostgreSQL's
//! `agent_audit` table, off the turn (`crate::audit`).

use std::ffi::c_char;
use std::time::Duration;

use super::agent::{agent_ref, agentao_agent};
use super::handle::BoxCastable;
use super::{
    agentao_error, agentao_status, guard, guard_required_out, out_arg, out_string, str_arg, Fail,
};
use crate::audit::{AuditSink, SinkState};

/// An audit sink: a bounded queue and the writer that drains it into the database.
pub struct agentao_audit_sink {
    sink: AuditSink,
}

impl BoxCastable for agentao_audit_sink {
    const NAME: &'static str = "sink";
}

/// How an audit sink's writer is doing.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum agentao_audit_state {
    /// The last write succeeded (or nothing was written yet).
    Healthy = 0,
    /// The last write failed (the database is away or slow): the batch is retried with
    /// backoff, new events queue, and what no longer fits is dropped and counted.
    Retrying = 1,
    /// The writer has ended.
    Closed = 2,
}

/// An audit sink's counters (`agentao_audit_sink_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct agentao_audit_status {
    /// Set by the caller to `sizeof(agentao_audit_status)`.
    pub struct_size: u32,
    pub state: agentao_audit_state,
    /// Events taken into the queue.
    pub accepted: u64,
    /// Events written to the table.
    pub written: u64,
    /// Events lost: the queue was full, or the database refused their batch as bad data.
    pub dropped: u64,
    /// Writes that failed and were retried.
    pub failed_writes: u64,
}

/// Opens an audit sink writing to the PostgreSQL database `url` (borrowed;
/// `postgres://user[:password]@host[:port]/database`), into the table `agent_audit`
/// (`tenant_id`, `session_id`, `ts`, `event_type`, `payload jsonb`; created if missing).
/// `capacity` bounds the queue (0: 4096 events). Connects on the first batch, so a database
/// that is down now is a `AGENTAO_AUDIT_STATE_RETRYING` later, not an error here. The writer
/// runs on the library's runtime. On success `*sink_out` owns the sink (release with
/// `agentao_audit_sink_free`). Errors: a malformed URL `_INVALID_ARGUMENT`; NULL arguments
/// `_NULL_ARGUMENT`. Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_audit_sink_open_postgres(
    url: *const c_char,
    capacity: u32,
    sink_out: *mut *mut agentao_audit_sink,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_required_out(sink_out, "sink_out", err_out, |out| {
        let url = str_arg(url, "url")?;
        #[cfg(feature = "postgres")]
        {
            let writer = crate::audit::postgres::PostgresAuditWriter::new(url)
                .map_err(|m| Fail(agentao_status::InvalidArgument, m))?;
            let rt =
                crate::agent::runtime().map_err(|e| Fail(super::status_of(&e), e.to_string()))?;
            let sink = AuditSink::start(writer, capacity as usize, rt.handle());
            out.write(|| agentao_audit_sink { sink }.into_raw());
            Ok(())
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = (url, capacity, out);
            Err(Fail(
                agentao_status::InvalidArgument,
                "built without the postgres feature: no PostgreSQL audit sink".into(),
            ))
        }
    })
}

/// Sends every host event of `agent` to `sink` (borrowed; the agent keeps its own reference,
/// so the sink may be freed before the agent) as the tenant `tenant_id` (borrowed, copied).
/// The observer only queues: a turn never waits for the database; a full queue drops the
/// event and counts it. Writes the registration id to `*id_out`; remove it with
/// `agentao_agent_remove_host_event_observer`. Errors: NULL arguments `_NULL_ARGUMENT`, bad
/// UTF-8 `_INVALID_UTF8`. Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_add_audit_sink(
    agent: *const agentao_agent,
    sink: *const agentao_audit_sink,
    tenant_id: *const c_char,
    id_out: *mut u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let agent = agent_ref(agent)?;
        let sink = agentao_audit_sink::try_ref(sink)?;
        let tenant = str_arg(tenant_id, "tenant_id")?;
        let id_out = out_arg(id_out, "id_out")?;
        *id_out = agent.host_events().add_observer(sink.sink.observer(tenant));
        Ok(())
    })
}

/// Writes the sink's counters to `*status` (the caller sets its `struct_size`; a smaller one
/// is `_INVALID_ARGUMENT`) and, when `last_error_out` is not NULL, the last write error to
/// `*last_error_out` (NULL when no write failed; release with `agentao_string_free`). Any
/// thread; never blocks.
#[no_mangle]
pub unsafe extern "C" fn agentao_audit_sink_status(
    sink: *const agentao_audit_sink,
    status: *mut agentao_audit_status,
    last_error_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    if !last_error_out.is_null() {
        *last_error_out = std::ptr::null_mut();
    }
    guard(err_out, || {
        let sink = agentao_audit_sink::try_ref(sink)?;
        let status = out_arg(status, "status")?;
        let size = std::mem::size_of::<agentao_audit_status>();
        if (status.struct_size as usize) < size {
            return Err(Fail(
                agentao_status::InvalidArgument,
                format!(
                    "agentao_audit_status.struct_size is {}; set it to sizeof(agentao_audit_status)",
                    status.struct_size
                ),
            ));
        }
        let s = sink.sink.status();
        *status = agentao_audit_status {
            struct_size: size as u32,
            state: match s.state {
                SinkState::Healthy => agentao_audit_state::Healthy,
                SinkState::Retrying => agentao_audit_state::Retrying,
                SinkState::Closed => agentao_audit_state::Closed,
            },
            accepted: s.accepted,
            written: s.written,
            dropped: s.dropped,
            failed_writes: s.failed_writes,
        };
        if let (Some(e), false) = (s.last_error, last_error_out.is_null()) {
            *last_error_out = out_string(&e);
        }
        Ok(())
    })
}

/// Blocks the calling thread until every event queued before the call is written (or dropped
/// as refused data), at most `timeout_ms`: `AGENTAO_STATUS_TIMEOUT` when the database did not
/// take them in time (they stay queued). A host calls it after a turn whose audit rows must
/// exist before it goes on, and before it exits. From a library callback or thread:
/// `_REENTRANT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_audit_sink_flush(
    sink: *const agentao_audit_sink,
    timeout_ms: u32,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let sink = agentao_audit_sink::try_ref(sink)?;
        if crate::agent::on_runtime_thread() {
            return Err(Fail(
                agentao_status::Reentrant,
                "agentao_audit_sink_flush blocks: not from a library thread".into(),
            ));
        }
        sink.sink
            .flush_blocking(Duration::from_millis(u64::from(timeout_ms)))
            .map_err(|_| {
                let s = sink.sink.status();
                Fail(
                    agentao_status::Timeout,
                    format!(
                        "the audit sink did not write its queue in {timeout_ms} ms ({} queued; last error: {})",
                        s.accepted.saturating_sub(s.written + s.dropped),
                        s.last_error.as_deref().unwrap_or("none")
                    ),
                )
            })
    })
}

/// Releases the host's handle. Agents the sink was added to keep sending to it; the writer
/// ends once they are gone and the queue is written. Events still queued when the process
/// exits are lost: flush first. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn agentao_audit_sink_free(sink: *mut agentao_audit_sink) {
    agentao_audit_sink::free_with(sink, |_| {});
}
