import Agentao
import Foundation
import XCTest

/// A flag set from any thread.
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

private func lookupCall(_ key: String, id: String = "c1") -> [String: Any] {
    ["tool_calls": [["id": id, "name": "lookup", "arguments": ["key": key]]]]
}

private let lookup = ToolSpec(
    name: "lookup", description: "Looks a key up in the host's table.",
    parametersJSON: #"{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}"#)

final class HostToolTests: XCTestCase {
    func testHostToolResultReachesTheModel() async throws {
        let agent = try Agent(config: scripted([lookupCall("k1"), ["text": "done"]]))
        try agent.addTool(lookup) { call in
            XCTAssertEqual(call.id, "c1")
            return "value of \(call.argumentsJSON)"
        }
        let out = try await agent.run("look k1 up")
        XCTAssertEqual(out.text, "done")
        XCTAssertEqual(out.toolCount, 1)
        let history = try agent.historyJSON()
        XCTAssertTrue(history.contains(#"value of {\"key\":\"k1\"}"#), history)
    }

    func testThrownErrorsAreToolErrorsAndTheTurnGoesOn() async throws {
        let agent = try Agent(config: scripted([lookupCall("a"), ["text": "one"], lookupCall("b"), ["text": "two"]]))
        try agent.addTool(lookup) { _ in throw ToolFailure(type: "KeyError", message: "no such key") }
        let first = try await agent.run("1")
        XCTAssertEqual(first.text, "one")
        XCTAssertTrue(try agent.historyJSON().contains("Error executing lookup: no such key"))
        struct Offline: Error, CustomStringConvertible { var description: String { "backend offline" } }
        try agent.addTool(lookup, replace: true) { _ in throw Offline() }
        let second = try await agent.run("2")
        XCTAssertEqual(second.text, "two")
        XCTAssertTrue(try agent.historyJSON().contains("Error executing lookup: backend offline"))
    }

    func testCancellingTheTurnCancelsTheHandlersTask() async throws {
        let agent = try Agent(config: scripted([lookupCall("slow"), ["text": "done"]]))
        let started = Flag()
        let sawCancel = Flag()
        try agent.addTool(lookup) { _ in
            started.set()
            do {
                try await Task.sleep(nanoseconds: 30_000_000_000)
            } catch {
                sawCancel.set()
                throw error
            }
            return "too late"
        }
        let turn = Task { try await agent.run("go") }
        let running = await eventually { started.isSet }
        XCTAssertTrue(running)
        turn.cancel()
        _ = await XCTAssertThrowsStatus(.cancelled) { try await turn.value }
        let cancelled = await eventually { sawCancel.isSet }
        XCTAssertTrue(cancelled, "the handler's task was not cancelled with the turn")
        XCTAssertFalse(try agent.historyJSON().contains("too late"))
        // The agent is still usable; the cancelled turn did not read the script's "done".
        let again = try await agent.run("again")
        XCTAssertEqual(again.text, "done")
    }

    func testRegistrationErrors() throws {
        let agent = try Agent(config: scripted([["text": "x"]]))
        try agent.addTool(lookup) { _ in "r" }
        XCTAssertThrowsError(try agent.addTool(lookup) { _ in "r" }) { error in
            XCTAssertEqual((error as? AgentaoError)?.status, .invalidArgument)
        }
        var bad = lookup
        bad.name = "mcp_x"
        XCTAssertThrowsError(try agent.addTool(bad) { _ in "r" })
        bad.name = "other"
        bad.parametersJSON = "{not json"
        XCTAssertThrowsError(try agent.addTool(bad) { _ in "r" }) { error in
            XCTAssertEqual((error as? AgentaoError)?.status, .invalidJSON)
        }
        XCTAssertTrue(try agent.removeTool("lookup"))
        XCTAssertFalse(try agent.removeTool("lookup"))
    }
}

final class AgentInfoTests: XCTestCase {
    func testMCPStatusWithAFailingServer() async throws {
        let dir = workspace()
        let config = #"{"working_directory":"\#(dir)","mcp_servers":{"gone":{"command":"/nonexistent/mcp-server"}},"llm":{"provider":"scripted","script":{"responses":[{"text":"fine"}]}}}"#
        let agent = try Agent(config: config)
        let out = try await agent.run("go")
        XCTAssertEqual(out.text, "fine")
        let status = try agent.mcpStatusJSON()
        XCTAssertTrue(status.contains(#"{"name":"gone","status":"error""#), status)
        let none = try Agent(config: scripted([["text": "x"]]))
        XCTAssertTrue(try none.mcpStatusJSON().contains(#""servers":[]"#))
    }

    func testPreflight() throws {
        let agent = try Agent(config: scripted([["text": "x"]]))
        let allow = try agent.preflightJSON(tool: "read_file", argumentsJSON: #"{"file_path":"a.txt"}"#)
        XCTAssertTrue(allow.contains(#""outcome":"allow""#), allow)
        XCTAssertThrowsError(try agent.preflightJSON(tool: "no_such_tool", argumentsJSON: "{}")) { error in
            XCTAssertEqual((error as? AgentaoError)?.status, .invalidArgument)
        }
    }

    func testAddedSubagentRunsAsATool() async throws {
        let dir = workspace()
        let config = #"{"working_directory":"\#(dir)","llm":{"provider":"scripted","script":{"responses":[{"tool_calls":[{"id":"c1","name":"agent_helper_one","arguments":{"task":"summarise"}}]},{"text":"parent done"}],"subagents":{"helper-one":[{"text":"child summary"}]}}}}"#
        let agent = try Agent(config: config)
        try agent.addSubagent(definitionJSON: #"{"name":"helper-one","description":"Summarises."}"#)
        let out = try await agent.run("delegate")
        XCTAssertEqual(out.text, "parent done")
        XCTAssertTrue(try agent.historyJSON().contains("child summary"))
        XCTAssertThrowsError(try agent.addSubagent(definitionJSON: "{oops")) { error in
            XCTAssertEqual((error as? AgentaoError)?.status, .invalidJSON)
        }
    }
}

final class MCPRegistryTests: XCTestCase {
    func testRegistryServersAppearInTheStatus() async throws {
        let agent = try Agent(config: scripted([["text": "one"], ["text": "two"]]))
        try agent.setMCPRegistry { #"{"from_registry":{"command":"/nonexistent/registry-server"}}"# }
        let one = try await agent.run("go")
        XCTAssertEqual(one.text, "one")
        let status = try agent.mcpStatusJSON()
        XCTAssertTrue(status.contains(#""name":"from_registry""#), status)
        struct Down: Error {}
        try agent.setMCPRegistry { throw Down() }
        let two = try await agent.run("again")
        XCTAssertEqual(two.text, "two")
        XCTAssertFalse(try agent.mcpStatusJSON().contains("from_registry"))
        try agent.setMCPRegistry(nil)
    }
}
