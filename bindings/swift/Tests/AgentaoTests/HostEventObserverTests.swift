import Agentao
import Foundation
import XCTest

/// What an observer heard; thread-safe through its lock (observers run on library threads).
final class Heard: @unchecked Sendable {
    private let lock = NSLock()
    private var _events: [HostEvent] = []
    var events: [HostEvent] { lock.withLock { _events } }
    func add(_ e: HostEvent) { lock.withLock { _events.append(e) } }
}

final class HostEventObserverTests: XCTestCase {
    /// Inline and in order: every event of the turn is there when `run` returns.
    func testObserverHearsEveryEventOfTheTurnInOrder() async throws {
        let agent = try Agent(config: scripted([writeCall("o.txt", "x"), ["text": "done"]]))
        let heard = Heard()
        try agent.addHostEventObserver { heard.add($0) }
        _ = try await agent.run("write")
        let seen = heard.events
        XCTAssertEqual(seen.count, 3, "\(seen)")
        guard seen.count == 3 else { return }
        guard case .permissionDecision(let decision) = seen[0] else { return XCTFail("\(seen[0])") }
        XCTAssertEqual(decision.sessionId, agent.sessionID)
        XCTAssertEqual(decision.toolName, "write_file")
        XCTAssertEqual(decision.toolCallId, "w1")
        guard case .toolLifecycle(let started) = seen[1], case .toolLifecycle(let completed) = seen[2] else {
            return XCTFail("\(seen)")
        }
        XCTAssertEqual(started.phase, "started")
        XCTAssertEqual(completed.phase, "completed")
        XCTAssertEqual(completed.outcome, "ok")
        XCTAssertNotNil(completed.completedAt)
    }

    /// The observer sees the same events as the pull stream, decoded the same way.
    func testObserverAndPullStreamAgree() async throws {
        let rule: [String: Any] = ["tool": "write_file", "action": "allow", "args": ["file_path": "r\\.txt$"]]
        let agent = try Agent(
            config: scripted([writeCall("r.txt", "x"), ["text": "done"]], permissions: ["rules": [rule]]))
        let heard = Heard()
        try agent.addHostEventObserver { heard.add($0) }
        let events = agent.events()
        _ = try await agent.run("write")
        var pulled: [HostEvent] = []
        for try await e in events {
            pulled.append(e)
            if pulled.count == 3 { break }
        }
        XCTAssertEqual(heard.events, pulled)
        guard case .permissionDecision(let decision)? = heard.events.first else { return XCTFail("no decision") }
        XCTAssertEqual(decision.matchedRule?["args"], .object(["file_path": .string("r\\.txt$")]))
    }

    /// A removed observer hears nothing more and is released; a second remove is false.
    func testRemovedObserverIsReleasedAndHearsNoMore() async throws {
        let agent = try Agent(config: scripted([writeCall("a.txt", "x"), ["text": "one"], writeCall("b.txt", "y"), ["text": "two"]]))
        let heard = Heard()
        weak var weakProbe: Heard?
        let id: HostEventObserverID
        do {
            // Held by the observer alone: gone once the library releases it.
            let probe = Heard()
            weakProbe = probe
            id = try agent.addHostEventObserver { [heard, probe] in
                heard.add($0)
                probe.add($0)
            }
        }
        _ = try await agent.run("first")
        XCTAssertEqual(heard.events.count, 3)
        XCTAssertNotNil(weakProbe, "released while registered")
        XCTAssertTrue(agent.removeHostEventObserver(id))
        XCTAssertFalse(agent.removeHostEventObserver(id))
        _ = try await agent.run("second")
        XCTAssertEqual(heard.events.count, 3)
        let released = await eventually { weakProbe == nil }
        XCTAssertTrue(released, "the observer was never released")
    }

    /// The library owns the observer: it is released once the agent is gone.
    func testObserverIsReleasedWithTheAgent() async throws {
        weak var weakHeard: Heard?
        do {
            let heard = Heard()
            weakHeard = heard
            let agent = try Agent(config: scripted([["text": "hi"]]))
            try agent.addHostEventObserver { [heard] in heard.add($0) }
            _ = try await agent.run("hi")
        }
        let released = await eventually { weakHeard == nil }
        XCTAssertTrue(released, "the observer was never released with the agent")
    }
}
