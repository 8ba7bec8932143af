import CAgentao
import Foundation

/// A point of the agent loop where hooks run (Claude Code's hook event names; docs/hooks.md).
public enum HookEvent: Int32, Sendable {
    case preToolUse = 0
    case postToolUse = 1
    case postToolUseFailure = 2
    case userPromptSubmit = 3
    case stop = 4
    case sessionStart = 5
    case preCompact = 6
    /// A point this version of the binding does not know (asked by a newer library). Answer
    /// nil (no opinion) unless the handler knows better.
    case unknown = -1
}

extension HookEvent {
    /// The point the library's event code names; a code this binding does not know is
    /// `.unknown`, never another point.
    init(library code: Int32) {
        self = HookEvent(rawValue: code) ?? .unknown
    }
}

/// One hook point the host is asked about.
public struct HookRequest: Sendable {
    public let event: HookEvent
    /// Set at the tool points.
    public let toolName: String?
    public let callID: String?
    /// What a command hook reads on stdin (Claude Code's format).
    public let inputJSON: String
}

/// The host's hooks: asked at every hook point, after the config's command hooks, in a task of
/// its own. The answer is the JSON a command hook prints (Claude Code's hook output format), or
/// nil for no opinion. A thrown error fails the request, which at `preToolUse` denies the call.
public typealias HooksHandler = @Sendable (HookRequest) async throws -> String?

private final class HooksBox: Sendable {
    let handler: HooksHandler
    init(_ handler: @escaping HooksHandler) { self.handler = handler }
}

/// The library's reply handle: answered once, from any thread (the C contract).
private struct PendingHookReply: @unchecked Sendable {
    let reply: OpaquePointer
}

extension Agent {
    /// Asks `handler` at every hook point (nil removes the host's hooks; the config's command
    /// hooks still run). Between turns only.
    public func setHooks(_ handler: HooksHandler?) throws(AgentaoError) {
        guard let handler else {
            try check { agentao_agent_set_hooks(handle, nil, $0) }
            return
        }
        var v = agentao_hooks()
        v.struct_size = UInt32(MemoryLayout<agentao_hooks>.size)
        // The library owns the box from here: userdata_free releases it, on failure too.
        v.userdata = retainHostBox(HooksBox(handler))
        v.userdata_free = releaseHostBox
        v.on_hook = { ud, req, reply in
            let handler = Unmanaged<HooksBox>.fromOpaque(ud!).takeUnretainedValue().handler
            let r = req!.pointee
            let request = HookRequest(
                event: HookEvent(library: r.event),
                toolName: r.tool_name.map { String(cString: $0) },
                callID: r.call_id.map { String(cString: $0) },
                inputJSON: String(cString: r.input_json))
            let pending = PendingHookReply(reply: reply!)
            Task {
                do {
                    if let output = try await handler(request) {
                        _ = agentao_reply_hook(pending.reply, output, nil)
                    } else {
                        _ = agentao_reply_hook(pending.reply, nil, nil)
                    }
                } catch {
                    _ = agentao_reply_fail(pending.reply, String(describing: error), nil)
                }
            }
        }
        try check { agentao_agent_set_hooks(handle, &v, $0) }
    }
}
