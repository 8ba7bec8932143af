//! One child run, start to end (spec §6.2–§6.4): lineage ids, `agent_start`, `spawned`, the
//! child's turn, classification, usage roll-up, `agent_end`, the terminal event.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use super::context::{child_message, parent_context};
use super::definition::SubagentDefinition;
use super::forward::{ChildMode, Forwarder};
use super::narrow::narrow;
use super::outcome::{
    classify, complete_task_payload, is_harness_notice, result_text, usage_of, ChildState, Lineage,
    RunStats,
};
use super::parent::{report, ParentView};
use crate::cancel::CancelToken;
use crate::config::LlmConfig;
use crate::events::host::{now_rfc3339, HostEventHub};
use crate::events::subagent_event::{SubagentEnded, SubagentSpawned};
use crate::events::{Emitter, TurnEvent};
use crate::llm::{LlmClient, MessagesVersionCell};
use crate::turn::compaction::controller::{ChildController, CompactionController};
use crate::turn::{self, DeltaSink, TurnEnv};

/// How one run ended, for the spawn tool (or the background store).
#[derive(Debug, Clone)]
pub(crate) struct ChildReport {
    pub(crate) state: ChildState,
    /// What the parent model reads: the child's text and footer (spec §6.4). For a run that
    /// could not start, the error.
    pub(crate) text: String,
    /// Why a failed run stopped short (the `agent_end` error), for the background store.
    pub(crate) detail: Option<String>,
    /// The child could not be built (the tool reports it as an error of this type).
    pub(crate) setup_error: Option<String>,
    /// `incomplete:<reason>` on a failed run.
    pub(crate) error_type: Option<String>,
    pub(crate) stats: RunStats,
}

/// The child's model settings: the parent's current ones, with the definition's model and
/// temperature when it sets them. A scripted parent gives the child the script under its name
/// (`llm.script.subagents.<name>`; docs/subagents.md).
fn child_llm(parent: &LlmConfig, def: &SubagentDefinition) -> LlmConfig {
    match parent {
        LlmConfig::OpenAi(c) => {
            let mut c = c.clone();
            // The child's usage rolls up into the parent's, whose budgets then apply to it.
            c.budgets = Default::default();
            if let Some(m) = def.model_name() {
                c.model = m.to_owned();
            }
            if def.temperature.is_some() {
                c.temperature = def.temperature;
            }
            LlmConfig::OpenAi(c)
        }
        LlmConfig::Scripted(s) => {
            LlmConfig::Scripted(crate::llm::script::subagent_script(s, &def.name))
        }
    }
}

/// The ids one child's lifecycle events share, fixed before the first of them is published.
pub(crate) fn new_lineage(
    parent: &ParentView,
    def: &SubagentDefinition,
    mode: &ChildMode,
) -> Lineage {
    Lineage {
        parent_session_id: parent.agent.session_id().to_owned(),
        parent_task_id: match mode {
            ChildMode::Foreground => None,
            ChildMode::Background { parent_task_id } => Some(parent_task_id.clone()),
        },
        parent_tool_call_id: parent.tool_call_id.clone(),
        child_session_id: uuid::Uuid::new_v4().to_string(),
        child_task_id: uuid::Uuid::new_v4().to_string(),
        name: def.name.clone(),
        started_at: now_rfc3339(),
    }
}

/// Runs one sub-agent to its end and reports it. Never fails the caller: a child that cannot
/// be built is a `failed` run whose report says why.
///
/// The spawn tool calls it on the tool's thread with [`ChildMode::Foreground`]. `cancel` is
/// the child's token: in the foreground the parent turn's, so cancelling the parent cancels
/// the child at once.
pub(crate) async fn run_child(
    parent: &ParentView,
    def: &SubagentDefinition,
    task: &str,
    mode: ChildMode,
    cancel: CancelToken,
) -> ChildReport {
    let lineage = new_lineage(parent, def, &mode);
    report_spawned(&*parent.agent, &lineage, def, task, &cancel).await;
    run_spawned(parent, def, task, mode, cancel, lineage).await
}

/// The child's [`SubagentSpawned`]: `agent_start` in the foreground, and `spawned`.
pub(crate) async fn report_spawned(
    parent: &dyn super::ParentAgent,
    lineage: &Lineage,
    def: &SubagentDefinition,
    task: &str,
    cancel: &CancelToken,
) {
    let head: String = task.chars().take(80).collect();
    let event = TurnEvent::SubagentSpawned(SubagentSpawned {
        lineage,
        task: &head,
        max_turns: def.max_turns,
    });
    report(parent, &event, cancel).await;
}

