import Agentao
import Foundation
import XCTest

/// A fresh workspace directory for one agent.
func workspace() -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("agentao-swift-\(UUID().uuidString)")
    try! FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir.path
}

/// A config for the offline scripted provider (docs/config.md) in `dir`.
func scripted(
    _ responses: [[String: Any]], dir: String = workspace(), maxIterations: Int? = nil, replyTimeoutMs: Int? = nil,
    permissions: [String: Any]? = nil, telemetry: [String: Any]? = nil
) -> String {
    var config: [String: Any] = [
        "working_directory": dir,
        "llm": ["provider": "scripted", "script": ["responses": responses]],
    ]
    if let maxIterations { config["max_iterations"] = maxIterations }
    if let replyTimeoutMs { config["reply_timeout_ms"] = replyTimeoutMs }
    if let permissions { config["permissions"] = permissions }
    if let telemetry { config["telemetry"] = telemetry }
    let data = try! JSONSerialization.data(withJSONObject: config)
    return String(decoding: data, as: UTF8.self)
}

/// A model response that writes `content` to `path` (write_file needs a confirmation).
func writeCall(_ path: String, _ content: String, id: String = "w1") -> [String: Any] {
    ["tool_calls": [["id": id, "name": "write_file", "arguments": ["file_path": path, "content": content]]]]
}

/// A slow answer: `count` chunks, `delayMs` before each.
func slowText(chunks count: Int, delayMs: Int) -> [String: Any] {
    ["chunks": (1...count).map { "c\($0) " }, "delay_ms": delayMs]
}

/// Waits up to `seconds` for `condition`, polling.
func eventually(_ seconds: Double = 5, _ condition: () throws -> Bool) async rethrows -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if try condition() { return true }
        try? await Task.sleep(nanoseconds: 10_000_000)
    }
    return try condition()
}

/// Records what the agent sends; answers with fixed values. Thread-safe through its lock.
final class Recorder: Transport, @unchecked Sendable {
    private let lock = NSLock()
    private var _events: [AgentEvent] = []
    private var _questions: [Question] = []
    private var _maxRequests: [MaxIterationsRequest] = []
    let answer: String
    let action: MaxIterationsAction

    init(answer: String = "", action: MaxIterationsAction = .stop) {
        self.answer = answer
        self.action = action
    }

    var events: [AgentEvent] { lock.withLock { _events } }
    var questions: [Question] { lock.withLock { _questions } }
    var maxRequests: [MaxIterationsRequest] { lock.withLock { _maxRequests } }

    func emit(_ event: AgentEvent) { lock.withLock { _events.append(event) } }

    func askUser(_ question: Question) async throws -> String {
        lock.withLock { _questions.append(question) }
        // Answered after a suspension, so the reply is deferred, not synchronous.
        try await Task.sleep(nanoseconds: 20_000_000)
        return answer
    }

    func onMaxIterations(_ request: MaxIterationsRequest) async throws -> MaxIterationsAction {
        lock.withLock { _maxRequests.append(request) }
        return action
    }
}

/// A confirmation waiting for an answer from another task.
struct PendingConfirmation: Sendable {
    let request: ToolConfirmation
    let answer: CheckedContinuation<Confirmation, Never>
}

/// Hands every confirmation to whoever reads `pending`, and waits for their answer.
struct GatedTransport: Transport {
    let pending: AsyncStream<PendingConfirmation>.Continuation

    static func make() -> (GatedTransport, AsyncStream<PendingConfirmation>) {
        let (stream, cont) = AsyncStream<PendingConfirmation>.makeStream()
        return (GatedTransport(pending: cont), stream)
    }

    func confirmTool(_ request: ToolConfirmation) async throws -> Confirmation {
        await withCheckedContinuation { pending.yield(PendingConfirmation(request: request, answer: $0)) }
    }
}

struct Refusal: Error, CustomStringConvertible {
    var description: String { "the operator said no" }
}

func XCTAssertThrowsStatus<T>(
    _ expected: Status, _ body: () async throws -> T, file: StaticString = #filePath, line: UInt = #line
) async -> AgentaoError? {
    do {
        _ = try await body()
        XCTFail("expected \(expected), got success", file: file, line: line)
    } catch let e as AgentaoError {
        XCTAssertEqual(e.status, expected, "\(e)", file: file, line: line)
        return e
    } catch {
        XCTFail("expected AgentaoError \(expected), got \(error)", file: file, line: line)
    }
    return nil
}
