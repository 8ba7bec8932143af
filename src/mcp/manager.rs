//! The agent's MCP servers: which ones (config, optional `mcp.json` files, the host's
//! registry), their connections, the tools they add to a turn, and their status.
//!
//! Before every turn [`McpManager::sync`] brings the connections in line with the servers
//! listed now: new servers connect, changed ones reconnect, removed ones close, and a server
//! that failed (or whose connection died) before the turn asked is tried again. Connecting is
//! concurrent: N servers take about as long as the slowest. A server that fails never fails
//! the agent: its tools are absent and its status says why.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::client::{Connection, StderrTail};
use super::config::{parse_server, ConfigFiles, ProcessVars, ServerConfig};
use super::registry::McpRegistry;
use super::resource_tools::{ListResources, ReadResource, ResourceToolSelection};
use super::tool::McpTool;
use crate::cancel::CancelToken;
use crate::tools::{Tool, ToolRegistry};

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerState {
    // Documented by `agentao_agent_mcp_status` but built nowhere in this crate; whether a
    // first connect should report it is for the MCP work to decide.
    #[allow(dead_code)]
    Connecting,
    Connected,
    Error,
}

impl ServerState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Error => "error",
        }
    }
}

/// A change a sync made, for the agent to report as an `mcp_server_status` event.
#[derive(Debug, Clone)]
pub(crate) struct StatusChange {
    pub(crate) server: String,
    pub(crate) state: ServerState,
    pub(crate) tools: usize,
    pub(crate) error: Option<String>,
}

struct Slot {
    config: Result<ServerConfig, String>,
    conn: Option<Arc<Connection>>,
    error: Option<String>,
    finished: Instant,
    stderr: Arc<StderrTail>,
}

#[derive(Default)]
struct State {
    slots: BTreeMap<String, Slot>,
    /// Bumped whenever the set of live connections changes.
    generation: u64,
    registry_error: Option<String>,
}

/// One server's status entry and its connection, kept for the status call.
type StatusEntry = (Value, Option<Arc<Connection>>);

/// The servers' entries and the registry's error.
type StatusBoard = (Vec<StatusEntry>, Option<String>);

/// A turn's tools, for a generation of connections and a base registry.
struct ToolsCache {
    generation: u64,
    base: Arc<ToolRegistry>,
    tools: Arc<ToolRegistry>,
}

/// The agent's MCP servers.
pub(crate) struct McpManager {
    workspace: PathBuf,
    config_servers: Map<String, Value>,
    files: ConfigFiles,
    registry: RwLock<Option<Arc<dyn McpRegistry>>>,
    state: tokio::sync::Mutex<State>,
    /// What the status call reads without waiting for a sync in progress: each server's
    /// entry with its connection (whose death shows at read time), and the registry's error.
    status: Mutex<StatusBoard>,
    /// The resource tools the config's tool selection keeps.
    resource_tools: ResourceToolSelection,
    /// The last turn's tools, kept while neither the connections nor the base registry
    /// changed: the same list keeps the request's rendered `tools` array cached.
    cache: Mutex<Option<ToolsCache>>,
    /// Cancelled when the agent goes: a sync in progress stops and drops what it started.
    closed: CancelToken,
}

impl McpManager {
    /// Validates the config's servers (a bad one is a config error naming it).
    pub(crate) fn new(
        workspace: PathBuf,
        config_servers: Map<String, Value>,
        files: ConfigFiles,
        resource_tools: ResourceToolSelection,
    ) -> Result<Self, String> {
        for (name, v) in &config_servers {
            parse_server(name, v, &workspace, &ProcessVars)
                .map_err(|e| format!("config field `mcp_servers.{name}`: {e}"))?;
        }
        Ok(McpManager {
            workspace,
            config_servers,
            files,
            registry: RwLock::new(None),
            state: tokio::sync::Mutex::new(State::default()),
            status: Mutex::new((Vec::new(), None)),
            resource_tools,
            cache: Mutex::new(None),
            closed: CancelToken::new(),
        })
    }

