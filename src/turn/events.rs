//! The `data` of the turn's internal events, as borrowed structs: serializing one writes
//! straight into the event buffer, with no intermediate JSON map and no copy of history,
//! arguments or tool output.

use serde::Serialize;

use super::tool_outcome::ToolStatus;
use crate::llm::Message;
use serde_json::{Map, Value};

#[derive(Serialize)]
pub(crate) struct TurnStart {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) display_reset: bool,
}

#[derive(Serialize)]
pub(crate) struct LlmCallStarted<'a> {
    pub(crate) attempt: u32,
    pub(crate) model: &'a str,
    pub(crate) temperature: Option<f64>,
    pub(crate) max_tokens: u32,
    pub(crate) n_messages: usize,
    pub(crate) n_tool_messages: usize,
    pub(crate) n_system_reminder_blocks: usize,
    pub(crate) system_prompt_hash: &'a str,
    pub(crate) tools_hash: &'a str,
    pub(crate) tool_count: usize,
}

#[derive(Serialize)]
pub(crate) struct LlmCallDelta<'a> {
    pub(crate) attempt: u32,
    pub(crate) delta_start_index: usize,
    pub(crate) total_messages: usize,
    pub(crate) added_messages: &'a [Message],
}

#[derive(Serialize)]
pub(crate) struct LlmCallCompleted<'a> {
    pub(crate) attempt: u32,
    pub(crate) status: &'static str,
    pub(crate) duration_ms: f64,
    pub(crate) model_latency_ms: f64,
    pub(crate) first_token_ms: Option<f64>,
    pub(crate) first_reasoning_ms: Option<f64>,
    pub(crate) error_class: Option<&'a str>,
    pub(crate) error_message: Option<&'a str>,
    pub(crate) finish_reason: Option<&'a str>,
    /// Only on `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) finish_reason_reported: Option<bool>,
    pub(crate) prompt_tokens: Option<u64>,
    pub(crate) completion_tokens: Option<u64>,
    pub(crate) cache_read_tokens: Option<u64>,
    pub(crate) cache_creation_tokens: Option<u64>,
    pub(crate) reasoning_tokens: Option<u64>,
    /// Only on `error`: whether text had reached the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) streamed: Option<bool>,
}

#[derive(Serialize)]
pub(crate) struct ToolCall<'a> {
    pub(crate) tool: &'a str,
    pub(crate) args: &'a Map<String, Value>,
    pub(crate) call_id: &'a str,
}

#[derive(Serialize)]
pub(crate) struct ToolOutput<'a> {
    pub(crate) tool: &'a str,
    pub(crate) chunk: &'a str,
    pub(crate) call_id: &'a str,
}

#[derive(Serialize)]
pub(crate) struct ToolComplete<'a> {
    pub(crate) tool: &'a str,
    pub(crate) call_id: &'a str,
    pub(crate) status: ToolStatus,
    pub(crate) duration_ms: f64,
    pub(crate) error: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct ToolResult<'a> {
    pub(crate) tool: &'a str,
    pub(crate) call_id: &'a str,
    pub(crate) content: &'a str,
    pub(crate) content_hash: &'a str,
    pub(crate) original_chars: usize,
    pub(crate) saved_to_disk: bool,
    pub(crate) disk_path: Option<String>,
    pub(crate) status: ToolStatus,
    pub(crate) duration_ms: f64,
    pub(crate) error: Option<&'a str>,
}
