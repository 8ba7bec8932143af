//! The ACP payloads this server reads and writes, as typed serde structs shaped after the
//! reference's wire schema (`docs/schema/host.acp.schema.json`, the `Acp*` definitions named on
//! each type). Incoming types are lenient, as ACP asks of a receiver: `_meta` (reserved on every
//! message) and fields this server does not know are ignored, and optional objects an SDK leaves
//! out when they hold only defaults are defaulted. What the server sends stays strict.
//!
//! Why not the `agent-client-protocol` crate: its types follow upstream ACP, which is wider than
//! the reference's schema in places (`_meta` on every object, `locations`, `rawOutput`) and
//! narrower in others (the `_agentao.cn/*` extensions, `session/set_model`); every message this
//! server sends has to validate against the reference schema, which these types are checked
//! against in `acp/tests/`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The ACP protocol version this server speaks.
pub const PROTOCOL_VERSION: u32 = 1;

pub const ASK_USER_METHOD: &str = "_agentao.cn/ask_user";
pub const SET_MODEL_EXT_METHOD: &str = "_agentao.cn/set_model";

// ---- incoming -------------------------------------------------------------------------------

/// `AcpInitializeRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    pub protocol_version: i64,
    #[serde(default)]
    pub client_capabilities: Map<String, Value>,
    #[serde(default)]
    pub client_info: Option<Map<String, Value>>,
}

/// `AcpMcpServer`: accepted for the wire shape; this build has no MCP client.
#[derive(Debug, Deserialize)]
pub struct McpServer {
    pub name: String,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Option<Vec<String>>,
    #[serde(default)]
    pub env: Option<Vec<Value>>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: Option<Vec<Value>>,
}

/// `AcpSessionNewRequest`, and upstream ACP's `additionalDirectories`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNewRequest {
    pub cwd: String,
    #[serde(default)]
    pub mcp_servers: Vec<McpServer>,
    #[serde(default)]
    pub additional_directories: Vec<String>,
}

/// `AcpSessionLoadRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLoadRequest {
    pub session_id: String,
    pub cwd: String,
    #[serde(default)]
    pub mcp_servers: Vec<McpServer>,
    #[serde(default)]
    pub additional_directories: Vec<String>,
}

/// Upstream ACP's `session/list` request (newer than the reference's schema).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListRequest {
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Upstream ACP's `ListSessionsResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListResponse {
    pub sessions: Vec<SessionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Upstream ACP's `SessionInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub cwd: String,
}

/// One prompt block (`AcpTextContentBlock`, `AcpResourceLinkBlock`, `AcpImageContentBlock`).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PromptBlock {
    Text {
        text: String,
    },
    ResourceLink {
        uri: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        title: Option<String>,
    },
    /// `data` is base64; `uri` (optional) is where the image came from.
    #[serde(rename_all = "camelCase")]
    Image {
        data: String,
        mime_type: String,
        #[serde(default)]
        uri: Option<String>,
    },
}

/// `AcpSessionPromptRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPromptRequest {
    pub session_id: String,
    pub prompt: Vec<Value>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<Value>,
}

/// `AcpSessionCancelRequest` (also the shape of `session/list_models`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionIdOnly {
    pub session_id: String,
}

/// `AcpSessionSetModeRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeRequest {
    pub session_id: String,
    pub mode_id: String,
}

/// `AcpSessionSetModelRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModelRequest {
    pub session_id: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub context_length: Option<i64>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
}

/// `AcpAgentaoSetModelRequest` (`_agentao.cn/set_model`): model only, secret-free.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtSetModelRequest {
    pub session_id: String,
    pub model: String,
}

/// `AcpSessionSetConfigOptionRequest`: no credential-bearing field can ride along.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetConfigOptionRequest {
    pub session_id: String,
    pub config_id: String,
    pub value: String,
    /// Everything else: ignored, unless it looks like a credential or an endpoint (refused, so a
    /// client never believes it set one).
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Whether a field name looks like a credential or where one would be sent.
pub fn credential_like(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace(['_', '-'], "");
    [
        "key",
        "token",
        "secret",
        "password",
        "credential",
        "auth",
        "baseurl",
        "endpoint",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// `AcpRequestPermissionResponse`.
#[derive(Debug, Deserialize)]
pub struct RequestPermissionResponse {
    pub outcome: PermissionOutcome,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PermissionOutcome {
    Selected {
        #[serde(rename = "optionId")]
        option_id: String,
    },
    Cancelled,
}

/// `AcpAskUserResponse`.
#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AskUserResponse {
    Answered { text: String },
    Cancelled,
}

// ---- outgoing -------------------------------------------------------------------------------

/// `AcpInitializeResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    pub protocol_version: u32,
    pub agent_capabilities: AgentCapabilities,
    pub agent_info: AgentInfo,
    pub auth_methods: Vec<Value>,
    #[serde(rename = "_meta")]
    pub meta: InitializeMeta,
}

/// `AcpAgentCapabilities`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub load_session: bool,
    pub prompt_capabilities: Map<String, Value>,
    pub mcp_capabilities: Map<String, Value>,
    /// Upstream ACP's (the reference's schema predates it and allows extra capabilities).
    pub session_capabilities: SessionCapabilities,
}

/// ACP `sessionCapabilities`: `close` present (an empty object) means `session/close` is served.
#[derive(Serialize)]
pub struct SessionCapabilities {
    pub close: Map<String, Value>,
    /// Present: `session/list` is served.
    pub list: Map<String, Value>,
}

/// `AcpAgentInfo`.
#[derive(Serialize)]
pub struct AgentInfo {
    pub name: &'static str,
    pub title: &'static str,
    pub version: &'static str,
}

