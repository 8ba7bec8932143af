//! What a child needs from its parent agent. The agent (a layer up) implements
//! [`ParentAgent`]; a spawn tool holds it weakly and takes a [`ParentView`] per call.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::config::{LlmConfig, ToolsConfig};
use crate::events::host::HostEventHub;
use crate::events::{Emitter, TurnEvent};
use crate::llm::Usage;
use crate::permissions::PermissionEngine;
use crate::tools::{ToolRegistry, ToolServices};

/// The parent agent, as its children reach it.
pub(crate) trait ParentAgent: Send + Sync {
    fn session_id(&self) -> &str;
    /// The parent's settings now (its current LLM config, its tool settings).
    fn snapshot(&self) -> ParentSnapshot;
    /// The parent's live permission engine. A child decides every call against it, never
    /// against a copy: a host that switches the parent to read-only, adds a deny rule or a
    /// source has bound every running child by its next call, and a copy taken at spawn would
    /// let a background child go on writing for as long as it runs.
    fn engine(&self) -> &RwLock<Option<PermissionEngine>>;
    /// The parent's live read-only flag (the other half of a mode switch), for the same reason.
    fn read_only(&self) -> &AtomicBool;
    /// Where forwarded events and `agent_start` / `agent_end` go (serialised with the
    /// parent's own events).
    fn emitter(&self) -> &Emitter;
    /// Where `subagent_lifecycle` events (and relayed child events) are published.
    fn hub(&self) -> &HostEventHub;
    /// Rolls a child's provider usage into the parent's session totals.
    fn add_usage(&self, usage: &Usage);
    /// The parent's background-agent store (spec §6.5). Crate-internal, like the store; the
    /// trait is public only for its other methods.
    #[allow(private_interfaces)]
    fn background(&self) -> Arc<super::background::BackgroundStore>;
}

/// The parent's settings a child is built from (spec §6.2).
pub(crate) struct ParentSnapshot {
    pub(crate) llm: LlmConfig,
    pub(crate) services: Arc<ToolServices>,
    pub(crate) tools_config: ToolsConfig,
    pub(crate) workspace: PathBuf,
    pub(crate) reply_timeout: Option<Duration>,
    /// `subagents.relay_events`.
    pub(crate) relay_events: bool,
    /// The parent's context window (configured, or learned from an overflow): a child
    /// compacts against the same one.
    pub(crate) context_window: u64,
    /// The parent's compaction controller: a child asks it too.
    pub(crate) compaction_controller:
        Option<Arc<dyn crate::turn::compaction::controller::CompactionController>>,
    /// The parent's hooks: a child's tool calls pass the same `PreToolUse` guards.
    pub(crate) hooks: Option<Arc<crate::hooks::Hooks>>,
    /// The parent's skills catalogue block: a child offered `activate_skill` is shown it too.
    pub(crate) skills_block: Option<Arc<str>>,
}

/// Everything one child run reads from its parent.
pub(crate) struct ParentView {
    pub(crate) agent: Arc<dyn ParentAgent>,
    pub(crate) snapshot: ParentSnapshot,
    /// The parent's tools of this turn (the child's are narrowed from them).
    pub(crate) tools: Arc<ToolRegistry>,
    /// The parent conversation's last messages, wire-shaped, oldest first.
    pub(crate) recent_messages: Vec<Value>,
    /// The id of the `agent_*` call that spawned the child.
    pub(crate) tool_call_id: Option<String>,
}

/// A child's start or end, reported through its parent: to the parent's transport (typed, and
/// `agent_start` / `agent_end` in the foreground) and, projected, to the parent's host-event
/// streams (`subagent_lifecycle`).
pub(crate) async fn report(parent: &dyn ParentAgent, event: &TurnEvent<'_>, cancel: &CancelToken) {
    let emitter = parent.emitter();
    if emitter.listens() {
        emitter.send(&mut crate::events::EventWriter::default(), event);
    }
    parent
        .hub()
        .project(event, parent.session_id(), None, cancel)
        .await;
}
