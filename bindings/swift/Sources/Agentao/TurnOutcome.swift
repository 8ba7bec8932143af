import Foundation

/// How a turn ended (the C API's TurnOutcome JSON, see docs/c-api.md).
public struct TurnOutcome: Decodable, Sendable, Equatable {
    public enum Status: String, Decodable, Sendable {
        case ok, error, cancelled
    }

    /// The answer, or the partial text of a cancelled or failed turn.
    public let text: String
    public let status: Status
    /// Why an `ok` turn has no real answer: `"max_iterations"`, `"llm_error"`, `"doom_loop"`, ...
    public let incompleteReason: String?
    public let toolCount: Int
    /// The failure or cancellation reason.
    public let error: String?
    public let finishReasonMissing: Bool
    public let isAnswer: Bool

    enum CodingKeys: String, CodingKey {
        case text, status, error
        case incompleteReason = "incomplete_reason"
        case toolCount = "tool_count"
        case finishReasonMissing = "finish_reason_missing"
        case isAnswer = "is_answer"
    }
}

// In an extension, so that the memberwise initializer stays.
extension TurnOutcome {
    /// From the library's JSON (borrowed): read in place (`JSONReader`), or by `JSONDecoder` when
    /// the reader does not take it.
    init?(json: UnsafePointer<CChar>?) {
        guard let json else { return nil }
        let read = withCStringBytes(json) { bytes -> TurnOutcome? in
            var reader = JSONReader(bytes)
            let outcome = TurnOutcome(reading: &reader)
            return reader.finished() ? outcome : nil
        }
        if let read {
            self = read
            return
        }
        guard let outcome = try? decodeJSON(TurnOutcome.self, String(cString: json)) else { return nil }
        self = outcome
    }

    /// Reads the outcome's object. Its keys are matched exactly (`CodingKeys`, no conversion),
    /// so any other key is skipped; a repeated one stops the reader.
    init?(reading r: inout JSONReader) {
        var text: String?
        var status: Status?
        var incompleteReason: String?
        var toolCount: Int?
        var error: String?
        var finishReasonMissing: Bool?
        var isAnswer: Bool?
        var seen: UInt64 = 0
        guard r.object() else { return nil }
        while r.member() {
            if r.keyIs("text") {
                if r.once(&seen, 0) { text = r.string() }
            } else if r.keyIs("status") {
                if r.once(&seen, 1) {
                    status = r.string().flatMap(Status.init(rawValue:))
                    if status == nil { r.fail() }
                }
            } else if r.keyIs("incomplete_reason") {
                if r.once(&seen, 2) { incompleteReason = r.optionalString() }
            } else if r.keyIs("tool_count") {
                if r.once(&seen, 3) { toolCount = r.int() }
            } else if r.keyIs("error") {
                if r.once(&seen, 4) { error = r.optionalString() }
            } else if r.keyIs("finish_reason_missing") {
                if r.once(&seen, 5) { finishReasonMissing = r.bool() }
            } else if r.keyIs("is_answer") {
                if r.once(&seen, 6) { isAnswer = r.bool() }
            } else {
                r.skip()
            }
        }
        guard !r.failed, let text, let status, let toolCount, let finishReasonMissing, let isAnswer else {
            r.fail()
            return nil
        }
        self.init(
            text: text, status: status, incompleteReason: incompleteReason, toolCount: toolCount, error: error,
            finishReasonMissing: finishReasonMissing, isAnswer: isAnswer)
    }
}

func decodeJSON<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(text.utf8))
}

func encodeJSON<T: Encodable>(_ value: T) -> String {
    // Encoding plain structs of strings cannot fail.
    String(decoding: (try? JSONEncoder().encode(value)) ?? Data("{}".utf8), as: UTF8.self)
}
