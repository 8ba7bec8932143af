//! The agent's events, typed: one [`TurnEvent`] per thing a turn reports (and per notice the
//! agent sends between turns: mode changes, MCP status, a sub-agent's start and end), each
//! variant holding its payload as a borrowed struct. Every surface is a projection of it:
//!
//! - transport JSON (`{"type","schema_version","data"}`): [`TurnEvent::write_json`], the
//!   bytes the host's `emit` receives;
//! - in-process observers ([`super::transport::Transport::observe`]), e.g. `agentao-acp`'s
//!   `session/update` notifications, which match on the variants and read the fields: a
//!   renamed or retyped field is a compile error there, not an update silently dropped;
//! - host events v3: `host_projection::host_event`, from the same payloads (a payload's
//!   `host_only` fields are the facts only the host event carries: timestamps, error types,
//!   usage).
//!
//! Adding an event is one variant, its payload struct (`event_data!` writes its JSON from the
//! field list) and one arm in [`TurnEvent::kind`] and [`TurnEvent::write_json`]; the compiler
//! names every `match` that must decide what to do with it (the host projection's among them).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::host::PermissionOutcome;
use super::subagent_event::{SubagentEnded, SubagentSpawned};
use super::{event_data, EventData, EventWriter, Fields, JsonText, TextEventHead};

fn is_false(b: &bool) -> bool {
    !*b
}

/// The `status` of the `tool_complete` and `tool_result` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Ok,
    Error,
    Cancelled,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Cancelled => "cancelled",
        }
    }
}

impl serde::Serialize for ToolStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl super::FieldValue for ToolStatus {
    fn write_json(&self, out: &mut Vec<u8>) {
        // `as_str` is a plain lowercase word: nothing to escape.
        out.push(b'"');
        out.extend_from_slice(self.as_str().as_bytes());
        out.push(b'"');
    }
}

/// A piece of text an event carries, with its JSON string form when the writer already has it
/// (a streamed delta is escaped once, for the stream item, and the event reuses that).
#[derive(Debug, Clone, Copy)]
pub struct Text<'a> {
    text: &'a str,
    /// `text` as a JSON string, quotes included.
    json: Option<&'a str>,
}

impl<'a> Text<'a> {
    pub fn new(text: &'a str) -> Self {
        Text { text, json: None }
    }

    /// `json` must be `text` as serde_json writes it (quoted, escaped).
    pub(crate) fn escaped(text: &'a str, json: &'a str) -> Self {
        Text {
            text,
            json: Some(json),
        }
    }

    pub fn as_str(&self) -> &'a str {
        self.text
    }

    #[inline]
    fn write<'w>(&self, w: &'w mut EventWriter, head: TextEventHead) -> JsonText<'w> {
        match self.json {
            Some(json) => w.text_event_json(head, json),
            None => w.text_event_at(head, self.text),
        }
    }
}

/// Messages already rendered as JSON objects (the model request's own bytes), written as an
/// array without being rendered again.
pub trait RenderedMessages: Sync {
    fn count(&self) -> usize;
    /// Appends the JSON array of the messages.
    fn write_array(&self, out: &mut Vec<u8>);
}

event_data! {
    pub struct TurnStart<'a> {
        #[skip_if(is_false)]
        pub display_reset: bool,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
}

event_data! {
    /// `compaction_started` (host-contract §2.2).
    pub struct CompactionStarted<'a> {
        pub trigger: &'static str,
        pub kind: &'static str,
        pub reason: &'a str,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
}

event_data! {
    /// `compaction_settled`: how a compaction ended, with the history's size before and after.
    pub struct CompactionSettled<'a> {
        pub trigger: &'static str,
        pub kind: &'static str,
        pub reason: &'a str,
        pub status: &'static str,
        pub pre_msgs: usize,
        pub post_msgs: usize,
        pub pre_tokens_history: u64,
        pub post_tokens_history: u64,
        pub duration_ms: u64,
        pub detail: Option<&'a str>,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
}

