//! The SQLite store (`sqlite:PATH`): one database file, one row per session, WAL so readers
//! do not wait for a writer, a busy timeout so two processes on one file wait for each other
//! instead of failing. The version check and the write are one `BEGIN IMMEDIATE`
//! transaction, so two processes continuing the same version cannot both win.
//!
//! Every operation runs on a blocking thread: SQLite waits on file locks, and the library's
//! workers must not.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};

use super::{
    check_commit, check_session_id, now_ms, Cursor, ListQuery, SessionCommit, SessionListing,
    SessionPage, SessionStore, StoreError, StoreFuture, StoredSession,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agentao_sessions (
    session_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    document TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS agentao_sessions_newest
    ON agentao_sessions(updated_at_ms DESC, session_id DESC);
";

/// How long a statement waits for another connection's lock before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct SqliteStore {
    db: Arc<Mutex<Connection>>,
}

fn store_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Timeout {
            operation: "waiting for the database lock",
        },
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            StoreError::Corrupt(format!("sessions database: {e}"))
        }
        _ => StoreError::Unavailable(format!("sessions database: {e}")),
    }
}

impl SqliteStore {
    /// Opens (creating it and its parent directory if needed) the database at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Unavailable(format!("sessions database {}: {e}", path.display()))
            })?;
        }
        // Documents hold whole conversations: a new file is the owner's only (SQLite gives its
        // journal files the database file's mode).
        {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path);
        }
        let db = Connection::open(path).map_err(store_error)?;
        db.busy_timeout(BUSY_TIMEOUT).map_err(store_error)?;
        // WAL needs a writable directory; a read-only one keeps the rollback journal and
        // still reads.
        let _ = db.pragma_update(None, "journal_mode", "WAL");
        db.pragma_update(None, "synchronous", "NORMAL")
            .map_err(store_error)?;
        if let Err(e) = db.execute_batch(SCHEMA) {
            // A read-only file that already holds the table still serves loads and lists.
            let has_table = db
                .query_row(
                    "SELECT 1 FROM sqlite_master WHERE name = 'agentao_sessions'",
                    [],
                    |_| Ok(()),
                )
                .optional()
                .map_err(store_error)?
                .is_some();
            if !has_table {
                return Err(store_error(e));
            }
        }
        Ok(SqliteStore {
            db: Arc::new(Mutex::new(db)),
        })
    }

    /// Runs `f` on the connection on a blocking thread (inline when there is no runtime).
    fn with_db<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let db = self.db.clone();
        let run = move || f(&mut db.lock().unwrap_or_else(|e| e.into_inner()));
        Box::pin(async move {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => rt.spawn_blocking(run).await.unwrap_or_else(|e| {
                    Err(StoreError::Unavailable(format!(
                        "the database operation failed: {e}"
                    )))
                }),
                Err(_) => run(),
            }
        })
    }
}

