//! The agent's MCP servers: which ones (config, optional `mcp.json` files, the host's
//! registry), their connections, the tools they add to a turn, and their status.
//!
//! Before every turn [`McpManager::sync`] brings the connections in line with the servers
//! listed now: new servers connect, changed ones reconnect, removed ones close, and one whose
//! connection died reconnects. Connecting is concurrent: N servers take about as long as the
//! slowest. A server that fails never fails the agent: its tools are absent and its status says
//! why. It is tried again in the background, after 1 s, then twice as long after each failure
//! (at most [`MAX_RETRY_DELAY`]), and never by a turn: a server that cannot start costs a turn
//! at most its first startup timeout, not one per turn.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::client::{Connection, StderrTail};
use super::config::{parse_server, ConfigFiles, ProcessVars, ServerConfig};
use super::limits::ToolListLimits;
use super::naming::{assign, Listing, Offered};
use super::registry::McpRegistry;
use super::resource_tools::{ListResources, ReadResource, ResourceToolSelection};
use super::tool::McpTool;
use crate::cancel::CancelToken;
use crate::tools::{Tool, ToolRegistry};

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerState {
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

/// The first background retry of a failed server waits this long; each failure doubles it.
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between background retries.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

fn retry_delay(failures: u32) -> Duration {
    FIRST_RETRY_DELAY
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(MAX_RETRY_DELAY)
}

/// Sees each status change; set by the agent, which reports them as events.
pub(crate) type Reporter = Arc<dyn Fn(&StatusChange) + Send + Sync>;

struct Slot {
    config: Result<ServerConfig, String>,
    conn: Option<Arc<Connection>>,
    error: Option<String>,
    stderr: Arc<StderrTail>,
    /// Which connect made this slot: a background retry installs its result only into the slot
    /// it was started for (not one a sync replaced or removed meanwhile).
    epoch: u64,
}

#[derive(Default)]
struct State {
    slots: BTreeMap<String, Slot>,
    next_epoch: u64,
    /// Bumped whenever the set of live connections changes.
    generation: u64,
    registry_error: Option<String>,
}

impl State {
    /// What each server's listed tools are offered as, by server (see [`assign`]): over every
    /// configured server, so a name's meaning never depends on which ones are up.
    fn names(&self) -> BTreeMap<String, Vec<Offered>> {
        let listings: Vec<Listing<'_>> = self
            .slots
            .iter()
            .map(|(name, slot)| Listing {
                server: name,
                tools: slot
                    .conn
                    .as_ref()
                    .map(|c| c.tools.iter().map(|t| t.name.as_str()).collect())
                    .unwrap_or_default(),
            })
            .collect();
        let offered = assign(&listings);
        self.slots.keys().cloned().zip(offered).collect()
    }

    /// The connected servers, each with what its tools are offered as (from [`State::names`]).
    fn live<'a>(
        &self,
        names: &'a BTreeMap<String, Vec<Offered>>,
    ) -> Vec<(Arc<Connection>, &'a [Offered])> {
        self.slots
            .iter()
            .filter_map(|(n, s)| {
                let offered = names.get(n).map_or(&[][..], |o| &o[..]);
                s.conn.clone().map(|c| (c, offered))
            })
            .collect()
    }
}

fn offered_count(offered: &[Offered]) -> usize {
    offered.iter().filter(|o| o.name().is_some()).count()
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
    list_limits: ToolListLimits,
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
    reporter: RwLock<Option<Reporter>>,
}

impl McpManager {
    /// Validates the config's servers (a bad one is a config error naming it).
    pub(crate) fn new(
        workspace: PathBuf,
        config_servers: Map<String, Value>,
        files: ConfigFiles,
        resource_tools: ResourceToolSelection,
        limits: Option<&Value>,
    ) -> Result<Self, String> {
        let list_limits = ToolListLimits::parse(limits)?;
        // Listed from construction on: the first sync runs in the background.
        let connecting: Vec<StatusEntry> = config_servers
            .keys()
            .map(|n| (Self::connecting_json(n), None))
            .collect();
        for (name, v) in &config_servers {
            parse_server(name, v, &workspace, &ProcessVars)
                .map_err(|e| format!("config field `mcp_servers.{name}`: {e}"))?;
        }
        Ok(McpManager {
            workspace,
            config_servers,
            list_limits,
            files,
            registry: RwLock::new(None),
            state: tokio::sync::Mutex::new(State::default()),
            status: Mutex::new((connecting, None)),
            resource_tools,
            cache: Mutex::new(None),
            closed: CancelToken::new(),
            reporter: RwLock::new(None),
        })
    }

