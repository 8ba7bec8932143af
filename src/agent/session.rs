//! One session's state ([`AgentCore`]): config, history and its version, the turn lock, the
//! permission engine, the emitter; what a turn borrows from it, and what a sub-agent's parent
//! lends.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};

use crate::cancel::CancelToken;
use crate::config::AgentConfig;
use crate::events::host::HostEventHub;
use crate::events::turn_event::McpServerStatus;
use crate::events::{Emitter, TurnEvent};
use crate::llm::{LlmClient, Message, MessagesVersion, MessagesVersionCell};
use crate::mcp::{McpManager, StatusChange};
use crate::permissions::PermissionEngine;
use crate::subagents::background::BackgroundStore;
use crate::subagents::{ParentAgent, ParentSnapshot, SubagentsConfig};
use crate::tools::{ToolRegistry, ToolServices};
use crate::turn::compaction::controller::CompactionController;
use crate::turn::{self, TurnEnv, TurnOutcome};

use super::compose::ComposedTools;
use super::lock;

pub(crate) struct AgentCore {
    pub(crate) session_id: String,
    pub(super) config: AgentConfig,
    pub(super) llm: LlmClient,
    /// Replaced whole by `add_tool` / `remove_tool`; a turn keeps the one it started with.
    pub(super) tools: RwLock<Arc<ToolRegistry>>,
    pub(super) tool_services: Arc<ToolServices>,
    pub(super) system_prompt: turn::prompt::SystemPrompt,
    pub(super) emitter: Emitter,
    /// The tracer the emitter feeds, when telemetry is exported (the host's trace context
    /// is set on it).
    pub(super) tracer: Option<Arc<crate::telemetry::AgentTracer>>,
    pub(super) hub: HostEventHub,
    pub(super) engine: RwLock<Option<PermissionEngine>>,
    pub(super) read_only: AtomicBool,
    /// Written only by [`AgentCore::write_history`], [`AgentCore::repair_history`] and
    /// [`AgentCore::commit`].
    pub(super) history: RwLock<Vec<Message>>,
    /// Renewed by every change of `history` but a commit's append (the request cache trusts
    /// what it checked while it holds).
    pub(super) history_version: MessagesVersionCell,
    pub(super) last_turn: Mutex<Option<TurnOutcome>>,
    pub(super) busy: AtomicBool,
    pub(super) active: Mutex<Option<CancelToken>>,
    pub(super) mcp: Arc<McpManager>,
    /// Background sub-agents: they hold the store, not the agent.
    pub(super) background: Arc<BackgroundStore>,
    /// Definitions change between turns only (`add_subagent`).
    pub(super) subagents: RwLock<SubagentsConfig>,
    /// The last turn's tools with the background and spawn tools added, and the tools they
    /// were added to: a turn on the same tools reuses them, so the per-list caches of the tool
    /// digest and the rendered tools array hold (a new registry every turn missed both).
    pub(super) composed: Mutex<Option<ComposedTools>>,
    /// Counts `add_subagent`s: composed tools of an older count are not reused.
    pub(super) subagents_version: AtomicU64,
    /// The context window, the estimate's anchor and the compaction breaker.
    pub(super) context: turn::compaction::ContextState,
    /// Where the session came from (a fork's or sub-agent's parent).
    pub(super) lineage: super::session_document::Lineage,
    /// The session store the session commits to after every turn (config `session.store`).
    pub(super) store: Option<super::durable::StoreLink>,
    pub(super) last_commit: Mutex<Option<super::durable::CommitReport>>,
    /// Where the last repair of the history left it ([`AgentCore::repair_history`]).
    pub(super) repaired: Mutex<Option<RepairedPrefix>>,
    /// The host's compaction controller; a turn (and its sub-agents) keeps the one it started
    /// with.
    pub(super) compaction_controller: Mutex<Option<Arc<dyn CompactionController>>>,
    /// The user's lifecycle hooks (config `hooks`); `None` when none are configured.
    /// Replaced between turns only (`Agent::set_host_hooks`); a turn keeps the ones it started
    /// with.
    pub(super) hooks: Mutex<Option<Arc<crate::hooks::Hooks>>>,
    /// Set by the first turn (its `SessionStart` hooks).
    pub(super) session_started: AtomicBool,
    /// The `skills` section and the catalogue found for it.
    pub(super) skills: Arc<crate::skills::AgentSkills>,
    /// What turns built from the catalogue: kept while it is the same.
    pub(super) skills_in_turns: super::skills::SkillsInTurns,
}

/// A history the last repair left with every call answered: which state, how many messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RepairedPrefix {
    version: MessagesVersion,
    messages: usize,
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

impl AgentCore {
    pub(super) fn tools_now(&self) -> Arc<ToolRegistry> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A change of the history other than a turn's commit (a host's replacement): it gets a
    /// new version.
    pub(super) fn write_history(&self, f: impl FnOnce(&mut Vec<Message>)) {
        let mut history = self.history.write().unwrap_or_else(|e| e.into_inner());
        f(&mut history);
        self.history_version.renew();
        self.context.reset();
    }

    /// The repair before a turn ([`turn::history::backfill_orphans`]): a new version only when
    /// it answered a call (it only inserts, so the length tells). A history that only grew
    /// since the last repair is checked from where that one ended: walking the whole history
    /// before every turn made each turn of a long session cost more than the one before.
    pub(super) fn repair_history(&self) {
        let mut history = self.history.write().unwrap_or_else(|e| e.into_inner());
        let version = self.history_version.get();
        let mut repaired = lock(&self.repaired);
        let start = match *repaired {
            Some(r) if r.version == version && r.messages <= history.len() => r.messages,
            _ => 0,
        };
        let before = history.len();
        turn::history::backfill_orphans_from(&mut history, start);
        if history.len() != before {
            self.history_version.renew();
            self.context.forget_anchor();
        }
        // An unknown version says nothing about the next history: nothing is kept.
        *repaired = (version != MessagesVersion::unknown()).then(|| RepairedPrefix {
            version: self.history_version.get(),
            messages: history.len(),
        });
    }

    /// A finished turn: its messages appended to the history (an append keeps the version),
    /// its outcome the last turn.
    pub(super) fn commit(&self, transcript: Vec<Message>, outcome: &TurnOutcome) {
        self.history
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .extend(transcript);
        *lock(&self.last_turn) = Some(outcome.clone());
    }

    pub(super) fn report_mcp(&self, c: &StatusChange) {
        self.emitter
            .send_notice(&TurnEvent::McpServerStatus(McpServerStatus {
                server: &c.server,
                status: c.state.as_str(),
                tools: c.tools,
                error: c.error.as_deref(),
            }));
    }

    pub(super) fn env<'a>(&'a self, tools: &'a ToolRegistry) -> TurnEnv<'a> {
        let hooks = self.hooks();
        // The agent's first turn with hooks: its `SessionStart` hooks run.
        let session_start = hooks.is_some()
            && !self
                .session_started
                .swap(true, std::sync::atomic::Ordering::AcqRel);
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
            compaction_controller: self.compaction_controller(),
            images: &[],
            hooks,
            session_start,
            tool_hooks_only: false,
        }
    }

    pub(super) fn hooks(&self) -> Option<Arc<crate::hooks::Hooks>> {
        lock(&self.hooks).clone()
    }

    pub(super) fn compaction_controller(&self) -> Option<Arc<dyn CompactionController>> {
        lock(&self.compaction_controller).clone()
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
            compaction_controller: self.compaction_controller(),
            hooks: self.hooks(),
            skills_block: self.skills_block(),
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