fn commit_in(db: &mut Connection, c: &SessionCommit) -> Result<u64, StoreError> {
    let tx = db
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(store_error)?;
    let stored: Option<(i64, i64)> = tx
        .query_row(
            "SELECT version, updated_at_ms FROM agentao_sessions WHERE session_id = ?1",
            [&c.session_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(store_error)?;
    let (stored_version, floor) = stored.map_or((0, 0), |(v, t)| (v.max(0) as u64, t + 1));
    if stored_version != c.continues {
        return Err(StoreError::Conflict {
            session_id: c.session_id.clone(),
            continues: c.continues,
            stored: stored_version,
        });
    }
    let version = c.continues + 1;
    let (new, old) = (sql_version(version)?, sql_version(c.continues)?);
    // Strictly later than the version it replaces, so newest-first holds within a millisecond.
    let at = now_ms().max(floor);
    let changed = if c.continues == 0 {
        tx.execute(
            "INSERT INTO agentao_sessions (session_id, tenant, owner, version, updated_at_ms, document)
             VALUES (?1, ?2, ?3, 1, ?4, ?5)",
            params![c.session_id, c.tenant, c.owner, at, c.document],
        )
    } else {
        tx.execute(
            "UPDATE agentao_sessions SET tenant = ?2, owner = ?3, version = ?4, updated_at_ms = ?5,
             document = ?6 WHERE session_id = ?1 AND version = ?7",
            params![c.session_id, c.tenant, c.owner, new, at, c.document, old],
        )
    }
    .map_err(store_error)?;
    if changed != 1 {
        return Err(StoreError::Conflict {
            session_id: c.session_id.clone(),
            continues: c.continues,
            stored: stored_version,
        });
    }
    tx.commit().map_err(store_error)?;
    Ok(version)
}

fn sql_version(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Invalid(format!("version {v} is out of range")))
}

fn load_in(db: &mut Connection, id: &str) -> Result<Option<StoredSession>, StoreError> {
    db.query_row(
        "SELECT session_id, tenant, owner, version, updated_at_ms, document
         FROM agentao_sessions WHERE session_id = ?1",
        [id],
        |r| {
            Ok(StoredSession {
                session_id: r.get(0)?,
                tenant: r.get(1)?,
                owner: r.get(2)?,
                version: r.get::<_, i64>(3)?.max(0) as u64,
                updated_at_ms: r.get(4)?,
                document: r.get(5)?,
            })
        },
    )
    .optional()
    .map_err(|e| match e {
        // A row whose columns are not what this store writes (a foreign program's, a damaged
        // page): unreadable, which is not the same as unreachable.
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::Utf8Error(..) => StoreError::Corrupt(format!("session {id:?}: {e}")),
        e => store_error(e),
    })
}

fn list_in(db: &mut Connection, q: &ListQuery) -> Result<SessionPage, StoreError> {
    let after = q.cursor.as_deref().map(Cursor::decode).transpose()?;
    let size = q.page_size();
    let (after_ms, after_id) =
        after.map_or((i64::MAX, None), |c| (c.updated_at_ms, Some(c.session_id)));
    let mut stmt = db
        .prepare_cached(
            "SELECT session_id, tenant, owner, version, updated_at_ms FROM agentao_sessions
             WHERE (?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR owner = ?2)
               AND (updated_at_ms < ?3 OR (updated_at_ms = ?3 AND (?4 IS NULL OR session_id < ?4)))
             ORDER BY updated_at_ms DESC, session_id DESC LIMIT ?5",
        )
        .map_err(store_error)?;
    let mut rows: Vec<SessionListing> = stmt
        .query_map(
            params![q.tenant, q.owner, after_ms, after_id, i64::from(size) + 1],
            |r| {
                Ok(SessionListing {
                    session_id: r.get(0)?,
                    tenant: r.get(1)?,
                    owner: r.get(2)?,
                    version: r.get::<_, i64>(3)?.max(0) as u64,
                    updated_at_ms: r.get(4)?,
                })
            },
        )
        .map_err(store_error)?
        .collect::<Result<_, _>>()
        .map_err(store_error)?;
    let size = size as usize;
    let next_cursor = (rows.len() > size).then(|| Cursor::after(&rows[size - 1]).encode());
    rows.truncate(size);
    Ok(SessionPage {
        sessions: rows,
        next_cursor,
    })
}

impl SessionStore for SqliteStore {
    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        let id = session_id.to_owned();
        self.with_db(move |db| {
            check_session_id(&id)?;
            load_in(db, &id)
        })
    }

    fn commit<'a>(&'a self, commit: &'a SessionCommit) -> StoreFuture<'a, u64> {
        let c = commit.clone();
        self.with_db(move |db| {
            check_commit(&c)?;
            commit_in(db, &c)
        })
    }

    fn list<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, SessionPage> {
        let q = query.clone();
        self.with_db(move |db| list_in(db, &q))
    }

    fn delete<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        let id = session_id.to_owned();
        self.with_db(move |db| {
            check_session_id(&id)?;
            db.execute("DELETE FROM agentao_sessions WHERE session_id = ?1", [&id])
                .map(|n| n > 0)
                .map_err(store_error)
        })
    }
}
