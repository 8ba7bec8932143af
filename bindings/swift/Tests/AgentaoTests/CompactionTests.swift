import Agentao
import Foundation
import XCTest

private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 1, 2, 3]

/// Twelve messages of about 400 characters: a short summary makes them smaller.
private func longHistory() -> String {
    let filler = String(repeating: "x", count: 400)
    var parts: [String] = []
    for i in 0..<6 {
        parts.append(#"{"role":"user","content":"request \#(i) \#(filler)"}"#)
        parts.append(#"{"role":"assistant","content":"answer \#(i) \#(filler)"}"#)
    }
    return "[" + parts.joined(separator: ",") + "]"
}

private final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [CompactionRequest] = []
    func add(_ r: CompactionRequest) { lock.withLock { requests.append(r) } }
    var all: [CompactionRequest] { lock.withLock { requests } }
}

private struct ControllerRefusal: Error, CustomStringConvertible {
    var description: String { "the host refuses" }
}

final class CompactionTests: XCTestCase {
    func testImagesWithRunAndStream() async throws {
        let agent = try Agent(config: scripted([["text": "seen"], ["text": "seen again"]]))
        let outcome = try await agent.run("look", images: [Image(mimeType: "image/png", data: png)])
        XCTAssertEqual(outcome.text, "seen")
        var text = ""
        for try await item in agent.stream("again", images: [Image(mimeType: "image/gif", data: png)]) {
            if case .text(let t) = item { text += t }
        }
        XCTAssertEqual(text, "seen again")
        let history = try agent.historyJSON()
        XCTAssertTrue(history.contains("data:image/png;base64,iVBORwECAw=="), history)
        XCTAssertTrue(history.contains("data:image/gif;base64,"), history)
        do {
            _ = try await agent.run("bad", images: [Image(mimeType: "image/svg+xml", data: png)])
            XCTFail("a bad image was accepted")
        } catch let e as AgentaoError {
            XCTAssertEqual(e.status, .invalidArgument)
            XCTAssertTrue(e.message.contains("image/svg+xml"), e.message)
        }
    }

    func testContextUsageAndCompact() async throws {
        let agent = try Agent(config: scripted([["text": "S1 summary"]]))
        let usage = try agent.contextUsage()
        XCTAssertEqual(usage.window, 200_000)
        XCTAssertNil(usage.learnedWindow)
        XCTAssertFalse(usage.breakerOpen)
        let skipped = try await agent.compact()
        XCTAssertEqual(skipped.status, "skipped")
        try agent.setHistoryJSON(longHistory())
        let done = try await agent.compact(reason: "host_asked")
        XCTAssertEqual(done.status, "success")
        XCTAssertLessThan(done.postMsgs, done.preMsgs)
        XCTAssertTrue(try agent.historyJSON().contains("S1 summary"))
        XCTAssertEqual(try agent.contextUsage().compactions, 1)
    }

    func testCompactionController() async throws {
        let agent = try Agent(config: scripted([["text": "never"]]))
        try agent.setHistoryJSON(longHistory())
        let seen = Seen()
        try agent.setCompactionController { request in
            seen.add(request)
            switch seen.all.count {
            case 1: return .cancel(reason: "not now")
            case 2: throw ControllerRefusal()
            default:
                try await Task.sleep(nanoseconds: 30_000_000)
                return .summary("SWIFT SUMMARY")
            }
        }
        let cancelled = try await agent.compact(reason: "host")
        XCTAssertEqual(cancelled.status, "cancelled")
        XCTAssertEqual(cancelled.detail, "cancelled by the compaction controller: not now")
        let r = seen.all[0]
        XCTAssertEqual(r.trigger, .manual)
        XCTAssertEqual(r.kind, .full)
        XCTAssertEqual(r.reason, "host")
        XCTAssertEqual(r.window, 200_000)
        XCTAssertEqual(r.messagesToSummarize + r.messagesKept, 12)
        XCTAssertNil(r.childTaskID)
        XCTAssertTrue(r.messagesJSON.contains("request 0 xxx"))

        let failed = try await agent.compact()
        XCTAssertEqual(failed.status, "cancelled")
        XCTAssertEqual(failed.detail, "the compaction controller failed: the host refuses")

        let written = try await agent.compact()
        XCTAssertEqual(written.status, "success")
        XCTAssertTrue(try agent.historyJSON().contains("SWIFT SUMMARY"))
        try agent.setCompactionController(nil)
    }
}
