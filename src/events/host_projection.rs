//! Host events v3 as a projection of the typed [`TurnEvent`]: [`host_event`] is a pure
//! function of the event and a [`HostContext`] (the session, the turn, the time). No other code
//! builds a host event, so a renamed payload field is a compile error here, not a host event
//! silently wrong; and the projection runs only when the hub has a listener
//! ([`HostEventHub::project`]).

use chrono::{DateTime, Utc};

use super::host::{
    project_rule, redact_summary, rfc3339_millis, HostEvent, HostEventHub, PermissionDecisionEvent,
    SubagentLifecycleEvent, SubagentPhase, ToolLifecycleEvent, ToolOutcome, ToolPhase,
};
use super::subagent_event::{ChildState, Lineage, SubagentEnded};
use super::turn_event::{PermissionDecision, ToolComplete, ToolStart, ToolStatus};
use super::TurnEvent;
use crate::cancel::CancelToken;

/// What a host event says that its turn event does not.
pub(crate) struct HostContext<'a> {
    /// The session whose event it is (a sub-agent's lifecycle names its lineage's instead).
    pub(crate) session_id: &'a str,
    /// The turn the event happened in.
    pub(crate) turn_id: Option<&'a str>,
    /// When the projection is made: a terminal event's `completed_at`, a decision's
    /// `decided_at`.
    pub(crate) now: DateTime<Utc>,
}

/// Whether events of `event`'s variant may have a host event. Such events are sent with their
/// projection (`Turn::report`, `subagents::report`); the paths that send events without one
/// assert they never get such an event.
pub(crate) fn has_host_event(event: &TurnEvent<'_>) -> bool {
    match event {
        TurnEvent::PermissionDecision(_)
        | TurnEvent::ToolStart(_)
        | TurnEvent::ToolComplete(_)
        | TurnEvent::SubagentSpawned(_)
        | TurnEvent::SubagentEnded(_) => true,
        TurnEvent::TurnBegin { .. }
        | TurnEvent::TurnStart(_)
        | TurnEvent::LlmText { .. }
        | TurnEvent::Thinking { .. }
        | TurnEvent::LlmCallStarted(_)
        | TurnEvent::LlmCallDelta(_)
        | TurnEvent::LlmCallCompleted(_)
        | TurnEvent::LlmRetry(_)
        | TurnEvent::ToolConfirmation(_)
        | TurnEvent::ToolOutput(_)
        | TurnEvent::ToolResult(_)
        | TurnEvent::BackgroundNotificationInjected(_)
        | TurnEvent::CompactionStarted(_)
        | TurnEvent::CompactionSettled(_)
        | TurnEvent::ContextCompressed(_)
        | TurnEvent::SessionSummaryWritten(_)
        | TurnEvent::ImagesRemoved(_)
        | TurnEvent::PluginHookFired(_)
        | TurnEvent::TurnEnd(_)
        | TurnEvent::ReadonlyModeChanged(_)
        | TurnEvent::PermissionModeChanged(_)
        | TurnEvent::McpServerStatus(_)
        | TurnEvent::SessionCommitted(_) => false,
    }
}

