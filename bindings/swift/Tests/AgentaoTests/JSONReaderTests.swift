@testable import Agentao
import Foundation
import XCTest

/// `JSONReader` (the binding's decoder of the library's documents without `JSONDecoder`) reads
/// what the library writes, and every other shape decodes as `JSONDecoder` decodes it: read the
/// same by the reader, or left to `JSONDecoder`.
final class JSONReaderTests: XCTestCase {
    /// The conformance suite's host events (bindings/go/agentao/testdata), one a line.
    static let conformanceEvents = #"""
{"event_type":"permission_decision","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","turn_id":"b7c1e0d4-6f3a-4a8e-8f2d-1c9e7a5b3d10","tool_call_id":"call_01","tool_name":"read_file","decision_id":"0e3a6c1b-9d2f-4b7a-8c5e-2f1d3a4b5c6d","outcome":"allow","mode":"workspace-write","matched_rule":null,"reason":"no rule matched; tool does not require confirmation","loaded_sources":["default:no-engine"],"decided_at":"2026-05-01T08:15:02.114Z"}
{"event_type":"tool_lifecycle","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","turn_id":"b7c1e0d4-6f3a-4a8e-8f2d-1c9e7a5b3d10","tool_call_id":"call_01","tool_name":"read_file","phase":"started","started_at":"2026-05-01T08:15:02.115Z","completed_at":null,"outcome":null,"summary":null,"error_type":null}
{"event_type":"tool_lifecycle","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","turn_id":"b7c1e0d4-6f3a-4a8e-8f2d-1c9e7a5b3d10","tool_call_id":"call_01","tool_name":"read_file","phase":"completed","started_at":"2026-05-01T08:15:02.115Z","completed_at":"2026-05-01T08:15:02.131Z","outcome":"ok","summary":"read_file succeeded","error_type":null}
{"event_type":"permission_decision","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","turn_id":"b7c1e0d4-6f3a-4a8e-8f2d-1c9e7a5b3d10","tool_call_id":"call_02","tool_name":"run_shell_command","decision_id":"7a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d","outcome":"prompt","mode":"workspace-write","matched_rule":{"tool":"run_shell_command","action":"ask"},"reason":"mode-preset:run_shell_command","loaded_sources":["preset:workspace-write","injected:tenant-policy"],"decided_at":"2026-05-01T08:15:09.870Z"}
{"event_type":"tool_lifecycle","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","turn_id":"b7c1e0d4-6f3a-4a8e-8f2d-1c9e7a5b3d10","tool_call_id":"call_02","tool_name":"run_shell_command","phase":"failed","started_at":"2026-05-01T08:15:14.402Z","completed_at":"2026-05-01T08:15:14.402Z","outcome":"cancelled","summary":"not approved","error_type":null}
{"event_type":"permission_decision","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","turn_id":"b7c1e0d4-6f3a-4a8e-8f2d-1c9e7a5b3d10","tool_call_id":"call_03","tool_name":"run_shell_command","decision_id":"c4d5e6f7-a8b9-4c0d-8e1f-2a3b4c5d6e7f","outcome":"deny","mode":"workspace-write","matched_rule":{"tool":"run_shell_command","args":{"command":"rm\\s+-rf|sudo\\s|mkfs|dd\\s+if="},"action":"deny"},"reason":"mode-preset:run_shell_command","loaded_sources":["preset:workspace-write"],"decided_at":"2026-05-01T08:15:20.005Z"}
{"event_type":"tool_lifecycle","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","turn_id":"b7c1e0d4-6f3a-4a8e-8f2d-1c9e7a5b3d10","tool_call_id":"call_04","tool_name":"web_fetch","phase":"failed","started_at":"2026-05-01T08:15:25.300Z","completed_at":"2026-05-01T08:15:55.301Z","outcome":"error","summary":"web_fetch failed","error_type":"ConnectTimeout"}
{"event_type":"subagent_lifecycle","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","parent_session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","parent_task_id":null,"parent_tool_call_id":"call_05","child_session_id":"2b3c4d5e-6f70-4a81-9b2c-3d4e5f607182","child_task_id":"9f8e7d6c-5b4a-4c3d-8e2f-1a0b9c8d7e6f","phase":"spawned","task_summary":"sub-agent: codebase-investigator","started_at":"2026-05-01T08:16:00.000Z","completed_at":null,"error_type":null,"usage":null}
{"event_type":"subagent_lifecycle","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","parent_session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","parent_task_id":null,"parent_tool_call_id":"call_05","child_session_id":"2b3c4d5e-6f70-4a81-9b2c-3d4e5f607182","child_task_id":"9f8e7d6c-5b4a-4c3d-8e2f-1a0b9c8d7e6f","phase":"completed","task_summary":"sub-agent: codebase-investigator","started_at":"2026-05-01T08:16:00.000Z","completed_at":"2026-05-01T08:16:41.512Z","error_type":null,"usage":{"prompt_tokens":48210,"completion_tokens":2315,"cache_read_tokens":30720,"cache_creation_tokens":0,"reasoning_tokens":812}}
{"event_type":"subagent_lifecycle","session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","parent_session_id":"5d0f5c8e-2a51-4c7e-9d0b-3f1b8f6a9e21","parent_task_id":null,"parent_tool_call_id":"call_06","child_session_id":"1c2d3e4f-5061-4728-a394-a5b6c7d8e9f0","child_task_id":"0a1b2c3d-4e5f-4061-8273-8495a6b7c8d9","phase":"failed","task_summary":"sub-agent: generalist","started_at":"2026-05-01T08:17:00.000Z","completed_at":"2026-05-01T08:19:12.004Z","error_type":"incomplete:max_iterations","usage":{"prompt_tokens":120044,"completion_tokens":6120,"cache_read_tokens":0,"cache_creation_tokens":0,"reasoning_tokens":0}}
"""#

    func testTheReaderTakesTheConformanceEventsAsJSONDecoderReadsThem() {
        let lines = Self.conformanceEvents.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 10)
        for line in lines {
            let read = Array(line.utf8).withUnsafeBufferPointer { HostEvent.read(utf8: $0) }
            XCTAssertNotNil(read, "left to JSONDecoder: \(line)")
            XCTAssertEqual(read, HostEvent.decodeWithFoundation(line), line)
            if case .unknown = HostEvent.decodeWithFoundation(line) { XCTFail("JSONDecoder did not read \(line)") }
        }
    }

    /// Events read with a shared `RecentStrings` (repeated ids and timestamps share one string)
    /// are the events read without it, in any order and however the slots collide.
    func testSharedRecentStringsGiveTheSameEvents() {
        let lines = Self.conformanceEvents.split(separator: "\n").map(String.init)
        let recent = RecentStrings()
        for round in 0..<3 {
            for line in (round == 1 ? lines.reversed() : lines) {
                let bytes = Array(line.utf8)
                let shared = bytes.withUnsafeBufferPointer { HostEvent.decode(utf8: $0, recent: recent) }
                let own = bytes.withUnsafeBufferPointer { HostEvent.decode(utf8: $0) }
                XCTAssertEqual(shared, own, line)
            }
        }
        // Bodies of every length around the bounds (15/16 and 128/129 bytes), many colliding in a
        // slot: each read gives its own bytes back, never a recent look-alike's.
        for length in [1, 15, 16, 17, 36, 127, 128, 129, 300] {
            for variant in 0..<40 {
                var body = Array(repeating: UInt8(ascii: "a"), count: length)
                body[length / 2] = UInt8(ascii: "a") + UInt8(variant % 26)
                if length > 3 { body[0] = UInt8(ascii: "0") + UInt8(variant % 10) }
                let text = String(decoding: body, as: UTF8.self)
                let doc = Array(("\"" + text + "\"").utf8)
                let read = doc.withUnsafeBufferPointer { b -> String? in
                    var r = JSONReader(b, recent: recent)
                    return r.string()
                }
                XCTAssertEqual(read, text, "length \(length), variant \(variant)")
            }
        }
    }

    /// The string scan takes eight bytes at a time: a quote, a backslash, a control byte or a
    /// non-ASCII byte at any position of a body, near or across a word's edge, is still found
    /// (the value as `JSONDecoder` reads it; a control byte fails the reader).
    func testTheStringScanFindsEveryByteThatEndsAPlainRun() throws {
        let specials: [(insert: [UInt8], decoded: String?)] = [
            (Array(#"\""#.utf8), "\""),
            (Array(#"\\"#.utf8), "\\"),
            (Array(#"\u00e9"#.utf8), "é"),
            (Array("é".utf8), "é"),
            ([0x7F], "\u{7F}"),
            ([0x1F], nil),
            ([0x0A], nil),
        ]
        for length in 0..<26 {
            for at in 0...length {
                for special in specials {
                    var body = Array(repeating: UInt8(ascii: "x"), count: length)
                    body.insert(contentsOf: special.insert, at: at)
                    let doc = [UInt8(ascii: "\"")] + body + [UInt8(ascii: "\"")] + Array(#","next":1"#.utf8)
                    var failed = false
                    let read = doc.withUnsafeBufferPointer { b -> String? in
                        var r = JSONReader(b)
                        let s = r.string()
                        failed = r.failed
                        // The scan stopped at the closing quote, not before or after it.
                        if !failed { r.expect(UInt8(ascii: ",")) }
                        failed = failed || r.failed
                        return s
                    }
                    let where_ = "length \(length), at \(at), \(special.insert)"
                    if let want = special.decoded {
                        let x = String(repeating: "x", count: at)
                        let y = String(repeating: "x", count: length - at)
                        XCTAssertFalse(failed, where_)
                        XCTAssertEqual(read, x + want + y, where_)
                    } else {
                        XCTAssertTrue(failed, where_)
                    }
                }
            }
        }
    }

    func testOtherShapesDecodeAsJSONDecoderDecodesThem() {
        let tool = #"{"event_type":"tool_lifecycle","session_id":"s","tool_call_id":"c","tool_name":"read_file","phase":"started","started_at":"2026-05-01T08:15:02.115Z""#
        let perm = #"{"event_type":"permission_decision","session_id":"s","tool_name":"t","decision_id":"d","outcome":"allow","mode":"plan","loaded_sources":["a"],"decided_at":"2026-05-01T08:15:02.114Z""#
        let sub = #"{"event_type":"subagent_lifecycle","session_id":"s","child_task_id":"k","phase":"spawned","started_at":"2026-05-01T08:16:00.000Z""#
        let docs: [String] = [
            tool + "}",
            " \n\t" + tool + "} \r\n",
            tool + #","summary":"a \"quoted\" \u00e9 \ud83d\ude00 line\n \/ \\ \b\f\r\t"}"#,
            tool + #","summary":"é ✓ 😀"}"#,
            tool + #","summary":"lone \ud83d surrogate"}"#,
            tool + #","summary":"\u0000 nul"}"#,
            tool + #","Summary":"by case"}"#,
            tool + #","summaryX":"not a field"}"#,
            tool + #","sessionId":"camel"}"#,
            tool + #","SESSION_ID":"upper"}"#,
            tool + #","tool__call_id":"doubled"}"#,
            tool + #","eventType":"tool_lifecycle"}"#,
            tool + #","event_type":"permission_decision"}"#,
            tool + #","summ\u0061ry":"escaped key"}"#,
            tool + #","phase":null}"#,
            tool + #","summary":null,"summary":"again"}"#,
            tool + #","completed_at":null,"outcome":null}"#,
            tool + #","future":{"a":[1,-2.5e3,true,false,null,"x",{}],"b":[]}}"#,
            tool + #","phase":5}"#,
            tool + "}x",
            tool + ",}",
            tool + #","future":01}"#,
            tool + #","future":1.}"#,
            tool + #","future":tru}"#,
            tool + "," + #""summary":"tab"# + "\t" + #"inside"}"#,
            tool + #","summary":"bad \x escape"}"#,
            tool,
            #"{"event_type":"tool_lifecycle"}"#,
            #"{"event_type":"a_newer_event","x":1}"#,
            #"{"session_id":"s","event_type":"tool_lifecycle"}"#,
            #"{"event_type":"tool\u005flifecycle","session_id":"s"}"#,
            "not json",
            "",
            perm + "}",
            perm + #","loaded_sources":[]}"#,
            perm + #","loaded_sources":null}"#,
            perm + #","loaded_sources":["a",null]}"#,
            perm + #","loaded_sources":["a" "b"]}"#,
            perm + #","matched_rule":null}"#,
            perm + #","matched_rule":{ "tool" : "x", "n":[1, 2.5, -3e2], "deep":{"Snake_Key":{"k":null}}, "t":true }}"#,
            perm + #","matched_rule":{"a":1,"a":2}}"#,
            perm + #","matched_rule":{"n":1e400}}"#,
            perm + #","matched_rule":"not an object"}"#,
            perm + #","matched_rule":{"\u0061":"escaped key"}}"#,
            sub + "}",
            sub + #","usage":null}"#,
            sub + #","usage":{"prompt_tokens":1,"completion_tokens":-2}}"#,
            sub + #","usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}"#,
            sub + #","usage":{"prompt_tokens":1.5}}"#,
            sub + #","usage":{"prompt_tokens":1.0}}"#,
            sub + #","usage":{"prompt_tokens":1e3}}"#,
            sub + #","usage":{"prompt_tokens":99999999999999999999}}"#,
            sub + #","usage":{"prompt_tokens":-9223372036854775808}}"#,
            sub + #","usage":{"prompt_tokens":"1"}}"#,
            sub + #","usage":{"Prompt_Tokens":7}}"#,
            sub + #","usage":[]}"#,
            sub + #","usage":{"prompt_tokens":null}}"#,
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
            tool + #","future":"# + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "}",
        ]
        var taken = 0
        for doc in docs {
            let bytes = Array(doc.utf8)
            let decoded = bytes.withUnsafeBufferPointer { HostEvent.decode(utf8: $0) }
            XCTAssertEqual(decoded, HostEvent.decodeWithFoundation(doc), doc)
            if bytes.withUnsafeBufferPointer({ HostEvent.read(utf8: $0) }) != nil { taken += 1 }
        }
        // A good part of the shapes are the reader's (the test would prove little otherwise).
        XCTAssertGreaterThanOrEqual(taken, 12)
    }

    /// Bytes that are not UTF-8 are never the reader's (the library writes none).
    func testInvalidUTF8IsLeftToJSONDecoder() {
        let doc = Array(#"{"event_type":"tool_lifecycle","session_id":"caf"#.utf8) + [0xE9]
            + Array(#"","tool_call_id":"c","tool_name":"t","phase":"started","started_at":"x"}"#.utf8)
        XCTAssertNil(doc.withUnsafeBufferPointer { HostEvent.read(utf8: $0) })
    }

    func testTurnOutcomesReadAsJSONDecoderReadsThem() {
        let written = #"{"type":"turn_outcome","text":"done \"now\" é","status":"ok","incomplete_reason":null,"tool_count":2,"error":null,"finish_reason_missing":false,"is_answer":true}"#
        let docs = [
            written,
            #"{"text":"","status":"cancelled","incomplete_reason":"llm_error","tool_count":0,"error":"task-cancelled","finish_reason_missing":true,"is_answer":false}"#,
            #"{"text":"x","status":"finished","tool_count":0,"finish_reason_missing":false,"is_answer":true}"#,
            #"{"text":"x","status":"ok","tool_count":1.5,"finish_reason_missing":false,"is_answer":true}"#,
            #"{"text":"x","status":"ok","tool_count":1,"finish_reason_missing":false}"#,
            #"{"text":"x","text":"y","status":"ok","tool_count":1,"finish_reason_missing":false,"is_answer":true}"#,
            #"{"Text":"x","text":"y","status":"ok","tool_count":1,"finish_reason_missing":0,"is_answer":true}"#,
            #"{"text":"x","status":"ok","tool_count":1,"finish_reason_missing":false,"is_answer":true,"extra":[{}]}"#,
            "null",
        ]
        for doc in docs {
            let outcome = doc.withCString { TurnOutcome(json: $0) }
            XCTAssertEqual(outcome, try? JSONDecoder().decode(TurnOutcome.self, from: Data(doc.utf8)), doc)
        }
        let read = Array(written.utf8).withUnsafeBufferPointer { bytes -> TurnOutcome? in
            var reader = JSONReader(bytes)
            let o = TurnOutcome(reading: &reader)
            return reader.finished() ? o : nil
        }
        XCTAssertEqual(read?.text, #"done "now" é"#, "the library's outcome was left to JSONDecoder")
        XCTAssertEqual(read?.toolCount, 2)
    }

    func testEventEnvelopeTypeWithoutADecoder() {
        let docs = [
            #"{"type":"llm_text","schema_version":1,"data":{"chunk":"a\"b"}}"#,
            #"{"type":"turn_start","schema_version":1,"data":{}}"#,
            #"{"schema_version":1,"type":"tool_start","data":{}}"#,
            #"{"type":"t\u0061g","schema_version":1,"data":{}}"#,
            #"{"type":"x","schema_version":2,"data":{}}"#,
            "not json",
        ]
        for doc in docs {
            let event = doc.withCString { AgentEvent(cString: $0) }
            XCTAssertEqual(event.type, AgentEvent(json: doc).type, doc)
            XCTAssertEqual(event.json, doc)
        }
    }

    /// Deltas with escapes and non-ASCII text stream as written.
    func testStreamDeltasWithEscapesAndNonASCII() async throws {
        let chunks = ["plain ", "\"quoted\"\n", "tab\t\\ ", "é ✓ ", "😀", "\u{1}"]
        let agent = try Agent(config: scripted([["chunks": chunks]]))
        var deltas: [String] = []
        for try await item in agent.stream("go") {
            if case .text(let t) = item { deltas.append(t) }
        }
        XCTAssertEqual(deltas, chunks)
    }
}
