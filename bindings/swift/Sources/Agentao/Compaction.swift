import CAgentao
import Dispatch
import Foundation

/// An image sent with a message (`agentao_image`): `image/png`, `image/jpeg`, `image/gif` or
/// `image/webp`, and its raw bytes.
public struct Image: Sendable, Equatable {
    public var mimeType: String
    public var data: [UInt8]
    public init(mimeType: String, data: [UInt8]) {
        self.mimeType = mimeType
        self.data = data
    }
}

/// Runs `body` with a C copy of `images` (NULL and 0 when there are none), freed after it.
func withCImages<R>(_ images: [Image], _ body: (UnsafePointer<agentao_image>?, Int) -> R) -> R {
    if images.isEmpty { return body(nil, 0) }
    let list = UnsafeMutablePointer<agentao_image>.allocate(capacity: images.count)
    var owned: [UnsafeMutableRawPointer] = []
    for (i, image) in images.enumerated() {
        let mime = strdup(image.mimeType)!
        // Never NULL: an empty image is refused as empty, not as a NULL pointer.
        let data = UnsafeMutablePointer<UInt8>.allocate(capacity: max(image.data.count, 1))
        data.initialize(from: image.data, count: image.data.count)
        owned.append(UnsafeMutableRawPointer(mime))
        list[i] = agentao_image(mime_type: UnsafePointer(mime), data: UnsafePointer(data), len: image.data.count)
        owned.append(UnsafeMutableRawPointer(data))
    }
    defer {
        for (k, p) in owned.enumerated() {
            if k % 2 == 0 { free(p) } else { p.assumingMemoryBound(to: UInt8.self).deallocate() }
        }
        list.deallocate()
    }
    return body(UnsafePointer(list), images.count)
}

/// The context estimate of the next request and the window it is measured against
/// (`agentao_agent_context_usage`).
public struct ContextUsage: Decodable, Sendable, Equatable {
    public let estimatedTokens: UInt64
    public let window: UInt64
    public let configuredWindow: UInt64
    /// The window an overflow error stated (nil until one did).
    public let learnedWindow: UInt64?
    public let microcompactAbove: UInt64
    public let compactAbove: UInt64
    public let compactions: UInt64
    public let consecutiveFailures: UInt32
    public let breakerOpen: Bool

    enum CodingKeys: String, CodingKey {
        case window, compactions
        case estimatedTokens = "estimated_tokens"
        case configuredWindow = "configured_window"
        case learnedWindow = "learned_window"
        case microcompactAbove = "microcompact_above"
        case compactAbove = "compact_above"
        case consecutiveFailures = "consecutive_failures"
        case breakerOpen = "breaker_open"
    }
}

/// How an on-demand compaction ended (`agentao_agent_compact`).
public struct CompactionResult: Decodable, Sendable, Equatable {
    /// `"success"`, `"cancelled"`, `"failed"` or `"skipped"`.
    public let status: String
    public let preMsgs: Int
    public let postMsgs: Int
    public let preTokensHistory: UInt64
    public let postTokensHistory: UInt64
    public let durationMs: UInt64
    public let detail: String?

    enum CodingKeys: String, CodingKey {
        case status, detail
        case preMsgs = "pre_msgs"
        case postMsgs = "post_msgs"
        case preTokensHistory = "pre_tokens_history"
        case postTokensHistory = "post_tokens_history"
        case durationMs = "duration_ms"
    }
}

/// What started a compaction.
public enum CompactionTrigger: Int32, Sendable {
    case automatic = 0
    case overflow = 1
    case manual = 2
}

/// What a compaction does.
public enum CompactionKind: Int32, Sendable {
    case full = 0
    case minimal = 1
}

/// One full compaction a controller is asked about.
public struct CompactionRequest: Sendable {
    public let trigger: CompactionTrigger
    public let kind: CompactionKind
    public let reason: String
    public let estimatedTokens: UInt64
    public let window: UInt64
    public let messagesToSummarize: Int
    public let messagesKept: Int
    /// The messages the summary replaces (a JSON array, the history's format).
    public let messagesJSON: String
    /// Set when a foreground sub-agent compacts.
    public let childTaskID: String?
}

/// A controller's answer.
public enum CompactionDecision: Sendable, Equatable {
    /// The library summarises, as without a controller.
    case allow
    /// No compaction; the reason goes into `compaction_settled`'s detail.
    case cancel(reason: String?)
    /// This text is the summary (no model is called).
    case summary(String)
}

