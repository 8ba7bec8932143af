//! One ACP session: an agent built from the server's config template, its transport, the
//! session's mode and model knobs, and its history file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use agentao::agent::Agent;
use agentao::permissions::Mode;
use serde_json::{json, Value};

use crate::protocol::{ConfigOption, ConfigOptionChoice, SessionMode, SessionModeState};
use crate::rpc::{Outbox, Pending, RpcError};
use crate::transport::AcpTransport;

pub const MODES: [(&str, &str, &str); 4] = [
    (
        "read-only",
        "Read only",
        "Reads and searches; nothing that writes runs",
    ),
    (
        "workspace-write",
        "Workspace write",
        "Edits inside the workspace; shell commands ask first",
    ),
    (
        "full-access",
        "Full access",
        "Everything is allowed (the hardline floor still applies)",
    ),
    (
        "plan",
        "Plan",
        "Plans without editing; writes and shell commands are denied",
    ),
];

pub struct Session {
    pub id: String,
    pub cwd: PathBuf,
    agent: RwLock<Agent>,
    transport: Arc<AcpTransport>,
    /// The agent's config (with this session's working directory); edited by model switches.
    config: Mutex<Value>,
    mode_id: Mutex<String>,
    /// "Always allow" rules, re-applied when a model switch rebuilds the agent.
    allowed: Mutex<Vec<Value>>,
    /// One history write at a time: a quick next prompt can end while the last one's
    /// completion is still saving.
    saving: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Session {
    /// Builds a session whose agent works in `cwd`; `mode` is the initial permission mode.
    pub fn create(
        id: String,
        cwd: PathBuf,
        template: &Value,
        mode: Mode,
        out: Outbox,
        pending: Arc<Pending>,
    ) -> Result<Arc<Session>, RpcError> {
        let mut config = template.clone();
        config["working_directory"] = json!(cwd.display().to_string());
        // With a store, the session is committed under its id, its cwd recorded as its owner
        // (what session/list reports); an id the store holds is resumed.
        if let Some(section) = config.get_mut("session").and_then(Value::as_object_mut) {
            section.insert("id".into(), json!(id));
            section.insert("owner".into(), json!(cwd.display().to_string()));
        }
        let transport = Arc::new(AcpTransport::new(id.clone(), cwd.clone(), out, pending));
        let agent = build_agent(&config, &transport)?;
        if mode == Mode::Plan {
            agent
                .set_permission_mode(mode)
                .map_err(|e| RpcError::internal(e.to_string()))?;
        }
        let session = Arc::new(Session {
            id,
            cwd,
            agent: RwLock::new(agent),
            transport: transport.clone(),
            config: Mutex::new(config),
            mode_id: Mutex::new(mode.as_str().to_owned()),
            allowed: Mutex::new(Vec::new()),
            saving: Mutex::new(()),
        });
        transport.attach(Arc::downgrade(&session));
        Ok(session)
    }

    pub fn agent(&self) -> Agent {
        self.agent.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn transport(&self) -> &AcpTransport {
        &self.transport
    }

    pub fn mode_id(&self) -> String {
        lock(&self.mode_id).clone()
    }

    pub fn modes(&self) -> SessionModeState {
        SessionModeState {
            current_mode_id: self.mode_id(),
            available_modes: MODES
                .iter()
                .map(|&(id, name, description)| SessionMode {
                    id,
                    name,
                    description,
                })
                .collect(),
        }
    }

    /// Takes the agent's permission mode as the session's (a session resumed from a store
    /// brings its own).
    pub fn adopt_agent_mode(&self) {
        *lock(&self.mode_id) = self.agent().active_permissions().mode;
    }

    /// Applies a mode: one of the four presets switches the permission engine; any other id is
    /// kept as is (a client-side mode such as `code`), as the reference does.
    pub fn set_mode(&self, mode_id: &str) -> Result<(), RpcError> {
        if let Some(mode) = Mode::parse(mode_id) {
            self.agent()
                .set_permission_mode(mode)
                .map_err(|e| RpcError::internal(e.to_string()))?;
        }
        *lock(&self.mode_id) = mode_id.to_owned();
        Ok(())
    }

    pub fn provider(&self) -> String {
        lock(&self.config)["llm"]["provider"]
            .as_str()
            .unwrap_or("openai")
            .to_owned()
    }

    pub fn model(&self) -> String {
        let config = lock(&self.config);
        model_of(&config)
    }

    pub fn max_tokens(&self) -> u64 {
        lock(&self.config)["llm"]["max_tokens"]
            .as_u64()
            .unwrap_or(u64::from(agentao::config::DEFAULT_MAX_TOKENS))
    }

    /// The window the library compacts against (`max_context_tokens`).
    pub fn context_length(&self) -> u64 {
        lock(&self.config)["max_context_tokens"]
            .as_u64()
            .unwrap_or(agentao::config::DEFAULT_MAX_CONTEXT_TOKENS)
    }

    pub fn config_options(&self) -> Vec<ConfigOption> {
        let model = self.model();
        let value = format!("{}/{}", self.provider(), model);
        vec![ConfigOption {
            id: "model",
            name: "Model",
            category: "model",
            kind: "select",
            current_value: value.clone(),
            options: vec![ConfigOptionChoice { value, name: model }],
        }]
    }

    /// Switches the model (and the token caps) between turns: the agent is rebuilt from the
    /// edited config and given the history, the mode and the "always allow" rules.
    pub fn set_model(
        &self,
        model: Option<&str>,
        max_tokens: Option<u64>,
        context_length: Option<u64>,
    ) -> Result<(), RpcError> {
        let mut agent_slot = self.agent.write().unwrap_or_else(|e| e.into_inner());
        if agent_slot.is_busy() {
            return Err(RpcError::new(
                crate::rpc::INVALID_REQUEST,
                "a prompt is running in this session; switch the model between prompts",
            ));
        }
        let mut config = lock(&self.config).clone();
        let switched = model.is_some_and(|m| m != model_of(&config));
        if let Some(m) = model {
            if config["llm"]["provider"] == "scripted" {
                config["llm"]["script"]["model"] = json!(m);
            } else {
                config["llm"]["model"] = json!(m);
            }
        }
        if let Some(t) = max_tokens {
            let t =
                u32::try_from(t).map_err(|_| RpcError::invalid_params("maxTokens is too large"))?;
            config["llm"]["max_tokens"] = json!(t);
        }
        if let Some(c) = context_length {
            // The library's window: compaction starts at its 55 % and 80 %.
            config["max_context_tokens"] = json!(c);
        }
        if model.is_some() || max_tokens.is_some() || context_length.is_some() {
            let agent = build_agent(&config, &self.transport)?;
            agent
                .set_history_json(&agent_slot.history_json())
                .map_err(|e| RpcError::internal(e.to_string()))?;
            if switched {
                // What the earlier model reasoned is not the next one's to read.
                agent
                    .strip_reasoning()
                    .map_err(|e| RpcError::internal(e.to_string()))?;
            }
            if let Some(mode) = Mode::parse(&self.mode_id()) {
                agent
                    .set_permission_mode(mode)
                    .map_err(|e| RpcError::internal(e.to_string()))?;
            }
            for rule in lock(&self.allowed).iter() {
                agent
                    .with_engine(|e| e.add_rules(&json!([rule]), "injected:acp-allow-always"))
                    .map_err(|e| RpcError::internal(e.to_string()))?
                    .map_err(RpcError::internal)?;
            }
            *agent_slot = agent;
            *lock(&self.config) = config;
        }
        Ok(())
    }

    /// Adds an "always allow" rule to the permission engine of this session.
    pub fn remember_allow(&self, rule: Value) -> Result<(), String> {
        self.agent()
            .with_engine(|e| e.add_rules(&json!([rule.clone()]), "injected:acp-allow-always"))
            .map_err(|e| e.to_string())??;
        lock(&self.allowed).push(rule);
        Ok(())
    }

    /// Writes the history to `<dir>/<id>.json` (owner-only), atomically.
    pub fn persist(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _one_at_a_time = lock(&self.saving);
        std::fs::create_dir_all(dir)?;
        let history: Value = serde_json::from_str(&self.agent().history_json())
            .unwrap_or_else(|_| Value::Array(Vec::new()));
        let doc = json!({"cwd": self.cwd.display().to_string(), "history": history});
        let tmp = dir.join(format!(".{}.tmp", self.id));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(doc.to_string().as_bytes())?;
        f.sync_data()?;
        std::fs::rename(&tmp, dir.join(format!("{}.json", self.id)))
    }
}

fn model_of(config: &Value) -> String {
    let llm = &config["llm"];
    if llm["provider"] == "scripted" {
        llm["script"]["model"]
            .as_str()
            .unwrap_or("scripted")
            .to_owned()
    } else {
        llm["model"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| std::env::var("OPENAI_MODEL").ok())
            .unwrap_or_default()
    }
}

fn build_agent(config: &Value, transport: &Arc<AcpTransport>) -> Result<Agent, RpcError> {
    let t: Arc<dyn agentao::events::transport::Transport> = transport.clone();
    Agent::new(&config.to_string(), Some(t)).map_err(|e| RpcError::invalid_params(e.to_string()))
}

/// Whether `id` may name a session file (no path syntax can ride in it).
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
