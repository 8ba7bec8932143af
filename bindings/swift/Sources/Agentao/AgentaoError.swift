import CAgentao

/// A status of the C API (`agentao_status`). A struct rather than an enum because the library
/// appends new codes; an unknown code still round-trips.
public struct Status: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let ok = Status(rawValue: 0)
    public static let nullArgument = Status(rawValue: 1)
    public static let invalidArgument = Status(rawValue: 2)
    public static let invalidUTF8 = Status(rawValue: 3)
    public static let invalidJSON = Status(rawValue: 4)
    public static let invalidConfig = Status(rawValue: 5)
    public static let turnInProgress = Status(rawValue: 6)
    public static let noSubscribe = Status(rawValue: 7)
    public static let streamSubscribe = Status(rawValue: 8)
    public static let cancelled = Status(rawValue: 9)
    public static let timeout = Status(rawValue: 10)
    public static let reentrant = Status(rawValue: 11)
    public static let panic = Status(rawValue: 12)
    public static let `internal` = Status(rawValue: 13)
    public static let hostError = Status(rawValue: 14)
    public static let closed = Status(rawValue: 15)
    public static let noEngine = Status(rawValue: 16)
    public static let eventsDropped = Status(rawValue: 17)

    /// The library's name for the status, e.g. `"INVALID_CONFIG"`.
    public var description: String { String(cString: agentao_status_name(rawValue)) }
}

/// A failed call or turn: the library's status and message. A turn that ended cancelled or in
/// error also carries its outcome (the partial text, the reason).
public struct AgentaoError: Error, Sendable, CustomStringConvertible {
    public let status: Status
    public let message: String
    public let outcome: TurnOutcome?

    public init(status: Status, message: String, outcome: TurnOutcome? = nil) {
        self.status = status
        self.message = message
        self.outcome = outcome
    }

    public var description: String { "\(status): \(message)" }

    /// Reads a borrowed `agentao_error` (NULL: only the status is known).
    init(status: Int32, borrowed err: OpaquePointer?, outcome: TurnOutcome? = nil) {
        self.status = Status(rawValue: status)
        self.message = err.map { String(cString: agentao_error_message($0)) } ?? ""
        self.outcome = outcome
    }

    /// Reads and releases an owned `agentao_error` from an `err_out` parameter.
    init(status: Int32, owned err: OpaquePointer?) {
        self.init(status: status, borrowed: err)
        agentao_error_free(err)
    }
}

/// Runs a C call that takes an `agentao_error **err_out` last and throws on a non-OK status.
@inline(__always)
func check(_ call: (UnsafeMutablePointer<OpaquePointer?>) -> Int32) throws(AgentaoError) {
    var err: OpaquePointer?
    let status = call(&err)
    if status != Status.ok.rawValue { throw AgentaoError(status: status, owned: err) }
}

/// Takes a string the library handed out (`char **..._out`) and releases it.
func takeString(_ s: UnsafeMutablePointer<CChar>?) -> String? {
    guard let s else { return nil }
    defer { agentao_string_free(s) }
    return String(cString: s)
}