/// A compaction controller: asked before every full compaction (automatic, overflow, on
/// demand, a sub-agent's), in a task of its own. A thrown error cancels the compaction.
public typealias CompactionController = @Sendable (CompactionRequest) async throws -> CompactionDecision

private final class ControllerBox: Sendable {
    let controller: CompactionController
    init(_ controller: @escaping CompactionController) { self.controller = controller }
}

/// The library's reply handle: answered once, from any thread (the C contract).
private struct PendingReply: @unchecked Sendable {
    let reply: OpaquePointer
}

private final class CompactBox: @unchecked Sendable {
    let agent: Agent
    let token = CancelToken()
    init(_ agent: Agent) { self.agent = agent }
}

extension Agent {
    /// The context figures; any thread, during a turn too.
    public func contextUsage() throws(AgentaoError) -> ContextUsage {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_context_usage(handle, &out, $0) }
        do {
            return try decodeJSON(ContextUsage.self, takeString(out) ?? "")
        } catch {
            throw AgentaoError(status: .internal, message: "the context usage does not decode: \(error)")
        }
    }

    /// Compacts the history now (between turns; `.turnInProgress` otherwise): an LLM summary,
    /// or the controller's, replaces the older messages. `reason` (nil: `"manual"`) goes into
    /// the events. The call waits on a Dispatch thread; cancelling the task cancels the
    /// summarizer's call. A compaction that did not succeed is not an error: `status` says why.
    public func compact(reason: String? = nil) async throws -> CompactionResult {
        let box = CompactBox(self)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<CompactionResult, any Error>) in
                DispatchQueue.global().async {
                    var out: UnsafeMutablePointer<CChar>?
                    var err: OpaquePointer?
                    let status: Int32
                    if let reason {
                        status = reason.withCString {
                            agentao_agent_compact(box.agent.handle, $0, box.token.raw, &out, &err)
                        }
                    } else {
                        status = agentao_agent_compact(box.agent.handle, nil, box.token.raw, &out, &err)
                    }
                    guard status == Status.ok.rawValue else {
                        cont.resume(throwing: AgentaoError(status: status, owned: err))
                        return
                    }
                    do {
                        cont.resume(returning: try decodeJSON(CompactionResult.self, takeString(out) ?? ""))
                    } catch {
                        cont.resume(throwing: error)
                    }
                }
            }
        } onCancel: {
            box.token.cancel(reason: "task-cancelled")
        }
    }

    /// Asks `controller` before every full compaction (nil removes it). Between turns only.
    public func setCompactionController(_ controller: CompactionController?) throws(AgentaoError) {
        guard let controller else {
            try check { agentao_agent_set_compaction_controller(handle, nil, $0) }
            return
        }
        var v = agentao_compaction_controller()
        v.struct_size = UInt32(MemoryLayout<agentao_compaction_controller>.size)
        // The library owns the box from here: userdata_free releases it, on failure too.
        v.userdata = retainHostBox(ControllerBox(controller))
        v.userdata_free = releaseHostBox
        v.decide = { ud, req, reply in
            let controller = Unmanaged<ControllerBox>.fromOpaque(ud!).takeUnretainedValue().controller
            let r = req!.pointee
            let request = CompactionRequest(
                trigger: CompactionTrigger(rawValue: r.trigger) ?? .automatic,
                kind: CompactionKind(rawValue: r.kind) ?? .full,
                reason: String(cString: r.reason),
                estimatedTokens: r.estimated_tokens,
                window: r.window,
                messagesToSummarize: Int(r.messages_to_summarize),
                messagesKept: Int(r.messages_kept),
                messagesJSON: String(cString: r.messages_json),
                childTaskID: r.child_task_id.map { String(cString: $0) })
            let pending = PendingReply(reply: reply!)
            Task {
                do {
                    switch try await controller(request) {
                    case .allow:
                        _ = agentao_reply_compaction_allow(pending.reply, nil)
                    case .cancel(let reason?):
                        _ = agentao_reply_compaction_cancel(pending.reply, reason, nil)
                    case .cancel(nil):
                        _ = agentao_reply_compaction_cancel(pending.reply, nil, nil)
                    case .summary(let text):
                        _ = agentao_reply_compaction_summary(pending.reply, text, nil)
                    }
                } catch {
                    _ = agentao_reply_fail(pending.reply, String(describing: error), nil)
                }
            }
        }
        try check { agentao_agent_set_compaction_controller(handle, &v, $0) }
    }
}
