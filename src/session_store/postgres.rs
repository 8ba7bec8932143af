//! The PostgreSQL session store: many processes, one database (docs/scale-out.md).
//!
//! One row per session holds its newest version. A commit is one statement whose `WHERE`
//! carries the version check, so the database's row lock decides between two processes that
//! continue the same version: the second's statement matches no row and becomes
//! [`StoreError::Conflict`]. The document is kept as `text`, byte for byte: the store never
//! reads it, and `jsonb` would reorder its keys and parse it on every commit.
//!
//! The connection is opened on first use and again after it is lost, so a database that
//! restarts costs the calls made while it was away ([`StoreError::Unavailable`]) and nothing
//! else.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls, Statement};

use super::{
    check_commit, check_session_id, Cursor, ListQuery, SessionCommit, SessionListing, SessionPage,
    SessionStore, StoreError, StoreFuture, StoredSession,
};

/// How long one operation (connecting included) may take unless the host says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Created on every new connection; the advisory lock keeps processes starting together from
/// racing on `CREATE ... IF NOT EXISTS` (which is not atomic in PostgreSQL's catalogue).
const SCHEMA: &str = r#"
BEGIN;
SELECT pg_advisory_xact_lock(7161012393456275712);
CREATE TABLE IF NOT EXISTS agent_sessions (
    session_id text COLLATE "C" PRIMARY KEY CHECK (session_id <> ''),
    tenant     text NOT NULL,
    owner      text NOT NULL,
    version    bigint NOT NULL CHECK (version > 0),
    updated_at timestamptz NOT NULL,
    document   text NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_sessions_newest
    ON agent_sessions (updated_at DESC, session_id DESC);
CREATE INDEX IF NOT EXISTS agent_sessions_by_owner
    ON agent_sessions (tenant, owner, updated_at DESC, session_id DESC);
COMMIT;
"#;

/// Milliseconds since the epoch. Commits store their time truncated to the millisecond, the
/// precision of every store's cursor, so a page ends exactly where its cursor says; session ids
/// compare bytewise (`COLLATE "C"`), as the other stores compare them.
const MILLIS: &str = "(extract(epoch FROM updated_at) * 1000)::bigint";
const NOW: &str = "date_trunc('milliseconds', clock_timestamp())";

struct Statements {
    insert: Statement,
    update: Statement,
    version: Statement,
    load: Statement,
    delete: Statement,
    list: Statement,
}

struct Connection {
    client: Client,
    st: Statements,
}

/// A [`SessionStore`] over one PostgreSQL connection shared by every agent of the process
/// (tokio-postgres pipelines concurrent calls on it).
pub struct PostgresStore {
    config: tokio_postgres::Config,
    timeout: Duration,
    conn: Mutex<Option<Arc<Connection>>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the config: it may hold a password.
        f.debug_struct("PostgresStore")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Reads the URL (`postgres://user[:password]@host[:port]/database[?options]`, or the
    /// `key=value` form); connects on first use, so a database that is down at start-up is an
    /// [`StoreError::Unavailable`] of the first operation, not of this call.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("bad PostgreSQL URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_TIMEOUT);
        }
        config.application_name("agentao");
        Ok(Self {
            config,
            timeout: DEFAULT_TIMEOUT,
            conn: Mutex::new(None),
        })
    }

    /// Every operation, connecting included, fails with [`StoreError::Timeout`] after `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.config.connect_timeout(timeout);
        self
    }

    async fn connection(&self) -> Result<Arc<Connection>, StoreError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.client.is_closed() {
                return Ok(c.clone());
            }
        }
        *slot = None;
        let (client, connection) = self.config.connect(NoTls).await.map_err(unavailable)?;
        // The socket's driver; it ends when the client is dropped or the server goes away.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client.batch_execute(SCHEMA).await.map_err(unavailable)?;
        let st = Statements {
            insert: prepare(
                &client,
                &format!(
                    "INSERT INTO agent_sessions (session_id, tenant, owner, version, updated_at, document) \
                     VALUES ($1, $2, $3, 1, {NOW}, $4) ON CONFLICT (session_id) DO NOTHING"
                ),
            )
            .await?,
            update: prepare(
                &client,
                &format!(
                    "UPDATE agent_sessions SET version = version + 1, tenant = $3, owner = $4, \
                     document = $5, updated_at = {NOW} WHERE session_id = $1 AND version = $2"
                ),
            )
            .await?,
            version: prepare(
                &client,
                "SELECT version FROM agent_sessions WHERE session_id = $1",
            )
            .await?,
            load: prepare(
                &client,
                &format!(
                    "SELECT tenant, owner, version, {MILLIS}, document FROM agent_sessions \
                     WHERE session_id = $1"
                ),
            )
            .await?,
            delete: prepare(&client, "DELETE FROM agent_sessions WHERE session_id = $1").await?,
            // NULL parameters mean "any tenant", "any owner", "from the newest".
            list: prepare(
                &client,
                &format!(
                    "SELECT session_id, tenant, owner, version, {MILLIS} FROM agent_sessions \
                     WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR owner = $2) \
                     AND ($3::bigint IS NULL OR (updated_at, session_id) < \
                          (timestamptz 'epoch' + $3::bigint * interval '1 millisecond', $4::text)) \
                     ORDER BY updated_at DESC, session_id DESC LIMIT $5"
                ),
            )
            .await?,
        };
        let conn = Arc::new(Connection { client, st });
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Runs one operation under the store's deadline. A timeout or a lost connection drops the
    /// connection, so the next operation starts on a fresh one rather than behind a stuck query.
    async fn run<T, F, Fut>(&self, operation: &'static str, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(Arc<Connection>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let work = async {
            let conn = self.connection().await?;
            f(conn).await
        };
        let result = match tokio::time::timeout(self.timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout { operation }),
        };
        if matches!(
            result,
            Err(StoreError::Timeout { .. } | StoreError::Unavailable(_))
        ) {
            *self.conn.lock().await = None;
        }
        result
    }
}

