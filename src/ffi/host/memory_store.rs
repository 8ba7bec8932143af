//! The host's memory store (spec §5.4): its C vtable, its answer slot, and its adapter to the
//! tools layer's [`MemoryStore`].

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;
use std::time::Duration;

use crate::ffi::agent::{agent_ref, agentao_agent};
use crate::ffi::answer::{self, Answerer, NoAnswer, Request};
use crate::ffi::host::{adopt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::{
    agentao_error, agentao_status, guard, in_callback, opt_str_arg, str_arg, to_cstring, Fail,
};
use crate::tools::memory::{matching, sort_recent_first, InMemoryStore, MemoryWriteError};
use crate::tools::{MemoryRecord, MemoryScope, MemoryStore};

/// Where a store callback puts its answer: a request handle (docs/c-api.md, "Answering a
/// request"), finished by exactly one of `agentao_memory_answer_json` / `_fail` / `_full` /
/// `_ok`, or by the callback's return when it answered nothing (success for `upsert`). A
/// callback that calls `agentao_memory_answer_defer` before returning finishes it later, from
/// any thread. A call on a finished handle returns `AGENTAO_STATUS_INVALID_ARGUMENT`.
pub struct agentao_memory_answer {
    deferred: bool,
    answerer: Answerer<Option<HostAnswer>>,
    /// The store's userdata stays alive while the host holds the handle.
    _keep_alive: Arc<HostData>,
}

impl Request for agentao_memory_answer {
    const NAME: &'static str = "answer";

    fn deferred(&self) -> bool {
        self.deferred
    }
}

/// What a store callback answered.
enum HostAnswer {
    Json(String),
    Failed(String),
    /// `upsert` only: the store takes no more.
    Full(String),
}

/// A memory store the host implements (spec §5.4), e.g. a remote memory service. Copied by
/// `agentao_agent_set_memory_store`. Records are JSON objects:
/// `{"id": 8 hex, "scope": "user"|"project", "type": str, "key_normalized": str,
/// "title": str, "content": str, "tags": [str], "keywords": [str],
/// "source": "explicit"|"auto"|"crystallized", "confidence": number, "sensitivity": str,
/// "created_at": RFC 3339, "updated_at": RFC 3339, "deleted_at": RFC 3339|null}`.
///
/// Threads: callbacks run on library threads where blocking is fine (a `save_memory` call, the
/// start of a turn), never two of one agent at once; strings passed in are borrowed for the
/// callback. A callback answers through `answer` before it returns, or, after
/// `agentao_memory_answer_defer(answer)`, later from any thread (waited for at most the
/// config's `reply_timeout_ms`, 300 s when unset, and not past a cancel of the turn it serves;
/// a pending handle keeps `userdata` alive); one
/// that fails
/// (`agentao_memory_answer_fail`) makes `save_memory` report `Error saving memory: <message>`
/// and leaves the turn's prompt without memories; an `upsert` answered with
/// `agentao_memory_answer_full` makes it report `Error saving memory: the memory store is full:
/// <message>`, so the model knows to replace a memory rather than retry.
///
/// Budget: besides what the host says, `save_memory` keeps to the agent's budget (config
/// `memory.max_entries`, default 1,000; `memory.max_bytes`, default 4 MiB of key, title,
/// content, tags and keywords), measured on what `list` answers.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_memory_store {
    /// `sizeof(agentao_memory_store)`; a smaller value means the slots past it are NULL.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Optional; called exactly once with `userdata` when the agent lets the store go
    /// (replaced, or the agent freed), or before `agentao_agent_set_memory_store` returns when
    /// it fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// Required. Insert `record_json`, or replace the live record with the same `scope` and
    /// `key_normalized`. Answer nothing (success) or fail.
    pub(crate) upsert: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            record_json: *const c_char,
            answer: *mut agentao_memory_answer,
        ),
    >,
    /// Required. The live records of `scope` (`"user"`, `"project"`, or NULL for both) as a
    /// JSON array, most recently updated first.
    pub(crate) list: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            scope: *const c_char,
            answer: *mut agentao_memory_answer,
        ),
    >,
    /// Optional. The live record with this `scope` and `key`, or `null`. NULL: found in `list`.
    pub(crate) get: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            scope: *const c_char,
            key: *const c_char,
            answer: *mut agentao_memory_answer,
        ),
    >,
    /// Optional. The live records (of `scope`, NULL for both) relevant to `query`, as a JSON
    /// array. NULL: the records of `list` that share a word with the query.
    pub(crate) search: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            query: *const c_char,
            scope: *const c_char,
            answer: *mut agentao_memory_answer,
        ),
    >,
}