/// `context_compressed`: its first key is `type` (the compaction's kind), which no Rust field
/// can be named, hence the hand-written field list.
pub struct ContextCompressed<'a> {
    pub kind: &'static str,
    pub reason: &'a str,
    pub pre_msgs: usize,
    pub post_msgs: usize,
    pub pre_est_tokens: u64,
    pub post_est_tokens: u64,
    pub duration_ms: u64,
    /// Set on a foreground sub-agent's event forwarded to its parent.
    pub child_task_id: Option<&'a str>,
}

impl EventData for ContextCompressed<'_> {
    fn write_fields(&self, fields: &mut Fields<'_>) {
        fields.field("\"type\":", &self.kind);
        fields.field("\"reason\":", &self.reason);
        fields.field("\"pre_msgs\":", &self.pre_msgs);
        fields.field("\"post_msgs\":", &self.post_msgs);
        fields.field("\"pre_est_tokens\":", &self.pre_est_tokens);
        fields.field("\"post_est_tokens\":", &self.post_est_tokens);
        fields.field("\"duration_ms\":", &self.duration_ms);
        if let Some(id) = &self.child_task_id {
            fields.field("\"child_task_id\":", id);
        }
    }
}

event_data! {
    /// `session_summary_written`: the compaction's summary went to the memory store.
    pub struct SessionSummaryWritten<'a> {
        pub summary_id: &'a str,
        pub session_id: &'a str,
        pub tokens_before: u64,
        pub messages_summarized: usize,
        pub summary_size: usize,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
}

event_data! {
    /// `images_removed`: the model refused image input; the images became attachment tags.
    pub struct ImagesRemoved<'a> {
        pub reason: &'static str,
        pub images_removed: usize,
        pub message_indices: &'a [usize],
    }
}

event_data! {
    /// `plugin_hook_fired`: hooks ran at one point of the loop (docs/hooks.md). `outcome` is
    /// what they decided together: `allow`, `ask`, `deny`, `block`, `halt`, `context` or `none`.
    pub struct PluginHookFired<'a> {
        pub hook_name: &'static str,
        #[skip_if(Option::is_none)]
        pub tool_name: Option<&'a str>,
        #[skip_if(Option::is_none)]
        pub call_id: Option<&'a str>,
        pub hooks: usize,
        pub failed: usize,
        pub outcome: &'static str,
        pub reason: Option<&'a str>,
    }
}

event_data! {
    /// `turn_end`: the keys in the order of the `json!` map it was written from before.
    pub struct TurnEnd<'a> {
        pub final_text: &'a str,
        pub status: &'static str,
        pub error: Option<&'a str>,
        pub tool_count: u64,
        pub incomplete_reason: Option<&'static str>,
        pub finish_reason_missing: bool,
    }
}

event_data! {
    pub struct LlmCallStarted<'a> {
        pub attempt: u32,
        pub model: &'a str,
        pub temperature: Option<f64>,
        pub max_tokens: u32,
        pub n_messages: usize,
        pub n_tool_messages: usize,
        pub n_system_reminder_blocks: usize,
        pub system_prompt_hash: &'a str,
        pub tools_hash: &'a str,
        pub tool_count: usize,
    }
}

/// Written by hand: its messages are spliced as rendered ([`RenderedMessages`], which the
/// request then reuses), not written through their `Serialize`.
pub struct LlmCallDelta<'a> {
    pub attempt: u32,
    pub delta_start_index: usize,
    pub total_messages: usize,
    pub added_messages: &'a dyn RenderedMessages,
}

impl EventData for LlmCallDelta<'_> {
    fn write_fields(&self, fields: &mut Fields<'_>) {
        fields.field("\"attempt\":", &self.attempt);
        fields.field("\"delta_start_index\":", &self.delta_start_index);
        fields.field("\"total_messages\":", &self.total_messages);
        fields.field_with("\"added_messages\":", |out| {
            self.added_messages.write_array(out)
        });
    }
}

event_data! {
    pub struct LlmCallCompleted<'a> {
        pub attempt: u32,
        pub status: &'static str,
        pub duration_ms: f64,
        pub model_latency_ms: f64,
        pub first_token_ms: Option<f64>,
        pub first_reasoning_ms: Option<f64>,
        pub error_class: Option<&'a str>,
        pub error_message: Option<&'a str>,
        pub finish_reason: Option<&'a str>,
        /// Only on `ok`.
        #[skip_if(Option::is_none)]
        pub finish_reason_reported: Option<bool>,
        pub prompt_tokens: Option<u64>,
        pub completion_tokens: Option<u64>,
        pub cache_read_tokens: Option<u64>,
        pub cache_creation_tokens: Option<u64>,
        pub reasoning_tokens: Option<u64>,
        /// Only on `error`: whether text had reached the host.
        #[skip_if(Option::is_none)]
        pub streamed: Option<bool>,
    }
}

