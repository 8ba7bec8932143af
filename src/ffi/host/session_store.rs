//! The host's session store: its C vtable, its answer slot, and its adapter to
//! [`SessionStore`], so a host keeps sessions wherever it keeps its data.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use crate::ffi::answer::{self, Request};
use crate::ffi::handle::BoxCastable;
use crate::ffi::host::{adopt, host_capability};
use crate::ffi::host_data::HostData;
use crate::ffi::session::agentao_session_store;
use crate::ffi::{
    agentao_error, agentao_status, guard, in_callback, opt_str_arg, out_arg, str_arg, to_cstring,
    Fail,
};
use crate::session_store::{
    check_commit, check_session_id, ListQuery, SessionCommit, SessionListing, SessionPage,
    SessionStore, StoreError, StoreFuture, StoredSession,
};

/// Where a session-store callback puts its answer: a handle of the one request table
/// (docs/c-api.md, "Answering a request"), answered at most once, before the callback returns,
/// with one of the `agentao_session_answer_*` functions; after the callback returned, a call on
/// it is `_INVALID_ARGUMENT` (the handle is a token the library looks up, never freed memory).
pub struct agentao_session_answer {
    answer: Option<HostAnswer>,
}

impl Request for agentao_session_answer {
    const NAME: &'static str = "answer";

    /// Answered inside the callback only: the store's callers wait on the callback's return.
    fn deferred(&self) -> bool {
        false
    }
}

enum HostAnswer {
    Document { document: String, version: u64 },
    Version(u64),
    Conflict(u64),
    Page(String),
    Deleted(bool),
    Failed(String),
}

/// A session store the host implements (a database of its own, a service). Copied by
/// `agentao_session_store_from_host`.
///
/// Threads: callbacks run on library threads where blocking is fine, possibly several at once
/// (several agents commit to one store); strings passed in are borrowed for the callback. Each
/// callback answers through `answer` before it returns; one that answers nothing or fails
/// (`agentao_session_answer_fail`) makes the operation `unavailable` (a commit's report says
/// so; the agent's in-memory session is unaffected).
///
/// The host keeps the store's promise: `commit` writes only if the stored version of the
/// session is still `continues` (0: the session must not exist), atomically, and otherwise
/// answers `agentao_session_answer_conflict` with the stored version.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct agentao_host_session_store {
    /// `sizeof(agentao_host_session_store)`; a smaller value means the slots past it are NULL.
    pub(crate) struct_size: u32,
    pub(crate) userdata: *mut c_void,
    /// Optional; called exactly once with `userdata` when the last agent and handle let the
    /// store go, or before `agentao_session_store_from_host` returns when it fails.
    pub userdata_free: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// Required. The newest version of `session_id`: answer
    /// `agentao_session_answer_document`, or nothing when there is none.
    pub(crate) load: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            session_id: *const c_char,
            answer: *mut agentao_session_answer,
        ),
    >,
    /// Required. Commit `document` as version `continues + 1` if the stored version is
    /// `continues`: answer `agentao_session_answer_version` with the new version, or
    /// `agentao_session_answer_conflict`.
    pub(crate) commit: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            session_id: *const c_char,
            tenant: *const c_char,
            owner: *const c_char,
            continues: u64,
            document: *const c_char,
            answer: *mut agentao_session_answer,
        ),
    >,
    /// Optional. A page of sessions newest first: `query_json` is `{"tenant", "owner"
    /// (null: any), "limit", "cursor" (null: the first page)}`; answer
    /// `agentao_session_answer_page`. NULL: listing is refused.
    pub(crate) list: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            query_json: *const c_char,
            answer: *mut agentao_session_answer,
        ),
    >,
    /// Optional. Delete every version of `session_id`: answer `agentao_session_answer_deleted`.
    /// NULL: deleting is refused.
    pub(crate) remove: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            session_id: *const c_char,
            answer: *mut agentao_session_answer,
        ),
    >,
}