type AnswerPtr = *mut agentao_memory_answer;

host_capability!(agentao_memory_store, minimum: list, required: [upsert, list]);

struct FfiMemoryStore {
    data: Arc<HostData>,
    /// How long a deferred answer is waited for (the config's `reply_timeout_ms`).
    deadline: Duration,
    upsert: unsafe extern "C" fn(*mut c_void, *const c_char, AnswerPtr),
    list: unsafe extern "C" fn(*mut c_void, *const c_char, AnswerPtr),
    get: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, AnswerPtr)>,
    search: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, AnswerPtr)>,
}

fn scope_c(scope: Option<MemoryScope>) -> Option<CString> {
    scope.map(|s| to_cstring(s.as_str()))
}

fn ptr_or_null(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
}

impl FfiMemoryStore {
    /// Runs one callback with a fresh answer slot; `Ok(None)` when it answered nothing.
    fn ask(
        &self,
        what: &str,
        call: impl FnOnce(AnswerPtr),
    ) -> Result<Option<String>, MemoryWriteError> {
        let (answerer, waiter) = answer::channel();
        let slot = answer::issue(agentao_memory_answer {
            deferred: false,
            answerer,
            _keep_alive: self.data.clone(),
        })
        .map_err(|_| {
            MemoryWriteError::Failed("too many host requests are waiting for an answer".into())
        })?;
        in_callback(|| call(slot));
        let answer = match answer::returned(slot) {
            Some(_) => None,
            None => match waiter.wait(Some(self.deadline)) {
                Ok(a) => a,
                Err(NoAnswer::TimedOut) => {
                    return Err(MemoryWriteError::Failed(format!(
                        "the memory store did not finish `{what}` within reply_timeout_ms"
                    )))
                }
                Err(NoAnswer::Dropped) => {
                    return Err(MemoryWriteError::Failed(format!(
                        "the memory store's `{what}` request was dropped"
                    )))
                }
                Err(NoAnswer::Cancelled) => {
                    return Err(MemoryWriteError::Failed(format!(
                        "cancelled while the memory store's `{what}` was unanswered"
                    )))
                }
            },
        };
        match answer {
            None => Ok(None),
            Some(HostAnswer::Json(json)) => Ok(Some(json)),
            Some(HostAnswer::Failed(m)) => Err(MemoryWriteError::Failed(format!(
                "the memory store failed `{what}`: {m}"
            ))),
            Some(HostAnswer::Full(m)) => Err(MemoryWriteError::Full(m)),
        }
    }

    /// As [`Self::ask`], for the reads: a store is full only for writes.
    fn ask_read(&self, what: &str, call: impl FnOnce(AnswerPtr)) -> Result<Option<String>, String> {
        self.ask(what, call).map_err(|e| match e {
            MemoryWriteError::Failed(m) => m,
            MemoryWriteError::Full(m) => format!("the memory store failed `{what}`: {m}"),
        })
    }

    fn records(&self, what: &str, json: Option<String>) -> Result<Vec<MemoryRecord>, String> {
        let json = json.ok_or_else(|| format!("the memory store gave no answer to `{what}`"))?;
        let mut v: Vec<MemoryRecord> = serde_json::from_str(&json).map_err(|e| {
            format!("the memory store's answer to `{what}` is not a list of records: {e}")
        })?;
        v.retain(|r| r.deleted_at.is_none());
        Ok(v)
    }
}

impl MemoryStore for FfiMemoryStore {
    fn upsert(&self, record: &MemoryRecord) -> Result<(), MemoryWriteError> {
        let json = to_cstring(
            &serde_json::to_string(record).map_err(|e| MemoryWriteError::Failed(e.to_string()))?,
        );
        // SAFETY: the host's callback with its userdata, a string and an answer slot that live
        // for the call.
        self.ask("upsert", |a| unsafe {
            (self.upsert)(self.data.ptr(), json.as_ptr(), a)
        })
        .map(drop)
    }

    fn get(&self, scope: MemoryScope, key: &str) -> Result<Option<MemoryRecord>, String> {
        let Some(get) = self.get else {
            return Ok(self
                .list(Some(scope))?
                .into_iter()
                .find(|r| r.key_normalized == key));
        };
        let (s, k) = (to_cstring(scope.as_str()), to_cstring(key));
        // SAFETY: as in `upsert`.
        let json = self.ask_read("get", |a| unsafe {
            get(self.data.ptr(), s.as_ptr(), k.as_ptr(), a)
        })?;
        let json = json.ok_or("the memory store gave no answer to `get`")?;
        let r: Option<MemoryRecord> = serde_json::from_str(&json).map_err(|e| {
            format!("the memory store's answer to `get` is not a record or null: {e}")
        })?;
        Ok(r.filter(|r| r.deleted_at.is_none()))
    }

