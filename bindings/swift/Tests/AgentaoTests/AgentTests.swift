import Agentao
import Foundation
import XCTest

final class TurnTests: XCTestCase {
    func testTurnReturnsTheOutcomeAndEmitsEvents() async throws {
        let recorder = Recorder()
        let agent = try Agent(config: scripted([["text": "Hello from Swift.", "chunk_size": 4]]), transport: recorder)
        XCTAssertEqual(agent.sessionID.count, 36)
        XCTAssertNil(try agent.lastTurn())
        let outcome = try await agent.run("Say hello.")
        XCTAssertEqual(outcome.text, "Hello from Swift.")
        XCTAssertEqual(outcome.status, .ok)
        XCTAssertTrue(outcome.isAnswer)
        XCTAssertNil(outcome.incompleteReason)
        XCTAssertEqual(try agent.lastTurn(), outcome)
        let types = recorder.events.map(\.type)
        XCTAssertEqual(types.first, "turn_begin")
        XCTAssertEqual(types.last, "turn_end")
        XCTAssertTrue(types.contains("llm_text"), "\(types)")
        struct TurnEnd: Decodable { let final_text: String; let status: String }
        let end = try recorder.events.last!.decodeData(TurnEnd.self)
        XCTAssertEqual(end.final_text, "Hello from Swift.")
        XCTAssertEqual(end.status, "ok")
        XCTAssertTrue(try agent.historyJSON().contains("Say hello."))
    }

    func testAgentWithoutTransportUsesTheLibraryDefaults() async throws {
        let dir = workspace()
        let agent = try Agent(config: scripted([writeCall("a.txt", "auto"), ["text": "done"]], dir: dir))
        let outcome = try await agent.run("write")
        XCTAssertEqual(outcome.text, "done")
        XCTAssertEqual(outcome.toolCount, 1)
        // The null transport approves.
        XCTAssertEqual(try String(contentsOfFile: dir + "/a.txt", encoding: .utf8), "auto")
    }

    func testTransportIsReleasedWithTheAgent() async throws {
        weak var weakRecorder: Recorder?
        do {
            let recorder = Recorder()
            weakRecorder = recorder
            let agent = try Agent(config: scripted([["text": "hi"]]), transport: recorder)
            _ = try await agent.run("hi")
        }
        // userdata_free released the Unmanaged box on a library thread once the agent was gone.
        let released = await eventually { weakRecorder == nil }
        XCTAssertTrue(released, "the transport box was never released")
    }

    func testVersion() {
        XCTAssertEqual(agentaoVersion.split(separator: ".").count, 3)
    }
}

final class StreamTests: XCTestCase {
    func testStreamYieldsDeltasThenTheOutcome() async throws {
        let text = "Streaming from the scripted model."
        let agent = try Agent(config: scripted([["text": text, "chunk_size": 5]]))
        var deltas: [String] = []
        var outcome: TurnOutcome?
        for try await item in agent.stream("stream") {
            XCTAssertNil(outcome, "an item after the outcome")
            switch item {
            case .text(let t): deltas.append(t)
            case .outcome(let o): outcome = o
            }
        }
        XCTAssertGreaterThan(deltas.count, 1)
        XCTAssertEqual(deltas.joined(), text)
        XCTAssertEqual(outcome?.text, text)
        XCTAssertEqual(outcome?.status, .ok)
    }

    /// A Swift transport has no fan-out (the vtable's `subscribe` is NULL) and streams all the
    /// same: the library owns the fan-out to the stream.
    func testStreamThroughATransportWithoutSubscribe() async throws {
        let recorder = Recorder()
        let agent = try Agent(config: scripted([["chunks": ["no ", "stub"]]]), transport: recorder)
        var deltas: [String] = []
        var outcome: TurnOutcome?
        for try await item in agent.stream("stream") {
            switch item {
            case .text(let t): deltas.append(t)
            case .outcome(let o): outcome = o
            }
        }
        XCTAssertEqual(deltas, ["no ", "stub"])
        XCTAssertEqual(outcome?.text, "no stub")
        XCTAssertEqual(recorder.events.map(\.type).last, "turn_end")
    }