/// The host event of one typed event, if it has one (spec §3).
pub(crate) fn host_event(event: &TurnEvent<'_>, ctx: &HostContext<'_>) -> Option<HostEvent> {
    match event {
        TurnEvent::ToolStart(s) => tool_started(s, ctx),
        TurnEvent::ToolComplete(c) => Some(tool_finished(c, ctx)),
        TurnEvent::PermissionDecision(d) => Some(permission_decision(d, ctx)),
        TurnEvent::SubagentSpawned(s) => Some(subagent(s.lineage, ctx, None)),
        TurnEvent::SubagentEnded(e) => Some(subagent(e.lineage, ctx, Some(e))),
        TurnEvent::TurnBegin { .. }
        | TurnEvent::TurnStart(_)
        | TurnEvent::LlmText { .. }
        | TurnEvent::Thinking { .. }
        | TurnEvent::LlmCallStarted(_)
        | TurnEvent::LlmCallDelta(_)
        | TurnEvent::LlmCallCompleted(_)
        | TurnEvent::LlmRetry(_)
        | TurnEvent::ToolConfirmation(_)
        | TurnEvent::ToolOutput(_)
        | TurnEvent::ToolResult(_)
        | TurnEvent::BackgroundNotificationInjected(_)
        | TurnEvent::CompactionStarted(_)
        | TurnEvent::CompactionSettled(_)
        | TurnEvent::ContextCompressed(_)
        | TurnEvent::SessionSummaryWritten(_)
        | TurnEvent::ImagesRemoved(_)
        | TurnEvent::PluginHookFired(_)
        | TurnEvent::TurnEnd(_)
        | TurnEvent::ReadonlyModeChanged(_)
        | TurnEvent::PermissionModeChanged(_)
        | TurnEvent::McpServerStatus(_)
        | TurnEvent::SessionCommitted(_) => None,
    }
}

fn tool_started(s: &ToolStart<'_>, ctx: &HostContext<'_>) -> Option<HostEvent> {
    Some(HostEvent::ToolLifecycle(ToolLifecycleEvent {
        session_id: ctx.session_id.to_owned(),
        turn_id: ctx.turn_id.map(str::to_owned),
        tool_call_id: s.call_id.to_owned(),
        tool_name: s.tool.to_owned(),
        phase: ToolPhase::Started,
        started_at: rfc3339_millis(s.started_at?),
        completed_at: None,
        outcome: None,
        summary: None,
        error_type: None,
    }))
}

/// A terminal `tool_lifecycle`: `completed` for ok, `failed` for error and cancelled (a
/// refused call's summary is why it was refused).
fn tool_finished(c: &ToolComplete<'_>, ctx: &HostContext<'_>) -> HostEvent {
    let (phase, outcome, summary) = match c.status {
        ToolStatus::Ok => (
            ToolPhase::Completed,
            ToolOutcome::Ok,
            redact_summary(&format!("{} succeeded", c.tool)),
        ),
        ToolStatus::Error => (
            ToolPhase::Failed,
            ToolOutcome::Error,
            redact_summary(&format!("{} failed", c.tool)),
        ),
        ToolStatus::Cancelled => (
            ToolPhase::Failed,
            ToolOutcome::Cancelled,
            c.error.and_then(redact_summary),
        ),
    };
    HostEvent::ToolLifecycle(ToolLifecycleEvent {
        session_id: ctx.session_id.to_owned(),
        turn_id: ctx.turn_id.map(str::to_owned),
        tool_call_id: c.call_id.to_owned(),
        tool_name: c.tool.to_owned(),
        phase,
        started_at: rfc3339_millis(c.started_at),
        completed_at: Some(rfc3339_millis(ctx.now)),
        outcome: Some(outcome),
        summary,
        error_type: c.error_type.map(str::to_owned),
    })
}

fn permission_decision(d: &PermissionDecision<'_>, ctx: &HostContext<'_>) -> HostEvent {
    HostEvent::PermissionDecision(PermissionDecisionEvent {
        session_id: ctx.session_id.to_owned(),
        turn_id: ctx.turn_id.map(str::to_owned),
        tool_call_id: Some(d.call_id.to_owned()),
        tool_name: d.tool.to_owned(),
        decision_id: d.decision_id.to_string(),
        outcome: d.outcome,
        mode: d.mode.to_owned(),
        matched_rule: d.matched_rule.and_then(project_rule),
        reason: redact_summary(d.reason),
        loaded_sources: d.loaded_sources.to_vec(),
        decided_at: rfc3339_millis(ctx.now),
    })
}

