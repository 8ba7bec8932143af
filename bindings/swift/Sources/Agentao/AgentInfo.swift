import CAgentao

extension Agent {
    /// The MCP servers' status as JSON: `{"servers": [{"name", "status", "transport", ...}],
    /// "registry_error"?}` (`agentao_agent_mcp_status`); never waits for a connection.
    public func mcpStatusJSON() throws(AgentaoError) -> String {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_mcp_status(handle, &out, $0) }
        return takeString(out) ?? "{}"
    }

    /// What the permission pipeline would decide for `tool` called with `argumentsJSON` now, as
    /// JSON (`{"outcome": "allow"|"deny"|"prompt", "reason", "source", "mode", ...}`), without
    /// running anything (`agentao_agent_preflight`).
    public func preflightJSON(tool: String, argumentsJSON: String) throws(AgentaoError) -> String {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_preflight(handle, tool, argumentsJSON, &out, $0) }
        return takeString(out) ?? "{}"
    }

    /// Adds (or replaces, by name) a sub-agent definition between turns: the model is offered
    /// its `agent_<name>` tool from the next turn on (`agentao_agent_add_subagent`).
    public func addSubagent(definitionJSON: String) throws(AgentaoError) {
        try check { agentao_agent_add_subagent(handle, definitionJSON, $0) }
    }
}