host_capability!(agentao_host_session_store, minimum: commit, required: [load, commit]);

type AnswerPtr = *mut agentao_session_answer;

struct HostStore {
    data: HostData,
    load: unsafe extern "C" fn(*mut c_void, *const c_char, AnswerPtr),
    commit: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        *const c_char,
        *const c_char,
        u64,
        *const c_char,
        AnswerPtr,
    ),
    list: Option<unsafe extern "C" fn(*mut c_void, *const c_char, AnswerPtr)>,
    remove: Option<unsafe extern "C" fn(*mut c_void, *const c_char, AnswerPtr)>,
}

impl HostStore {
    /// `None`: the host answered nothing (or no handle could be had: the table is full).
    fn ask(&self, call: impl FnOnce(AnswerPtr)) -> Option<HostAnswer> {
        let handle = answer::issue(agentao_session_answer { answer: None }).ok()?;
        in_callback(|| call(handle));
        answer::returned(handle)?.answer
    }

    fn load_now(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        check_session_id(id)?;
        let c_id = to_cstring(id);
        // SAFETY: the host's callback with its userdata, a string and an answer slot that live
        // for the call.
        match self.ask(|a| unsafe { (self.load)(self.data.ptr(), c_id.as_ptr(), a) }) {
            None => Ok(None),
            Some(HostAnswer::Document { document, version }) => Ok(Some(StoredSession {
                session_id: id.to_owned(),
                tenant: String::new(),
                owner: String::new(),
                version,
                updated_at_ms: 0,
                document,
            })),
            Some(other) => Err(unexpected("load", other)),
        }
    }

    fn commit_now(&self, c: &SessionCommit) -> Result<u64, StoreError> {
        check_commit(c)?;
        let (id, tenant, owner, doc) = (
            to_cstring(&c.session_id),
            to_cstring(&c.tenant),
            to_cstring(&c.owner),
            to_cstring(&c.document),
        );
        // SAFETY: as in `load_now`.
        let answer = self.ask(|a| unsafe {
            (self.commit)(
                self.data.ptr(),
                id.as_ptr(),
                tenant.as_ptr(),
                owner.as_ptr(),
                c.continues,
                doc.as_ptr(),
                a,
            )
        });
        match answer {
            Some(HostAnswer::Version(v)) if v == c.continues + 1 => Ok(v),
            Some(HostAnswer::Version(v)) => Err(StoreError::Unavailable(format!(
                "the host store answered version {v} to a commit continuing {}",
                c.continues
            ))),
            Some(HostAnswer::Conflict(stored)) => Err(StoreError::Conflict {
                session_id: c.session_id.clone(),
                continues: c.continues,
                stored,
            }),
            None => Err(StoreError::Unavailable(
                "the host store answered nothing to `commit`".into(),
            )),
            Some(other) => Err(unexpected("commit", other)),
        }
    }

    fn list_now(&self, q: &ListQuery) -> Result<SessionPage, StoreError> {
        let Some(list) = self.list else {
            return Err(StoreError::Invalid(
                "the host store does not list sessions".into(),
            ));
        };
        let query = to_cstring(
            &serde_json::json!({"tenant": q.tenant, "owner": q.owner, "limit": q.page_size(),
                                "cursor": q.cursor})
            .to_string(),
        );
        // SAFETY: as in `load_now`.
        match self.ask(|a| unsafe { list(self.data.ptr(), query.as_ptr(), a) }) {
            Some(HostAnswer::Page(json)) => parse_page(&json),
            None => Err(StoreError::Unavailable(
                "the host store answered nothing to `list`".into(),
            )),
            Some(other) => Err(unexpected("list", other)),
        }
    }

