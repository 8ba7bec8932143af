//! The `data` of the turn's internal events, as borrowed structs: serializing one writes
//! straight into the event buffer, with no intermediate JSON map and no copy of history,
//! arguments or tool output.

use serde::Serialize;

use super::tool_outcome::ToolStatus;
use crate::llm::Message;
use serde_json::{Map, Value};

#[derive(Serialize)]
pub struct TurnStart {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub display_reset: bool,
}

#[derive(Serialize)]
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

#[derive(Serialize)]
pub struct LlmCallDelta<'a> {
    pub attempt: u32,
    pub delta_start_index: usize,
    pub total_messages: usize,
    pub added_messages: &'a [Message],
}

#[derive(Serialize)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason_reported: Option<bool>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_creation_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// Only on `error`: whether text had reached the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streamed: Option<bool>,
}

#[derive(Serialize)]
pub struct ToolCall<'a> {
    pub tool: &'a str,
    pub args: &'a Map<String, Value>,
    pub call_id: &'a str,
}

#[derive(Serialize)]
pub struct ToolOutput<'a> {
    pub tool: &'a str,
    pub chunk: &'a str,
    pub call_id: &'a str,
}

#[derive(Serialize)]
pub struct ToolComplete<'a> {
    pub tool: &'a str,
    pub call_id: &'a str,
    pub status: ToolStatus,
    pub duration_ms: f64,
    pub error: Option<&'a str>,
}

#[derive(Serialize)]
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
