import Agentao
import Foundation
import XCTest

/// `stream`'s queue (TurnStream.swift): the end of a turn as the sequence gives it.
final class TurnStreamTests: XCTestCase {
    /// A turn that fails gives its deltas, then throws; the sequence is over after that.
    func testAFailedTurnThrowsAfterItsDeltas() async throws {
        struct Fails: Transport {
            func confirmTool(_ request: ToolConfirmation) async throws -> Confirmation { throw Refusal() }
        }
        var call = writeCall("f.txt", "x")
        call["chunks"] = ["before ", "the call"]
        let agent = try Agent(config: scripted([call, ["text": "unreached"]]), transport: Fails())
        var iterator = agent.stream("write").makeAsyncIterator()
        var deltas: [String] = []
        do {
            while let item = try await iterator.next() {
                guard case .text(let t) = item else { return XCTFail("an outcome: \(item)") }
                deltas.append(t)
            }
            XCTFail("the failed turn did not throw")
        } catch let e as AgentaoError {
            XCTAssertEqual(e.status, .hostError)
            XCTAssertEqual(e.outcome?.status, .error)
        }
        XCTAssertEqual(deltas, ["before ", "the call"])
        let after = try await iterator.next()
        XCTAssertNil(after)
    }

    /// A sequence dropped before it is read cancels its turn.
    func testAStreamDroppedUnreadCancelsTheTurn() async throws {
        let agent = try Agent(config: scripted([slowText(chunks: 40, delayMs: 100)]))
        let started = Date()
        do { _ = agent.stream("slow") }
        let ended = try await eventually { try agent.lastTurn() != nil }
        XCTAssertTrue(ended, "the turn did not end")
        XCTAssertEqual(try agent.lastTurn()?.status, .cancelled)
        XCTAssertEqual(try agent.lastTurn()?.error, "stream-ended")
        XCTAssertLessThan(Date().timeIntervalSince(started), 3.0, "the turn ran on (it takes 4 s)")
    }

    /// Many deltas in a burst arrive whole and in order, then the outcome.
    func testABurstOfDeltasArrivesInOrder() async throws {
        let chunks = (0..<3000).map { "\($0) " }
        let agent = try Agent(config: scripted([["chunks": chunks]]))
        var deltas: [String] = []
        var outcome: TurnOutcome?
        for try await item in agent.stream("burst") {
            XCTAssertNil(outcome, "an item after the outcome")
            switch item {
            case .text(let t): deltas.append(t)
            case .outcome(let o): outcome = o
            }
        }
        XCTAssertEqual(deltas, chunks)
        XCTAssertEqual(outcome?.text, chunks.joined())
    }

    /// A reader whose task is cancelled gets nil at once though items wait in the queue, and
    /// every later step too; the turn is cancelled.
    func testACancelledReaderGetsNilThoughItemsWait() async throws {
        let agent = try Agent(config: scripted([slowText(chunks: 40, delayMs: 50)]))
        let started = Date()
        let reader = Task { () -> [String] in
            var iterator = agent.stream("slow").makeAsyncIterator()
            var seen: [String] = []
            guard case .text(let first)? = try await iterator.next() else { return ["no first delta"] }
            seen.append(first)
            // A few more deltas arrive meanwhile, queued unread.
            try? await Task.sleep(nanoseconds: 300_000_000)
            withUnsafeCurrentTask { $0?.cancel() }
            if let item = try await iterator.next() { seen.append("after the cancel: \(item)") }
            if let item = try await iterator.next() { seen.append("later: \(item)") }
            return seen
        }
        let seen = try await reader.value
        XCTAssertEqual(seen, ["c1 "])
        let ended = try await eventually { try agent.lastTurn() != nil }
        XCTAssertTrue(ended, "the turn did not end")
        XCTAssertEqual(try agent.lastTurn()?.status, .cancelled)
        XCTAssertEqual(try agent.lastTurn()?.error, "stream-ended")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5, "the turn ran on (it takes 2 s)")
    }

    /// A stream the library refuses (another turn runs) throws the refusal on its first step,
    /// then ends; the running turn goes on.
    func testARefusedStreamThrowsOnItsFirstStep() async throws {
        let agent = try Agent(config: scripted([slowText(chunks: 4, delayMs: 50)]))
        let first = agent.stream("slow")
        var refused = agent.stream("second").makeAsyncIterator()
        do {
            _ = try await refused.next()
            XCTFail("the second stream did not throw")
        } catch let e as AgentaoError {
            XCTAssertEqual(e.status, .turnInProgress)
        }
        let after = try await refused.next()
        XCTAssertNil(after)
        var deltas = 0
        var outcome: TurnOutcome?
        for try await item in first {
            switch item {
            case .text: deltas += 1
            case .outcome(let o): outcome = o
            }
        }
        XCTAssertEqual(deltas, 4)
        XCTAssertEqual(outcome?.status, .ok)
    }
}