    /// Where status changes go, syncs' and background retries' alike.
    pub(crate) fn set_reporter(&self, reporter: Reporter) {
        if let Ok(mut r) = self.reporter.write() {
            *r = Some(reporter);
        }
    }

    fn report(&self, changes: &[StatusChange]) {
        let reporter = self.reporter.read().ok().and_then(|r| r.clone());
        if let Some(report) = reporter {
            for c in changes {
                report(c);
            }
        }
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

    /// Brings the connections in line with the servers listed now (see the module doc). The
    /// reporter sees each change while the sync still holds its lock, so reports of two syncs
    /// (or of a sync and a retry) never interleave.
    pub(crate) async fn sync(self: &Arc<Self>) {
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
        let servers_before: Vec<String> = state.slots.keys().cloned().collect();
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
            let config = parse_server(&name, &raw, &self.workspace, &ProcessVars).map(|mut c| {
                c.list_limits = self.list_limits;
                c
            });
            let slot = state.slots.get(&name);
            let same = slot.is_some_and(|s| s.config == config);
            let alive = slot.is_some_and(|s| s.conn.as_ref().is_some_and(|c| !c.is_dead()));
            // A server that failed is the background retries' to reconnect, never a turn's.
            let failed = slot.is_some_and(|s| s.conn.is_none());
            if same && (alive || failed) {
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
            let epoch = state.next_epoch;
            state.next_epoch += 1;
            if let (None, Ok(c)) = (&conn, &config) {
                self.retry_later(name.clone(), c.clone(), epoch, 1);
            }
            let old = state.slots.insert(
                name.clone(),
                Slot {
                    config,
                    conn: conn.clone(),
                    error: error.clone(),
                    stderr,
                    epoch,
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
                tools: 0,
                error,
            });
        }
        // Names depend on every configured server, connected or not.
        live_changed |= !state.slots.keys().eq(servers_before.iter());
        let names = state.names();
        for c in &mut changes {
            c.tools = names.get(&c.server).map_or(0, |o| offered_count(o));
        }
        if live_changed {
            state.generation += 1;
        }
        if board_changed {
            self.publish(&state, &[]);
        }
        self.report(&changes);
    }

    /// Tries `server` again after the delay for its `failures`, in the background, if its
    /// slot is still the failed one of `epoch` then; a failure schedules the next try.
    fn retry_later(
        self: &Arc<Self>,
        server: String,
        config: ServerConfig,
        epoch: u64,
        failures: u32,
    ) {
        let manager = Arc::downgrade(self);
        let closed = self.closed.clone();
        let delay = retry_delay(failures);
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = closed.cancelled() => return,
            }
            // Held while connecting: freeing the agent cancels `closed`, which ends this.
            let Some(manager) = manager.upgrade() else {
                return;
            };
            if !manager.awaits_retry(&server, epoch).await {
                return;
            }
            let stderr = Arc::new(StderrTail::default());
            let result = tokio::select! {
                r = Connection::connect(&server, &config, stderr.clone()) => r,
                // Dropping the attempt kills what it started.
                _ = closed.cancelled() => return,
            };
            manager
                .install_retry(server, config, epoch, failures, result, stderr)
                .await;
        });
    }

    async fn awaits_retry(&self, server: &str, epoch: u64) -> bool {
        let state = self.state.lock().await;
        !self.closed.is_cancelled()
            && state
                .slots
                .get(server)
                .is_some_and(|s| s.epoch == epoch && s.conn.is_none())
    }

    /// A background retry's result, into the slot it was for (if that is still there).
    async fn install_retry(
        self: &Arc<Self>,
        server: String,
        config: ServerConfig,
        epoch: u64,
        failures: u32,
        result: Result<Connection, String>,
        stderr: Arc<StderrTail>,
    ) {
        let mut state = self.state.lock().await;
        let current = state
            .slots
            .get(&server)
            .is_some_and(|s| s.epoch == epoch && s.conn.is_none());
        if self.closed.is_cancelled() || !current {
            return;
        }
        let (conn, error) = match result {
            Ok(c) => (Some(Arc::new(c)), None),
            Err(e) => (None, Some(e)),
        };
        let connected = conn.is_some();
        if !connected {
            self.retry_later(server.clone(), config.clone(), epoch, failures + 1);
        }
        state.slots.insert(
            server.clone(),
            Slot {
                config: Ok(config),
                conn,
                error: error.clone(),
                stderr,
                epoch,
            },
        );
        if connected {
            state.generation += 1;
        }
        self.publish(&state, &[]);
        // Only a success is news: a failure again leaves the status as it was.
        if connected {
            let tools = state.names().get(&server).map_or(0, |o| offered_count(o));
            self.report(&[StatusChange {
                server,
                state: ServerState::Connected,
                tools,
                error: None,
            }]);
        }
    }

    fn server_json(name: &str, slot: &Slot, state: ServerState, offered: &[Offered]) -> Value {
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
        let listed = conn.map_or(&[][..], |c| &c.tools[..]);
        let mut renamed = Map::new();
        let mut refused = Vec::new();
        for (def, o) in listed.iter().zip(offered) {
            match o {
                Offered::Named(_) => {}
                Offered::Renamed(n) => {
                    renamed.insert(def.name.clone(), json!(n));
                }
                Offered::Refused { name } => refused.push(json!({
                    "tool": def.name,
                    "reason": format!("its name {name} is already another tool's"),
                })),
            }
        }
        json!({
            "name": name,
            "status": state.as_str(),
            "transport": config.map(ServerConfig::transport_name),
            "protocol": conn.and_then(|c| c.protocol.clone()),
            "tools": if conn.is_some() { offered_count(offered) } else { 0 },
            "resources": conn.is_some_and(|c| c.resources),
            "resources_enabled": config.is_some_and(|c| c.resources),
            "trusted": config.is_some_and(|c| c.trust),
            "error": error,
            "stderr": slot.stderr.lines(),
            "renamed_tools": renamed,
            "refused_tools": refused,
        })
    }

    fn connecting_json(name: &str) -> Value {
        json!({"name": name, "status": ServerState::Connecting.as_str(), "tools": 0, "error": null})
    }

    fn publish_connecting<'a>(&self, state: &State, names: impl Iterator<Item = &'a str>) {
        let names: Vec<&str> = names.collect();
        self.publish(state, &names);
    }

    fn publish(&self, state: &State, connecting: &[&str]) {
        let names = state.names();
        let mut out: Vec<StatusEntry> = state
            .slots
            .iter()
            .filter(|(n, _)| !connecting.contains(&n.as_str()))
            .map(|(n, s)| {
                (
                    Self::server_json(
                        n,
                        s,
                        ServerState::Connected,
                        names.get(n).map_or(&[][..], |o| &o[..]),
                    ),
                    s.conn.clone(),
                )
            })
            .collect();
        for n in connecting {
            out.push((Self::connecting_json(n), None));
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
    /// While a sync holds the state, the last registry built for `base` is the answer.
    pub(crate) fn known_tools(&self, base: &Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        if let Ok(state) = self.state.try_lock() {
            let names = state.names();
            return self.with_connections(base, &state.live(&names));
        }
        self.cache
            .lock()
            .ok()
            .and_then(|c| {
                c.as_ref()
                    .filter(|c| Arc::ptr_eq(&c.base, base))
                    .map(|c| c.tools.clone())
            })
            .unwrap_or_else(|| base.clone())
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
        let names = state.names();
        let reg = self.with_connections(base, &state.live(&names));
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

    /// `base` plus the tools of `live` connections under the names they are offered by, and
    /// the resource tools the config keeps.
    fn with_connections(
        &self,
        base: &Arc<ToolRegistry>,
        live: &[(Arc<Connection>, &[Offered])],
    ) -> Arc<ToolRegistry> {
        let resource_servers: Arc<Vec<Arc<Connection>>> = Arc::new(
            live.iter()
                .map(|(c, _)| c)
                .filter(|c| c.resources && c.config.resources)
                .cloned()
                .collect(),
        );
        let mut reg = (**base).clone();
        let mut extra: Vec<Arc<dyn Tool>> = Vec::new();
        let offered = self.resource_tools;
        for (conn, names) in live {
            let hint = conn.resources && conn.config.resources && offered.read;
            for (def, name) in conn.tools.iter().zip(names.iter()) {
                if let Some(fqn) = name.name() {
                    extra.push(Arc::new(McpTool::new(
                        conn.clone(),
                        def.clone(),
                        fqn.to_owned(),
                        hint,
                    )));
                }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_doubling_to_the_cap() {
        let secs: Vec<u64> = (1..=12).map(|f| retry_delay(f).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }
}
