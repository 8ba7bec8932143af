//! A session's link to its store: the version its next commit continues, the commit at the
//! end of every turn, and how the last one went (a `session_committed` event and
//! [`Agent::last_commit`]).
//!
//! A commit that fails leaves the in-memory session as it was: the turn happened, only its
//! durability is in doubt, and the host decides (retry with the next turn, or reload).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::events::EventWriter;
use crate::permissions::Mode;
use crate::session_store::{SessionCommit, SessionStore, StoreError};
use crate::subagents::background::record::TaskRecord;

use super::session::AgentCore;
use super::session_document::{
    typed_history, BackgroundEntry, PermissionState, SessionDocument, TodoEntry, UsageTotals,
    SESSION_FORMAT_VERSION,
};
use super::{lock, on_runtime_thread, runtime, Agent, AgentError};

/// The store a session commits to, and where in it the session stands.
pub(crate) struct StoreLink {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) tenant: String,
    pub(super) owner: String,
    pub(super) timeout: Duration,
    /// The version the next commit continues (0: the store does not hold the session yet).
    pub(super) version: std::sync::Mutex<u64>,
}

/// How a commit went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStatus {
    Committed,
    /// Another agent committed the version this one continued; nothing was written.
    Conflict,
    /// The store did not answer in time: whether the commit landed is unknown until a load.
    Timeout,
    /// The store failed (unreachable, read-only, gone).
    Unavailable,
    /// The store holds something unreadable where the session should be.
    Corrupt,
    /// The store refused the commit as malformed.
    Invalid,
}

impl CommitStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CommitStatus::Committed => "committed",
            CommitStatus::Conflict => "conflict",
            CommitStatus::Timeout => "timeout",
            CommitStatus::Unavailable => "unavailable",
            CommitStatus::Corrupt => "corrupt",
            CommitStatus::Invalid => "invalid",
        }
    }
}

/// The last commit of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitReport {
    pub status: CommitStatus,
    /// The version the store now holds from this agent (committed), or the one the commit
    /// continued (any failure).
    pub version: u64,
    /// On a conflict, the version the store holds.
    pub stored_version: Option<u64>,
    /// Empty when committed.
    pub message: String,
}

impl CommitReport {
    fn of(continued: u64, r: &Result<u64, StoreError>) -> CommitReport {
        let (status, stored_version) = match r {
            Ok(_) => (CommitStatus::Committed, None),
            Err(StoreError::Conflict { stored, .. }) => (CommitStatus::Conflict, Some(*stored)),
            Err(StoreError::Timeout { .. }) => (CommitStatus::Timeout, None),
            Err(StoreError::Unavailable(_)) => (CommitStatus::Unavailable, None),
            Err(StoreError::Corrupt(_)) => (CommitStatus::Corrupt, None),
            Err(StoreError::Invalid(_)) => (CommitStatus::Invalid, None),
        };
        CommitReport {
            status,
            version: *r.as_ref().unwrap_or(&continued),
            stored_version,
            message: r
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default(),
        }
    }
}

/// Runs a store operation to its end or its timeout, from a host thread (never a library
/// thread: it blocks).
pub fn block_on_store<T>(
    timeout: Duration,
    op: &'static str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, AgentError> {
    if on_runtime_thread() {
        return Err(AgentError::Reentrant);
    }
    runtime()?
        .block_on(with_timeout(timeout, op, fut))
        .map_err(AgentError::Store)
}

pub(crate) async fn with_timeout<T>(
    timeout: Duration,
    operation: &'static str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or(Err(StoreError::Timeout { operation }))
}

