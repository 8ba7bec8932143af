//! Durable sessions at the C boundary: a session document out of an agent and an agent out of
//! one (resume, fork), how the last commit went, and a store handle for hosts that manage
//! sessions themselves (load, list, delete).

use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::agent::{agentao_agent, with_agent};
use super::handle::BoxCastable;
use super::transport::{agentao_transport, FfiTransport};
use super::{
    agentao_error, agentao_status, guard, guard_out, guard_required_out, opt_str_arg, out_arg,
    out_string, str_arg, Fail, FfiResult,
};
use crate::agent::session_document::fork_document;
use crate::agent::{block_on_store, Agent, AgentError, CommitStatus};
use crate::session_store::{ListQuery, SessionStore};

/// How long one operation on a store handle may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// A session store: where session documents are committed, loaded, listed and deleted. From
/// `agentao_session_store_open` or `agentao_session_store_from_host`; release it with
/// `agentao_session_store_free`. Thread-safe; agents given it keep their own reference.
pub struct agentao_session_store {
    pub(crate) store: Arc<dyn SessionStore>,
}

impl BoxCastable for agentao_session_store {
    const NAME: &'static str = "store";
}

/// How the last commit of a session went.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum agentao_commit_status {
    /// No commit yet, or the agent has no store.
    None = 0,
    Committed = 1,
    /// Another agent committed the version this one continued; nothing was written. The
    /// in-memory session goes on; every later commit conflicts too until the host resumes the
    /// stored session (or deletes it).
    Conflict = 2,
    /// The store did not answer in time; whether the commit landed is unknown until a load.
    Timeout = 3,
    /// The store failed (unreachable, read-only, gone); the next turn's commit tries again.
    Unavailable = 4,
    /// The store holds something unreadable where the session should be.
    Corrupt = 5,
    /// The store refused the commit as malformed.
    Invalid = 6,
}

/// The last commit of a session, as `agentao_agent_last_commit` writes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct agentao_commit_report {
    /// Set by the caller to `sizeof(agentao_commit_report)`.
    pub struct_size: u32,
    pub status: agentao_commit_status,
    /// The version the store holds from this agent (committed), or the one the failed commit
    /// continued; 0 before the first commit.
    pub version: u64,
    /// On `AGENTAO_COMMIT_STATUS_CONFLICT`, the version the store holds; otherwise 0.
    pub stored_version: u64,
}

/// Writes the agent's session as a session document (JSON, `docs/sessions.md`) to
/// `*document_json_out`; release it with `agentao_string_free`. During a turn it holds the
/// session as of the last finished turn. Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_export_session(
    agent: *const agentao_agent,
    document_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    super::agent::with_agent_out(
        agent,
        document_json_out,
        "document_json_out",
        err_out,
        |a, out| {
            out.write(|| out_string(&a.export_session()));
            Ok(())
        },
    )
}

/// Creates an agent, as `agentao_agent_new`, that continues a session: `document_json` (a
/// session document, borrowed; NULL: the one `store` or the config's `session.store` holds
/// under `session.id`, if any), committing after every turn to `store` (borrowed; the agent
/// keeps its own reference; NULL: the config's `session.store`, or none).
///
/// On success `*agent_out` owns a new agent (release with `agentao_agent_free`). Errors: a
/// document that is not JSON, truncated, not a session or of a `format_version` this library
/// does not read is `AGENTAO_STATUS_CORRUPT_SESSION` naming the reason; a document with
/// permission state under a config without `permissions` `_INVALID_CONFIG`; a store that
/// fails `_STORE_UNAVAILABLE` or `_TIMEOUT`; the other errors of `agentao_agent_new`. The
/// transport's `userdata_free` has run on failure. Blocks while the store loads: from a
/// library callback or thread it is `_REENTRANT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_open_session(
    config_json: *const c_char,
    document_json: *const c_char,
    store: *const agentao_session_store,
    transport: *const agentao_transport,
    agent_out: *mut *mut agentao_agent,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_out(agent_out, err_out, |agent_out| {
        let transport = FfiTransport::adopt_arg(transport)?;
        agent_out.require("`agent_out` is NULL")?;
        let config = str_arg(config_json, "config_json")?;
        let document = opt_str_arg(document_json, "document_json")?;
        let store = store.as_ref().map(|s| s.store.clone());
        let agent = Agent::open_session(config, transport, document, store)?;
        agent_out.write(|| agentao_agent::from_agent(agent).into_raw());
        Ok(())
    })
}

