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

    init?(json: UnsafePointer<CChar>?) {
        guard let json, let outcome = try? decodeJSON(TurnOutcome.self, String(cString: json)) else {
            return nil
        }
        self = outcome
    }
}

func decodeJSON<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(text.utf8))
}

func encodeJSON<T: Encodable>(_ value: T) -> String {
    // Encoding plain structs of strings cannot fail.
    String(decoding: (try? JSONEncoder().encode(value)) ?? Data("{}".utf8), as: UTF8.self)
}