impl AgentCore {
    /// The session as a document (between turns it is the whole session; during one, the
    /// session as of the last finished turn plus what the running turn changed outside the
    /// history).
    pub(crate) fn document(&self) -> SessionDocument {
        let history = {
            let h = self.history.read().unwrap_or_else(|e| e.into_inner());
            match serde_json::to_value(&*h).expect("messages serialize") {
                serde_json::Value::Array(items) => items
                    .into_iter()
                    .filter_map(|m| match m {
                        serde_json::Value::Object(m) => Some(m),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            }
        };
        let permissions = self
            .engine
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|e| PermissionState {
                mode: e.mode().as_str().to_owned(),
                added: e.added().to_vec(),
            });
        SessionDocument {
            format_version: SESSION_FORMAT_VERSION,
            session_id: self.session_id.clone(),
            lineage: self.lineage.clone(),
            history,
            permissions,
            todos: self
                .tool_services
                .todos()
                .into_iter()
                .map(|t| TodoEntry {
                    content: t.content,
                    status: t.status,
                })
                .collect(),
            background_tasks: self
                .background
                .records()
                .into_iter()
                .map(|(id, record)| BackgroundEntry { id, record })
                .collect(),
            usage: UsageTotals::from(&self.llm.usage.snapshot()),
        }
    }

    /// Gives a freshly built agent the state of `doc` (its id and lineage were given at
    /// construction).
    pub(super) fn apply(&self, doc: SessionDocument) -> Result<(), AgentError> {
        let history = typed_history(doc.history.clone()).map_err(|e| {
            AgentError::Document(super::session_document::DocumentError::Invalid(e))
        })?;
        if let Some(p) = &doc.permissions {
            let mut engine = self.engine.write().unwrap_or_else(|e| e.into_inner());
            let Some(engine) = engine.as_mut() else {
                return Err(AgentError::InvalidConfig(
                    "the session document holds permission state but the config has no \
                     `permissions` section: resume it with the config it ran under"
                        .into(),
                ));
            };
            let mode = Mode::parse(&p.mode).unwrap_or(Mode::WorkspaceWrite);
            engine.set_mode(mode);
            self.read_only
                .store(mode == Mode::ReadOnly, std::sync::atomic::Ordering::Release);
            for (i, added) in p.added.iter().enumerate() {
                engine.replay(added).map_err(|e| {
                    AgentError::Document(super::session_document::DocumentError::Invalid(format!(
                        "permissions.added[{i}]: {e}"
                    )))
                })?;
            }
        }
        self.tool_services.set_todos(doc.todo_items());
        self.background.adopt(
            doc.background_tasks
                .into_iter()
                .map(|b| (b.id, b.record))
                .collect::<Vec<(String, TaskRecord)>>(),
        );
        self.llm.usage.add(&doc.usage.to_usage());
        self.write_history(|h| *h = history);
        Ok(())
    }

    /// Commits the session to its store, if it has one, and reports how it went. Called where
    /// a turn finishes, before its result is handed out: a host that has the result knows
    /// whether the turn is durable.
    pub(super) async fn commit_session(&self) {
        let Some(link) = &self.store else {
            return;
        };
        let continues = *lock(&link.version);
        let commit = SessionCommit {
            session_id: self.session_id.clone(),
            tenant: link.tenant.clone(),
            owner: link.owner.clone(),
            continues,
            document: self.document().to_json(),
        };
        let r = with_timeout(link.timeout, "commit", link.store.commit(&commit)).await;
        if let Ok(v) = &r {
            *lock(&link.version) = *v;
        }
        let report = CommitReport::of(continues, &r);
        let mut w = EventWriter::default();
        self.emitter.emit(w.event(
            "session_committed",
            &json!({
                "session_id": self.session_id,
                "status": report.status.as_str(),
                "version": report.version,
                "stored_version": report.stored_version,
                "message": report.message,
            }),
        ));
        *lock(&self.last_commit) = Some(report);
    }
}

impl Agent {
    /// The session as a session document (JSON).
    pub fn export_session(&self) -> String {
        self.core.document().to_json()
    }

    /// How the last commit to the session store went; `None` before the first or without a
    /// store.
    pub fn last_commit(&self) -> Option<CommitReport> {
        lock(&self.core.last_commit).clone()
    }

    /// The version of the session the store holds from this agent (0: none yet); `None`
    /// without a store.
    pub fn store_version(&self) -> Option<u64> {
        self.core.store.as_ref().map(|l| *lock(&l.version))
    }
}
