@testable import Agentao
import Foundation
import XCTest

private final class SeenHooks: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [HookRequest] = []
    func add(_ r: HookRequest) { lock.withLock { requests.append(r) } }
    var all: [HookRequest] { lock.withLock { requests } }
}

private struct HookRefusal: Error, CustomStringConvertible {
    var description: String { "the host refuses" }
}

private func readA() -> [String: Any] {
    ["tool_calls": [["id": "c1", "name": "read_file", "arguments": ["file_path": "a.txt"]]]]
}

final class HooksTests: XCTestCase {
    func testHooksDenyAddContextAndFailClosed() async throws {
        let dir = workspace()
        try "alpha\n".write(toFile: dir + "/a.txt", atomically: true, encoding: .utf8)
        let agent = try Agent(config: scripted(
            [readA(), ["text": "one"], readA(), ["text": "two"], readA(), ["text": "three"]], dir: dir))
        let seen = SeenHooks()
        try agent.setHooks { request in
            seen.add(request)
            let turn = seen.all.filter { $0.event == .userPromptSubmit }.count
            switch (turn, request.event) {
            case (1, .preToolUse):
                return #"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"not from Swift"}}"#
            case (2, .postToolUse):
                try await Task.sleep(nanoseconds: 30_000_000)
                return #"{"hookSpecificOutput":{"additionalContext":"checked by Swift"}}"#
            case (3, .preToolUse):
                throw HookRefusal()
            default:
                return nil
            }
        }
        _ = try await agent.run("go")
        XCTAssertTrue(try agent.historyJSON().contains("Hook reason: not from Swift"))
        let pre = seen.all.first { $0.event == .preToolUse }
        XCTAssertEqual(pre?.toolName, "read_file")
        XCTAssertEqual(pre?.callID, "c1")
        XCTAssertTrue(pre?.inputJSON.contains(#""tool_input":{"file_path":"a.txt"}"#) ?? false)

        _ = try await agent.run("go")
        XCTAssertTrue(try agent.historyJSON().contains(#"<system-reminder>\nchecked by Swift\n</system-reminder>"#))

        _ = try await agent.run("go")
        XCTAssertTrue(try agent.historyJSON().contains("the host's hook failed: the host refuses"))
        try agent.setHooks(nil)
    }

    /// A newer library may ask at a point this binding does not know: the handler must not be
    /// told it is another point (a handler that denies at `preToolUse` would deny it).
    func testAnUnknownHookEventIsNotAnotherPoint() {
        XCTAssertEqual(HookEvent(library: 0), .preToolUse)
        XCTAssertEqual(HookEvent(library: 6), .preCompact)
        XCTAssertEqual(HookEvent(library: 99), .unknown)
        XCTAssertEqual(HookEvent(library: -7), .unknown)
    }
}
