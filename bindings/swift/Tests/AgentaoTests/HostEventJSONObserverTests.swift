@testable import Agentao
import CAgentao
import Foundation
import XCTest

/// What a JSON observer heard; thread-safe through its lock (observers run on library threads).
final class HeardJSON: @unchecked Sendable {
    private let lock = NSLock()
    private var _events: [String] = []
    var events: [String] { lock.withLock { _events } }
    func add(_ json: String) { lock.withLock { _events.append(json) } }
}

/// The bytes a C observer registered with `agentao_agent_add_host_event_observer` itself was
/// handed: what the C API gives out, the reference for the binding's copies.
final class HeardBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var _events: [[UInt8]] = []
    var events: [[UInt8]] { lock.withLock { _events } }
    func add(_ bytes: [UInt8]) { lock.withLock { _events.append(bytes) } }
}

/// Counts its own deinits: how many times the library released the closure that captured it.
final class ReleaseCount: @unchecked Sendable {
    private let lock = NSLock()
    private var _count = 0
    var count: Int { lock.withLock { _count } }
    func add() { lock.withLock { _count += 1 } }
}

final class ReleaseProbe: Sendable {
    let releases: ReleaseCount
    init(_ releases: ReleaseCount) { self.releases = releases }
    func touch() {}
    deinit { releases.add() }
}

final class HostEventJSONObserverTests: XCTestCase {
    /// Per turn of ``eventfulAgent(turns:)``: three decisions, two started and completed
    /// lifecycles, and the denied call's lone `failed`.
    private let eventsPerTurn = 8

    /// Turns with rules that match (a `matched_rule` object, non-ASCII in it), a write, a read
    /// and a denied write: permission decisions and tool lifecycles of every phase.
    private func eventfulAgent(turns: Int = 1) throws -> Agent {
        let rules: [[String: Any]] = [
            ["tool": "write_file", "action": "allow", "args": ["file_path": "日本\\.txt$"]],
            ["tool": "write_file", "action": "deny", "args": ["file_path": "denied\\.txt$"]],
        ]
        var responses: [[String: Any]] = []
        for t in 0..<turns {
            responses.append([
                "tool_calls": [
                    ["id": "w\(t)", "name": "write_file", "arguments": ["file_path": "日本.txt", "content": "é \(t)"]],
                    ["id": "r\(t)", "name": "read_file", "arguments": ["file_path": "missing-\(t).txt"]],
                    ["id": "d\(t)", "name": "write_file", "arguments": ["file_path": "denied.txt", "content": "no"]],
                ]
            ])
            responses.append(["text": "done \(t)"])
        }
        return try Agent(config: scripted(responses, permissions: ["rules": rules]))
    }