event_data! {
    pub struct LlmRetry<'a> {
        pub retry: u32,
        pub max_retries: u32,
        pub delay_s: f64,
        pub reason: &'a str,
    }
}

event_data! {
    /// `tool_confirmation` and `tool_start`.
    pub struct ToolCall<'a> {
        pub tool: &'a str,
        pub args: &'a Map<String, Value>,
        pub call_id: &'a str,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
}

event_data! {
    /// `tool_start`: a planned call begins, or is refused (it then completes at once).
    pub struct ToolStart<'a> {
        pub tool: &'a str,
        pub args: &'a Map<String, Value>,
        pub call_id: &'a str,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
    host_only {
        /// When the call began running; `None` for a refused call, which never runs: its
        /// `tool_lifecycle` is a `failed` alone.
        pub(crate) started_at: Option<DateTime<Utc>>,
    }
}

event_data! {
    pub struct ToolOutput<'a> {
        pub tool: &'a str,
        pub chunk: &'a str,
        pub call_id: &'a str,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
}

event_data! {
    pub struct ToolComplete<'a> {
        pub tool: &'a str,
        pub call_id: &'a str,
        pub status: ToolStatus,
        pub duration_ms: f64,
        pub error: Option<&'a str>,
        /// Set on a foreground sub-agent's event forwarded to its parent.
        #[skip_if(Option::is_none)]
        pub child_task_id: Option<&'a str>,
    }
    host_only {
        /// When the call began (a refused call's: when it was refused).
        pub(crate) started_at: DateTime<Utc>,
        /// The failed tool's error kind (the host event's `error_type`).
        pub(crate) error_type: Option<&'a str>,
    }
}

event_data! {
    pub struct ToolResult<'a> {
        pub tool: &'a str,
        pub call_id: &'a str,
        pub content: &'a str,
        pub content_hash: &'a str,
        pub original_chars: usize,
        pub saved_to_disk: bool,
        pub disk_path: Option<String>,
        pub status: ToolStatus,
        pub duration_ms: f64,
        pub error: Option<&'a str>,
    }
}

event_data! {
    pub struct BackgroundNotificationInjected<'a> {
        pub note_count: usize,
        pub content: &'a str,
    }
}

/// The permission decision of one planned call. Not on the transport: the host reads it as
/// the `permission_decision` host event (and a call that asks, as `tool_confirmation`).
pub struct PermissionDecision<'a> {
    pub(crate) tool: &'a str,
    pub(crate) call_id: &'a str,
    /// Names this decision in the host event.
    pub(crate) decision_id: uuid::Uuid,
    pub(crate) outcome: PermissionOutcome,
    /// The permission mode the decision was made in, and where its rules came from.
    pub(crate) mode: &'a str,
    pub(crate) loaded_sources: &'a [String],
    /// The rule that decided, as configured (the host event carries its projection).
    pub(crate) matched_rule: Option<&'a Value>,
    pub(crate) reason: &'a str,
}

event_data! {
    /// `readonly_mode_changed`: the host switched the permission mode into or out of read-only.
    pub struct ReadonlyModeChanged {
        pub previous: bool,
        pub current: bool,
    }
}

event_data! {
    /// `permission_mode_changed`: the host switched the permission mode.
    pub struct PermissionModeChanged {
        pub previous: &'static str,
        pub current: &'static str,
        pub cause: &'static str,
    }
}

event_data! {
    /// `mcp_server_status`: an MCP server connected, failed or was retried.
    pub struct McpServerStatus<'a> {
        pub server: &'a str,
        pub status: &'static str,
        pub tools: usize,
        pub error: Option<&'a str>,
    }
}

event_data! {
    /// `session_committed`: the session's commit to its store after a turn, and how it went.
    pub struct SessionCommitted<'a> {
        pub session_id: &'a str,
        pub status: &'static str,
        pub version: u64,
        pub stored_version: Option<u64>,
        pub message: &'a str,
    }
}