/// `spawned` (no end yet), or the end's `completed`, `failed` (with its `error_type`) or
/// `cancelled`, with the child's usage.
fn subagent(
    lineage: &Lineage,
    ctx: &HostContext<'_>,
    end: Option<&SubagentEnded<'_>>,
) -> HostEvent {
    let phase = match end.map(|e| e.state) {
        None => SubagentPhase::Spawned,
        Some(ChildState::Completed) => SubagentPhase::Completed,
        Some(ChildState::Failed) => SubagentPhase::Failed,
        Some(ChildState::Cancelled) => SubagentPhase::Cancelled,
    };
    HostEvent::SubagentLifecycle(SubagentLifecycleEvent {
        // The lineage's, fixed at the spawn: the start and the end name the same session.
        session_id: lineage.parent_session_id.clone(),
        parent_session_id: Some(lineage.parent_session_id.clone()),
        parent_task_id: lineage.parent_task_id.clone(),
        parent_tool_call_id: lineage.parent_tool_call_id.clone(),
        child_session_id: Some(lineage.child_session_id.clone()),
        child_task_id: lineage.child_task_id.clone(),
        phase,
        task_summary: redact_summary(&format!("sub-agent: {}", lineage.name)),
        started_at: lineage.started_at.clone(),
        completed_at: end.map(|_| rfc3339_millis(ctx.now)),
        error_type: end
            .filter(|e| e.state == ChildState::Failed)
            .and_then(|e| e.error_type)
            .map(str::to_owned),
        usage: end.and_then(|e| e.usage),
    })
}