/// Writes to `*document_json_out` a copy of the session document `document_json` (borrowed)
/// as a new session: `new_session_id` (borrowed; NULL: a fresh UUID), its lineage naming the
/// session it came from (`{"origin": "fork", "parent_session_id": …}`). Resume it with
/// `agentao_agent_open_session`. Release the string with `agentao_string_free`. A document
/// that cannot be read is `AGENTAO_STATUS_CORRUPT_SESSION`. Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_fork(
    document_json: *const c_char,
    new_session_id: *const c_char,
    document_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_required_out(document_json_out, "document_json_out", err_out, |out| {
        let document = str_arg(document_json, "document_json")?;
        let id = opt_str_arg(new_session_id, "new_session_id")?;
        let forked = fork_document(document, id).map_err(AgentError::Document)?;
        out.write(|| out_string(&forked));
        Ok(())
    })
}

/// Writes how the agent's last commit went to `*report` (the caller sets its `struct_size`)
/// and, when `message_out` is not NULL, the failure's message to `*message_out` (NULL when it
/// committed or nothing was committed; release with `agentao_string_free`). A commit runs at
/// the end of every turn, before the turn's result is handed out, so after a turn's
/// completion this is that turn's commit. Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_last_commit(
    agent: *const agentao_agent,
    report: *mut agentao_commit_report,
    message_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    if !message_out.is_null() {
        *message_out = std::ptr::null_mut();
    }
    with_agent(agent, err_out, |a| {
        let report = out_arg(report, "report")?;
        if (report.struct_size as usize) < std::mem::size_of::<agentao_commit_report>() {
            return Err(Fail(
                agentao_status::InvalidArgument,
                format!(
                    "agentao_commit_report.struct_size is {}; set it to sizeof(agentao_commit_report)",
                    report.struct_size
                ),
            ));
        }
        let last = a.last_commit();
        *report = agentao_commit_report {
            struct_size: std::mem::size_of::<agentao_commit_report>() as u32,
            status: last
                .as_ref()
                .map_or(agentao_commit_status::None, |c| match c.status {
                    CommitStatus::Committed => agentao_commit_status::Committed,
                    CommitStatus::Conflict => agentao_commit_status::Conflict,
                    CommitStatus::Timeout => agentao_commit_status::Timeout,
                    CommitStatus::Unavailable => agentao_commit_status::Unavailable,
                    CommitStatus::Corrupt => agentao_commit_status::Corrupt,
                    CommitStatus::Invalid => agentao_commit_status::Invalid,
                }),
            version: last
                .as_ref()
                .map_or_else(|| a.store_version().unwrap_or(0), |c| c.version),
            stored_version: last.as_ref().and_then(|c| c.stored_version).unwrap_or(0),
        };
        if let Some(c) = last.filter(|c| !c.message.is_empty()) {
            if !message_out.is_null() {
                *message_out = out_string(&c.message);
            }
        }
        Ok(())
    })
}

/// Opens the session store `url` names (borrowed): `sqlite:PATH`, `memory:NAME`,
/// `postgres://…` (the `postgres` build feature). The same URL opened twice while the first
/// handle (or an agent using it) lives is the same store. On success `*store_out` owns a
/// handle (release with `agentao_session_store_free`). Errors: an unknown scheme or a build
/// without its store `_INVALID_ARGUMENT`; a file that is not a database
/// `_CORRUPT_SESSION`; a store that cannot be opened `_STORE_UNAVAILABLE`.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_store_open(
    url: *const c_char,
    store_out: *mut *mut agentao_session_store,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_required_out(store_out, "store_out", err_out, |out| {
        let url = str_arg(url, "url")?;
        let store = crate::session_store::open(url).map_err(AgentError::Store)?;
        out.write(|| agentao_session_store { store }.into_raw());
        Ok(())
    })
}

/// Releases a store handle. Agents that commit to it keep it open. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_store_free(store: *mut agentao_session_store) {
    agentao_session_store::free_with(store, |_| {});
}

