//! The SQLite memory store (config `memory.sqlite_path`; feature `sqlite-memory`): one
//! database file, records as rows, deletes soft (`deleted_at`), as the reference's store.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::memory::{MemoryRecord, MemoryScope, MemoryStore, MemoryUsage, MemoryWriteError};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    type TEXT NOT NULL,
    key_normalized TEXT NOT NULL,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    tags TEXT NOT NULL,
    keywords TEXT NOT NULL,
    source TEXT NOT NULL,
    confidence REAL NOT NULL,
    sensitivity TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS memories_live_key
    ON memories(scope, key_normalized) WHERE deleted_at IS NULL;
";

const COLUMNS: &str = "id, scope, type, key_normalized, title, content, tags, keywords, source, \
                       confidence, sensitivity, created_at, updated_at, deleted_at";

pub(crate) struct SqliteMemoryStore {
    db: Mutex<Connection>,
}

fn err(e: impl std::fmt::Display) -> String {
    format!("memory database: {e}")
}

fn list_json(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<Option<MemoryRecord>> {
    let scope: String = row.get(1)?;
    let Some(scope) = MemoryScope::parse(&scope) else {
        // A row another program wrote with a scope we do not know is not ours to show.
        return Ok(None);
    };
    let strings = |i: usize| -> rusqlite::Result<Vec<String>> {
        let text: String = row.get(i)?;
        Ok(serde_json::from_str(&text).unwrap_or_default())
    };
    Ok(Some(MemoryRecord {
        id: row.get(0)?,
        scope,
        kind: row.get(2)?,
        key_normalized: row.get(3)?,
        title: row.get(4)?,
        content: row.get(5)?,
        tags: strings(6)?,
        keywords: strings(7)?,
        source: row.get(8)?,
        confidence: row.get(9)?,
        sensitivity: row.get(10)?,
        created_at: row.get(11)?,
        updated_at: row.get(12)?,
        deleted_at: row.get(13)?,
    }))
}

impl SqliteMemoryStore {
    /// Opens (creating it and its parent directories if needed) the database at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        let db = Connection::open(path).map_err(err)?;
        db.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        db.execute_batch(SCHEMA).map_err(err)?;
        Ok(SqliteMemoryStore { db: Mutex::new(db) })
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self, r: &MemoryRecord) -> Result<(), String> {
        let mut db = self.db();
        let tx = db.transaction().map_err(err)?;
        tx.execute(
            "UPDATE memories SET deleted_at = ?1 WHERE scope = ?2 AND key_normalized = ?3 \
             AND id <> ?4 AND deleted_at IS NULL",
            params![r.updated_at, r.scope.as_str(), r.key_normalized, r.id],
        )
        .map_err(err)?;
        tx.execute(
            &format!(
                "INSERT OR REPLACE INTO memories ({COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
            ),
            params![
                r.id,
                r.scope.as_str(),
                r.kind,
                r.key_normalized,
                r.title,
                r.content,
                list_json(&r.tags),
                list_json(&r.keywords),
                r.source,
                r.confidence,
                r.sensitivity,
                r.created_at,
                r.updated_at,
                r.deleted_at,
            ],
        )
        .map_err(err)?;
        tx.commit().map_err(err)
    }
}

impl MemoryStore for SqliteMemoryStore {
    fn upsert(&self, r: &MemoryRecord) -> Result<(), MemoryWriteError> {
        self.write(r).map_err(MemoryWriteError::Failed)
    }

    fn usage(&self) -> Result<MemoryUsage, String> {
        // `octet_length` reads a value's size from the row header, not the value: the budget is
        // checked on every save, and a full store holds megabytes.
        self.db()
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(octet_length(key_normalized) + octet_length(title) \
                 + octet_length(content) + octet_length(tags) + octet_length(keywords)), 0) \
                 FROM memories WHERE deleted_at IS NULL",
                [],
                |row| {
                    Ok(MemoryUsage {
                        entries: row.get::<_, i64>(0)?.max(0) as u64,
                        bytes: row.get::<_, i64>(1)?.max(0) as u64,
                    })
                },
            )
            .map_err(err)
    }

    fn get(&self, scope: MemoryScope, key: &str) -> Result<Option<MemoryRecord>, String> {
        self.db()
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM memories \
                     WHERE scope = ?1 AND key_normalized = ?2 AND deleted_at IS NULL"
                ),
                params![scope.as_str(), key],
                from_row,
            )
            .optional()
            .map(Option::flatten)
            .map_err(err)
    }

    fn list(&self, scope: Option<MemoryScope>) -> Result<Vec<MemoryRecord>, String> {
        let db = self.db();
        let mut stmt = db
            .prepare(&format!(
                "SELECT {COLUMNS} FROM memories WHERE deleted_at IS NULL \
                 AND (?1 IS NULL OR scope = ?1) ORDER BY updated_at DESC"
            ))
            .map_err(err)?;
        let rows = stmt
            .query_map(params![scope.map(MemoryScope::as_str)], from_row)
            .map_err(err)?;
        let mut out = Vec::new();
        for row in rows {
            if let Some(r) = row.map_err(err)? {
                out.push(r);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, key: &str, content: &str, at: &str) -> MemoryRecord {
        MemoryRecord {
            id: id.into(),
            tags: vec!["t".into()],
            ..MemoryRecord::test_note(key, content, at)
        }
    }

    #[test]
    fn records_survive_reopening_and_replace_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/memory.db");
        {
            let s = SqliteMemoryStore::open(&path).unwrap();
            s.upsert(&rec("00000001", "k", "one", "2026-01-01T00:00:00Z"))
                .unwrap();
            s.upsert(&rec("00000002", "k", "two", "2026-01-01T00:00:01Z"))
                .unwrap();
            s.upsert(&rec("00000003", "other", "x", "2026-01-01T00:00:02Z"))
                .unwrap();
        }
        let s = SqliteMemoryStore::open(&path).unwrap();
        let all = s.list(None).unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].key_normalized, "other", "most recent first");
        let k = s.get(MemoryScope::Project, "k").unwrap().unwrap();
        assert_eq!((k.id.as_str(), k.content.as_str()), ("00000002", "two"));
        assert_eq!(k.tags, vec!["t".to_owned()]);
        assert!(s.get(MemoryScope::User, "k").unwrap().is_none());
        assert!(s.list(Some(MemoryScope::User)).unwrap().is_empty());
        // The replaced record is kept, soft-deleted.
        let n: i64 = s
            .db()
            .query_row("SELECT COUNT(*) FROM memories", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 3);
    }
}
