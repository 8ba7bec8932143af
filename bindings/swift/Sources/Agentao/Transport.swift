import Foundation

/// How an agent talks to its host: events, tool confirmations, questions and the iteration
/// limit (the C `agentao_transport`). Every method has a default that behaves like the
/// reference's NullTransport, so a host implements only what it needs.
///
/// Methods are called from library threads; the `async` ones run in a new task each, so they
/// may wait as long as they like (on a UI, on another task) without holding a library thread.
/// The turn waits for the answer, cancellably: when the turn is cancelled meanwhile, the late
/// answer is ignored.
public protocol Transport: Sendable {
    /// One internal event (`turn_start`, `llm_text`, `tool_start`, ...), in order, never two at
    /// once for one agent. Must return quickly.
    func emit(_ event: AgentEvent)
    /// Approve a tool call. Throwing fails the request: the turn ends with status error
    /// (`AgentaoError` with `.hostError`).
    func confirmTool(_ request: ToolConfirmation) async throws -> Confirmation
    /// Answer the model's `ask_user` question. Throwing makes the tool report an error; the
    /// turn goes on.
    func askUser(_ question: Question) async throws -> String
    /// The iteration budget is spent. Throwing ends the turn with status error.
    func onMaxIterations(_ request: MaxIterationsRequest) async throws -> MaxIterationsAction
}

extension Transport {
    public func emit(_ event: AgentEvent) {}
    public func confirmTool(_ request: ToolConfirmation) async throws -> Confirmation { .allow }
    public func askUser(_ question: Question) async throws -> String {
        "[ask_user: not available in non-interactive mode]"
    }
    public func onMaxIterations(_ request: MaxIterationsRequest) async throws -> MaxIterationsAction {
        .stop
    }
}

/// An internal event: `{"type": ..., "schema_version": 1, "data": {...}}`. `data` is open, so
/// the raw JSON is kept; decode what you need with `decodeData`.
public struct AgentEvent: Sendable {
    public let type: String
    public let json: String

    struct Header: Decodable { let type: String }

    init(json: String) {
        self.json = json
        self.type = Self.decodedType(json)
    }

    private static func decodedType(_ json: String) -> String {
        (try? decodeJSON(Header.self, json).type) ?? ""
    }

    /// From the library's JSON (borrowed). Its envelope, `{"type":"T","schema_version":1,
    /// "data":…}`, gives the type without a decoder (one event a delta comes this way); any
    /// other shape is decoded.
    init(cString: UnsafePointer<CChar>) {
        let leading = withCStringBytes(cString) { bytes -> String? in
            let head: StaticString = #"{"type":""#
            guard let name = JSONReader.leadingString(bytes, key: head) else { return nil }
            // After the type's closing quote.
            let rest = UnsafeBufferPointer(rebasing: bytes[(head.utf8CodeUnitCount + name.count + 1)...])
            let envelope: StaticString = #","schema_version":1,"data":"#
            guard rest.count > envelope.utf8CodeUnitCount, rest.last == UInt8(ascii: "}"),
                JSONReader.equal(UnsafeBufferPointer(rebasing: rest.prefix(envelope.utf8CodeUnitCount)), envelope)
            else { return nil }
            return String(decoding: name, as: UTF8.self)
        }
        let json = String(cString: cString)
        self.json = json
        self.type = leading ?? Self.decodedType(json)
    }

    private struct Envelope<T: Decodable>: Decodable { let data: T }

    /// Decodes the event's `data` object.
    public func decodeData<T: Decodable>(_ type: T.Type) throws -> T {
        try decodeJSON(Envelope<T>.self, json).data
    }
}

/// A tool call waiting for the host's approval.
public struct ToolConfirmation: Sendable {
    public let toolName: String
    public let description: String
    /// The call's arguments as a JSON object.
    public let argumentsJSON: String
    public let callID: String
}

/// The answer to a confirmation.
public enum Confirmation: Int32, Sendable {
    /// Approve the call.
    case allow = 0
    /// Decline it: the model is told it was not approved.
    case deny = 1
    /// Decline because no person can approve: the model is told approval is unavailable.
    case denyUnavailable = 2
}

/// A question from the model (the `ask_user` tool), with its optional choice hints.
public struct Question: Sendable {
    public let text: String
    public let header: String?
    public let options: [String]?
    public let multiple: Bool
    public let allowCustom: Bool

    struct Hints: Decodable {
        let header: String?
        let options: [String]?
        let multiple: Bool?
        let allow_custom: Bool?
    }

    init(text: String, hintsJSON: String) {
        let hints = try? decodeJSON(Hints.self, hintsJSON)
        self.text = text
        self.header = hints?.header
        self.options = hints?.options
        self.multiple = hints?.multiple ?? false
        self.allowCustom = hints?.allow_custom ?? true
    }
}

/// The iteration budget of a turn is spent.
public struct MaxIterationsRequest: Sendable {
    public struct PendingCall: Decodable, Sendable {
        public let name: String
        /// The call's arguments, as the model sent them.
        public let args: String
    }

    /// The turn's budget.
    public let count: UInt32
    /// The tool calls of the last assistant message.
    public let pendingCalls: [PendingCall]
}

/// What to do when the iteration budget is spent.
public enum MaxIterationsAction: Sendable, Equatable {
    /// End the turn (`incompleteReason == "max_iterations"`).
    case stop
    /// Go on with a whole new budget.
    case `continue`
    /// Append this user message and go on with a new budget.
    case newInstruction(String)

    private struct Wire: Encodable {
        let action: String
        let message: String?
    }

    var json: String {
        switch self {
        case .stop: encodeJSON(Wire(action: "stop", message: nil))
        case .continue: encodeJSON(Wire(action: "continue", message: nil))
        case .newInstruction(let m): encodeJSON(Wire(action: "new_instruction", message: m))
        }
    }
}