unsafe fn store_ref<'a>(store: *const agentao_session_store) -> FfiResult<&'a dyn SessionStore> {
    Ok(&*agentao_session_store::try_ref(store)?.store)
}

/// Loads the newest version of `session_id` (borrowed): `*document_json_out` receives its
/// session document (release with `agentao_string_free`) and `*version_out` its version; a
/// session the store does not hold is `AGENTAO_STATUS_OK` with NULL and 0. Blocks (at most
/// 30 s, then `_TIMEOUT`); from a library callback or thread `_REENTRANT`. A row that cannot
/// be read is `_CORRUPT_SESSION`; a failing store `_STORE_UNAVAILABLE`.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_store_load(
    store: *const agentao_session_store,
    session_id: *const c_char,
    document_json_out: *mut *mut c_char,
    version_out: *mut u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    if !version_out.is_null() {
        *version_out = 0;
    }
    guard_required_out(document_json_out, "document_json_out", err_out, |out| {
        let store = store_ref(store)?;
        let version_out = out_arg(version_out, "version_out")?;
        let id = str_arg(session_id, "session_id")?;
        if let Some(s) = block_on_store(STORE_TIMEOUT, "load", store.load(id))? {
            *version_out = s.version;
            out.write(|| out_string(&s.document));
        }
        Ok(())
    })
}

/// Lists sessions, newest first. `query_json` (borrowed; NULL: everything) is
/// `{"tenant"?: str, "owner"?: str, "limit"?: int (default 50, at most 1000), "cursor"?: str}`;
/// `*page_json_out` receives `{"sessions": [{"session_id", "tenant", "owner", "version",
/// "updated_at_ms"}], "next_cursor": str|null}` (release with `agentao_string_free`); pass
/// `next_cursor` back for the next page. Blocks as `agentao_session_store_load`. A query that
/// is not JSON is `_INVALID_JSON`; a bad field or cursor `_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_store_list(
    store: *const agentao_session_store,
    query_json: *const c_char,
    page_json_out: *mut *mut c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard_required_out(page_json_out, "page_json_out", err_out, |out| {
        let store = store_ref(store)?;
        let query = match opt_str_arg(query_json, "query_json")? {
            Some(text) => list_query(text)?,
            None => ListQuery::default(),
        };
        let page = block_on_store(STORE_TIMEOUT, "list", store.list(&query))?;
        let sessions: Vec<Value> = page
            .sessions
            .iter()
            .map(|s| {
                json!({"session_id": s.session_id, "tenant": s.tenant, "owner": s.owner,
                       "version": s.version, "updated_at_ms": s.updated_at_ms})
            })
            .collect();
        let page = json!({"sessions": sessions, "next_cursor": page.next_cursor});
        out.write(|| out_string(&page.to_string()));
        Ok(())
    })
}

fn list_query(text: &str) -> FfiResult<ListQuery> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Raw {
        tenant: Option<String>,
        owner: Option<String>,
        limit: Option<u32>,
        cursor: Option<String>,
    }
    let v: Value = serde_json::from_str(text)
        .map_err(|e| Fail(agentao_status::InvalidJson, format!("`query_json`: {e}")))?;
    let raw: Raw = serde_json::from_value(v).map_err(|e| {
        Fail(
            agentao_status::InvalidArgument,
            format!("`query_json`: {e}"),
        )
    })?;
    Ok(ListQuery {
        tenant: raw.tenant,
        owner: raw.owner,
        limit: raw.limit.unwrap_or(0),
        cursor: raw.cursor,
    })
}

/// Deletes every version of `session_id` (borrowed); `*deleted_out` says whether there was
/// one. An agent still running that session commits it again from version 1 only if it never
/// committed (otherwise its commits conflict). Blocks as `agentao_session_store_load`.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_store_delete(
    store: *const agentao_session_store,
    session_id: *const c_char,
    deleted_out: *mut bool,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let store = store_ref(store)?;
        let deleted_out = out_arg(deleted_out, "deleted_out")?;
        *deleted_out = false;
        let id = str_arg(session_id, "session_id")?;
        *deleted_out = block_on_store(STORE_TIMEOUT, "delete", store.delete(id))?;
        Ok(())
    })
}
