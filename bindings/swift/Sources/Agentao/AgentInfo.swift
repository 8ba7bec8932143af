import CAgentao

extension Agent {
    /// The MCP servers' status as JSON: `{"servers": [{"name", "status", "transport", ...}],
    /// "registry_error"?}` (`agentao_agent_mcp_status`); never waits for a connection.
    public func mcpStatusJSON() throws(AgentaoError) -> String {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_mcp_status(handle, &out, $0) }
        return takeString(out) ?? "{}"
    }

    /// The skills report as JSON: `{"enabled", "skills": [{"name", "description", "origin",
    /// "path"}], "skipped": [{"path", "name", "kind", "reason"}], "prompt_chars"?}`
    /// (`agentao_agent_skills`; docs/skills.md). The first call finds the skills if no turn has
    /// yet, blocking for the file reads.
    public func skillsJSON() throws(AgentaoError) -> String {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_skills(handle, &out, $0) }
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

/// An MCP registry: returns servers as a JSON object `{"<name>": {<server config>}}`, or nil
/// for none; a thrown error counts as none. Asked when it is set and before each turn, on a
/// library thread.
public typealias MCPRegistry = @Sendable () throws -> String?

private final class RegistryBox: Sendable {
    let registry: MCPRegistry
    init(_ registry: @escaping MCPRegistry) { self.registry = registry }
}

extension Agent {
    /// Adds the registry's MCP servers to the config's (which win by name); nil removes it.
    public func setMCPRegistry(_ registry: MCPRegistry?) throws(AgentaoError) {
        guard let registry else {
            try check { agentao_agent_set_mcp_registry(handle, nil, $0) }
            return
        }
        var v = agentao_mcp_registry()
        v.struct_size = UInt32(MemoryLayout<agentao_mcp_registry>.size)
        // The library owns the box from here: userdata_free releases it, on failure too.
        v.userdata = retainHostBox(RegistryBox(registry))
        v.userdata_free = releaseHostBox
        v.list_servers = { ud in
            let registry = Unmanaged<RegistryBox>.fromOpaque(ud!).takeUnretainedValue().registry
            guard let json = (try? registry()) ?? nil else { return nil }
            // A copy the library hands back to release_servers.
            let utf8 = Array(json.utf8CString)
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
            copy.initialize(from: utf8, count: utf8.count)
            return UnsafePointer(copy)
        }
        v.release_servers = { _, json in
            UnsafeMutablePointer(mutating: json!).deallocate()
        }
        try check { agentao_agent_set_mcp_registry(handle, &v, $0) }
    }
}