    fn list(&self, scope: Option<MemoryScope>) -> Result<Vec<MemoryRecord>, String> {
        let s = scope_c(scope);
        // SAFETY: as in `upsert`.
        let json = self.ask_read("list", |a| unsafe {
            (self.list)(self.data.ptr(), ptr_or_null(&s), a)
        })?;
        let mut v = self.records("list", json)?;
        sort_recent_first(&mut v);
        Ok(v)
    }

    fn search(&self, query: &str, scope: Option<MemoryScope>) -> Result<Vec<MemoryRecord>, String> {
        let Some(search) = self.search else {
            return Ok(matching(self.list(scope)?, query));
        };
        let (q, s) = (to_cstring(query), scope_c(scope));
        // SAFETY: as in `upsert`.
        let json = self.ask_read("search", |a| unsafe {
            search(self.data.ptr(), q.as_ptr(), ptr_or_null(&s), a)
        })?;
        self.records("search", json)
    }
}

/// Takes a host vtable (see [`adopt`]); every failure releases the userdata.
unsafe fn from_vtable(t: *const agentao_memory_store) -> Result<FfiMemoryStore, Fail> {
    let (data, v) = adopt(t)?;
    let (Some(upsert), Some(list)) = (v.upsert, v.list) else {
        // Required slots: `adopt` refused a NULL one.
        return Err(Fail::null("upsert"));
    };
    Ok(FfiMemoryStore {
        data: Arc::new(data),
        deadline: answer::DEFAULT_DEADLINE,
        upsert,
        list,
        get: v.get,
        search: v.search,
    })
}

/// Sets the agent's memory store (spec §5.4), right after `agentao_agent_new` or between
/// turns: `save_memory` writes to it, and every turn shows its memories to the model (a
/// stable block of at most 2,000 characters in the system prompt, and the memories relevant
/// to the user's message in a request-only reminder). `store` is borrowed and copied; NULL
/// restores a new, empty in-memory store (the default).
///
/// Ownership: the library owns `store->userdata` from the call on: `userdata_free` runs once,
/// when the store is replaced or the agent is freed, or before this returns when it fails
/// (earlier versions left it with the host on failure; docs/c-api.md, "Host capabilities").
///
/// Errors: `AGENTAO_STATUS_NULL_ARGUMENT` (NULL agent, or a NULL `upsert` or `list`),
/// `_INVALID_ARGUMENT` (`struct_size` too small), `_TURN_IN_PROGRESS`. Threads: any thread,
/// not inside a callback of this agent's running turn.
#[no_mangle]
pub unsafe extern "C" fn agentao_agent_set_memory_store(
    agent: *mut agentao_agent,
    store: *const agentao_memory_store,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        // Owned from here, so a NULL agent releases the userdata too.
        let host = match store.is_null() {
            true => None,
            false => Some(from_vtable(store)?),
        };
        let agent = agent_ref(agent)?;
        let store: Arc<dyn MemoryStore> = match host {
            None => Arc::new(InMemoryStore::default()),
            Some(mut host) => {
                host.deadline = agent.reply_timeout().unwrap_or(answer::DEFAULT_DEADLINE);
                Arc::new(host)
            }
        };
        agent.set_memory_store(store)?;
        Ok(())
    })
}

/// Finishes `answer` with `what` (`None`: answered with nothing).
unsafe fn finish_with(
    answer: *mut agentao_memory_answer,
    what: impl FnOnce() -> (Option<HostAnswer>, Result<(), Fail>),
) -> Result<(), Fail> {
    let a = answer::finish(answer)?;
    let (given, result) = what();
    a.answerer.answer(given);
    result
}

/// Answers a store callback with `json` (borrowed, copied): a record list for `list` and
/// `search`, a record or `null` for `get`. A finishing call: inside the callback, or later
/// from any thread after `agentao_memory_answer_defer`. Text that is not JSON fails the
/// callback and returns `AGENTAO_STATUS_INVALID_JSON`; a second answer returns `_INVALID_ARGUMENT` and
/// does nothing.
#[no_mangle]
pub unsafe extern "C" fn agentao_memory_answer_json(
    answer: *mut agentao_memory_answer,
    json: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        finish_with(answer, || {
            let text = match str_arg(json, "json") {
                Ok(t) => t,
                Err(f) => return (Some(HostAnswer::Failed(f.1.clone())), Err(f)),
            };
            if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                let msg = format!("the answer is not JSON: {e}");
                return (
                    Some(HostAnswer::Failed(msg.clone())),
                    Err(Fail(agentao_status::InvalidJson, msg)),
                );
            }
            (Some(HostAnswer::Json(text.to_owned())), Ok(()))
        })
    })
}

