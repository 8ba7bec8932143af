import CAgentao

/// What the model sees of a host tool, and how the agent treats it (`agentao_tool_desc`).
public struct ToolSpec: Sendable {
    public var name: String
    public var description: String
    /// The arguments' JSON Schema: a JSON object, sent to the model verbatim.
    public var parametersJSON: String
    /// Admitted in read-only mode, and eligible for parallel batches.
    public var readOnly = false
    /// When no rule decides the call, ask the transport's `confirmTool` first.
    public var requiresConfirmation = false
    /// Sub-agents receive the tool too.
    public var copiesToSubagents = false
    /// Two calls of this tool in one batch may run at the same time.
    public var reentrant = false

    public init(name: String, description: String, parametersJSON: String = #"{"type":"object","properties":{}}"#) {
        self.name = name
        self.description = description
        self.parametersJSON = parametersJSON
    }
}

/// One call of a host tool.
public struct ToolCall: Sendable {
    /// The model's tool_call_id.
    public let id: String
    /// The arguments object, as JSON.
    public let argumentsJSON: String
}

/// Thrown by a tool handler to choose the `error_type` the host event reports; any other
/// error is a `HostToolError` with its description. The model reads
/// `Error executing <tool>: <message>`.
public struct ToolFailure: Error, Sendable {
    public let type: String
    public let message: String
    public init(type: String, message: String) {
        self.type = type
        self.message = message
    }
}

/// A host tool's handler: the returned text is the result, a thrown error the tool's failure.
/// It runs in a task of its own; that task is cancelled when the turn is cancelled (the call is
/// then over and its answer ignored).
public typealias ToolHandler = @Sendable (ToolCall) async throws -> String

/// The tool's userdata: passed to C retained, released by the descriptor's `userdata_free`.
private final class ToolBox: Sendable {
    let handler: ToolHandler
    init(_ handler: @escaping ToolHandler) { self.handler = handler }
}

/// The library's handles of one call: valid until the reply is answered, usable from any
/// thread (the C contract), hence `@unchecked Sendable`.
private struct PendingCall: @unchecked Sendable {
    let reply: OpaquePointer
    /// A child of the turn's token, owned here: it outlives the call's borrowed one.
    let token: OpaquePointer
}

extension Agent {
    /// Registers a host tool; the model is offered it from the next turn on. A name in use is
    /// `.invalidArgument` unless `replace`. Between turns only (`.turnInProgress`).
    public func addTool(_ spec: ToolSpec, replace: Bool = false, _ handler: @escaping ToolHandler) throws(AgentaoError) {
        // The library owns the box from here: userdata_free releases it, on failure too.
        let box = retainHostBox(ToolBox(handler))
        var status: Int32 = Status.ok.rawValue
        var err: OpaquePointer?
        spec.name.withCString { name in
            spec.description.withCString { description in
                spec.parametersJSON.withCString { parameters in
                    var d = agentao_tool_desc()
                    d.struct_size = UInt32(MemoryLayout<agentao_tool_desc>.size)
                    d.name = name
                    d.description = description
                    d.parameters_json = parameters
                    d.is_read_only = spec.readOnly
                    d.requires_confirmation = spec.requiresConfirmation
                    d.copies_to_subagents = spec.copiesToSubagents
                    d.reentrant = spec.reentrant
                    d.userdata = box
                    d.userdata_free = releaseHostBox
                    d.execute = { ud, args, call, reply in
                        let handler = Unmanaged<ToolBox>.fromOpaque(ud!).takeUnretainedValue().handler
                        let toolCall = ToolCall(
                            id: String(cString: agentao_tool_call_id(call)), argumentsJSON: String(cString: args!))
                        let pending = PendingCall(
                            reply: reply!, token: agentao_cancel_token_child(agentao_tool_call_cancel_token(call)))
                        let cancelled = TokenWatch(pending.token)
                        Task {
                            defer {
                                cancelled.remove()
                                agentao_cancel_token_free(pending.token)
                            }
                            // The handler races the turn's cancel, whose win cancels the handler;
                            // its answer then arrives late and is ignored by the library.
                            let result = await withTaskGroup(of: Result<String, any Error>?.self) { group in
                                group.addTask {
                                    do { return .success(try await handler(toolCall)) } catch { return .failure(error) }
                                }
                                group.addTask {
                                    await cancelled.wait()
                                    return nil
                                }
                                var answer: Result<String, any Error>?
                                for await r in group {
                                    if let r { answer = r }
                                    group.cancelAll()
                                }
                                return answer ?? .failure(CancellationError())
                            }
                            switch result {
                            case .success(let text):
                                _ = agentao_reply_tool_result(pending.reply, text, nil)
                            case .failure(let failure as ToolFailure):
                                _ = agentao_reply_tool_error(pending.reply, failure.type, failure.message, nil)
                            case .failure(let error):
                                _ = agentao_reply_tool_error(pending.reply, nil, String(describing: error), nil)
                            }
                        }
                    }
                    status = agentao_agent_add_tool(handle, &d, replace, &err)
                }
            }
        }
        if status != Status.ok.rawValue {
            throw AgentaoError(status: status, owned: err)
        }
    }

    /// Removes a tool (a host tool or a built-in) between turns; false when there was none.
    public func removeTool(_ name: String) throws(AgentaoError) -> Bool {
        var removed = false
        try check { agentao_agent_remove_tool(handle, name, &removed, $0) }
        return removed
    }
}
