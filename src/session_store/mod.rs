//! The session store: where a session's document lives between turns and between processes.
//!
//! The store moves opaque documents (the agent layer writes and reads their JSON) with the
//! metadata a fleet needs to find them. Every commit names the version it continues, so two
//! processes that continue the same version cannot both win: the second gets
//! [`StoreError::Conflict`], never a silent overwrite. Built-in stores: SQLite (one file, the
//! embedded default) and PostgreSQL (the `postgres` feature); a host may plug its own through
//! the session-store capability.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex, Weak};

pub(crate) mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite-memory")]
pub(crate) mod sqlite;

/// What a store's operations return: boxed, because stores are trait objects chosen by config.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A committed session document and its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    pub session_id: String,
    pub tenant: String,
    pub owner: String,
    /// 1 for the first commit; each commit adds one.
    pub version: u64,
    /// Milliseconds since the Unix epoch, as the store recorded the commit.
    pub updated_at_ms: i64,
    /// The session document (JSON text; the agent layer owns its schema).
    pub document: String,
}

/// A commit: `document` becomes version `continues + 1` of `session_id`, if and only if the
/// stored version is still `continues` (0: the session must not exist yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCommit {
    pub session_id: String,
    pub tenant: String,
    pub owner: String,
    pub continues: u64,
    pub document: String,
}

/// One row of a listing: everything but the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionListing {
    pub session_id: String,
    pub tenant: String,
    pub owner: String,
    pub version: u64,
    pub updated_at_ms: i64,
}

/// Which sessions to list: newest first (by `updated_at_ms`, then `session_id`), at most
/// `limit`, starting after `cursor` (the `next_cursor` of the previous page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    pub tenant: Option<String>,
    pub owner: Option<String>,
    pub limit: u32,
    pub cursor: Option<String>,
}

/// A page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPage {
    pub sessions: Vec<SessionListing>,
    /// Present when more sessions follow.
    pub next_cursor: Option<String>,
}