impl HostEventHub {
    /// Publishes the host event of `event` to the streams of `session_id`, if the event has
    /// one and anyone listens: nothing is projected (no clock read, no string built) otherwise.
    pub(crate) async fn project(
        &self,
        event: &TurnEvent<'_>,
        session_id: &str,
        turn_id: Option<&str>,
        cancel: &CancelToken,
    ) {
        if !self.has_listeners() {
            return;
        }
        let ctx = HostContext {
            session_id,
            turn_id,
            now: Utc::now(),
        };
        if let Some(host) = host_event(event, &ctx) {
            self.publish(session_id, &host, cancel).await;
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every variant of [`TurnEvent`] projects to the host event the v3 schema of
    //! `tests/conformance/` describes, or to none.
    use std::collections::BTreeSet;

    use chrono::TimeZone;
    use serde_json::{json, Map, Value};
    use strum::EnumCount;

    use super::*;
    use crate::events::host::{PermissionOutcome, SubagentUsage};
    use crate::events::subagent_event::{RunStats, SubagentSpawned};
    use crate::events::turn_event::*;
    use crate::llm::message::WireJson;

    fn ctx() -> HostContext<'static> {
        HostContext {
            session_id: "sess",
            turn_id: Some("turn-1"),
            now: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap()
                + chrono::Duration::milliseconds(678),
        }
    }

    const NOW: &str = "2026-01-02T03:04:05.678Z";
    const STARTED: &str = "2026-01-02T03:04:00.012Z";

    fn started() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 0).unwrap() + chrono::Duration::milliseconds(12)
    }

    fn lineage(parent_task_id: Option<&str>) -> Lineage {
        Lineage {
            parent_session_id: "sess".into(),
            parent_task_id: parent_task_id.map(str::to_owned),
            parent_tool_call_id: Some("call-9".into()),
            child_session_id: "child-sess".into(),
            child_task_id: "child-task".into(),
            name: "scout".into(),
            started_at: STARTED.into(),
        }
    }

    fn tool_lifecycle(phase: &str, completed: bool, outcome: Value, summary: Value) -> Value {
        json!({"event_type": "tool_lifecycle", "session_id": "sess", "turn_id": "turn-1",
            "tool_call_id": "c1", "tool_name": "write_file", "phase": phase,
            "started_at": STARTED, "completed_at": if completed { json!(NOW) } else { Value::Null },
            "outcome": outcome, "summary": summary, "error_type": Value::Null})
    }

    fn subagent(phase: &str, end: Option<(Value, Value)>) -> Value {
        let (error_type, usage) = end.clone().unwrap_or((Value::Null, Value::Null));
        json!({"event_type": "subagent_lifecycle", "session_id": "sess",
            "parent_session_id": "sess", "parent_task_id": Value::Null,
            "parent_tool_call_id": "call-9", "child_session_id": "child-sess",
            "child_task_id": "child-task", "phase": phase, "task_summary": "sub-agent: scout",
            "started_at": STARTED,
            "completed_at": if end.is_some() { json!(NOW) } else { Value::Null },
            "error_type": error_type, "usage": usage})
    }

    #[test]
    fn every_variant_projects_to_its_schema_event_or_none() {
        let schema: Value = serde_json::from_str(include_str!(
            "../../tests/conformance/host.events.v3.schema.json"
        ))
        .unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let args = json!({"file_path": "a.txt"});
        let args: &Map<String, Value> = args.as_object().unwrap();
        let rule = json!({"tool": "write_file", "action": "ask",
            "args": {"file_path": "*.txt", "nested": {"x": 1}}, "list": [1, {"x": 1}]});
        let sources = [
            "default:preset".to_owned(),
            "project:.agentao/permissions.json".into(),
        ];
        let decision_id = uuid::Uuid::from_u128(0x1234);
        let rendered: Vec<WireJson> = Vec::new();
        let (fg, usage) = (lineage(None), SubagentUsage::default());
        let stats = RunStats::default();
        let tool_call = ToolCall {
            tool: "write_file",
            args,
            call_id: "c1",
            child_task_id: None,
        };
        let start = |started_at| ToolStart {
            tool: "write_file",
            args,
            call_id: "c1",
            child_task_id: None,
            started_at,
        };
        let complete = |status, error, error_type| ToolComplete {
            tool: "write_file",
            call_id: "c1",
            status,
            duration_ms: 1.5,
            error,
            child_task_id: None,
            started_at: started(),
            error_type,
        };
        let end = |state, error_type| SubagentEnded {
            lineage: &fg,
            state,
            stats: Some(stats),
            error: Some("it produced no output"),
            error_type,
            usage: Some(usage),
        };
        let usage_json = json!({"prompt_tokens": 0, "completion_tokens": 0,
            "cache_read_tokens": 0, "cache_creation_tokens": 0, "reasoning_tokens": 0});
        let samples: Vec<(TurnEvent<'_>, Option<Value>)> = vec![
            (TurnEvent::TurnBegin { user_message: "hi" }, None),
            (
                TurnEvent::TurnStart(TurnStart {
                    display_reset: false,
                    child_task_id: None,
                }),
                None,
            ),
            (
                TurnEvent::LlmText {
                    chunk: Text::new("a"),
                },
                None,
            ),
            (TurnEvent::Thinking { text: "b" }, None),
            (
                TurnEvent::LlmCallStarted(LlmCallStarted {
                    attempt: 1,
                    model: "m",
                    temperature: None,
                    max_tokens: 1,
                    n_messages: 1,
                    n_tool_messages: 0,
                    n_system_reminder_blocks: 0,
                    system_prompt_hash: "h",
                    tools_hash: "h",
                    tool_count: 0,
                }),
                None,
            ),
            (
                TurnEvent::LlmCallDelta(LlmCallDelta {
                    attempt: 1,
                    delta_start_index: 0,
                    total_messages: 0,
                    added_messages: &rendered,
                }),
                None,
            ),
            (
                TurnEvent::LlmCallCompleted(LlmCallCompleted {
                    attempt: 1,
                    status: "ok",
                    duration_ms: 1.0,
                    model_latency_ms: 1.0,
                    first_token_ms: None,
                    first_reasoning_ms: None,
                    error_class: None,
                    error_message: None,
                    finish_reason: None,
                    finish_reason_reported: None,
                    prompt_tokens: None,
                    completion_tokens: None,
                    cache_read_tokens: None,
                    cache_creation_tokens: None,
                    reasoning_tokens: None,
                    streamed: None,
                }),
                None,
            ),
            (
                TurnEvent::LlmRetry(LlmRetry {
                    retry: 1,
                    max_retries: 3,
                    delay_s: 1.0,
                    reason: "r",
                }),
                None,
            ),
            (TurnEvent::ToolConfirmation(tool_call), None),
            (
                TurnEvent::PermissionDecision(PermissionDecision {
                    tool: "write_file",
                    call_id: "c1",
                    decision_id,
                    outcome: PermissionOutcome::Prompt,
                    mode: "workspace-write",
                    loaded_sources: &sources,
                    matched_rule: Some(&rule),
                    reason: "  matched\n a rule ",
                }),
                Some(
                    json!({"event_type": "permission_decision", "session_id": "sess",
                    "turn_id": "turn-1", "tool_call_id": "c1", "tool_name": "write_file",
                    "decision_id": decision_id.to_string(), "outcome": "prompt",
                    "mode": "workspace-write",
                    "matched_rule": {"tool": "write_file", "action": "ask",
                        "args": {"file_path": "*.txt"}, "list": [1]},
                    "reason": "matched a rule", "loaded_sources": sources,
                    "decided_at": NOW}),
                ),
            ),
            (
                TurnEvent::ToolStart(start(Some(started()))),
                Some(tool_lifecycle("started", false, Value::Null, Value::Null)),
            ),
            // A refused call never starts: its lifecycle is the terminal event alone.
            (TurnEvent::ToolStart(start(None)), None),
            (
                TurnEvent::ToolOutput(ToolOutput {
                    tool: "write_file",
                    chunk: "x",
                    call_id: "c1",
                    child_task_id: None,
                }),
                None,
            ),
            (
                TurnEvent::ToolComplete(complete(ToolStatus::Ok, None, None)),
                Some(tool_lifecycle(
                    "completed",
                    true,
                    json!("ok"),
                    json!("write_file succeeded"),
                )),
            ),
            (
                TurnEvent::ToolComplete(complete(
                    ToolStatus::Error,
                    Some("disk full"),
                    Some("OSError"),
                )),
                Some({
                    let mut e =
                        tool_lifecycle("failed", true, json!("error"), json!("write_file failed"));
                    e["error_type"] = json!("OSError");
                    e
                }),
            ),
            (
                TurnEvent::ToolComplete(complete(
                    ToolStatus::Cancelled,
                    Some("not approved"),
                    None,
                )),
                Some(tool_lifecycle(
                    "failed",
                    true,
                    json!("cancelled"),
                    json!("not approved"),
                )),
            ),
            (
                TurnEvent::ToolResult(ToolResult {
                    tool: "write_file",
                    call_id: "c1",
                    content: "ok",
                    content_hash: "h",
                    original_chars: 2,
                    saved_to_disk: false,
                    disk_path: None,
                    status: ToolStatus::Ok,
                    duration_ms: 1.0,
                    error: None,
                }),
                None,
            ),
            (
                TurnEvent::BackgroundNotificationInjected(BackgroundNotificationInjected {
                    note_count: 1,
                    content: "n",
                }),
                None,
            ),
            (
                TurnEvent::CompactionStarted(CompactionStarted {
                    trigger: "auto",
                    kind: "full",
                    reason: "r",
                    child_task_id: None,
                }),
                None,
            ),
            (
                TurnEvent::CompactionSettled(CompactionSettled {
                    trigger: "auto",
                    kind: "full",
                    reason: "r",
                    status: "success",
                    pre_msgs: 2,
                    post_msgs: 1,
                    pre_tokens_history: 2,
                    post_tokens_history: 1,
                    duration_ms: 1,
                    detail: None,
                    child_task_id: None,
                }),
                None,
            ),
            (
                TurnEvent::ContextCompressed(ContextCompressed {
                    kind: "full",
                    reason: "r",
                    pre_msgs: 2,
                    post_msgs: 1,
                    pre_est_tokens: 2,
                    post_est_tokens: 1,
                    duration_ms: 1,
                    child_task_id: None,
                }),
                None,
            ),
            (
                TurnEvent::SessionSummaryWritten(SessionSummaryWritten {
                    summary_id: "i",
                    session_id: "sess",
                    tokens_before: 1,
                    messages_summarized: 1,
                    summary_size: 1,
                    child_task_id: None,
                }),
                None,
            ),
            (
                TurnEvent::ImagesRemoved(ImagesRemoved {
                    reason: "r",
                    images_removed: 1,
                    message_indices: &[0],
                }),
                None,
            ),
            (
                TurnEvent::PluginHookFired(PluginHookFired {
                    hook_name: "PreToolUse",
                    tool_name: Some("t"),
                    call_id: Some("c"),
                    hooks: 1,
                    failed: 0,
                    outcome: "allow",
                    reason: None,
                }),
                None,
            ),
            (
                TurnEvent::TurnEnd(TurnEnd {
                    final_text: "done",
                    status: "ok",
                    error: None,
                    tool_count: 0,
                    incomplete_reason: None,
                    finish_reason_missing: false,
                }),
                None,
            ),
            (
                TurnEvent::SubagentSpawned(SubagentSpawned {
                    lineage: &fg,
                    task: "look",
                    max_turns: 5,
                }),
                Some(subagent("spawned", None)),
            ),
            (
                TurnEvent::SubagentEnded(end(ChildState::Failed, Some("incomplete:no_output"))),
                Some(subagent(
                    "failed",
                    Some((json!("incomplete:no_output"), usage_json.clone())),
                )),
            ),
            // Only a failed run keeps its error type.
            (
                TurnEvent::SubagentEnded(end(ChildState::Completed, Some("ignored"))),
                Some(subagent(
                    "completed",
                    Some((Value::Null, usage_json.clone())),
                )),
            ),
            (
                TurnEvent::SubagentEnded(end(ChildState::Cancelled, None)),
                Some(subagent("cancelled", Some((Value::Null, usage_json)))),
            ),
            (
                TurnEvent::ReadonlyModeChanged(ReadonlyModeChanged {
                    previous: false,
                    current: true,
                }),
                None,
            ),
            (
                TurnEvent::PermissionModeChanged(PermissionModeChanged {
                    previous: "workspace-write",
                    current: "read-only",
                    cause: "host",
                }),
                None,
            ),
            (
                TurnEvent::McpServerStatus(McpServerStatus {
                    server: "s",
                    status: "ready",
                    tools: 1,
                    error: None,
                }),
                None,
            ),
            (
                TurnEvent::SessionCommitted(SessionCommitted {
                    session_id: "s",
                    status: "committed",
                    version: 2,
                    stored_version: None,
                    message: "",
                }),
                None,
            ),
        ];
        let kinds: BTreeSet<&str> = samples.iter().map(|(e, _)| e.kind()).collect();
        assert_eq!(kinds.len(), TurnEvent::COUNT, "one sample of every variant");
        let mut event_types = BTreeSet::new();
        for (event, expected) in &samples {
            let got = host_event(event, &ctx()).map(|h| serde_json::to_value(h).unwrap());
            assert_eq!(&got, expected, "{}", event.kind());
            if let Some(got) = got {
                assert!(has_host_event(event), "{}", event.kind());
                let errors: Vec<String> =
                    validator.iter_errors(&got).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{}: {got} {errors:?}", event.kind());
                event_types.insert(got["event_type"].as_str().unwrap().to_owned());
            }
        }
        // Every event type of the schema comes from some turn event.
        let mut schema_types = BTreeSet::new();
        for variant in schema["oneOf"].as_array().into_iter().flatten() {
            let name = variant["$ref"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap();
            let def = &schema["$defs"][name];
            let ty = def["properties"]["event_type"]["const"].as_str().unwrap();
            schema_types.insert(ty.to_owned());
        }
        assert!(!schema_types.is_empty(), "the schema's union was read");
        assert_eq!(event_types, schema_types);
    }
}