/// `AcpInitializeMeta`.
#[derive(Serialize)]
pub struct InitializeMeta {
    #[serde(rename = "_agentao.cn/extensions")]
    pub extensions: Vec<InitializeExtension>,
}

/// `AcpInitializeExtension`.
#[derive(Serialize)]
pub struct InitializeExtension {
    pub method: &'static str,
    pub description: &'static str,
}

/// `AcpSessionNewResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNewResponse {
    pub session_id: String,
    pub modes: SessionModeState,
    pub config_options: Vec<ConfigOption>,
}

/// `AcpSessionLoadResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLoadResponse {
    pub config_options: Vec<ConfigOption>,
}

/// `AcpSessionModeState`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    pub current_mode_id: String,
    pub available_modes: Vec<SessionMode>,
}

/// `AcpSessionMode`.
#[derive(Serialize)]
pub struct SessionMode {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
}

/// `AcpConfigOption` (the one `model` select option).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigOption {
    pub id: &'static str,
    pub name: &'static str,
    pub category: &'static str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub current_value: String,
    pub options: Vec<ConfigOptionChoice>,
}

/// `AcpConfigOptionChoice`.
#[derive(Serialize)]
pub struct ConfigOptionChoice {
    pub value: String,
    pub name: String,
}

/// `AcpSessionPromptResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    pub stop_reason: StopReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    Cancelled,
    MaxTokens,
    MaxTurnRequests,
}

/// `AcpSessionSetModeResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeResponse {
    pub mode_id: String,
}

/// `AcpSessionSetModelResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModelResponse {
    pub model: String,
    pub context_length: u64,
    pub max_tokens: u64,
}

/// `AcpAgentaoSetModelResponse`.
#[derive(Serialize)]
pub struct ExtSetModelResponse {
    pub model: String,
}

/// `AcpSessionSetConfigOptionResponse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetConfigOptionResponse {
    pub config_options: Vec<ConfigOption>,
}

/// `AcpSessionListModelsResponse`.
#[derive(Serialize)]
pub struct ListModelsResponse {
    pub models: Vec<ModelInfo>,
}

/// `AcpModelInfo`.
#[derive(Serialize)]
pub struct ModelInfo {
    pub id: String,
}

/// `AcpSessionUpdateParams`, borrowing its parts: one is built per streamed chunk.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUpdateParams<'a> {
    pub session_id: &'a str,
    pub update: SessionUpdate<'a>,
}

/// The `update` variants (`AcpSessionUpdate*`).
#[derive(Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate<'a> {
    AgentMessageChunk {
        content: TextBlock<'a>,
    },
    AgentThoughtChunk {
        content: TextBlock<'a>,
    },
    UserMessageChunk {
        content: TextBlock<'a>,
    },
    ToolCall(ToolCallSummary<'a>),
    ToolCallUpdate {
        #[serde(rename = "toolCallId")]
        tool_call_id: &'a str,
        status: ToolCallStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ToolCallContent<'a>>>,
    },
    Plan {
        entries: Vec<PlanEntry<'a>>,
    },
    CurrentModeUpdate {
        #[serde(rename = "currentModeId")]
        current_mode_id: &'a str,
    },
}

/// `AcpSessionUpdateContentBlock`.
#[derive(Serialize)]
pub struct TextBlock<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: &'a str,
}

impl<'a> TextBlock<'a> {
    pub fn new(text: &'a str) -> Self {
        TextBlock { kind: "text", text }
    }
}

/// `AcpToolCallSummary` (also the body of a `tool_call` update).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallSummary<'a> {
    pub tool_call_id: &'a str,
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolCallStatus,
    pub raw_input: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Search,
    Execute,
    Think,
    Fetch,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// `AcpToolCallTextEntry` / `AcpToolCallDiffEntry`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent<'a> {
    Content {
        content: TextBlock<'a>,
    },
    Diff {
        path: String,
        #[serde(rename = "oldText")]
        old_text: Option<&'a str>,
        #[serde(rename = "newText")]
        new_text: &'a str,
    },
}

/// `AcpPlanEntry`.
#[derive(Serialize)]
pub struct PlanEntry<'a> {
    pub content: &'a str,
    pub priority: &'static str,
    pub status: &'a str,
}

/// `AcpRequestPermissionParams`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionParams<'a> {
    pub session_id: &'a str,
    pub tool_call: ToolCallSummary<'a>,
    pub options: Vec<PermissionOption>,
}

/// `AcpPermissionOption`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    pub option_id: &'static str,
    pub name: &'static str,
    pub kind: &'static str,
}

pub const PERMISSION_OPTIONS: [(&str, &str, &str); 3] = [
    ("allow_once", "Allow once", "allow_once"),
    ("allow_always", "Always allow", "allow_always"),
    ("reject_once", "Reject", "reject_once"),
];

/// The options of a permission request; "always allow" only when the answer can be remembered
/// with a scope (so the client never shows a promise the server does not keep).
pub fn permission_options(always: bool) -> Vec<PermissionOption> {
    PERMISSION_OPTIONS
        .iter()
        .filter(|(id, _, _)| always || *id != "allow_always")
        .map(|&(option_id, name, kind)| PermissionOption {
            option_id,
            name,
            kind,
        })
        .collect()
}

/// `AcpAskUserParams`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskUserParams<'a> {
    pub session_id: &'a str,
    pub question: &'a str,
    pub header: Option<String>,
    pub options: Option<Vec<String>>,
    pub multiple: bool,
    pub allow_custom: bool,
}