    /// Whether any server can exist (config, files or a registry): otherwise a sync is a no-op.
    pub(crate) fn has_sources(&self) -> bool {
        !self.config_servers.is_empty()
            || self.files != ConfigFiles::default()
            || self.registry.read().map(|r| r.is_some()).unwrap_or(false)
    }

    /// Closes every connection (killing stdio servers with their groups) and stops a sync in
    /// progress; later syncs do nothing. Called when the agent goes.
    pub(crate) fn close(&self) {
        self.closed.cancel("the agent was freed");
        if let Ok(mut state) = self.state.try_lock() {
            state.slots.clear();
        }
        self.forget_tools();
    }

    /// Forgets the last turn's tools: when the base registry changed, so a tool removed from it
    /// is released now rather than at the next turn (a host tool's finalizer is due then), and
    /// when the agent goes. What it held is dropped after the lock, since a host finalizer may
    /// run then.
    pub(crate) fn forget_tools(&self) {
        let kept = self.cache.lock().ok().and_then(|mut c| c.take());
        drop(kept);
    }

    pub(crate) fn set_registry(&self, registry: Option<Arc<dyn McpRegistry>>) {
        if let Ok(mut r) = self.registry.write() {
            *r = registry;
        }
    }

    /// The servers listed now, by name: files, then the registry, then the config's own.
    async fn desired(&self) -> (BTreeMap<String, Value>, Option<String>) {
        let mut out: BTreeMap<String, Value> = BTreeMap::new();
        let mut problem = None;
        if self.files != ConfigFiles::default() {
            let (files, ws) = (self.files, self.workspace.clone());
            match tokio::task::spawn_blocking(move || files.read(&ws)).await {
                Ok(Ok(m)) => out.extend(m),
                Ok(Err(e)) => problem = Some(format!("mcp.json: {e}")),
                Err(e) => problem = Some(format!("mcp.json: {e}")),
            }
        }
        let registry = self.registry.read().ok().and_then(|r| r.clone());
        if let Some(reg) = registry {
            // Host code: never on a runtime worker.
            let answer = tokio::task::spawn_blocking(move || reg.list_servers()).await;
            let parsed = match answer {
                Ok(Ok(None)) => Ok(Map::new()),
                Ok(Ok(Some(text))) => match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(m)) => Ok(m),
                    Ok(_) => Err("list_servers must return a JSON object".to_owned()),
                    Err(e) => Err(format!("list_servers returned invalid JSON: {e}")),
                },
                Ok(Err(e)) => Err(format!("list_servers failed: {e}")),
                Err(e) => Err(format!("list_servers failed: {e}")),
            };
            match parsed {
                Ok(m) => out.extend(m),
                Err(e) => problem = Some(format!("MCP registry: {e}")),
            }
        }
        out.extend(self.config_servers.clone());
        (out, problem)
    }

    /// Brings the connections in line with the servers listed now (see the module doc).
    /// `asked` is when the caller wanted fresh servers: a failure that ended after it (another
    /// sync the caller waited for) is not retried. `report` sees each change while the sync
    /// still holds its lock, so reports of two syncs never interleave.
    pub(crate) async fn sync(&self, asked: Instant, report: &(dyn Fn(&StatusChange) + Sync)) {
        if !self.has_sources() || self.closed.is_cancelled() {
            return;
        }
        let mut state = self.state.lock().await;
        if self.closed.is_cancelled() {
            state.slots.clear();
            return;
        }
        let (desired, registry_problem) = self.desired().await;
        let registry_failed = registry_problem.is_some();
        // The status board is rebuilt only when something changed: a turn with the same
        // servers connected does no status work (a connection's death shows at read time).
        let mut board_changed = state.registry_error != registry_problem;
        state.registry_error = registry_problem;
        let mut changes = Vec::new();
        let mut live_changed = false;
        // A failed registry leaves its servers as they were: only drop what is known gone.
        let removed: Vec<String> = state
            .slots
            .keys()
            .filter(|k| !desired.contains_key(*k) && !registry_failed)
            .cloned()
            .collect();
        for name in removed {
            board_changed = true;
            if let Some(slot) = state.slots.remove(&name) {
                live_changed |= slot.conn.is_some();
            }
        }
        let mut todo = Vec::new();
        for (name, raw) in desired {
            let config = parse_server(&name, &raw, &self.workspace, &ProcessVars);
            let slot = state.slots.get(&name);
            let same = slot.is_some_and(|s| s.config == config);
            let alive = slot.is_some_and(|s| s.conn.as_ref().is_some_and(|c| !c.is_dead()));
            let failed_before = slot.is_some_and(|s| s.conn.is_none() && s.finished < asked);
            let dead = slot.is_some_and(|s| s.conn.as_ref().is_some_and(|c| c.is_dead()));
            if same && (alive || (!failed_before && !dead)) {
                continue;
            }
            todo.push((name, config));
        }
        board_changed |= !todo.is_empty();
        if !todo.is_empty() {
            self.publish_connecting(&state, todo.iter().map(|(n, _)| n.as_str()));
        }
        let attempts = todo.into_iter().map(|(name, config)| async move {
            let stderr = Arc::new(StderrTail::default());
            let result = match &config {
                Ok(c) => Connection::connect(&name, c, stderr.clone()).await,
                Err(e) => Err(e.clone()),
            };
            (name, config, result, stderr)
        });
        let results = tokio::select! {
            r = futures_util::future::join_all(attempts) => r,
            // Dropping the attempts kills what they started.
            _ = self.closed.cancelled() => {
                state.slots.clear();
                return;
            }
        };
        for (name, config, result, stderr) in results {
            let (conn, error) = match result {
                Ok(c) => (Some(Arc::new(c)), None),
                Err(e) => (None, Some(e)),
            };
            let old = state.slots.insert(
                name.clone(),
                Slot {
                    config,
                    conn: conn.clone(),
                    error: error.clone(),
                    finished: Instant::now(),
                    stderr,
                },
            );
            live_changed |= conn.is_some() || old.is_some_and(|o| o.conn.is_some());
            changes.push(StatusChange {
                server: name,
                state: if conn.is_some() {
                    ServerState::Connected
                } else {
                    ServerState::Error
                },
                tools: conn.as_ref().map_or(0, |c| c.tools.len()),
                error,
            });
        }
        if live_changed {
            state.generation += 1;
        }
        if board_changed {
            self.publish(&state, &[]);
        }
        for c in &changes {
            report(c);
        }
    }

    fn server_json(name: &str, slot: &Slot, state: ServerState) -> Value {
        let conn = slot.conn.as_ref().filter(|c| !c.is_dead());
        let state = match (state, conn, &slot.conn) {
            (ServerState::Connecting, _, _) => ServerState::Connecting,
            (_, Some(_), _) => ServerState::Connected,
            _ => ServerState::Error,
        };
        let error = match (&slot.error, &slot.conn) {
            (Some(e), _) => Some(e.clone()),
            (None, Some(c)) if c.is_dead() => {
                Some("the connection closed; the next turn reconnects".to_owned())
            }
            _ => None,
        };
        let config = slot.config.as_ref().ok();
        json!({
            "name": name,
            "status": state.as_str(),
            "transport": config.map(ServerConfig::transport_name),
            "protocol": conn.and_then(|c| c.protocol.clone()),
            "tools": conn.map_or(0, |c| c.tools.len()),
            "resources": conn.is_some_and(|c| c.resources),
            "resources_enabled": config.is_some_and(|c| c.resources),
            "trusted": config.is_some_and(|c| c.trust),
            "error": error,
            "stderr": slot.stderr.lines(),
        })
    }

    fn publish_connecting<'a>(&self, state: &State, names: impl Iterator<Item = &'a str>) {
        let names: Vec<&str> = names.collect();
        self.publish(state, &names);
    }

    fn publish(&self, state: &State, connecting: &[&str]) {
        let mut out: Vec<StatusEntry> = state
            .slots
            .iter()
            .filter(|(n, _)| !connecting.contains(&n.as_str()))
            .map(|(n, s)| {
                (
                    Self::server_json(n, s, ServerState::Connected),
                    s.conn.clone(),
                )
            })
            .collect();
        for n in connecting {
            out.push((
                json!({"name": n, "status": "connecting", "tools": 0, "error": null}),
                None,
            ));
        }
        out.sort_by(|a, b| a.0["name"].as_str().cmp(&b.0["name"].as_str()));
        if let Ok(mut s) = self.status.lock() {
            *s = (out, state.registry_error.clone());
        }
    }

    /// `{"servers": [{name, status, transport, protocol, tools, resources, resources_enabled,
    /// trusted, error, stderr}], "registry_error"?}`.
    pub(crate) fn status_json(&self) -> String {
        let Ok(guard) = self.status.lock() else {
            return json!({"servers": []}).to_string();
        };
        let servers: Vec<Value> = guard
            .0
            .iter()
            .map(|(v, conn)| {
                let mut v = v.clone();
                if let Some(c) = conn {
                    if c.is_dead() {
                        v["status"] = json!(ServerState::Error.as_str());
                        v["tools"] = json!(0);
                        v["error"] = json!("the connection closed; the next turn reconnects");
                    }
                    v["stderr"] = json!(c.stderr.lines());
                }
                v
            })
            .collect();
        let mut doc = json!({"servers": servers});
        if let Some(e) = &guard.1 {
            doc["registry_error"] = json!(e);
        }
        doc.to_string()
    }

    /// The tools of the servers connected now, as the next turn would offer them (a dead
    /// connection's too: the turn offers them until its sync reconnects), without waiting
    /// for a sync in progress or starting one: for the preflight, which may run anywhere.
    pub(crate) fn known_tools(&self, base: &Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        let live: Vec<Arc<Connection>> = self
            .status
            .lock()
            .map(|s| s.0.iter().filter_map(|(_, c)| c.clone()).collect())
            .unwrap_or_default();
        self.with_connections(base, &live)
    }

    /// `base` plus the tools of `live` connections, and the resource tools the config keeps.
    fn with_connections(
        &self,
        base: &Arc<ToolRegistry>,
        live: &[Arc<Connection>],
    ) -> Arc<ToolRegistry> {
        let resource_servers: Arc<Vec<Arc<Connection>>> = Arc::new(
            live.iter()
                .filter(|c| c.resources && c.config.resources)
                .cloned()
                .collect(),
        );
        let mut reg = (**base).clone();
        let mut extra: Vec<Arc<dyn Tool>> = Vec::new();
        let offered = self.resource_tools;
        for conn in live {
            let hint = conn.resources && conn.config.resources && offered.read;
            for def in &conn.tools {
                extra.push(Arc::new(McpTool::new(conn.clone(), def.clone(), hint)));
            }
        }
        if !resource_servers.is_empty() {
            for templates in [false, true] {
                if (templates && offered.templates) || (!templates && offered.list) {
                    extra.push(Arc::new(ListResources {
                        servers: resource_servers.clone(),
                        templates,
                    }));
                }
            }
            if offered.read {
                extra.push(Arc::new(ReadResource {
                    servers: resource_servers,
                }));
            }
        }
        if extra.is_empty() {
            base.clone()
        } else {
            reg.extend(extra);
            Arc::new(reg)
        }
    }

    /// `base` plus every live server's tools (and the resource tools the selection keeps when
    /// a server offers resources). Built once per generation of connections and base.
    pub(crate) async fn tools(&self, base: &Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        let state = self.state.lock().await;
        if let Ok(c) = self.cache.lock() {
            if let Some(c) = c.as_ref() {
                if c.generation == state.generation && Arc::ptr_eq(&c.base, base) {
                    return c.tools.clone();
                }
            }
        }
        let live: Vec<Arc<Connection>> = state
            .slots
            .values()
            .filter_map(|s| s.conn.clone())
            .collect();
        let reg = self.with_connections(base, &live);
        let replaced = self.cache.lock().ok().and_then(|mut c| {
            c.replace(ToolsCache {
                generation: state.generation,
                base: base.clone(),
                tools: reg.clone(),
            })
        });
        // A tool dropped with it may run a host finalizer: not under the lock.
        drop(replaced);
        reg
    }
}
