//! A store in this process's memory (`memory:` URLs): the same semantics as the durable
//! stores, for tests and for hosts that want versions without durability.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{
    check_commit, check_session_id, now_ms, Cursor, ListQuery, SessionCommit, SessionListing,
    SessionPage, SessionStore, StoreError, StoreFuture, StoredSession,
};

#[derive(Default)]
pub(crate) struct MemoryStore {
    sessions: Mutex<HashMap<String, StoredSession>>,
}

impl MemoryStore {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, StoredSession>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn commit_now(&self, c: &SessionCommit) -> Result<u64, StoreError> {
        check_commit(c)?;
        let mut sessions = self.sessions();
        let stored = sessions.get(&c.session_id).map_or(0, |s| s.version);
        if stored != c.continues {
            return Err(StoreError::Conflict {
                session_id: c.session_id.clone(),
                continues: c.continues,
                stored,
            });
        }
        let version = stored + 1;
        // Strictly later than the version it replaces, so newest-first holds within a
        // millisecond too.
        let floor = sessions
            .get(&c.session_id)
            .map_or(0, |s| s.updated_at_ms + 1);
        sessions.insert(
            c.session_id.clone(),
            StoredSession {
                session_id: c.session_id.clone(),
                tenant: c.tenant.clone(),
                owner: c.owner.clone(),
                version,
                updated_at_ms: now_ms().max(floor),
                document: c.document.clone(),
            },
        );
        Ok(version)
    }

    fn list_now(&self, q: &ListQuery) -> Result<SessionPage, StoreError> {
        let after = q.cursor.as_deref().map(Cursor::decode).transpose()?;
        let mut rows: Vec<SessionListing> = self
            .sessions()
            .values()
            .filter(|s| q.tenant.as_ref().is_none_or(|t| *t == s.tenant))
            .filter(|s| q.owner.as_ref().is_none_or(|o| *o == s.owner))
            .map(|s| SessionListing {
                session_id: s.session_id.clone(),
                tenant: s.tenant.clone(),
                owner: s.owner.clone(),
                version: s.version,
                updated_at_ms: s.updated_at_ms,
            })
            .filter(|l| after.as_ref().is_none_or(|c| c.precedes(l)))
            .collect();
        rows.sort_by(|a, b| {
            (b.updated_at_ms, &b.session_id).cmp(&(a.updated_at_ms, &a.session_id))
        });
        let size = q.page_size() as usize;
        let next_cursor = (rows.len() > size).then(|| Cursor::after(&rows[size - 1]).encode());
        rows.truncate(size);
        Ok(SessionPage {
            sessions: rows,
            next_cursor,
        })
    }
}

impl SessionStore for MemoryStore {
    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        let r = check_session_id(session_id).map(|()| self.sessions().get(session_id).cloned());
        Box::pin(async move { r })
    }

    fn commit<'a>(&'a self, commit: &'a SessionCommit) -> StoreFuture<'a, u64> {
        let r = self.commit_now(commit);
        Box::pin(async move { r })
    }

    fn list<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, SessionPage> {
        let r = self.list_now(query);
        Box::pin(async move { r })
    }

    fn delete<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        let r = check_session_id(session_id).map(|()| self.sessions().remove(session_id).is_some());
        Box::pin(async move { r })
    }
}
