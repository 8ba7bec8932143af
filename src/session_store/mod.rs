//! The session store: where a session's document lives between turns and between processes.
//!
//! The store moves opaque documents (the agent layer writes and reads their JSON) with the
//! metadata a fleet needs to find them. Every commit names the version it continues, so two
//! processes that continue the same version cannot both win: the second gets
//! [`StoreError::Conflict`], never a silent overwrite. Built-in stores: SQLite (one file, the
//! embedded default) and PostgreSQL (the `postgres` feature); a host may plug its own through
//! the session-store capability.

#[cfg(feature = "postgres")]
pub mod postgres;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

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