    func testEndingTheIterationEarlyCancelsTheTurn() async throws {
        let agent = try Agent(config: scripted([slowText(chunks: 40, delayMs: 100), ["text": "next turn"]]))
        let started = Date()
        var seen = 0
        for try await item in agent.stream("slow") {
            if case .text = item { seen += 1 }
            break
        }
        XCTAssertEqual(seen, 1)
        var last: TurnOutcome?
        let ended = try await eventually { last = try agent.lastTurn(); return last != nil }
        let took = Date().timeIntervalSince(started)
        print("stream ended early: turn over after \(Int(took * 1000)) ms (the full turn takes 4000 ms)")
        XCTAssertTrue(ended, "the turn did not end after the stream was dropped")
        XCTAssertEqual(last?.status, .cancelled)
        XCTAssertEqual(last?.error, "stream-ended")
        XCTAssertLessThan(took, 3.0)
        // The agent is free for the next turn.
        let next = try await agent.run("again")
        XCTAssertEqual(next.text, "next turn")
    }

    func testCancellingTheConsumingTaskCancelsTheTurn() async throws {
        let agent = try Agent(config: scripted([slowText(chunks: 40, delayMs: 100)]))
        let consumer = Task { () -> Int in
            var n = 0
            for try await _ in agent.stream("slow") { n += 1 }
            return n
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        consumer.cancel()
        _ = try? await consumer.value
        let ended = try await eventually { try agent.lastTurn()?.status == .cancelled }
        XCTAssertTrue(ended)
    }
}

final class CancelTests: XCTestCase {
    func testTaskCancellationCancelsTheTurn() async throws {
        let agent = try Agent(config: scripted([slowText(chunks: 50, delayMs: 100)]))
        let turn = Task { try await agent.run("slow") }
        try await Task.sleep(nanoseconds: 300_000_000)
        let cancelledAt = Date()
        turn.cancel()
        let error = await XCTAssertThrowsStatus(.cancelled) { try await turn.value }
        let ms = Int(Date().timeIntervalSince(cancelledAt) * 1000)
        print("task cancellation to thrown .cancelled: \(ms) ms")
        // The contract is 100 ms; the margin holds on a loaded 2-core machine.
        XCTAssertLessThan(ms, 2000)
        XCTAssertEqual(error?.outcome?.status, .cancelled)
        XCTAssertEqual(error?.outcome?.error, "task-cancelled")
    }

    func testAlreadyCancelledTaskDoesNotRunTheTurn() async throws {
        let dir = workspace()
        let agent = try Agent(config: scripted([writeCall("never.txt", "x"), ["text": "done"]], dir: dir))
        let turn = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await agent.run("write")
        }
        _ = await XCTAssertThrowsStatus(.cancelled) { try await turn.value }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/never.txt"))
    }

    func testCancelWhileAConfirmationIsPendingAndLateAnswerIsIgnored() async throws {
        let dir = workspace()
        let (transport, pending) = GatedTransport.make()
        // The reply timeout only bounds the test if the cancellation were lost.
        let config = scripted([writeCall("late.txt", "x"), ["text": "done"]], dir: dir, replyTimeoutMs: 10_000)
        let agent = try Agent(config: config, transport: transport)
        let turn = Task { try await agent.run("write") }
        var iterator = pending.makeAsyncIterator()
        let request = await iterator.next()
        XCTAssertEqual(request?.request.toolName, "write_file")
        turn.cancel()
        _ = await XCTAssertThrowsStatus(.cancelled) { try await turn.value }
        // The answer arrives after the turn was cancelled: ignored, nothing written.
        request?.answer.resume(returning: .allow)
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/late.txt"))
    }
}

