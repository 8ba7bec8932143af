//! The public façade: the [`Agent`] handle and [`WeakAgent`], and what a host asks of an agent
//! between turns (history, permissions, tools, memory, file system, shell, sub-agents, MCP).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::Value;

use crate::events::host::HostEventHub;
use crate::events::turn_event::{PermissionModeChanged, ReadonlyModeChanged};
use crate::events::TurnEvent;
use crate::mcp::McpRegistry;
use crate::permissions::preflight::Preflight;
use crate::permissions::{ActivePermissions, Mode, PermissionEngine, ToolFacts};
use crate::subagents::background;
#[cfg(test)]
use crate::subagents::background::BackgroundStore;
use crate::subagents::SubagentDefinition;
use crate::tools::{FileSystem, MemoryStore, ShellExecutor, Tool, ToolRegistry, ToolServices};
use crate::turn::TurnOutcome;

use super::session::AgentCore;
use super::{lock, on_runtime_thread, AgentError, TurnOptions};

/// A handle to one agent; clones share it.
#[derive(Clone)]
pub struct Agent {
    pub(super) core: Arc<AgentCore>,
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

impl Agent {
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

    pub fn host_events(&self) -> &HostEventHub {
        &self.core.hub
    }

    pub fn downgrade(&self) -> WeakAgent {
        WeakAgent(Arc::downgrade(&self.core))
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
        let objects = messages
            .into_iter()
            .map(|m| match m {
                Value::Object(m) => m,
                _ => serde_json::Map::new(),
            })
            .collect();
        let typed =
            super::session_document::typed_history(objects).map_err(AgentError::InvalidArgument)?;
        if self.is_busy() {
            return Err(AgentError::TurnInProgress);
        }
        self.core.write_history(|h| *h = typed);
        Ok(())
    }

    /// Takes the reasoning earlier models left out of the history (between turns only): each
    /// assistant message's `reasoning_content` and the wires' carriers
    /// (`anthropic_thinking_blocks`, `openai_reasoning_items`), as the reference does when the
    /// model or provider changes: another model cannot read them, and a wire that checks signed
    /// or encrypted reasoning refuses them.
    pub fn strip_reasoning(&self) -> Result<(), AgentError> {
        const REASONING_KEYS: [&str; 3] = [
            "reasoning_content",
            "anthropic_thinking_blocks",
            "openai_reasoning_items",
        ];
        let mut history: Value = serde_json::from_str(&self.history_json())
            .map_err(|e| AgentError::Internal(format!("history: {e}")))?;
        let messages = history.as_array_mut().into_iter().flatten();
        for m in messages.filter_map(Value::as_object_mut) {
            if m.get("role").and_then(Value::as_str) == Some("assistant") {
                for key in REASONING_KEYS {
                    m.remove(key);
                }
            }
        }
        self.set_history_json(&history.to_string())
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
        if was_ro != now_ro {
            self.core
                .emitter
                .send_notice(&TurnEvent::ReadonlyModeChanged(ReadonlyModeChanged {
                    previous: was_ro,
                    current: now_ro,
                }));
        }
        if previous != mode {
            self.core
                .emitter
                .send_notice(&TurnEvent::PermissionModeChanged(PermissionModeChanged {
                    previous: previous.as_str(),
                    current: mode.as_str(),
                    cause: "host",
                }));
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
            let with_skill = self.core.skills_in_turns.forget_tools();
            // A tool dropped with the old registry runs its host finalizer: never under a lock.
            drop(tools);
            drop(old);
            drop(composed);
            drop(with_skill);
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
            |probe| self.core.tool_services.answer_probe(probe),
        ))
    }

    /// How long a host request waits for its answer (the config's `reply_timeout_ms`).
    pub(crate) fn reply_timeout(&self) -> Option<std::time::Duration> {
        self.core.config.reply_timeout
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
    pub(super) fn between_turns(&self, f: impl FnOnce(&ToolServices)) -> Result<(), AgentError> {
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

    /// The session's cost in US dollars by `llm.prices` (sub-agents' included); `None` when
    /// the table prices nothing this session used.
    pub fn cost_usd(&self) -> Option<f64> {
        let nano = self.core.llm.usage.snapshot().cost_nano_usd;
        (nano > 0 || self.core.llm.priced()).then(|| nano as f64 / 1e9)
    }
}