    fn delete_now(&self, id: &str) -> Result<bool, StoreError> {
        check_session_id(id)?;
        let Some(remove) = self.remove else {
            return Err(StoreError::Invalid(
                "the host store does not delete sessions".into(),
            ));
        };
        let c_id = to_cstring(id);
        // SAFETY: as in `load_now`.
        match self.ask(|a| unsafe { remove(self.data.ptr(), c_id.as_ptr(), a) }) {
            Some(HostAnswer::Deleted(d)) => Ok(d),
            None => Err(StoreError::Unavailable(
                "the host store answered nothing to `remove`".into(),
            )),
            Some(other) => Err(unexpected("remove", other)),
        }
    }
}

fn unexpected(op: &str, answer: HostAnswer) -> StoreError {
    match answer {
        HostAnswer::Failed(m) => {
            StoreError::Unavailable(format!("the host store failed `{op}`: {m}"))
        }
        _ => StoreError::Unavailable(format!(
            "the host store gave `{op}` an answer of another operation"
        )),
    }
}

fn parse_page(json: &str) -> Result<SessionPage, StoreError> {
    #[derive(serde::Deserialize)]
    struct Row {
        session_id: String,
        #[serde(default)]
        tenant: String,
        #[serde(default)]
        owner: String,
        version: u64,
        #[serde(default)]
        updated_at_ms: i64,
    }
    #[derive(serde::Deserialize)]
    struct Page {
        sessions: Vec<Row>,
        #[serde(default)]
        next_cursor: Option<String>,
    }
    let page: Page = serde_json::from_str(json)
        .map_err(|e| StoreError::Corrupt(format!("the host store's page is not a listing: {e}")))?;
    Ok(SessionPage {
        sessions: page
            .sessions
            .into_iter()
            .map(|r| SessionListing {
                session_id: r.session_id,
                tenant: r.tenant,
                owner: r.owner,
                version: r.version,
                updated_at_ms: r.updated_at_ms,
            })
            .collect(),
        next_cursor: page.next_cursor,
    })
}

/// Host code blocks: called on a blocking thread when there is a runtime.
fn off_the_workers<'a, T: Send + 'static>(
    store: &Arc<HostStore>,
    f: impl FnOnce(&HostStore) -> Result<T, StoreError> + Send + 'static,
) -> StoreFuture<'a, T> {
    let store = store.clone();
    Box::pin(async move {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt
                .spawn_blocking(move || f(&store))
                .await
                .unwrap_or_else(|e| {
                    Err(StoreError::Unavailable(format!(
                        "the host store's callback panicked: {e}"
                    )))
                }),
            Err(_) => f(&store),
        }
    })
}

/// The adapter: the vtable behind an `Arc`, so a blocking thread can hold it.
struct FfiSessionStore(Arc<HostStore>);

impl SessionStore for FfiSessionStore {
    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        let id = session_id.to_owned();
        off_the_workers(&self.0, move |s| s.load_now(&id))
    }

    fn commit<'a>(&'a self, commit: &'a SessionCommit) -> StoreFuture<'a, u64> {
        let c = commit.clone();
        off_the_workers(&self.0, move |s| s.commit_now(&c))
    }

    fn list<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, SessionPage> {
        let q = query.clone();
        off_the_workers(&self.0, move |s| s.list_now(&q))
    }

    fn delete<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        let id = session_id.to_owned();
        off_the_workers(&self.0, move |s| s.delete_now(&id))
    }
}

/// Makes a session store of the host's vtable (`store`, borrowed and copied). On success
/// `*store_out` owns a handle (release with `agentao_session_store_free`); pass it to
/// `agentao_agent_open_session` and to the `agentao_session_store_*` operations.
///
/// Ownership: the library owns `store->userdata` from the call on: `userdata_free` runs once,
/// when the handle and every agent using the store are gone, or before this returns when it
/// fails. Errors: `AGENTAO_STATUS_NULL_ARGUMENT` (NULL `store` or `store_out`, or a NULL `load`
/// or `commit`), `_INVALID_ARGUMENT` (`struct_size` too small). Any thread.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_store_from_host(
    store: *const agentao_host_session_store,
    store_out: *mut *mut agentao_session_store,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    if !store_out.is_null() {
        *store_out = std::ptr::null_mut();
    }
    guard(err_out, || {
        if store.is_null() {
            return Err(Fail::null("store"));
        }
        // Owned from here: every failure below releases the userdata.
        let (data, v) = adopt(store)?;
        let out = out_arg(store_out, "store_out")?;
        let (Some(load), Some(commit)) = (v.load, v.commit) else {
            // Required slots: `adopt` refused a NULL one.
            return Err(Fail::null("load"));
        };
        let host = HostStore {
            data,
            load,
            commit,
            list: v.list,
            remove: v.remove,
        };
        let store: Arc<dyn SessionStore> = Arc::new(FfiSessionStore(Arc::new(host)));
        *out = BoxCastable::into_raw(agentao_session_store { store });
        Ok(())
    })
}

