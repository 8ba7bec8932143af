import Agentao
import Foundation
import XCTest

private let hostTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
private let hostParent = "00-\(hostTrace)-00f067aa0ba902b7-01"
private let turnTrace = "0af7651916cd43dd8448eb211c80319c"
private let turnParent = "00-\(turnTrace)-b7ad6b7169203331-01"
/// Port 9 (discard) on loopback: nothing answers; exports fail and the turns must not care.
private func downExporter() -> [String: Any] { ["endpoint": "http://127.0.0.1:9", "timeout_ms": 500] }

/// Records the trace id `traceID()` gives inside `emit` at each turn's end.
private final class TraceIDsSeen: Transport, @unchecked Sendable {
    private let lock = NSLock()
    private var _last: String?
    private var _failure: String?
    weak var agent: Agent?

    var last: String? { lock.withLock { _last } }
    var failure: String? { lock.withLock { _failure } }

    func emit(_ event: AgentEvent) {
        guard event.type == "turn_end", let agent else { return }
        do {
            let id = try agent.traceID()
            lock.withLock { _last = id }
        } catch {
            lock.withLock { _failure = "\(error)" }
        }
    }
}

private func expectRefused(
    _ status: Status, _ needle: String, file: StaticString = #filePath, line: UInt = #line,
    _ call: () throws -> Void
) {
    do {
        try call()
        XCTFail("accepted", file: file, line: line)
    } catch let error as AgentaoError {
        XCTAssertEqual(error.status, status, "\(error)", file: file, line: line)
        XCTAssertTrue(error.message.contains(needle), "\(error)", file: file, line: line)
    } catch {
        XCTFail("not an AgentaoError: \(error)", file: file, line: line)
    }
}

final class TelemetryTests: XCTestCase {
    func testWithoutAnExporterTheTraceIDIsEmpty() async throws {
        let seen = TraceIDsSeen()
        let agent = try Agent(config: scripted([["text": "hi"]]), transport: seen)
        seen.agent = agent
        XCTAssertEqual(try agent.traceID(), "")
        try agent.setTraceparent(hostParent)  // checked even so, and accepted
        let outcome = try await agent.run("go")
        XCTAssertEqual(outcome.text, "hi")
        XCTAssertNil(seen.failure)
        XCTAssertEqual(seen.last, "")
        let status = try agent.telemetryStatus()
        XCTAssertEqual(status, try JSONDecoder().decode(TelemetryStatus.self, from: Data(
            #"{"enabled":false,"exported_spans":0,"dropped_spans":0,"failed_exports":0,"last_error":null}"#.utf8)))
        XCTAssertFalse(status.enabled)
        XCTAssertNil(status.lastError)
    }

    func testMalformedValuesAreRefused() throws {
        let agent = try Agent(config: scripted([["text": "hi"]]))
        expectRefused(.invalidArgument, "trace id") {
            try agent.setTraceparent("00-xyz-00f067aa0ba902b7-01")
        }
        expectRefused(.invalidArgument, "all zeros") {
            try agent.setTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01")
        }
        expectRefused(.invalidArgument, "needs a traceparent") {
            try agent.setTurnTraceparent(nil, tracestate: "a=b")
        }
        expectRefused(.invalidArgument, "key=value") {
            try agent.setTurnTraceparent(hostParent, tracestate: "no-equals")
        }
        // nil clears (and withdraws): accepted with nothing set.
        try agent.setTraceparent(nil)
        try agent.setTurnTraceparent(nil)
    }

    func testTraceparentPerAgentAndPerTurn() async throws {
        let seen = TraceIDsSeen()
        let agent = try Agent(
            config: scripted([["text": "one"], ["text": "two"], ["text": "three"], ["text": "four"]],
                             telemetry: downExporter()),
            transport: seen)
        seen.agent = agent
        try agent.setTraceparent(hostParent, tracestate: "vendor=abc")
        // A malformed value afterwards changes nothing: the turn is still the host's trace.
        expectRefused(.invalidArgument, "traceparent") {
            try agent.setTraceparent("00-bad")
        }
        expectRefused(.invalidArgument, "traceparent") {
            try agent.setTurnTraceparent("00-bad")
        }
        _ = try await agent.run("first")
        XCTAssertNil(seen.failure)
        XCTAssertEqual(seen.last, hostTrace)
        XCTAssertEqual(try agent.traceID(), hostTrace)

        // The next turn's traceparent wins once, then the agent's again.
        try agent.setTurnTraceparent(turnParent)
        _ = try await agent.run("second")
        XCTAssertEqual(seen.last, turnTrace)
        _ = try await agent.run("third")
        XCTAssertEqual(seen.last, hostTrace)

        // Cleared: the turn starts a trace of its own.
        try agent.setTraceparent(nil)
        _ = try await agent.run("fourth")
        let own = seen.last ?? ""
        XCTAssertEqual(own.count, 32, own)
        XCTAssertNotEqual(own, hostTrace)
        XCTAssertNotEqual(own, turnTrace)

        XCTAssertTrue(try agent.telemetryStatus().enabled)
    }
}