/// Fails a store callback with `message` (borrowed, copied; NULL: a generic text). A finishing
/// call (see `agentao_memory_answer_json`); a second answer returns `_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_memory_answer_fail(
    answer: *mut agentao_memory_answer,
    message: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    answer_with_message(
        answer,
        message,
        "the store failed",
        HostAnswer::Failed,
        err_out,
    )
}

/// Answers an `upsert` callback with "the store is full" and `message` (borrowed, copied; NULL:
/// a generic text), e.g. a quota reached. `save_memory` then tells the model
/// `Error saving memory: the memory store is full: <message>`, and nothing is retried. Only
/// for the `upsert` callback that received `answer`: for another callback it fails that
/// callback as `agentao_memory_answer_fail` would. A finishing call (see
/// `agentao_memory_answer_json`); a second answer returns `AGENTAO_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn agentao_memory_answer_full(
    answer: *mut agentao_memory_answer,
    message: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    answer_with_message(
        answer,
        message,
        "the host's store takes no more",
        HostAnswer::Full,
        err_out,
    )
}

/// Says, inside a store callback, that it answers after it returns: the request then waits for
/// one finishing call (`agentao_memory_answer_json` / `_fail` / `_full` / `_ok`) from any
/// thread, at most the config's `reply_timeout_ms`, 300 s when unset (then the request fails
/// and the late
/// answer is dropped). Calling it again is harmless. Errors: `_NULL_ARGUMENT`; `_INVALID_ARGUMENT` when
/// `answer` is finished.
#[no_mangle]
pub unsafe extern "C" fn agentao_memory_answer_defer(
    answer: *mut agentao_memory_answer,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || answer::with(answer, |a| a.deferred = true))
}

/// Finishes `answer` with nothing: a successful `upsert` (a read answered so reports that the
/// store gave no answer). What returning without an answer means, for a deferred callback.
/// Any thread; a second answer returns `AGENTAO_STATUS_INVALID_ARGUMENT`. The store's `userdata_free`
/// may run inside this call (and inside every finishing call) when it is the last thing
/// keeping it.
#[no_mangle]
pub unsafe extern "C" fn agentao_memory_answer_ok(
    answer: *mut agentao_memory_answer,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || finish_with(answer, || (None, Ok(()))))
}

/// Gives `answer` the answer `kind` makes of `message` (borrowed, copied; NULL: `default`).
/// Invalid UTF-8 still fails the request (with `default`).
unsafe fn answer_with_message(
    answer: *mut agentao_memory_answer,
    message: *const c_char,
    default: &str,
    kind: fn(String) -> HostAnswer,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        finish_with(answer, || match opt_str_arg(message, "message") {
            Ok(m) => (Some(kind(m.unwrap_or(default).to_owned())), Ok(())),
            Err(f) => (Some(kind(default.to_owned())), Err(f)),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn full_upsert(_: *mut c_void, _: *const c_char, a: AnswerPtr) {
        let status =
            agentao_memory_answer_full(a, c"quota of 10 reached".as_ptr(), std::ptr::null_mut());
        assert_eq!(status, agentao_status::Ok);
        // One answer per call.
        let again = agentao_memory_answer_fail(a, std::ptr::null(), std::ptr::null_mut());
        assert_eq!(again, agentao_status::InvalidArgument);
    }

    unsafe extern "C" fn empty_list(_: *mut c_void, _: *const c_char, a: AnswerPtr) {
        agentao_memory_answer_json(a, c"[]".as_ptr(), std::ptr::null_mut());
    }

    #[test]
    fn a_host_store_says_it_is_full() {
        let vtable = agentao_memory_store {
            struct_size: std::mem::size_of::<agentao_memory_store>() as u32,
            userdata: std::ptr::null_mut(),
            userdata_free: None,
            upsert: Some(full_upsert),
            list: Some(empty_list),
            get: None,
            search: None,
        };
        // SAFETY: a vtable on the stack, valid for the call.
        let store = unsafe { from_vtable(&vtable) }.unwrap_or_else(|_| panic!("a valid vtable"));
        let record = MemoryRecord::test_note("k", "v", "2026-01-01T00:00:00Z");
        let err = store.upsert(&record).unwrap_err();
        assert_eq!(err, MemoryWriteError::Full("quota of 10 reached".into()));
        assert_eq!(
            err.to_string(),
            "the memory store is full: quota of 10 reached"
        );
        assert!(store.list(None).unwrap().is_empty());
    }
}
