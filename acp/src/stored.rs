//! `session/load` and `session/list` over a session store (`--store`): the library commits
//! every session after every turn, so any server process on the same store can load what
//! another committed.

use std::time::Duration;

use agentao::agent::block_on_store;
use agentao::session_store::{self, ListQuery};
use serde_json::Value;

use super::{replay, to_value, Server};
use crate::options::STORE_TENANT;
use crate::protocol::{SessionInfo, SessionLoadRequest, SessionLoadResponse};
use crate::rpc::{RpcError, INVALID_REQUEST};
use crate::session::valid_session_id;

/// How long a listing may wait for the store.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);
/// Stored sessions a listing reads at most (the store pages; this bounds one request).
const MAX_LISTED: usize = 10_000;

impl Server {
    fn store_tenant(&self) -> String {
        self.opts.template["session"]["tenant"]
            .as_str()
            .unwrap_or(STORE_TENANT)
            .to_owned()
    }

    /// `session/load` from the store: the agent built for the id resumes the stored session
    /// (history, mode, rules, todo list, usage); its history is replayed to the client.
    pub(super) fn load_stored(&self, req: SessionLoadRequest) -> Result<Value, RpcError> {
        if !valid_session_id(&req.session_id) {
            return Err(RpcError::invalid_params("session/load: not a session id"));
        }
        let cwd = self.check_cwd(&req.cwd)?;
        Self::check_additional(&req.additional_directories)?;
        self.check_room("session/load", Some(&req.session_id))?;
        Self::warn_mcp(&req.mcp_servers);
        if let Some(old) = self.sessions().get(&req.session_id).cloned() {
            if old.agent().is_busy() {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    "session/load: that session has a prompt running",
                ));
            }
        }
        let session = self
            .create(req.session_id.clone(), cwd)
            .map_err(|e| RpcError::new(e.code, format!("session/load: {}", e.message)))?;
        if session.agent().store_version() == Some(0) {
            return Err(RpcError::invalid_params(format!(
                "session/load: no saved session {}",
                req.session_id
            )));
        }
        session.adopt_agent_mode();
        let history: Value = serde_json::from_str(&session.agent().history_json())
            .unwrap_or(Value::Array(Vec::new()));
        replay(&session, &history);
        let response = SessionLoadResponse {
            config_options: session.config_options(),
        };
        self.keep("session/load", session)?;
        to_value(&response)
    }

    /// The store's sessions of this server's tenant, with the cwd each was recorded under
    /// (none without `--store`). A store that fails is the request's error.
    pub(super) fn stored_sessions(&self) -> Result<Vec<SessionInfo>, RpcError> {
        let Some(url) = &self.opts.store else {
            return Ok(Vec::new());
        };
        let store = session_store::open(url)
            .map_err(|e| RpcError::internal(format!("session/list: {e}")))?;
        let mut query = ListQuery {
            tenant: Some(self.store_tenant()),
            owner: None,
            limit: 0,
            cursor: None,
        };
        let mut out = Vec::new();
        loop {
            let page = block_on_store(STORE_TIMEOUT, "list", store.list(&query))
                .map_err(|e| RpcError::internal(format!("session/list: {e}")))?;
            out.extend(page.sessions.into_iter().map(|s| SessionInfo {
                session_id: s.session_id,
                cwd: s.owner,
            }));
            match page.next_cursor {
                Some(c) if out.len() < MAX_LISTED => query.cursor = Some(c),
                _ => break,
            }
        }
        Ok(out)
    }
}
