//! Composition: an agent built from its config (LLM, tools, permissions, memory, MCP,
//! sub-agents), and each turn's tools (the registry plus MCP, background and spawn tools).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use crate::cancel::CancelToken;
use crate::config::{AgentConfig, ConfigErrorKind, SessionConfig};
use crate::events::host::HostEventHub;
use crate::events::transport::{NullTransport, Transport};
use crate::events::Emitter;
use crate::llm::{LlmClient, MessagesVersionCell};
use crate::mcp::{ConfigFiles, McpManager, ResourceToolSelection, StatusChange};
use crate::permissions::{Mode, PermissionEngine};
use crate::subagents::background::{self, BackgroundStore};
use crate::subagents::{ParentAgent, SpawnTool, SubagentsConfig};
use crate::telemetry::AgentTracer;
use crate::tools::{memory, Tool, ToolRegistry, ToolSelection, ToolServices};
use crate::turn;

use super::api::Agent;
use super::durable::{block_on_store, StoreLink};
use super::session::AgentCore;
use super::session_document::SessionDocument;
use super::{lock, runtime, AgentError};
use crate::session_store::{SessionStore, StoreError};

pub(super) struct ComposedTools {
    from: Arc<ToolRegistry>,
    subagents_version: u64,
    tools: Arc<ToolRegistry>,
}

impl Agent {
    /// Builds an agent from a config JSON document. `transport`: `None` is the NullTransport.
    /// With a `session.store` that holds `session.id`, the agent resumes that session.
    pub fn new(
        config_json: &str,
        transport: Option<Arc<dyn Transport>>,
    ) -> Result<Agent, AgentError> {
        Self::open(config_json, transport, None, None)
    }

    /// Builds an agent that continues the session `document` holds (its id, history,
    /// permissions, todo list, background records, usage). With a `session.store`, the next
    /// commit continues the version the store holds for that id, if any: the host chose this
    /// document as the session's continuation.
    pub fn resume(
        config_json: &str,
        transport: Option<Arc<dyn Transport>>,
        document: &str,
    ) -> Result<Agent, AgentError> {
        Self::open_session(config_json, transport, Some(document), None)
    }

    /// [`Agent::new`] or [`Agent::resume`] (with `document`), committing to `store` when given
    /// (a host's store; it replaces the config's `session.store`).
    pub fn open_session(
        config_json: &str,
        transport: Option<Arc<dyn Transport>>,
        document: Option<&str>,
        store: Option<Arc<dyn SessionStore>>,
    ) -> Result<Agent, AgentError> {
        let document = document
            .map(SessionDocument::parse)
            .transpose()
            .map_err(AgentError::Document)?;
        Self::open(config_json, transport, document, store)
    }