/// Puts the callback's one answer into its handle.
fn put(answer: AnswerPtr, value: HostAnswer) -> Result<(), Fail> {
    answer::with(answer, |a| match a.answer {
        Some(_) => Err(Fail(
            agentao_status::InvalidArgument,
            "this callback has already answered".into(),
        )),
        None => {
            a.answer = Some(value);
            Ok(())
        }
    })?
}

/// Answers with `value`, or, when the host's text is bad, fails the callback and returns why.
fn put_text(
    answer: AnswerPtr,
    text: Result<&str, Fail>,
    value: impl FnOnce(&str) -> HostAnswer,
) -> Result<(), Fail> {
    match text {
        Ok(t) => put(answer, value(t)),
        Err(f) => {
            put(answer, HostAnswer::Failed(f.1.clone()))?;
            Err(f)
        }
    }
}

unsafe fn give(
    answer: AnswerPtr,
    err_out: *mut *mut agentao_error,
    value: HostAnswer,
) -> agentao_status {
    guard(err_out, || put(answer, value))
}

/// Answers `load` with the stored `document` (borrowed, copied) and its `version` (≥ 1). Only
/// inside the callback that received `answer`; a second answer is `_INVALID_ARGUMENT`; a NULL
/// or non-UTF-8 document fails the callback and returns its status.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_answer_document(
    answer: *mut agentao_session_answer,
    document: *const c_char,
    version: u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        put_text(answer, str_arg(document, "document"), |d| {
            HostAnswer::Document {
                document: d.to_owned(),
                version,
            }
        })
    })
}

/// Answers `commit`: the new version (`continues + 1`).
#[no_mangle]
pub unsafe extern "C" fn agentao_session_answer_version(
    answer: *mut agentao_session_answer,
    version: u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    give(answer, err_out, HostAnswer::Version(version))
}

/// Answers `commit`: refused, the store holds `stored_version`, not the one continued.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_answer_conflict(
    answer: *mut agentao_session_answer,
    stored_version: u64,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    give(answer, err_out, HostAnswer::Conflict(stored_version))
}

/// Answers `list` with a page (borrowed, copied): `{"sessions": [{"session_id", "tenant",
/// "owner", "version", "updated_at_ms"}], "next_cursor": str|null}`.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_answer_page(
    answer: *mut agentao_session_answer,
    page_json: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        put_text(answer, str_arg(page_json, "page_json"), |p| {
            HostAnswer::Page(p.to_owned())
        })
    })
}

/// Answers `remove`: whether there was a session to delete.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_answer_deleted(
    answer: *mut agentao_session_answer,
    deleted: bool,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    give(answer, err_out, HostAnswer::Deleted(deleted))
}

/// Fails a store callback with `message` (borrowed, copied; NULL: a generic text): the
/// operation is `unavailable`.
#[no_mangle]
pub unsafe extern "C" fn agentao_session_answer_fail(
    answer: *mut agentao_session_answer,
    message: *const c_char,
    err_out: *mut *mut agentao_error,
) -> agentao_status {
    guard(err_out, || {
        let m = opt_str_arg(message, "message")?.unwrap_or("the store failed");
        put(answer, HostAnswer::Failed(m.to_owned()))
    })
}