async fn prepare(client: &Client, sql: &str) -> Result<Statement, StoreError> {
    client.prepare(sql).await.map_err(unavailable)
}

fn unavailable(e: tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Unavailable(format!(
            "PostgreSQL: {} ({})",
            db.message(),
            db.code().code()
        )),
        None if e.is_closed() => {
            StoreError::Unavailable("PostgreSQL: the connection was closed".to_owned())
        }
        None => StoreError::Unavailable(format!("PostgreSQL: {e}")),
    }
}

/// A database error that is the request's fault rather than the database's.
fn db_error(e: tokio_postgres::Error) -> StoreError {
    let code = e.code().cloned();
    match code {
        Some(c) if c == SqlState::CHECK_VIOLATION || c == SqlState::CHARACTER_NOT_IN_REPERTOIRE => {
            StoreError::Invalid(format!("PostgreSQL refused the values: {e}"))
        }
        _ => unavailable(e),
    }
}

fn version_of(v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative version {v}")))
}

fn signed(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Invalid(format!("{what} {v} is out of range")))
}

/// PostgreSQL text cannot hold NUL; JSON escapes it, so only a foreign document has one.
fn check_text(what: &str, s: &str) -> Result<(), StoreError> {
    if s.contains('\0') {
        return Err(StoreError::Invalid(format!("{what} holds a NUL")));
    }
    Ok(())
}