/// Why a store operation failed. The in-memory session is untouched by any of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The stored version is not the one the commit continues: another process committed first.
    Conflict {
        session_id: String,
        continues: u64,
        stored: u64,
    },
    /// The store did not answer in time; whether the commit landed is unknown until a load.
    Timeout { operation: &'static str },
    /// The store cannot be reached or refused the operation (the database went away, the file
    /// is read-only, ...).
    Unavailable(String),
    /// What the store holds cannot be read as a session (a truncated or foreign row).
    Corrupt(String),
    /// The request itself is wrong (an empty session id, a bad cursor, a bad store URL).
    Invalid(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Conflict {
                session_id,
                continues,
                stored,
            } => write!(
                f,
                "session {session_id:?}: the commit continues version {continues} but the store holds version {stored}"
            ),
            StoreError::Timeout { operation } => write!(f, "session store: {operation} timed out"),
            StoreError::Unavailable(m) => write!(f, "session store unavailable: {m}"),
            StoreError::Corrupt(m) => write!(f, "session store holds an unreadable session: {m}"),
            StoreError::Invalid(m) => write!(f, "session store: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// A place sessions are committed to and loaded from. Implementations are shared by every
/// agent of a process and called from the library's runtime; each operation is atomic.
pub trait SessionStore: Send + Sync + 'static {
    /// The newest committed version of `session_id`, or `None` when there is none.
    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>>;
    /// Commits atomically; returns the new version (`continues + 1`).
    fn commit<'a>(&'a self, commit: &'a SessionCommit) -> StoreFuture<'a, u64>;
    /// A page of sessions, newest first.
    fn list<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, SessionPage>;
    /// Deletes every version of `session_id`; whether there was one.
    fn delete<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool>;
}

/// A listing's page size when the query gives none (`limit` 0).
pub const DEFAULT_LIST_LIMIT: u32 = 50;
/// A listing's page size at most: a larger `limit` is lowered to this.
pub const MAX_LIST_LIMIT: u32 = 1000;

impl ListQuery {
    /// The page size this query asks for, within [`MAX_LIST_LIMIT`].
    pub fn page_size(&self) -> u32 {
        match self.limit {
            0 => DEFAULT_LIST_LIMIT,
            n => n.min(MAX_LIST_LIMIT),
        }
    }
}

/// Where a page ends: the last listing's `(updated_at_ms, session_id)`; the next page starts
/// strictly after it in newest-first order. Every store writes it the same way, so a cursor is
/// text a host may keep, not a store's private offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub updated_at_ms: i64,
    pub session_id: String,
}

impl Cursor {
    pub fn after(listing: &SessionListing) -> Cursor {
        Cursor {
            updated_at_ms: listing.updated_at_ms,
            session_id: listing.session_id.clone(),
        }
    }

    pub fn encode(&self) -> String {
        format!("{}:{}", self.updated_at_ms, self.session_id)
    }

    pub fn decode(text: &str) -> Result<Cursor, StoreError> {
        let bad = || StoreError::Invalid(format!("not a listing cursor: {text:?}"));
        let (ms, id) = text.split_once(':').ok_or_else(bad)?;
        Ok(Cursor {
            updated_at_ms: ms.parse().map_err(|_| bad())?,
            session_id: id.to_owned(),
        })
    }

    /// Whether `listing` comes after this cursor, newest first.
    pub fn precedes(&self, listing: &SessionListing) -> bool {
        (listing.updated_at_ms, listing.session_id.as_str())
            < (self.updated_at_ms, self.session_id.as_str())
    }
}

/// What every store checks of a commit before it touches anything.
pub fn check_commit(commit: &SessionCommit) -> Result<(), StoreError> {
    check_session_id(&commit.session_id)
}

/// A session id is 1 to 256 bytes with no control characters: it is a key in every store and
/// a path segment in none.
pub fn check_session_id(id: &str) -> Result<(), StoreError> {
    if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
        return Err(StoreError::Invalid(format!(
            "session id {id:?}: must be 1 to 256 bytes without control characters"
        )));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Opens the store a URL names: `sqlite:PATH` (the file is created if missing), `memory:` or
/// `memory:NAME` (in this process only), `postgres://…` / `postgresql://…` (the `postgres`
/// feature). The same URL opened twice in a process while the first is alive gives the same
/// store, so every agent of a process shares one connection (and, for `memory:NAME`, one map).
pub fn open(url: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    static OPEN: LazyLock<Mutex<HashMap<String, Weak<dyn SessionStore>>>> =
        LazyLock::new(Default::default);
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(store) = open.get(url).and_then(Weak::upgrade) {
        return Ok(store);
    }
    let store = open_new(url)?;
    open.retain(|_, w| w.strong_count() > 0);
    open.insert(url.to_owned(), Arc::downgrade(&store));
    Ok(store)
}

fn open_new(url: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        if path.is_empty() {
            return Err(StoreError::Invalid(
                "sqlite: needs a file path (sqlite:/path/sessions.db)".into(),
            ));
        }
        #[cfg(feature = "sqlite-memory")]
        return Ok(Arc::new(sqlite::SqliteStore::open(std::path::Path::new(
            path,
        ))?));
        #[cfg(not(feature = "sqlite-memory"))]
        return Err(StoreError::Invalid(
            "built without the sqlite-memory feature: no SQLite session store".into(),
        ));
    }
    if url == "memory:" || url.starts_with("memory:") {
        return Ok(Arc::new(memory::MemoryStore::default()));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return open_postgres(url);
    }
    Err(StoreError::Invalid(format!(
        "unknown store URL {:?}: sqlite:PATH, memory:, postgres://…",
        redact(url)
    )))
}

// The `postgres` feature and its module come with the PostgreSQL store; until this build
// declares them the lint would call the condition unknown.
#[allow(unexpected_cfgs)]
fn open_postgres(url: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    #[cfg(feature = "postgres")]
    return Ok(Arc::new(postgres::PostgresStore::connect(url)?));
    #[cfg(not(feature = "postgres"))]
    {
        let _ = url;
        Err(StoreError::Invalid(
            "built without the postgres feature: no PostgreSQL session store".into(),
        ))
    }
}

/// A URL as an error may show it: a password in it is not repeated.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_and_a_bad_one_is_refused() {
        let c = Cursor {
            updated_at_ms: 17,
            session_id: "a:b".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        assert!(matches!(Cursor::decode("x"), Err(StoreError::Invalid(_))));
        assert!(matches!(Cursor::decode("x:y"), Err(StoreError::Invalid(_))));
    }

    #[test]
    fn a_password_is_not_repeated() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert!(matches!(open("mysql://x"), Err(StoreError::Invalid(_))));
        assert!(matches!(open("sqlite:"), Err(StoreError::Invalid(_))));
    }

    #[test]
    fn memory_stores_of_one_name_are_one_store() {
        let a = open("memory:shared-test").unwrap();
        let b = open("memory:shared-test").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = open("memory:other-test").unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
