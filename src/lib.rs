//! libagentao: a governed LLM agent behind a C ABI.
//!
//! The layers, top to bottom (imports only go down; see `docs/architecture.md`):
//!
//! | module | owns |
//! |---|---|
//! | [`ffi`] | every `extern "C"` function, handles, the panic boundary, C strings, status codes |
//! | [`agent`] | one session: config, history, turn lock, last turn, entry points |
//! | [`subagents`] | sub-agent definitions, spawn tools, the child run and its events |
//! | [`turn`] | one turn: LLM call, tool-call planning, permission + confirmation, execution, outcome |
//! | [`config`] | the agent config: composes the sections each layer owns |
//! | [`hooks`] | lifecycle hooks: Claude Code's hook format and protocol, command runs, matching and precedence |
//! | [`audit`] | the audit sink: host events from a bounded queue into PostgreSQL, in batches, drops counted |
//! | [`telemetry`] | OpenTelemetry: spans from the typed events, metrics, the host's `traceparent`, OTLP/HTTP export from a bounded queue, drops counted |
//! | [`session_store`] | where session documents are committed (optimistic versions) and loaded: the trait, SQLite, PostgreSQL |
//! | [`mcp`] | MCP servers (rmcp): config, connections, their tools, status |
//! | `skills` | `SKILL.md` discovery, the catalogue in the system prompt, `activate_skill` |
//! | [`llm`] | chat completions over SSE, the scripted provider, retries |
//! | [`tools`] | the tool trait, registry and built-in tools |
//! | [`permissions`] | modes, rules, the hardline floor, path and URL policy, snapshot; pure decisions (a verdict needing a process returns a probe), git launch hardening |
//! | [`events`] | the agent's typed events (a turn's and its own notices) and their projections (transport JSON, host events v3), the transport, host-event streams |
//! | [`cancel`] | cancellation tokens |
//! | `config_field` | how a config section is read: closed objects, errors in the section's words |
//! | [`pycompat`] | the reference's Python spellings (`json.dumps`, `str`, `repr`, `splitlines`) |
//! | `panic_text` | the message of a caught panic |
//! | `panic_caught` | a future whose panic becomes its output |
//! | `handoff` | a one-shot value handed to a thread that blocks for it (a blocking chat's result) |
//!
//! `unsafe` lives in `ffi` only.
//!
//! # Public Rust surface
//!
//! The product is the C ABI; the Rust surface is public only where something outside the crate
//! needs it, and every layer is `pub(crate)` by default:
//!
//! | user | what it needs |
//! |---|---|
//! | `acp/` | `agent` (the entry points, `TurnOptions`, `AgentError`), `config::DEFAULT_MAX_TOKENS`, `turn::{DeltaSink, TurnOutcome, TurnStatus, IncompleteReason}`, `events::{transport, host, JsonText}` (the JSON the event writer lends, NUL after it), `events::{TurnEvent, turn_event}` with `Transport::{observes, observe}` (the turn's typed events, observed in-process: ACP's `session/update` mapping reads their fields), `cancel::CancelToken`, `permissions::Mode`, `agent::block_on_store` with `session_store::{open, ListQuery}` (`--store`) |
//! | `mock-openai/` | the scripted `llm::script` types |
//! | `fuzz/` | `turn::plan::repair_name`, `permissions::hardline::{check, MAX_TEXTS, TOO_COMPLEX}`, `permissions::{rules, path_policy, url_policy}`, the engine and its probes (`permissions::probe`), `llm::{sse, openai::decode_events_for_fuzzing, anthropic_decode_for_fuzzing, responses_decode_for_fuzzing, tool_call}`, `config::AgentConfig`, `pycompat::python_str` |
//! | `tests/` | the above, and what the Rust tests drive directly: `llm::{LlmClient, ChatRequest, Message, Piece, HttpClientChoice}` (with `OpenAiConfig::http_client`, which forces reqwest for the HTTP conformance suite), `tools::{Tool, ToolContext, ToolServices, ToolRegistry, FileSystem}` (`ToolServices::answer_probe` answers a decision's probe), `permissions::decide_probing`, the tools config, `mcp::{client, config, render}`, `events::host` streams, `ffi::library::acp_schema`, `subagents::SubagentDefinition`, `Agent::{add_tool, usage, set_compaction_controller, skills_json}` with `turn::compaction::{controller::{CompactionController, CompactionFacts}, Trigger, Kind}` and `events::transport::CompactionDecision`, the session store trait and `agent::session_document::fork_document`, `session_store::postgres::PostgresStore`, `audit::{AuditSink, SinkState, postgres::PostgresAuditWriter}` |
//!
//! Everything else is `pub(crate)`: the turn's stages, the built-in tools' internals, the
//! hardline floor's internals, the MCP manager, naming and tools, retry, fingerprints, the
//! scripted provider, presets, shell reads, secrets, git launch, shell runs, the SQLite store,
//! the event writer, the config sections' parsing, and every non-`extern` item of `ffi`
//! except the C types the header declares. A new item starts `pub(crate)` and becomes `pub`
//! only for one of those users.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod ffi;

pub mod agent;
pub mod subagents;
pub mod turn;

pub mod audit;
pub mod config;
pub mod hooks;
pub mod session_store;
pub mod telemetry;

pub mod mcp;
pub(crate) mod skills;

pub mod llm;
pub mod tools;

pub mod permissions;

pub mod events;

pub mod cancel;
pub(crate) mod config_field;
pub(crate) mod handoff;
pub(crate) mod panic_caught;
pub(crate) mod panic_text;
pub mod pycompat;