    fn open(
        config_json: &str,
        transport: Option<Arc<dyn Transport>>,
        document: Option<SessionDocument>,
        store: Option<Arc<dyn SessionStore>>,
    ) -> Result<Agent, AgentError> {
        let config = AgentConfig::from_json(config_json).map_err(|e| match e.1 {
            ConfigErrorKind::Json => AgentError::InvalidJson(format!("config_json: {}", e.0)),
            ConfigErrorKind::Invalid => AgentError::InvalidConfig(e.0),
        })?;
        let (store, document) = open_store(&config.session, document, store)?;
        let llm = LlmClient::new(&config.llm).map_err(AgentError::InvalidConfig)?;
        if let crate::config::LlmConfig::OpenAi(c) = &config.llm {
            // Shell children never see the key, under whatever variable name.
            crate::tools::note_credential_value(&c.api_key);
        }
        let tools = shared_registry(&config.tools).map_err(AgentError::InvalidConfig)?;
        let mut tool_services = ToolServices::new(&config.tools, &config.working_directory);
        let mut engine =
            PermissionEngine::from_config(config.permissions.as_ref(), &config.working_directory)
                .map_err(AgentError::InvalidConfig)?;
        if let Some(e) = engine.as_mut() {
            e.set_outside_reads_allowed(config.tools.allow_reads_outside_workspace);
        }
        // Without an engine the floor applies when a command launches (as in the reference);
        // an engine applies it while planning, unless its config turned it off.
        if let Some(e) = &engine {
            tool_services.shell_settings.hardline_at_launch = e.hardline_enabled();
        }
        let memory =
            memory::settings_from_config(config.memory.as_ref(), &config.working_directory)
                .map_err(AgentError::InvalidConfig)?;
        tool_services.memory_budget = memory.budget;
        tool_services.set_memory(memory.store);
        let tool_services = Arc::new(tool_services);
        let subagents =
            SubagentsConfig::from_value(config.subagents.as_ref(), &config.working_directory)
                .map_err(AgentError::InvalidConfig)?;
        let skills = crate::skills::SkillsConfig::from_value(
            config.skills.as_ref(),
            &config.working_directory,
        )
        .map_err(AgentError::InvalidConfig)?;
        let read_only = engine.as_ref().is_some_and(|e| e.mode() == Mode::ReadOnly);
        let system_prompt = turn::prompt::SystemPrompt::new(turn::prompt::system_prompt(
            &config.working_directory,
            config.system_prompt_extra.as_deref(),
        ));
        let selection = ToolSelection::of(&config.tools);
        let mcp = McpManager::new(
            config.working_directory.clone(),
            config.mcp.servers.clone(),
            ConfigFiles::parse(config.mcp.config_files.as_ref())
                .map_err(AgentError::InvalidConfig)?,
            ResourceToolSelection::from(|n| selection.selects(n)),
            config.mcp.limits.as_ref(),
        )
        .map_err(AgentError::InvalidConfig)
        .map(Arc::new)?;
        // Make sure the runtime can start before we hand out a handle.
        let rt = runtime()?;
        let background = BackgroundStore::new(
            rt.handle().clone(),
            subagents
                .background
                .persist
                .then(|| config.working_directory.clone()),
        );
        let transport = transport.unwrap_or_else(|| Arc::new(NullTransport::default()));
        let session_id = document
            .as_ref()
            .map(|d| d.session_id.clone())
            .or_else(|| config.session.id.clone())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let lineage = document
            .as_ref()
            .map(|d| d.lineage.clone())
            .unwrap_or_default();
        let tracer = tracer_for(&config, &session_id, rt.handle())?;
        let agent = Agent {
            core: Arc::new(AgentCore {
                session_id,
                llm,
                tools: RwLock::new(tools),
                tool_services,
                system_prompt,
                emitter: Emitter::new(transport)
                    .with_observer(crate::telemetry::as_observer(tracer.as_ref())),
                tracer,
                hub: HostEventHub::default(),
                engine: RwLock::new(engine),
                read_only: AtomicBool::new(read_only),
                history: RwLock::new(Vec::new()),
                history_version: MessagesVersionCell::fresh(),
                last_turn: Mutex::new(None),
                busy: AtomicBool::new(false),
                active: Mutex::new(None),
                mcp,
                background,
                subagents: RwLock::new(subagents),
                composed: Mutex::new(None),
                subagents_version: AtomicU64::new(0),
                context: turn::compaction::ContextState::new(config.max_context_tokens),
                lineage,
                store,
                last_commit: Mutex::new(None),
                repaired: Mutex::new(None),
                compaction_controller: Mutex::new(None),
                hooks: Mutex::new(
                    crate::hooks::Hooks::new(
                        config.hooks.clone(),
                        &config.working_directory,
                        None,
                        config.reply_timeout,
                    )
                    .map(Arc::new),
                ),
                session_started: AtomicBool::new(false),
                skills: Arc::new(crate::skills::AgentSkills::new(skills)),
                skills_in_turns: Default::default(),
                config,
            }),
        };
        if let Some(doc) = document {
            agent.core.apply(doc)?;
        }
        let core = Arc::downgrade(&agent.core);
        agent
            .core
            .mcp
            .set_reporter(Arc::new(move |c: &StatusChange| {
                if let Some(core) = core.upgrade() {
                    core.report_mcp(c);
                }
            }));
        agent.connect_mcp_in_background();
        Ok(agent)
    }

    /// Starts connecting the MCP servers now, so the first turn waits less (it waits for
    /// this sync, then uses its result).
    pub(super) fn connect_mcp_in_background(&self) {
        if !self.core.mcp.has_sources() {
            return;
        }
        if let Ok(rt) = runtime() {
            // The agent itself is not kept alive by this: freeing it closes the manager, which
            // ends the sync at once.
            let mcp = self.core.mcp.clone();
            rt.spawn(async move {
                mcp.sync().await;
            });
        }
    }
}

impl AgentCore {
    /// The turn's tools: the built-ins plus the MCP servers' (synced first; a cancelled turn
    /// stops waiting for servers), `activate_skill` for the turn's skills, plus a spawn tool
    /// per sub-agent definition.
    pub(super) async fn turn_tools(
        self: &Arc<Self>,
        cancel: &CancelToken,
        skills: Option<&crate::skills::Loaded>,
    ) -> Arc<ToolRegistry> {
        let base = self.tools_now();
        let tools = if !self.mcp.has_sources() {
            base
        } else {
            tokio::select! {
                _ = self.mcp.sync() => self.mcp.tools(&base).await,
                _ = cancel.cancelled() => base,
            }
        };
        self.composed(self.with_skill_tool(tools, skills))
    }