/// [`run_child`] once its `spawned` is out. Background agents
/// (`src/subagents/background/`) publish `spawned` while the launching call is still running,
/// as the reference does before the child's thread starts, and run the child from their own
/// task with [`ChildMode::Background`] and a token of their own.
pub(crate) async fn run_spawned(
    parent: &ParentView,
    def: &SubagentDefinition,
    task: &str,
    mode: ChildMode,
    cancel: CancelToken,
    lineage: Lineage,
) -> ChildReport {
    let agent = &parent.agent;
    let end_event = |state, stats, error, error_type, usage| SubagentEnded {
        lineage: &lineage,
        state,
        stats,
        error,
        error_type,
        usage,
    };

    let child_report = |state, text, setup_error, error_type, stats| ChildReport {
        state,
        text,
        detail: None,
        setup_error,
        error_type,
        stats,
    };

    let llm = match LlmClient::new(&child_llm(&parent.snapshot.llm, def)) {
        Ok(l) => l,
        Err(e) => {
            let r = child_report(
                ChildState::Failed,
                e,
                Some("ValueError".into()),
                Some("ValueError".into()),
                RunStats::default(),
            );
            record_background(parent, &mode, &r);
            // Nothing ran: the counters are not known and left out, as the reference does.
            let end = end_event(
                ChildState::Failed,
                None,
                Some("ValueError"),
                Some("ValueError"),
                None,
            );
            report(&**agent, &TurnEvent::SubagentEnded(end), &cancel).await;
            return r;
        }
    };

    let snap = &parent.snapshot;
    let forwarder = Arc::new(Forwarder::new(
        agent.clone(),
        &def.name,
        def.max_turns,
        &lineage.child_task_id,
        &mode,
    ));
    let emitter = Emitter::new(forwarder.clone())
        .with_observer(agent.emitter().child_observer(&lineage.child_task_id));
    let own_hub = HostEventHub::default();
    // Relayed events are the child's own, unchanged, under the child's session id.
    let hub = if snap.relay_events {
        agent.hub()
    } else {
        &own_hub
    };
    let tools = narrow(&parent.tools, def);
    let services = Arc::new(snap.services.child_view());
    let history = RwLock::new(Vec::new());
    let context = crate::turn::compaction::ContextState::new(snap.context_window);
    // Empty for the child's one turn: there is nothing to spare the cache.
    let history_version = MessagesVersionCell::unknown();
    let mut prompt = turn::prompt::system_prompt(&snap.workspace, def.instructions.as_deref());
    // The reference's child sees the parent's skills (a `child_view`): its catalogue when the
    // definition's tools include `activate_skill`.
    if let Some(block) = snap
        .skills_block
        .as_deref()
        .filter(|_| tools.get(crate::skills::activate::NAME).is_some())
    {
        prompt.push_str("\n\n");
        prompt.push_str(block);
    }
    let system_prompt = turn::prompt::SystemPrompt::new(prompt);
    let env = TurnEnv {
        session_id: &lineage.child_session_id,
        llm: &llm,
        tools: &tools,
        tool_services: &services,
        tools_config: &snap.tools_config,
        workspace: &snap.workspace,
        system_prompt: &system_prompt,
        recall: None,
        emitter: &emitter,
        hub,
        // The parent's own policy, live; the child's restrictions are its narrowed tools.
        engine: agent.engine(),
        read_only: agent.read_only(),
        history: &history,
        history_version: &history_version,
        reply_timeout: snap.reply_timeout,
        // Sub-agents never drain the parent's background notices.
        background: None,
        // The child compacts its own history against the parent's window, under the parent's
        // controller.
        context: &context,
        compaction_controller: snap.compaction_controller.clone().map(|parent| {
            Arc::new(ChildController {
                parent,
                child_task_id: lineage.child_task_id.clone(),
            }) as Arc<dyn CompactionController>
        }),
        images: &[],
        hooks: snap.hooks.clone(),
        session_start: false,
        tool_hooks_only: true,
    };
    let message = child_message(&parent_context(&parent.recent_messages), task);
    let t0 = Instant::now();
    let mut ended = turn::run_turn(&env, &message, def.max_turns, &cancel, DeltaSink::None).await;
    let transcript = ended.take_transcript();
    let (outcome, _failure) = ended.finish();
    let stats = RunStats::of(&transcript, t0.elapsed().as_millis() as u64);

    let payload = complete_task_payload(&transcript);
    let mut result = outcome.text.clone();
    if let Some(p) = &payload {
        if is_harness_notice(&result) && !p.trim().is_empty() {
            result = p.clone();
        }
    }
    let incomplete = classify(
        &outcome,
        payload.is_some(),
        forwarder.max_iterations_hit(),
        def.max_turns,
    );
    let state = incomplete.map_or(ChildState::Completed, |i| i.state());
    let error_type = match (state, incomplete) {
        (ChildState::Failed, Some(i)) => Some(format!("incomplete:{}", i.reason())),
        _ => None,
    };

    // Before anything says the run ended: a host told `completed` reads the parent's totals.
    let raw_usage = llm.usage.snapshot();
    agent.add_usage(&raw_usage);
    let usage = usage_of(&raw_usage);

    let text = result_text(&def.name, &result, &stats, incomplete);
    let mut r = child_report(state, text, None, error_type, stats);
    r.detail = incomplete.map(|i| i.detail());
    record_background(parent, &mode, &r);
    let error = match state {
        ChildState::Failed => r.detail.as_deref(),
        _ => None,
    };
    let end = end_event(
        state,
        Some(stats),
        error,
        r.error_type.as_deref(),
        Some(usage),
    );
    report(&**agent, &TurnEvent::SubagentEnded(end), &cancel).await;
    r
}

/// A background run is recorded in the store (its notice queued) before its terminal event, as
/// the reference's `update` precedes the event: a host that starts the next turn on
/// `completed` finds the notice there.
fn record_background(parent: &ParentView, mode: &ChildMode, r: &ChildReport) {
    if let ChildMode::Background { parent_task_id } = mode {
        let report = super::background::run_report(r.clone());
        parent.agent.background().settle(parent_task_id, report);
    }
}
