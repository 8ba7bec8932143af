//! The host's source of MCP servers: the reference's `MCPRegistry` capability (spec §5.3).

/// Lists MCP servers: `{"<name>": {<server config>}, ...}`, the keys of `mcp_servers`.
/// Asked before every turn (a fresh answer each time, as the reference re-reads its files);
/// the agent's own `mcp_servers` are merged over the answer by name.
pub(crate) trait McpRegistry: Send + Sync {
    /// `Ok(None)`: no servers. `Err`: the registry failed; its servers are left as they were.
    fn list_servers(&self) -> Result<Option<String>, String>;
}