    /// What the next turn would offer, as far as is known without a turn: the built-in and host
    /// tools, the connected MCP servers' tools, the background and spawn tools. Composed
    /// afresh, so the turn's cached lists (and the request bodies rendered from them) stay.
    pub(super) fn next_turn_tools(self: &Arc<Self>) -> Arc<ToolRegistry> {
        let base = self.tools_now();
        let tools = if self.mcp.has_sources() {
            self.mcp.known_tools(&base)
        } else {
            base
        };
        let skills = self
            .skills
            .enabled()
            .then(|| self.skills.cached(&self.tool_services.fs()))
            .flatten();
        let tools = self.with_skill_tool(tools, skills.as_ref());
        self.with_spawn_tools(self.with_background_tools(tools))
    }

    /// `tools` with the background and spawn tools added, reused while `tools` and the
    /// definitions are the same. The lock is not held while composing, which reads the
    /// definitions; the count is read first, so tools composed while a definition was added
    /// are stored under the older count and not reused.
    fn composed(self: &Arc<Self>, tools: Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        let version = self.subagents_version.load(Ordering::Acquire);
        {
            let s = self.subagents.read().unwrap_or_else(|e| e.into_inner());
            if s.definitions.is_empty() && !s.background.enabled {
                // Nothing to add: nothing kept (and no tool held past its removal).
                return tools;
            }
        }
        if let Some(c) = lock(&self.composed)
            .as_ref()
            .filter(|c| c.subagents_version == version && Arc::ptr_eq(&c.from, &tools))
        {
            return c.tools.clone();
        }
        let composed = self.with_spawn_tools(self.with_background_tools(tools.clone()));
        let replaced = lock(&self.composed).replace(ComposedTools {
            from: tools,
            subagents_version: version,
            tools: composed.clone(),
        });
        // A tool dropped with it may run a host finalizer: never under the lock.
        drop(replaced);
        composed
    }

    /// `tools` plus `check_background_agent` and `cancel_background_agent` when background
    /// agents are enabled (before the spawn tools, so a child inherits them as the reference's
    /// children share the store).
    fn with_background_tools(&self, tools: Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        let enabled = self
            .subagents
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .background
            .enabled;
        if !enabled {
            return tools;
        }
        let store = &self.background;
        let mut reg = (*tools).clone();
        reg.extend([
            Arc::new(background::tools::CheckBackgroundAgent {
                store: store.clone(),
            }) as Arc<dyn Tool>,
            Arc::new(background::tools::CancelBackgroundAgent {
                store: store.clone(),
            }),
        ]);
        Arc::new(reg)
    }

    /// `tools` plus an `agent_<name>` tool per definition. The spawn tools hold the agent
    /// weakly and `tools` without themselves, so nothing keeps the agent alive or loops.
    fn with_spawn_tools(self: &Arc<Self>, tools: Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        let subagents = self.subagents.read().unwrap_or_else(|e| e.into_inner());
        if subagents.definitions.is_empty() {
            return tools;
        }
        let weak: std::sync::Weak<AgentCore> = Arc::downgrade(self);
        let parent: std::sync::Weak<dyn ParentAgent> = weak;
        // A host tool registered under a spawn tool's name wins, as the reference registers
        // host tools after the agent tools.
        let spawn: Vec<Arc<dyn Tool>> = subagents
            .definitions
            .iter()
            .filter(|d| tools.get(&d.tool_name()).is_none())
            .map(|d| {
                Arc::new(SpawnTool::new(
                    Arc::new(d.clone()),
                    parent.clone(),
                    tools.clone(),
                    subagents.background,
                )) as Arc<dyn Tool>
            })
            .collect();
        let mut reg = (*tools).clone();
        reg.extend(spawn);
        Arc::new(reg)
    }
}

/// The session's store and the document to continue: the one given, or the one the store
/// holds under `session.id`. Loads block this (host) thread.
fn open_store(
    session: &SessionConfig,
    given: Option<SessionDocument>,
    store: Option<Arc<dyn SessionStore>>,
) -> Result<(Option<StoreLink>, Option<SessionDocument>), AgentError> {
    let store = match (store, &session.store) {
        (Some(store), _) => store,
        (None, Some(url)) => crate::session_store::open(url).map_err(AgentError::Store)?,
        (None, None) => return Ok((None, given)),
    };
    let timeout = session.timeout();
    let id = given
        .as_ref()
        .map(|d| d.session_id.clone())
        .or_else(|| session.id.clone());
    let stored = match &id {
        Some(id) => block_on_store(timeout, "load", store.load(id))?,
        None => None,
    };
    let version = stored.as_ref().map_or(0, |s| s.version);
    let document = match (given, stored) {
        (Some(doc), _) => Some(doc),
        (None, Some(s)) => {
            let doc = SessionDocument::parse(&s.document).map_err(AgentError::Document)?;
            if doc.session_id != s.session_id {
                return Err(AgentError::Store(StoreError::Corrupt(format!(
                    "session {:?} holds the document of session {:?}",
                    s.session_id, doc.session_id
                ))));
            }
            Some(doc)
        }
        (None, None) => None,
    };
    let link = StoreLink {
        store,
        tenant: session.tenant.clone(),
        owner: session.owner.clone(),
        timeout,
        version: Mutex::new(version),
    };
    Ok((Some(link), document))
}