final class TransportTests: XCTestCase {
    func testConfirmationAnsweredFromAnotherTask() async throws {
        let dir = workspace()
        let (transport, pending) = GatedTransport.make()
        let agent = try Agent(config: scripted([writeCall("out.txt", "deferred"), ["text": "written"]], dir: dir), transport: transport)
        let answerer = Task { () -> ToolConfirmation? in
            for await p in pending {
                try? await Task.sleep(nanoseconds: 150_000_000)
                p.answer.resume(returning: .allow)
                return p.request
            }
            return nil
        }
        let started = Date()
        let outcome = try await agent.run("write")
        let took = Date().timeIntervalSince(started)
        XCTAssertEqual(outcome.text, "written")
        XCTAssertGreaterThanOrEqual(took, 0.14, "the turn did not wait for the deferred answer")
        XCTAssertEqual(try String(contentsOfFile: dir + "/out.txt", encoding: .utf8), "deferred")
        let request = await answerer.value
        XCTAssertEqual(request?.toolName, "write_file")
        XCTAssertEqual(request?.callID, "w1")
        XCTAssertTrue(request?.argumentsJSON.contains("\"deferred\"") ?? false, request?.argumentsJSON ?? "")
    }

    func testDeniedConfirmationSkipsTheTool() async throws {
        struct Deny: Transport {
            func confirmTool(_ request: ToolConfirmation) async throws -> Confirmation { .deny }
        }
        let dir = workspace()
        let agent = try Agent(config: scripted([writeCall("no.txt", "x"), ["text": "ok"]], dir: dir), transport: Deny())
        _ = try await agent.run("write")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/no.txt"))
        XCTAssertTrue(try agent.historyJSON().contains("needed approval and was not approved"))
    }

    func testAskUser() async throws {
        let recorder = Recorder(answer: "blue")
        let call: [String: Any] = ["tool_calls": [[
            "id": "q1", "name": "ask_user",
            "arguments": ["question": "Favourite colour?", "header": "Colour", "options": ["red", "blue"], "allow_custom": false],
        ]]]
        let agent = try Agent(config: scripted([call, ["text": "noted"]]), transport: recorder)
        let outcome = try await agent.run("ask me")
        XCTAssertEqual(outcome.text, "noted")
        let q = try XCTUnwrap(recorder.questions.first)
        XCTAssertEqual(recorder.questions.count, 1)
        XCTAssertEqual(q.text, "Favourite colour?")
        XCTAssertEqual(q.header, "Colour")
        XCTAssertEqual(q.options, ["red", "blue"])
        XCTAssertFalse(q.multiple)
        XCTAssertFalse(q.allowCustom)
        // The answer went back to the model as the tool's result.
        let history = try agent.historyJSON()
        XCTAssertTrue(history.contains("\"tool_call_id\":\"q1\""), history)
        XCTAssertTrue(history.contains("blue"), history)
    }

    func testAskUserThrowingBecomesAToolErrorAndTheTurnGoesOn() async throws {
        struct Mute: Transport {
            func askUser(_ question: Question) async throws -> String { throw Refusal() }
        }
        let call: [String: Any] = ["tool_calls": [["id": "q1", "name": "ask_user", "arguments": ["question": "?"]]]]
        let agent = try Agent(config: scripted([call, ["text": "carried on"]]), transport: Mute())
        let outcome = try await agent.run("ask")
        XCTAssertEqual(outcome.text, "carried on")
        XCTAssertTrue(try agent.historyJSON().contains("the operator said no"))
    }

    /// Five tool-call steps with distinct arguments, then a final answer.
    private let loop: [[String: Any]] = [
        ["repeat": 5, "text": "step {i}",
         "tool_calls": [["id": "l{i}", "name": "list_directory", "arguments": ["directory_path": "./d{i}"]]]],
        ["text": "final answer"],
    ]

    func testMaxIterationsStop() async throws {
        let recorder = Recorder(action: .stop)
        let agent = try Agent(config: scripted(loop), transport: recorder)
        let outcome = try await agent.run("work", maxIterations: 2)
        XCTAssertEqual(outcome.status, .ok)
        XCTAssertEqual(outcome.incompleteReason, "max_iterations")
        XCTAssertEqual(outcome.text, "step 2")
        XCTAssertFalse(outcome.isAnswer)
        XCTAssertEqual(recorder.maxRequests.count, 1)
        XCTAssertEqual(recorder.maxRequests.first?.count, 2)
        XCTAssertEqual(recorder.maxRequests.first?.pendingCalls.first?.name, "list_directory")
        XCTAssertTrue(recorder.maxRequests.first?.pendingCalls.first?.args.contains("d2") ?? false)
    }