    /// Every event the typed observer gets, the JSON observer gets too, in the same order, as the
    /// bytes the C API hands a C observer of the same agent; decoded, each is the typed event.
    func testJSONObserverGetsTheCAPIsBytesOfEveryEventTheTypedObserverGets() async throws {
        let agent = try eventfulAgent()
        let cHeard = HeardBytes()
        var cID: UInt64 = 0
        let status = agentao_agent_add_host_event_observer(
            agent.handle,
            { ud, json in
                let heard = Unmanaged<HeardBytes>.fromOpaque(ud!).takeUnretainedValue()
                let count = strlen(json!)
                heard.add(json!.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) })
            },
            Unmanaged.passRetained(cHeard).toOpaque(), { Unmanaged<HeardBytes>.fromOpaque($0!).release() }, &cID, nil)
        XCTAssertEqual(status, Status.ok.rawValue)
        let json = HeardJSON()
        let typed = Heard()
        try agent.addHostEventJSONObserver { json.add($0) }
        try agent.addHostEventObserver { typed.add($0) }
        _ = try await agent.run("write and read")

        let (c, j, t) = (cHeard.events, json.events, typed.events)
        XCTAssertEqual(t.count, eventsPerTurn, "\(t)")
        XCTAssertEqual(j.count, t.count)
        XCTAssertEqual(c.count, t.count)
        for i in 0..<min(c.count, j.count, t.count) {
            XCTAssertEqual(Array(j[i].utf8), c[i], "event \(i): \(j[i])")
            let decoded = Array(j[i].utf8).withUnsafeBufferPointer { HostEvent.decode(utf8: $0) }
            XCTAssertEqual(decoded, t[i], "event \(i): \(j[i])")
            XCTAssertTrue(j[i].hasPrefix(#"{"event_type":""#), j[i])
        }
        // The non-ASCII rule came through the copy intact.
        let decisions = t.compactMap { e -> PermissionDecisionEvent? in
            if case .permissionDecision(let d) = e { return d }
            return nil
        }
        XCTAssertTrue(
            decisions.contains { $0.matchedRule?["args"] == .object(["file_path": .string("日本\\.txt$")]) },
            "\(decisions)")
        XCTAssertTrue(
            t.contains { if case .toolLifecycle(let l) = $0 { return l.phase == "failed" } else { return false } },
            "\(t)")
        XCTAssertTrue(agentao_agent_remove_host_event_observer(agent.handle, cID))
    }

    /// Both kinds share the library's ids: `removeHostEventObserver` removes a JSON observer,
    /// which then hears nothing more while the others go on; its closure is released once,
    /// on removal, and not again when the agent is freed.
    func testRemovedJSONObserverHearsNoMoreAndIsReleasedOnce() async throws {
        let releases = ReleaseCount()
        let removed = HeardJSON()
        let kept = HeardJSON()
        let typed = Heard()
        var agent: Agent? = try eventfulAgent(turns: 2)
        let id: HostEventObserverID
        do {
            // Held by the observer alone: released when the library releases the closure.
            let probe = ReleaseProbe(releases)
            id = try agent!.addHostEventJSONObserver { [probe] in
                probe.touch()
                removed.add($0)
            }
        }
        let keptID = try agent!.addHostEventJSONObserver { kept.add($0) }
        let typedID = try agent!.addHostEventObserver { typed.add($0) }
        XCTAssertEqual(Set([id, keptID, typedID]).count, 3, "ids are not distinct")

        _ = try await agent!.run("first")
        XCTAssertEqual(removed.events.count, eventsPerTurn)
        XCTAssertEqual(releases.count, 0, "released while registered")
        XCTAssertTrue(agent!.removeHostEventObserver(id))
        XCTAssertFalse(agent!.removeHostEventObserver(id))
        let releasedOnRemoval = await eventually { releases.count == 1 }
        XCTAssertTrue(releasedOnRemoval, "the JSON observer was never released")

        _ = try await agent!.run("second")
        XCTAssertEqual(removed.events.count, eventsPerTurn, "a removed observer heard the second turn")
        XCTAssertEqual(kept.events.count, 2 * eventsPerTurn)
        XCTAssertEqual(typed.events.count, 2 * eventsPerTurn)
        XCTAssertEqual(removed.events, Array(kept.events.prefix(eventsPerTurn)))

        agent = nil
        try? await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(releases.count, 1, "released again with the agent")
    }

    /// The library owns the closure: it is released exactly once when the agent is gone.
    func testJSONObserverIsReleasedOnceWithTheAgent() async throws {
        let releases = ReleaseCount()
        do {
            let agent = try eventfulAgent()
            let probe = ReleaseProbe(releases)
            let heard = HeardJSON()
            try agent.addHostEventJSONObserver { [probe] in
                probe.touch()
                heard.add($0)
            }
            _ = try await agent.run("go")
            XCTAssertEqual(heard.events.count, eventsPerTurn)
        }
        let released = await eventually { releases.count >= 1 }
        XCTAssertTrue(released, "the JSON observer was never released with the agent")
        try? await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(releases.count, 1)
    }
}