/// One event of the agent: of a turn (or of a foreground sub-agent's turn, forwarded to its
/// parent), or a notice the agent sends outside one.
#[cfg_attr(test, derive(strum::EnumCount))]
pub enum TurnEvent<'a> {
    /// `turn_begin`: the user's message that starts the turn.
    TurnBegin {
        user_message: &'a str,
    },
    /// `turn_start`: one iteration of the loop begins (or, with `display_reset`, the host
    /// should redraw after a confirmation).
    TurnStart(TurnStart<'a>),
    /// `llm_text`: a streamed piece of the model's answer.
    LlmText {
        chunk: Text<'a>,
    },
    /// `thinking`: a streamed piece of the model's reasoning.
    Thinking {
        text: &'a str,
    },
    LlmCallStarted(LlmCallStarted<'a>),
    LlmCallDelta(LlmCallDelta<'a>),
    LlmCallCompleted(LlmCallCompleted<'a>),
    LlmRetry(LlmRetry<'a>),
    /// `tool_confirmation`: the host is about to be asked to confirm a call.
    ToolConfirmation(ToolCall<'a>),
    /// A planned call's permission decision: host event only, never on the transport.
    PermissionDecision(PermissionDecision<'a>),
    ToolStart(ToolStart<'a>),
    ToolOutput(ToolOutput<'a>),
    ToolComplete(ToolComplete<'a>),
    ToolResult(ToolResult<'a>),
    BackgroundNotificationInjected(BackgroundNotificationInjected<'a>),
    CompactionStarted(CompactionStarted<'a>),
    CompactionSettled(CompactionSettled<'a>),
    ContextCompressed(ContextCompressed<'a>),
    SessionSummaryWritten(SessionSummaryWritten<'a>),
    ImagesRemoved(ImagesRemoved<'a>),
    PluginHookFired(PluginHookFired<'a>),
    TurnEnd(TurnEnd<'a>),
    /// A sub-agent was spawned: `agent_start` on the transport in the foreground (a
    /// background child's is the host event alone).
    SubagentSpawned(SubagentSpawned<'a>),
    /// A sub-agent's run ended: `agent_end` on the transport in the foreground.
    SubagentEnded(SubagentEnded<'a>),
    ReadonlyModeChanged(ReadonlyModeChanged),
    PermissionModeChanged(PermissionModeChanged),
    McpServerStatus(McpServerStatus<'a>),
    SessionCommitted(SessionCommitted<'a>),
}

impl<'a> TurnEvent<'a> {
    /// The event's name: its `type` on the transport, when it is written there
    /// ([`TurnEvent::write_json`]).
    pub fn kind(&self) -> &'static str {
        match self {
            TurnEvent::TurnBegin { .. } => "turn_begin",
            TurnEvent::TurnStart(_) => "turn_start",
            TurnEvent::LlmText { .. } => "llm_text",
            TurnEvent::Thinking { .. } => "thinking",
            TurnEvent::LlmCallStarted(_) => "llm_call_started",
            TurnEvent::LlmCallDelta(_) => "llm_call_delta",
            TurnEvent::LlmCallCompleted(_) => "llm_call_completed",
            TurnEvent::LlmRetry(_) => "llm_retry",
            TurnEvent::ToolConfirmation(_) => "tool_confirmation",
            TurnEvent::PermissionDecision(_) => "permission_decision",
            TurnEvent::ToolStart(_) => "tool_start",
            TurnEvent::ToolOutput(_) => "tool_output",
            TurnEvent::ToolComplete(_) => "tool_complete",
            TurnEvent::ToolResult(_) => "tool_result",
            TurnEvent::BackgroundNotificationInjected(_) => "background_notification_injected",
            TurnEvent::CompactionStarted(_) => "compaction_started",
            TurnEvent::CompactionSettled(_) => "compaction_settled",
            TurnEvent::ContextCompressed(_) => "context_compressed",
            TurnEvent::SessionSummaryWritten(_) => "session_summary_written",
            TurnEvent::ImagesRemoved(_) => "images_removed",
            TurnEvent::PluginHookFired(_) => "plugin_hook_fired",
            TurnEvent::TurnEnd(_) => "turn_end",
            TurnEvent::SubagentSpawned(_) => "agent_start",
            TurnEvent::SubagentEnded(_) => "agent_end",
            TurnEvent::ReadonlyModeChanged(_) => "readonly_mode_changed",
            TurnEvent::PermissionModeChanged(_) => "permission_mode_changed",
            TurnEvent::McpServerStatus(_) => "mcp_server_status",
            TurnEvent::SessionCommitted(_) => "session_committed",
        }
    }

    /// The transport JSON of the event, written into `w`'s buffer; `None` for an event that is
    /// not on the transport (a permission decision, a background sub-agent's start and end).
    /// A streamed delta's event is written here, small enough to inline where the variant is
    /// known, so the delta path folds the check away; the whole `match` below is too large to
    /// inline and cost a delta a call, the kind's lookup and the dispatch.
    #[inline]
    pub(crate) fn write_json<'w>(&self, w: &'w mut EventWriter) -> Option<JsonText<'w>> {
        if let TurnEvent::LlmText { chunk } = self {
            return Some(chunk.write(w, super::text_event_head!("llm_text", "chunk")));
        }
        self.write_other_json(w)
    }

    fn write_other_json<'w>(&self, w: &'w mut EventWriter) -> Option<JsonText<'w>> {
        let ty = self.kind();
        Some(match self {
            TurnEvent::TurnBegin { user_message } => w.text_event_at(
                super::text_event_head!("turn_begin", "user_message"),
                user_message,
            ),
            TurnEvent::LlmText { chunk } => {
                chunk.write(w, super::text_event_head!("llm_text", "chunk"))
            }
            TurnEvent::Thinking { text } => {
                w.text_event_at(super::text_event_head!("thinking", "text"), text)
            }
            TurnEvent::TurnStart(d) => w.data_event(ty, d),
            TurnEvent::LlmCallStarted(d) => w.data_event(ty, d),
            TurnEvent::LlmCallDelta(d) => w.data_event(ty, d),
            TurnEvent::LlmCallCompleted(d) => w.data_event(ty, d),
            TurnEvent::LlmRetry(d) => w.data_event(ty, d),
            TurnEvent::ToolConfirmation(d) => w.data_event(ty, d),
            TurnEvent::PermissionDecision(_) => return None,
            TurnEvent::ToolStart(d) => w.data_event(ty, d),
            TurnEvent::ToolOutput(d) => w.data_event(ty, d),
            TurnEvent::ToolComplete(d) => w.data_event(ty, d),
            TurnEvent::ToolResult(d) => w.data_event(ty, d),
            TurnEvent::BackgroundNotificationInjected(d) => w.data_event(ty, d),
            TurnEvent::CompactionStarted(d) => w.data_event(ty, d),
            TurnEvent::CompactionSettled(d) => w.data_event(ty, d),
            TurnEvent::ContextCompressed(d) => w.data_event(ty, d),
            TurnEvent::SessionSummaryWritten(d) => w.data_event(ty, d),
            TurnEvent::ImagesRemoved(d) => w.data_event(ty, d),
            TurnEvent::PluginHookFired(d) => w.data_event(ty, d),
            TurnEvent::TurnEnd(d) => w.data_event(ty, d),
            TurnEvent::SubagentSpawned(d) if d.lineage.foreground() => w.data_event(ty, d),
            TurnEvent::SubagentEnded(d) if d.lineage.foreground() => w.data_event(ty, d),
            TurnEvent::SubagentSpawned(_) | TurnEvent::SubagentEnded(_) => return None,
            TurnEvent::ReadonlyModeChanged(d) => w.data_event(ty, d),
            TurnEvent::PermissionModeChanged(d) => w.data_event(ty, d),
            TurnEvent::McpServerStatus(d) => w.data_event(ty, d),
            TurnEvent::SessionCommitted(d) => w.data_event(ty, d),
        })
    }

    /// The transport JSON as an owned string (tests, and observers that want the JSON); `None`
    /// for an event that is not on the transport.
    pub fn to_json(&self) -> Option<String> {
        self.write_json(&mut EventWriter::default())
            .map(|j| j.as_str().to_owned())
    }
}
