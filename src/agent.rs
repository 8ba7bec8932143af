//! One agent session: config, history, the turn lock, the last turn, and the entry points
//! (blocking, asynchronous with a completion, streaming).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, RwLock};

use serde_json::{json, Value};

use crate::cancel::CancelToken;
use crate::config::{AgentConfig, ConfigErrorKind};
use crate::events::host::HostEventHub;
use crate::events::transport::{NullTransport, Transport};
use crate::events::{Emitter, EventWriter};
use crate::llm::{LlmClient, Message, MessagesVersionCell};
use crate::mcp::{ConfigFiles, McpManager, McpRegistry, ResourceToolSelection, StatusChange};
use crate::panic_caught::PanicCaught;
use crate::permissions::preflight::Preflight;
use crate::permissions::{ActivePermissions, Mode, PermissionEngine, ToolFacts};
use crate::subagents::background::{self, BackgroundStore};
use crate::subagents::{
    ParentAgent, ParentSnapshot, SpawnTool, SubagentDefinition, SubagentsConfig,
};
use crate::tools::{
    memory, FileSystem, MemoryStore, ShellExecutor, Tool, ToolRegistry, ToolSelection, ToolServices,
};
use crate::turn::{self, DeltaSink, TurnEnv, TurnFailure, TurnOutcome};

mod compaction;

/// Why an entry point refused or failed; the C layer maps each to a status code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    InvalidJson(String),
    #[error("a turn is already running on this agent")]
    TurnInProgress,
    #[error("the transport has no subscribe, so the streaming entry point cannot attach to it")]
    NoSubscribe,
    #[error("{0}")]
    StreamSubscribe(String),
    #[error("a blocking call was made from a library callback or runtime thread")]
    Reentrant,
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    HostError(String),
    #[error("the turn panicked: {0}")]
    Panic(String),
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    NoEngine(String),
}

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
static WORKER_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the runtime's worker count; only before the runtime exists (first agent). Returns
/// false when it is too late.
pub(crate) fn set_worker_threads(n: usize) -> bool {
    if RUNTIME.get().is_some() {
        return false;
    }
    WORKER_THREADS.store(n, Ordering::Relaxed);
    true
}