    func testMaxIterationsContinue() async throws {
        let recorder = Recorder(action: .continue)
        let agent = try Agent(config: scripted(loop), transport: recorder)
        let outcome = try await agent.run("work", maxIterations: 3)
        XCTAssertEqual(outcome.text, "final answer")
        XCTAssertNil(outcome.incompleteReason)
        XCTAssertEqual(outcome.toolCount, 5)
        XCTAssertEqual(recorder.maxRequests.count, 1)
    }

    func testMaxIterationsNewInstruction() async throws {
        let recorder = Recorder(action: .newInstruction("Please wrap up \"now\"."))
        // The config's budget is used when run() gets none.
        let agent = try Agent(config: scripted(loop, maxIterations: 3), transport: recorder)
        let outcome = try await agent.run("work")
        XCTAssertEqual(outcome.text, "final answer")
        XCTAssertEqual(recorder.maxRequests.first?.count, 3)
        XCTAssertTrue(try agent.historyJSON().contains(#"{"role":"user","content":"Please wrap up \"now\"."}"#))
    }
}

final class HostEventTests: XCTestCase {
    func testEventsAreTypedAndInOrder() async throws {
        var agent: Agent? = try Agent(config: scripted([writeCall("e.txt", "x"), ["text": "done"]]))
        let sessionID = agent!.sessionID
        var seen: [HostEvent] = []
        do {
            let events = agent!.events()
            _ = try await agent!.run("write")
            for try await event in events {
                seen.append(event)
                if seen.count == 3 { break }
            }
        }
        XCTAssertEqual(seen.count, 3)
        guard case .permissionDecision(let decision) = seen[0] else { return XCTFail("\(seen[0])") }
        XCTAssertEqual(decision.sessionId, sessionID)
        XCTAssertEqual(decision.toolName, "write_file")
        XCTAssertEqual(decision.toolCallId, "w1")
        XCTAssertEqual(decision.outcome, "prompt")
        guard case .toolLifecycle(let started) = seen[1], case .toolLifecycle(let completed) = seen[2] else {
            return XCTFail("\(seen)")
        }
        XCTAssertEqual(started.phase, "started")
        XCTAssertEqual(completed.phase, "completed")
        XCTAssertEqual(completed.outcome, "ok")
        XCTAssertEqual(completed.toolCallId, "w1")
        XCTAssertNotNil(completed.completedAt)

        // A second sequence (the first is gone) ends when the agent is freed.
        let more = agent!.events()
        let drained = Task { var n = 0; for try await _ in more { n += 1 }; return n }
        agent = nil
        let n = try await drained.value
        XCTAssertEqual(n, 0)
    }

    /// The reference's bounded queue: 64 unread events hold the turn, which goes on as they
    /// are read, and every event arrives (30 writes: 90 events).
    func testAnUnreadSequenceHoldsTheTurnAndNothingIsLost() async throws {
        let dir = workspace()
        let writes = (1...30).map { writeCall("f\($0).txt", "x", id: "w\($0)") }
        let agent = try Agent(config: scripted(writes + [["text": "done"]], dir: dir))
        let events = agent.events()
        let turn = Task { try await agent.run("write") }
        try await Task.sleep(nanoseconds: 300_000_000)
        let written = (1...30).filter { FileManager.default.fileExists(atPath: "\(dir)/f\($0).txt") }.count
        XCTAssertGreaterThan(written, 0, "the turn did not start")
        XCTAssertLessThan(written, 30, "the turn did not wait for its reader")
        var ids: [String] = []
        for try await event in events {
            if case .toolLifecycle(let e) = event, e.phase == "completed" { ids.append(e.toolCallId) }
            if ids.count == 30 { break }
        }
        XCTAssertEqual(ids, (1...30).map { "w\($0)" })
        let outcome = try await turn.value
        XCTAssertEqual(outcome.text, "done")
    }

    func testOneLiveSequencePerSessionFilter() async throws {
        let agent = try Agent(config: scripted([["text": "done"]]))
        let first = agent.events()
        var second = agent.events().makeAsyncIterator()
        do {
            _ = try await second.next()
            XCTFail("a second sequence with the same filter opened")
        } catch let e as AgentaoError {
            XCTAssertEqual(e.status, .streamSubscribe)
        }
        // Another filter may coexist.
        let other = agent.events(session: "elsewhere")
        let reading = Task { () -> HostEvent? in
            var it = other.makeAsyncIterator()
            return try await it.next()
        }
        reading.cancel()
        let ended = try await reading.value
        XCTAssertNil(ended)
        _ = first
    }

    func testCancellingTheReaderEndsTheSequence() async throws {
        let agent = try Agent(config: scripted([["text": "done"]]))
        let events = agent.events()
        let reading = Task { () -> Int in
            var n = 0
            for try await _ in events { n += 1 }
            return n
        }
        try await Task.sleep(nanoseconds: 100_000_000)
        reading.cancel()
        let n = try await reading.value
        XCTAssertEqual(n, 0)
    }
}

extension HostEventTests {
    func testPermissionDecisionKeepsTheMatchedRuleAsWritten() async throws {
        let rule: [String: Any] = ["tool": "write_file", "action": "allow", "args": ["file_path": "r\\.txt$"]]
        let agent = try Agent(
            config: scripted([writeCall("r.txt", "x"), ["text": "done"]], permissions: ["rules": [rule]]))
        let events = agent.events()
        _ = try await agent.run("write")
        var iterator = events.makeAsyncIterator()
        guard case .permissionDecision(let decision)? = try await iterator.next() else { return XCTFail("no decision") }
        XCTAssertEqual(decision.outcome, "allow")
        XCTAssertTrue(decision.loadedSources.contains("injected:config"), "\(decision.loadedSources)")
        XCTAssertEqual(decision.matchedRule?["tool"], .string("write_file"))
        XCTAssertEqual(decision.matchedRule?["args"], .object(["file_path": .string("r\\.txt$")]))
    }
}

final class ErrorTests: XCTestCase {
    func testInvalidConfigCarriesTheStatusAndTheField() async {
        let e = await XCTAssertThrowsStatus(.invalidConfig) {
            try Agent(config: #"{"working_directory": ".", "max_iterations": "many"}"#)
        }
        XCTAssertTrue(e?.message.contains("max_iterations") ?? false, e?.message ?? "")
        XCTAssertEqual(e?.status.description, "INVALID_CONFIG")
        _ = await XCTAssertThrowsStatus(.invalidJSON) { try Agent(config: "{") }
    }

    func testTransportIsReleasedWhenCreationFails() async {
        weak var weakRecorder: Recorder?
        do {
            let recorder = Recorder()
            weakRecorder = recorder
            _ = await XCTAssertThrowsStatus(.invalidJSON) { try Agent(config: "{", transport: recorder) }
        }
        XCTAssertNil(weakRecorder)
    }

    func testSecondTurnIsTurnInProgress() async throws {
        let recorder = Recorder()
        let agent = try Agent(config: scripted([slowText(chunks: 30, delayMs: 100)]), transport: recorder)
        let first = Task { try await agent.run("slow") }
        let busy = await eventually { recorder.events.contains { $0.type == "llm_call_started" } }
        XCTAssertTrue(busy)
        _ = await XCTAssertThrowsStatus(.turnInProgress) { try await agent.run("second") }
        first.cancel()
        _ = await XCTAssertThrowsStatus(.cancelled) { try await first.value }
    }

    func testFailedConfirmationIsHostError() async throws {
        struct Fails: Transport {
            func confirmTool(_ request: ToolConfirmation) async throws -> Confirmation { throw Refusal() }
        }
        let agent = try Agent(config: scripted([writeCall("f.txt", "x"), ["text": "unreached"]]), transport: Fails())
        let e = await XCTAssertThrowsStatus(.hostError) { try await agent.run("write") }
        XCTAssertTrue(e?.message.contains("the operator said no") ?? false, "\(String(describing: e))")
        XCTAssertEqual(e?.outcome?.status, .error)
        XCTAssertEqual(e?.outcome?.error, "the operator said no")
    }
}
