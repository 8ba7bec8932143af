//! MCP: the agent as a Model Context Protocol client (spec §5.3 and §8.1), on the official
//! Rust SDK `rmcp`.
//!
//! - [`config`]: `mcp_servers` and `mcp_config_files`, typed;
//! - [`client`]: one connection (stdio child in its own process group, or Streamable HTTP);
//! - [`manager`]: the agent's servers, synced before every turn, and their status JSON;
//! - [`tool`] and [`resource_tools`]: the `Tool`s a turn sees; [`naming`] and [`render`]: the
//!   reference's names and result text;
//! - [`registry`]: the host's `MCPRegistry`; `progress`: progress notifications routed to
//!   their call as they are read; `stdio`: a stdio server's transport, with `fast_answer` decoding tool answers ahead of rmcp,
//!   `shared_stdin` sharing the server's stdin and `direct_call` writing tool calls from their own
//!   task; `limits`: the limits a
//!   server must keep, and the tripwire that closes its connection when it does not.
//!
//! Sits between `agent` (which owns a [`McpManager`]) and `tools` (whose trait it implements).

pub mod client;
pub mod config;
mod direct_call;
mod fast_answer;
mod limits;
pub(crate) mod manager;
pub(crate) mod naming;
mod progress;
pub(crate) mod registry;
pub mod render;
pub(crate) mod resource_tools;
mod shared_stdin;
mod stdio;
pub(crate) mod tool;

pub(crate) use config::ConfigFiles;
pub(crate) use manager::{McpManager, StatusChange};
pub(crate) use registry::McpRegistry;
pub(crate) use resource_tools::ResourceToolSelection;