impl SessionStore for PostgresStore {
    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        Box::pin(async move {
            check_session_id(session_id)?;
            self.run("load", |c| async move {
                let row = c
                    .client
                    .query_opt(&c.st.load, &[&session_id])
                    .await
                    .map_err(db_error)?;
                let Some(row) = row else { return Ok(None) };
                Ok(Some(StoredSession {
                    session_id: session_id.to_owned(),
                    tenant: row.try_get(0).map_err(corrupt)?,
                    owner: row.try_get(1).map_err(corrupt)?,
                    version: version_of(row.try_get(2).map_err(corrupt)?)?,
                    updated_at_ms: row.try_get(3).map_err(corrupt)?,
                    document: row.try_get(4).map_err(corrupt)?,
                }))
            })
            .await
        })
    }

    fn commit<'a>(&'a self, commit: &'a SessionCommit) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            check_commit(commit)?;
            check_text("tenant", &commit.tenant)?;
            check_text("owner", &commit.owner)?;
            check_text("document", &commit.document)?;
            let continues = signed(commit.continues, "version")?;
            self.run("commit", |c| async move {
                let id = commit.session_id.as_str();
                let rows = if continues == 0 {
                    c.client
                        .execute(
                            &c.st.insert,
                            &[&id, &commit.tenant, &commit.owner, &commit.document],
                        )
                        .await
                } else {
                    c.client
                        .execute(
                            &c.st.update,
                            &[
                                &id,
                                &continues,
                                &commit.tenant,
                                &commit.owner,
                                &commit.document,
                            ],
                        )
                        .await
                }
                .map_err(db_error)?;
                if rows == 1 {
                    return Ok(commit.continues + 1);
                }
                // Lost the race (or continued a version that never was): say what is stored.
                let stored = c
                    .client
                    .query_opt(&c.st.version, &[&id])
                    .await
                    .map_err(db_error)?
                    .map(|r| r.try_get::<_, i64>(0).map_err(corrupt))
                    .transpose()?
                    .map(version_of)
                    .transpose()?
                    .unwrap_or(0);
                Err(StoreError::Conflict {
                    session_id: id.to_owned(),
                    continues: commit.continues,
                    stored,
                })
            })
            .await
        })
    }

    fn list<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, SessionPage> {
        Box::pin(async move {
            let after = query.cursor.as_deref().map(Cursor::decode).transpose()?;
            let (after_ms, after_id) = match &after {
                Some(c) => (Some(c.updated_at_ms), Some(c.session_id.as_str())),
                None => (None, None),
            };
            let limit = query.page_size();
            self.run("list", |c| async move {
                // One more than the page: whether another page follows, without a count.
                let fetch = i64::from(limit) + 1;
                let rows = c
                    .client
                    .query(
                        &c.st.list,
                        &[&query.tenant, &query.owner, &after_ms, &after_id, &fetch],
                    )
                    .await
                    .map_err(db_error)?;
                let more = rows.len() > limit as usize;
                let mut page = SessionPage::default();
                for row in rows.iter().take(limit as usize) {
                    page.sessions.push(SessionListing {
                        session_id: row.try_get(0).map_err(corrupt)?,
                        tenant: row.try_get(1).map_err(corrupt)?,
                        owner: row.try_get(2).map_err(corrupt)?,
                        version: version_of(row.try_get(3).map_err(corrupt)?)?,
                        updated_at_ms: row.try_get(4).map_err(corrupt)?,
                    });
                }
                if more {
                    page.next_cursor = page.sessions.last().map(|l| Cursor::after(l).encode());
                }
                Ok(page)
            })
            .await
        })
    }

    fn delete<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            check_session_id(session_id)?;
            self.run("delete", |c| async move {
                let n = c
                    .client
                    .execute(&c.st.delete, &[&session_id])
                    .await
                    .map_err(db_error)?;
                Ok(n > 0)
            })
            .await
        })
    }
}

fn corrupt(e: tokio_postgres::Error) -> StoreError {
    StoreError::Corrupt(format!("PostgreSQL row: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_are_invalid() {
        assert!(matches!(
            PostgresStore::connect("postgres://h:notaport/db"),
            Err(StoreError::Invalid(_))
        ));
        assert!(PostgresStore::connect("postgres://u@127.0.0.1:5/db").is_ok());
    }
}