/// The built-in registry for a tool selection, built once per distinct selection and shared:
/// tool schemas are the largest part of an idle agent otherwise.
fn shared_registry(config: &crate::config::ToolsConfig) -> Result<Arc<ToolRegistry>, String> {
    static CACHE: LazyLock<Mutex<HashMap<ToolSelection, Arc<ToolRegistry>>>> =
        LazyLock::new(Default::default);
    let selection = ToolSelection::of(config);
    if let Some(r) = lock(&CACHE).get(&selection) {
        return Ok(r.clone());
    }
    let r = Arc::new(ToolRegistry::for_selection(&selection)?);
    let mut cache = lock(&CACHE);
    if cache.len() < 64 {
        cache.insert(selection, r.clone());
    }
    Ok(r)
}

/// The agent's tracer when its config (or the environment) names an exporter.
#[cfg(feature = "otel")]
fn tracer_for(
    config: &AgentConfig,
    session_id: &str,
    runtime: &tokio::runtime::Handle,
) -> Result<Option<Arc<AgentTracer>>, AgentError> {
    let Some(telemetry) = &config.telemetry else {
        return Ok(None);
    };
    let pipeline = crate::telemetry::Pipeline::for_config(telemetry, runtime)
        .map_err(AgentError::InvalidConfig)?;
    let provider = match &config.llm {
        crate::config::LlmConfig::OpenAi(c) => match c.wire {
            crate::llm::config::WireKind::Anthropic => "anthropic",
            crate::llm::config::WireKind::ChatCompletions
            | crate::llm::config::WireKind::Responses => "openai",
        },
        crate::config::LlmConfig::Scripted(_) => "agentao.scripted",
    };
    Ok(Some(AgentTracer::new(
        pipeline,
        crate::telemetry::TracerIdentity {
            session_id: session_id.to_owned(),
            provider,
            agent_name: "agentao".to_owned(),
            nested: false,
        },
        None,
    )))
}

/// Without the `otel` feature a config never names an exporter (it is refused when parsed).
#[cfg(not(feature = "otel"))]
fn tracer_for(
    _config: &AgentConfig,
    _session_id: &str,
    _runtime: &tokio::runtime::Handle,
) -> Result<Option<Arc<AgentTracer>>, AgentError> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools_of(agent: &Agent) -> Arc<ToolRegistry> {
        let token = CancelToken::new();
        runtime()
            .unwrap()
            .block_on(agent.core.turn_tools(&token, None))
    }

    /// An agent with sub-agents (and background agents) gets the same registry every turn, so
    /// its tool digest and rendered tools stay cached; a new definition makes a new one.
    #[test]
    fn a_turn_reuses_the_composed_tools_until_a_definition_is_added() {
        let dir = tempfile::tempdir().unwrap();
        let config = serde_json::json!({"working_directory": dir.path(),
            "llm": {"provider": "scripted", "script": {"responses": []}},
            "subagents": {"definitions": [{"name": "writer", "description": "writes"}],
                "background": {"enabled": true}}});
        let agent = Agent::new(&config.to_string(), None).unwrap();
        let first = tools_of(&agent);
        assert!(first.get("agent_writer").is_some());
        assert!(first.get("check_background_agent").is_some());
        assert!(Arc::ptr_eq(&first, &tools_of(&agent)));
        agent
            .add_subagent(r#"{"name": "reader", "description": "reads"}"#)
            .unwrap();
        let second = tools_of(&agent);
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(second.get("agent_reader").is_some() && second.get("agent_writer").is_some());
        assert!(Arc::ptr_eq(&second, &tools_of(&agent)));
        // A removed tool is released at once, not kept by the last turn's composed tools.
        let own: Arc<dyn Tool> = Arc::new(crate::tools::builtin::todo::TodoWrite);
        let weak = Arc::downgrade(&own);
        drop(second);
        agent.remove_tool("todo_write").unwrap();
        agent.add_tool(own, false).unwrap();
        assert!(tools_of(&agent).get("todo_write").is_some());
        agent.remove_tool("todo_write").unwrap();
        assert!(weak.upgrade().is_none(), "the removed tool is still held");
    }
}