/// The process-wide runtime, built on first use.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime, AgentError> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    // std has no fallible `get_or_init`: a thread that loses the race to build the first runtime
    // drops its own, which is safe because no runtime thread exists before the first one is set.
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all()
        .thread_name("agentao-worker")
        .on_thread_start(crate::mcp::client::block_sigpipe);
    let n = WORKER_THREADS.load(Ordering::Relaxed);
    if n > 0 {
        b.worker_threads(n);
    }
    let rt = b
        .build()
        .map_err(|e| AgentError::Internal(format!("cannot start the runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Whether the calling thread belongs to a runtime (a worker, a blocking-pool thread running a
/// callback or a tool): a blocking entry point there could deadlock.
pub(crate) fn on_runtime_thread() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// Where a turn's completion runs.
#[derive(Clone, Copy)]
pub(crate) enum Completion {
    /// Host code: on a blocking thread, with the agent kept alive until it returns.
    Host,
    /// Library code that only hands the result to a waiting host thread (blocking chat, pull
    /// streams): inline on the worker that finished the turn (one thread wake-up less per
    /// turn), after the turn let go of the agent, so a host that frees the agent as soon as it
    /// has the result gets its `userdata_free` inside `agentao_agent_free`.
    Handoff,
}

/// Options of one turn.
#[derive(Default, Clone)]
pub struct TurnOptions {
    pub max_iterations: Option<u32>,
    /// The host's token, linked one way: cancelling it cancels the turn, never the reverse.
    pub cancel: Option<CancelToken>,
    /// Images sent with the message (checked by [`crate::llm::image::validate`] before the
    /// turn starts: a bad one is `InvalidArgument` and nothing is sent).
    pub images: Vec<crate::llm::image::ImageInput>,
}

/// The result of a finished turn, as handed to completions.
pub type TurnResult = Result<TurnOutcome, (AgentError, Option<TurnOutcome>)>;

/// What a turn's future gives: its outcome and failure, or the message of its panic.
type CaughtTurn = Result<(TurnOutcome, Option<TurnFailure>), String>;

/// A turn whose lock is taken, ready to run.
struct Turn<F> {
    run: F,
    token: CancelToken,
}

/// The result handed to completions, from what the turn's future gave.
fn turn_result(caught: CaughtTurn) -> TurnResult {
    match caught {
        Ok((outcome, None)) => Ok(outcome),
        Ok((outcome, Some(TurnFailure::Host(m)))) => Err((AgentError::HostError(m), Some(outcome))),
        Ok((outcome, Some(TurnFailure::Timeout(m)))) => {
            Err((AgentError::Timeout(m), Some(outcome)))
        }
        Err(panic) => Err((AgentError::Panic(panic), None)),
    }
}

pub(crate) struct AgentCore {
    pub(crate) session_id: String,
    config: AgentConfig,
    llm: LlmClient,
    /// Replaced whole by `add_tool` / `remove_tool`; a turn keeps the one it started with.
    tools: RwLock<Arc<ToolRegistry>>,
    tool_services: Arc<ToolServices>,
    system_prompt: turn::prompt::SystemPrompt,
    emitter: Emitter,
    hub: HostEventHub,
    engine: RwLock<Option<PermissionEngine>>,
    read_only: AtomicBool,
    /// Written only by [`AgentCore::write_history`], [`AgentCore::repair_history`] and
    /// [`AgentCore::commit`].
    history: RwLock<Vec<Message>>,
    /// Renewed by every change of `history` but a commit's append (the request cache trusts
    /// what it checked while it holds).
    history_version: MessagesVersionCell,
    last_turn: Mutex<Option<TurnOutcome>>,
    busy: AtomicBool,
    active: Mutex<Option<CancelToken>>,
    mcp: Arc<McpManager>,
    /// Background sub-agents: they hold the store, not the agent.
    background: Arc<BackgroundStore>,
    /// Definitions change between turns only (`add_subagent`).
    subagents: RwLock<SubagentsConfig>,
    /// The last turn's tools with the background and spawn tools added, and the tools they
    /// were added to: a turn on the same tools reuses them, so the per-list caches of the tool
    /// digest and the rendered tools array hold (a new registry every turn missed both).
    composed: Mutex<Option<ComposedTools>>,
    /// Counts `add_subagent`s: composed tools of an older count are not reused.
    subagents_version: AtomicU64,
    /// The context window, the estimate's anchor and the compaction breaker.
    context: turn::compaction::ContextState,
}

struct ComposedTools {
    from: Arc<ToolRegistry>,
    subagents_version: u64,
    tools: Arc<ToolRegistry>,
}

impl Drop for AgentCore {
    fn drop(&mut self) {
        // A background sync holds the manager, not the agent: stop it and kill its servers now.
        self.mcp.close();
        // Likewise the background agents: stopped now, without waiting (this may be a worker).
        self.background
            .close("session-closed", std::time::Duration::ZERO);
        self.tool_services.processes().end_all();
    }
}

/// A handle to one agent; clones share it.
#[derive(Clone)]
pub struct Agent {
    core: Arc<AgentCore>,
}

/// A handle that does not keep its agent alive: for what must end with the agent rather than
/// hold it (a host-event stream, whose reader learns the agent is gone when its queue closes).
pub struct WeakAgent(std::sync::Weak<AgentCore>);

impl WeakAgent {
    /// The agent, while a handle or a turn of it still exists.
    pub fn upgrade(&self) -> Option<Agent> {
        self.0.upgrade().map(|core| Agent { core })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Releases the turn lock when the turn (or its refusal path) ends, even by panic.
struct TurnSlot {
    core: Arc<AgentCore>,
}

impl Drop for TurnSlot {
    fn drop(&mut self) {
        *lock(&self.core.active) = None;
        self.core.busy.store(false, Ordering::Release);
    }
}

impl Agent {
    /// Builds an agent from a config JSON document. `transport`: `None` is the NullTransport.
    pub fn new(
        config_json: &str,
        transport: Option<Arc<dyn Transport>>,
    ) -> Result<Agent, AgentError> {
        let config = AgentConfig::from_json(config_json).map_err(|e| match e.1 {
            ConfigErrorKind::Json => AgentError::InvalidJson(format!("config_json: {}", e.0)),
            ConfigErrorKind::Invalid => AgentError::InvalidConfig(e.0),
        })?;
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
        let session_id = uuid::Uuid::new_v4().to_string();
        let agent = Agent {
            core: Arc::new(AgentCore {
                session_id,
                llm,
                tools: RwLock::new(tools),
                tool_services,
                system_prompt,
                emitter: Emitter::new(transport),
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
                config,
            }),
        };
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
    fn connect_mcp_in_background(&self) {
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

    /// Sets (or with `None` removes) the host's MCP registry; its servers connect now in the
    /// background and are in the next turn.
    pub(crate) fn set_mcp_registry(&self, registry: Option<Arc<dyn McpRegistry>>) {
        self.core.mcp.set_registry(registry);
        self.connect_mcp_in_background();
    }

    /// The MCP servers' status JSON (see `McpManager::status_json`).
    pub fn mcp_status_json(&self) -> String {
        self.core.mcp.status_json()
    }

    pub fn session_id(&self) -> &str {
        &self.core.session_id
    }

    pub(crate) fn transport(&self) -> &Arc<dyn Transport> {
        self.core.emitter.transport()
    }

    pub fn host_events(&self) -> &HostEventHub {
        &self.core.hub
    }

    pub fn downgrade(&self) -> WeakAgent {
        WeakAgent(Arc::downgrade(&self.core))
    }

    /// Takes the turn lock without waiting and mints the turn's token.
    fn begin(&self, opts: &TurnOptions) -> Result<(TurnSlot, CancelToken), AgentError> {
        if self
            .core
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(AgentError::TurnInProgress);
        }
        let slot = TurnSlot {
            core: self.core.clone(),
        };
        let token = CancelToken::new();
        if let Some(parent) = &opts.cancel {
            parent.link_child(&token);
        }
        *lock(&self.core.active) = Some(token.clone());
        Ok((slot, token))
    }

    /// Starts a turn on the runtime; `done` runs exactly once, on a blocking thread, with the
    /// outcome (or the error and whatever outcome there is). The turn keeps the agent (and so
    /// the transport) alive until `done` has returned, so a host completion never runs after
    /// (or during) the transport's `userdata_free`.
    pub fn start_turn(
        &self,
        message: String,
        opts: TurnOptions,
        deltas: DeltaSink,
        done: impl FnOnce(TurnResult) + Send + 'static,
    ) -> Result<CancelToken, AgentError> {
        self.spawn_turn(message, opts, deltas, Completion::Host, done)
    }

    /// [`Agent::start_turn`] with `done` run where `completion` says. One task runs the turn
    /// and its completion: a second task awaiting the first's `JoinHandle` cost a wake-up.
    pub(crate) fn spawn_turn(
        &self,
        message: String,
        opts: TurnOptions,
        deltas: DeltaSink,
        completion: Completion,
        done: impl FnOnce(TurnResult) + Send + 'static,
    ) -> Result<CancelToken, AgentError> {
        let rt = runtime()?;
        let turn = self.turn(message, &opts, deltas)?;
        let token = turn.token;
        let run = turn.run;
        match completion {
            // The turn let go of the agent before `run` gives its result.
            Completion::Handoff => drop(rt.spawn(async move { done(turn_result(run.await)) })),
            // Completions are host code: keep them off the workers, and keep the agent alive
            // until the host's completion has returned. Not awaited: the blocking thread's end
            // would wake a worker for nothing.
            Completion::Host => {
                let keep_alive = self.core.clone();
                drop(rt.spawn(async move {
                    let result = turn_result(run.await);
                    drop(tokio::task::spawn_blocking(move || {
                        done(result);
                        drop(keep_alive);
                    }));
                }));
            }
        }
        Ok(token)
    }

    /// Takes the turn lock and builds the turn: `run` runs it to its end (a panic in it
    /// caught), committing its transcript, and lets go of the lock and the agent before it
    /// gives its result.
    fn turn(
        &self,
        message: String,
        opts: &TurnOptions,
        deltas: DeltaSink,
    ) -> Result<Turn<impl Future<Output = CaughtTurn> + Send + 'static>, AgentError> {
        crate::llm::image::validate(&opts.images).map_err(AgentError::InvalidArgument)?;
        let (slot, token) = self.begin(opts)?;
        let core = self.core.clone();
        let images = opts.images.clone();
        let max_iterations = opts.max_iterations.unwrap_or(core.config.max_iterations);
        let turn_token = token.clone();
        // Boxed where it is made: the turn's state is kilobytes, and every move of an unboxed
        // future (into `Turn`, the task's future, tokio's task cell, the cell's finished
        // stage) copied all of it, on every turn.
        let run = PanicCaught::new(Box::pin(async move {
            let _slot = slot;
            let tools = core.turn_tools(&turn_token).await;
            // The store is host code: asked off the async workers.
            let store = core.tool_services.memory();
            let memory = if store.may_block() {
                let msg = message.clone();
                tokio::task::spawn_blocking(move || memory::view(store.as_ref(), &msg))
                    .await
                    .unwrap_or_default()
            } else {
                memory::view(store.as_ref(), &message)
            };
            // The agent's own prompt is borrowed, with the digest it keeps across turns.
            let with_memory;
            let mut env = core.env(&tools);
            if let Some(block) = &memory.stable_block {
                with_memory = turn::prompt::SystemPrompt::new(format!(
                    "{}\n\n{block}",
                    core.system_prompt.text()
                ));
                env.system_prompt = &with_memory;
            }
            env.recall = memory.recall.as_deref();
            env.images = &images;
            core.repair_history();
            let mut ended =
                turn::run_turn(&env, &message, max_iterations, &turn_token, deltas).await;
            core.commit(ended.take_transcript(), &ended.outcome);
            ended.finish()
        }));
        Ok(Turn { run, token })
    }

    /// Runs a turn and blocks the calling (non-runtime) thread until it ends.
    pub fn run_blocking(&self, message: &str, opts: TurnOptions) -> TurnResult {
        if on_runtime_thread() {
            return Err((AgentError::Reentrant, None));
        }
        let (tx, rx) = crate::handoff::handoff();
        self.spawn_turn(
            message.to_owned(),
            opts,
            DeltaSink::None,
            Completion::Handoff,
            move |r| tx.send(r),
        )
        .map_err(|e| (e, None))?;
        rx.recv().unwrap_or_else(|| {
            Err((
                AgentError::Internal("the turn ended without a result".into()),
                None,
            ))
        })
    }

    /// Cancels the running turn, if any (used when the host frees the agent).
    pub fn cancel_active(&self, reason: &str) {
        // The lock is released first: a host's watch of a token under the turn's runs inside
        // the cancel.
        let active = lock(&self.core.active).clone();
        if let Some(t) = active {
            t.cancel(reason);
        }
    }

    /// Agent free's part for background agents: no new launches, every pending or running one
    /// cancelled (`session-closed`), and a wait of up to [`background::CLOSE_TIMEOUT`] for them
    /// to settle (none on a library thread, where waiting could hold up the runs themselves);
    /// a run still going after that is aborted. Returns how many had not settled in time.
    pub fn close_background(&self) -> usize {
        let timeout = if on_runtime_thread() {
            std::time::Duration::ZERO
        } else {
            background::CLOSE_TIMEOUT
        };
        self.core.background.close("session-closed", timeout)
    }

    /// Ends the process groups the agent's background shell runs started (its sub-agents'
    /// included), and any started from now on: for when the host lets the agent go.
    pub fn end_processes(&self) {
        self.core.tool_services.processes().end_all();
    }

    #[cfg(test)]
    pub(crate) fn background(&self) -> &Arc<BackgroundStore> {
        &self.core.background
    }

    pub fn is_busy(&self) -> bool {
        self.core.busy.load(Ordering::Acquire)
    }

    pub fn last_turn(&self) -> Option<TurnOutcome> {
        lock(&self.core.last_turn).clone()
    }

    pub fn history_json(&self) -> String {
        let history = self.core.history.read().unwrap_or_else(|e| e.into_inner());
        serde_json::to_string(&*history).expect("messages serialize")
    }

    /// Replaces the history (between turns only): a JSON array of message objects with a
    /// string `role`.
    pub fn set_history_json(&self, json: &str) -> Result<(), AgentError> {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| AgentError::InvalidJson(format!("history: {e}")))?;
        let Value::Array(messages) = v else {
            return Err(AgentError::InvalidArgument(
                "history must be a JSON array".into(),
            ));
        };
        let mut typed = Vec::with_capacity(messages.len());
        for (i, m) in messages.into_iter().enumerate() {
            match m {
                Value::Object(m)
                    if matches!(
                        m.get("role").and_then(Value::as_str),
                        Some("system" | "user" | "assistant" | "tool")
                    ) =>
                {
                    typed.push(Message::from_host(m))
                }
                _ => {
                    return Err(AgentError::InvalidArgument(format!(
                        "history[{i}]: needs a role of system, user, assistant or tool"
                    )))
                }
            }
        }
        if self.is_busy() {
            return Err(AgentError::TurnInProgress);
        }
        self.core.write_history(|h| *h = typed);
        Ok(())
    }

    pub fn active_permissions(&self) -> ActivePermissions {
        let engine = self.core.engine.read().unwrap_or_else(|e| e.into_inner());
        engine.as_ref().map_or_else(
            ActivePermissions::no_engine,
            PermissionEngine::active_permissions,
        )
    }

    /// Switches the permission mode; returns the previous one. Emits
    /// `readonly_mode_changed` (when the read-only flag flips) and `permission_mode_changed`.
    pub fn set_permission_mode(&self, mode: Mode) -> Result<Mode, AgentError> {
        let previous = {
            let mut engine = self.core.engine.write().unwrap_or_else(|e| e.into_inner());
            let Some(engine) = engine.as_mut() else {
                return Err(AgentError::NoEngine(
                    "this agent has no permission engine (set `permissions` in its config)".into(),
                ));
            };
            engine.set_mode(mode)
        };
        let now_ro = mode == Mode::ReadOnly;
        let was_ro = self.core.read_only.swap(now_ro, Ordering::AcqRel);
        let mut w = EventWriter::default();
        if was_ro != now_ro {
            self.core.emitter.emit(w.event(
                "readonly_mode_changed",
                &json!({"previous": was_ro, "current": now_ro}),
            ));
        }
        if previous != mode {
            self.core.emitter.emit(w.event(
                "permission_mode_changed",
                &json!({"previous": previous.as_str(), "current": mode.as_str(), "cause": "host"}),
            ));
        }
        Ok(previous)
    }

    /// Runs `f` on the engine (host-injected rules, sources), if there is one.
    pub fn with_engine<R>(
        &self,
        f: impl FnOnce(&mut PermissionEngine) -> R,
    ) -> Result<R, AgentError> {
        let mut engine = self.core.engine.write().unwrap_or_else(|e| e.into_inner());
        match engine.as_mut() {
            Some(e) => Ok(f(e)),
            None => Err(AgentError::NoEngine(
                "this agent has no permission engine (set `permissions` in its config)".into(),
            )),
        }
    }

    /// Registers a host tool (spec §2.2), between turns. A name already in use is refused
    /// unless `replace` (a host tool may replace a built-in); the tool is offered from the
    /// next turn on.
    pub fn add_tool(&self, tool: Arc<dyn Tool>, replace: bool) -> Result<(), AgentError> {
        crate::tools::host::check_name(tool.name()).map_err(AgentError::InvalidArgument)?;
        self.edit_tools(|reg| {
            if !replace && reg.get(tool.name()).is_some() {
                return Err(AgentError::InvalidArgument(format!(
                    "a tool named '{}' is already registered (pass replace to replace it)",
                    tool.name()
                )));
            }
            reg.insert(tool);
            Ok(true)
        })
        .map(drop)
    }

    /// Removes a tool by name, between turns; false when there is none. A reserved name is
    /// refused.
    pub(crate) fn remove_tool(&self, name: &str) -> Result<bool, AgentError> {
        if crate::tools::host::RESERVED_NAMES.contains(&name) {
            return Err(AgentError::InvalidArgument(format!(
                "tool '{name}': the name is reserved"
            )));
        }
        self.edit_tools(|reg| Ok(reg.remove(name)))
    }

    fn edit_tools(
        &self,
        f: impl FnOnce(&mut ToolRegistry) -> Result<bool, AgentError>,
    ) -> Result<bool, AgentError> {
        let mut tools = self.core.tools.write().unwrap_or_else(|e| e.into_inner());
        // Checked under the lock: a turn takes its registry under the same lock.
        if self.is_busy() {
            return Err(AgentError::TurnInProgress);
        }
        let mut reg = (**tools).clone();
        let changed = f(&mut reg)?;
        if changed {
            let old = std::mem::replace(&mut *tools, Arc::new(reg));
            // The last turn's composed and MCP tools hold the old registry's tools too.
            let composed = lock(&self.core.composed).take();
            // A tool dropped with the old registry runs its host finalizer: never under a lock.
            drop(tools);
            drop(old);
            drop(composed);
            self.core.mcp.forget_tools();
        }
        Ok(changed)
    }

    /// Replaces the memory store (spec §5.4), between turns.
    pub(crate) fn set_memory_store(&self, store: Arc<dyn MemoryStore>) -> Result<(), AgentError> {
        let tools = self.core.tools.write().unwrap_or_else(|e| e.into_inner());
        if self.is_busy() {
            return Err(AgentError::TurnInProgress);
        }
        let old = self.core.tool_services.set_memory(store);
        // The old store may run its host finalizer: never under the lock.
        drop(tools);
        drop(old);
        Ok(())
    }

    /// What the planner would decide for this call now, without running anything.
    pub(crate) fn preflight(
        &self,
        tool_name: &str,
        args_json: &str,
    ) -> Result<Preflight, AgentError> {
        let args = match serde_json::from_str::<Value>(args_json) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(AgentError::InvalidArgument(
                    "args_json must be a JSON object".into(),
                ))
            }
            Err(e) => return Err(AgentError::InvalidJson(format!("args_json: {e}"))),
        };
        let tools = self.core.next_turn_tools();
        let Some(tool) = tools.get(tool_name) else {
            return Err(AgentError::InvalidArgument(format!(
                "no tool named '{tool_name}' is registered"
            )));
        };
        let engine = self.core.engine.read().unwrap_or_else(|e| e.into_inner());
        Ok(crate::permissions::preflight::preflight(
            engine.as_ref(),
            self.core.read_only.load(Ordering::Acquire),
            ToolFacts {
                name: tool.name(),
                is_read_only: tool.is_read_only(),
                requires_confirmation: tool.requires_confirmation(),
            },
            &args,
        ))
    }

    /// Installs a host file system for the tools (`None`: the local one). Between turns only.
    pub(crate) fn set_file_system(
        &self,
        fs: Option<Arc<dyn FileSystem>>,
    ) -> Result<(), AgentError> {
        self.between_turns(|s| s.set_file_system(fs))
    }

    /// Installs a host shell executor (`None`: the local one). Between turns only.
    pub(crate) fn set_shell_executor(
        &self,
        shell: Option<Arc<dyn ShellExecutor>>,
    ) -> Result<(), AgentError> {
        self.between_turns(|s| s.set_shell(shell))
    }

    /// Holds the turn lock while `f` changes the tool services, so no turn sees half a swap.
    fn between_turns(&self, f: impl FnOnce(&ToolServices)) -> Result<(), AgentError> {
        let (_slot, _token) = self.begin(&TurnOptions::default())?;
        f(&self.core.tool_services);
        Ok(())
    }

    /// Adds a sub-agent definition (spec §6.1), between turns: its `agent_<name>` tool is
    /// offered from the next turn on. A definition of the same name is replaced; a name whose
    /// tool name another tool has is refused.
    pub fn add_subagent(&self, json: &str) -> Result<(), AgentError> {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| AgentError::InvalidJson(format!("definition: {e}")))?;
        let def = SubagentDefinition::from_value(&v)
            .map_err(|e| AgentError::InvalidArgument(format!("definition: {e}")))?;
        if self.core.tools_now().get(&def.tool_name()).is_some() {
            return Err(AgentError::InvalidArgument(format!(
                "definition: a tool named '{}' is already registered",
                def.tool_name()
            )));
        }
        let mut subagents = self
            .core
            .subagents
            .write()
            .unwrap_or_else(|e| e.into_inner());
        // Checked under the lock: a turn reads the definitions under the same lock.
        if self.is_busy() {
            return Err(AgentError::TurnInProgress);
        }
        crate::subagents::config::upsert(&mut subagents.definitions, def);
        self.core.subagents_version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The sub-agent definitions the next turn offers.
    pub fn subagent_definitions(&self) -> Vec<SubagentDefinition> {
        let s = self
            .core
            .subagents
            .read()
            .unwrap_or_else(|e| e.into_inner());
        s.definitions.clone()
    }

    /// Provider usage totals of the session.
    pub fn usage(&self) -> crate::llm::Usage {
        self.core.llm.usage.snapshot()
    }
}

impl AgentCore {
    fn tools_now(&self) -> Arc<ToolRegistry> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A change of the history other than a turn's commit (a host's replacement): it gets a
    /// new version.
    fn write_history(&self, f: impl FnOnce(&mut Vec<Message>)) {
        let mut history = self.history.write().unwrap_or_else(|e| e.into_inner());
        f(&mut history);
        self.history_version.renew();
        self.context.reset();
    }

    /// The repair before a turn ([`turn::history::backfill_orphans`]): a new version only when
    /// it answered a call (it only inserts, so the length tells).
    fn repair_history(&self) {
        let mut history = self.history.write().unwrap_or_else(|e| e.into_inner());
        let before = history.len();
        turn::history::backfill_orphans(&mut history);
        if history.len() != before {
            self.history_version.renew();
            self.context.forget_anchor();
        }
    }

    /// A finished turn: its messages appended to the history (an append keeps the version),
    /// its outcome the last turn.
    fn commit(&self, transcript: Vec<Message>, outcome: &TurnOutcome) {
        self.history
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .extend(transcript);
        *lock(&self.last_turn) = Some(outcome.clone());
    }

    /// The turn's tools: the built-ins plus the MCP servers' (synced first; a cancelled turn
    /// stops waiting for servers), plus a spawn tool per sub-agent definition.
    async fn turn_tools(self: &Arc<Self>, cancel: &CancelToken) -> Arc<ToolRegistry> {
        let base = self.tools_now();
        let tools = if !self.mcp.has_sources() {
            base
        } else {
            tokio::select! {
                _ = self.mcp.sync() => self.mcp.tools(&base).await,
                _ = cancel.cancelled() => base,
            }
        };
        self.composed(tools)
    }

    /// What the next turn would offer, as far as is known without a turn: the built-in and host
    /// tools, the connected MCP servers' tools, the background and spawn tools. Composed
    /// afresh, so the turn's cached lists (and the request bodies rendered from them) stay.
    fn next_turn_tools(self: &Arc<Self>) -> Arc<ToolRegistry> {
        let base = self.tools_now();
        let tools = if self.mcp.has_sources() {
            self.mcp.known_tools(&base)
        } else {
            base
        };
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

    fn report_mcp(&self, c: &StatusChange) {
        let mut w = EventWriter::default();
        self.emitter.emit(w.event(
            "mcp_server_status",
            &json!({"server": c.server, "status": c.state.as_str(), "tools": c.tools, "error": c.error}),
        ));
    }

    fn env<'a>(&'a self, tools: &'a ToolRegistry) -> TurnEnv<'a> {
        TurnEnv {
            session_id: &self.session_id,
            llm: &self.llm,
            tools,
            tool_services: &self.tool_services,
            tools_config: &self.config.tools,
            workspace: &self.config.working_directory,
            system_prompt: &self.system_prompt,
            recall: None,
            emitter: &self.emitter,
            hub: &self.hub,
            engine: &self.engine,
            read_only: &self.read_only,
            history: &self.history,
            history_version: &self.history_version,
            reply_timeout: self.config.reply_timeout,
            background: Some(&*self.background),
            context: &self.context,
            images: &[],
        }
    }
}

impl ParentAgent for AgentCore {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn snapshot(&self) -> ParentSnapshot {
        let relay_events = self
            .subagents
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .relay_events;
        ParentSnapshot {
            llm: self.config.llm.clone(),
            services: self.tool_services.clone(),
            tools_config: self.config.tools.clone(),
            workspace: self.config.working_directory.clone(),
            reply_timeout: self.config.reply_timeout,
            relay_events,
            context_window: self.context.window(),
        }
    }

    fn engine(&self) -> &RwLock<Option<PermissionEngine>> {
        &self.engine
    }

    fn read_only(&self) -> &AtomicBool {
        &self.read_only
    }

    fn emitter(&self) -> &Emitter {
        &self.emitter
    }

    fn hub(&self) -> &HostEventHub {
        &self.hub
    }

    fn add_usage(&self, usage: &crate::llm::Usage) {
        self.llm.usage.add(usage);
    }

    #[allow(private_interfaces)]
    fn background(&self) -> Arc<BackgroundStore> {
        self.background.clone()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tools_of(agent: &Agent) -> Arc<ToolRegistry> {
        let token = CancelToken::new();
        runtime().unwrap().block_on(agent.core.turn_tools(&token))
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
