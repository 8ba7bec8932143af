import Agentao
import Foundation
import XCTest

/// Files in memory, keyed by absolute path.
private final class MemoryFiles: FileSystem, @unchecked Sendable {
    private let lock = NSLock()
    private var files: [String: [UInt8]]
    let root: String
    init(root: String, files: [String: String]) {
        self.root = root
        self.files = files.mapValues { Array($0.utf8) }
    }
    func content(_ path: String) -> String? { lock.withLock { files[path].map { String(decoding: $0, as: UTF8.self) } } }
    func read(path: String, maxBytes: UInt64) throws -> [UInt8] {
        guard let b = lock.withLock({ files[path] }) else { throw FileSystemError.notFound }
        return b
    }
    func write(path: String, data: [UInt8], append: Bool) throws {
        lock.withLock { files[path] = (append ? (files[path] ?? []) : []) + data }
    }
    func listDirectory(path: String) throws -> [DirectoryEntry] { [] }
    func walk(base: String, maxDepth: Int32) throws -> [WalkEntry] { [] }
    func stat(path: String) throws -> FileStatus {
        if path == root { return FileStatus(size: 0, modificationTime: 1000, kind: .directory) }
        guard let b = lock.withLock({ files[path] }) else { throw FileSystemError.notFound }
        return FileStatus(size: UInt64(b.count), modificationTime: 1000, kind: .file)
    }
}

private final class Memories: MemoryStore, @unchecked Sendable {
    private let lock = NSLock()
    private var records: [String] = []
    struct ReadOnly: Error, CustomStringConvertible { var description: String { "store is read-only" } }
    var saved: [String] { lock.withLock { records } }
    func upsert(recordJSON: String) throws {
        if recordJSON.contains("fail_me") { throw ReadOnly() }
        lock.withLock { records.append(recordJSON) }
    }
    func list(scope: String?) throws -> String { "[" + lock.withLock { records }.joined(separator: ",") + "]" }
}

private func call(_ id: String, _ tool: String, _ args: [String: Any]) -> [String: Any] {
    ["tool_calls": [["id": id, "name": tool, "arguments": args]]]
}

final class CapabilityTests: XCTestCase {
    func testFileSystemServesReadAndWrite() async throws {
        let dir = workspace()
        let fs = MemoryFiles(root: dir, files: [dir + "/notes.txt": "served from memory\n"])
        let agent = try Agent(config: scripted([
            call("r1", "read_file", ["file_path": "notes.txt"]), ["text": "read"],
            call("w1", "write_file", ["file_path": "new.txt", "content": "virtual"]), ["text": "wrote"],
        ], dir: dir))
        try agent.setFileSystem(fs)
        let read = try await agent.run("read")
        XCTAssertEqual(read.text, "read")
        XCTAssertTrue(try agent.historyJSON().contains("served from memory"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/notes.txt"))
        let wrote = try await agent.run("write")
        XCTAssertEqual(wrote.text, "wrote")
        XCTAssertEqual(fs.content(dir + "/new.txt"), "virtual")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/new.txt"))
        try agent.setFileSystem(nil)
    }

    func testMemoryStoreKeepsSaveMemory() async throws {
        let store = Memories()
        let agent = try Agent(config: scripted([
            call("m1", "save_memory", ["key": "Preferred Language", "value": "Rust"]), ["text": "saved"],
            call("m2", "save_memory", ["key": "fail_me", "value": "x"]), ["text": "refused"],
        ]))
        try agent.setMemoryStore(store)
        let saved = try await agent.run("remember")
        XCTAssertEqual(saved.text, "saved")
        XCTAssertEqual(store.saved.count, 1)
        XCTAssertTrue(store.saved.first?.contains(#""key_normalized":"preferred_language""#) ?? false)
        let refused = try await agent.run("remember more")
        XCTAssertEqual(refused.text, "refused")
        XCTAssertTrue(try agent.historyJSON().contains("Error saving memory: the memory store failed `upsert`: store is read-only"))
    }
}

private final class HostShell: ShellExecutor, @unchecked Sendable {
    private let lock = NSLock()
    private var _commands: [String] = []
    private var _sawCancel = false
    var commands: [String] { lock.withLock { _commands } }
    var sawCancel: Bool { lock.withLock { _sawCancel } }
    func run(_ request: ShellRequest, output: @Sendable (ShellStream, [UInt8]) -> Void) async throws -> ShellExit {
        lock.withLock { _commands.append(request.command) }
        switch request.command {
        case "explode":
            struct NoSandbox: Error, CustomStringConvertible { var description: String { "sandbox unavailable" } }
            throw NoSandbox()
        case "wait":
            do {
                try await Task.sleep(nanoseconds: 30_000_000_000)
            } catch {
                lock.withLock { _sawCancel = true }
                return ShellExit(code: -15, cancelled: true)
            }
        default:
            break
        }
        output(.stdout, Array("built by the host\n".utf8))
        return ShellExit(code: 0)
    }
}

final class ShellExecutorTests: XCTestCase {
    func testShellExecutorRunsTheCommands() async throws {
        let shell = HostShell()
        let agent = try Agent(config: scripted([
            call("s1", "run_shell_command", ["command": "make all"]), ["text": "made"],
            call("s2", "run_shell_command", ["command": "explode"]), ["text": "exploded"],
            call("s3", "run_shell_command", ["command": "wait"]), ["text": "never"],
        ]))
        try agent.setShellExecutor(shell)
        let made = try await agent.run("build")
        XCTAssertEqual(made.text, "made")
        XCTAssertTrue(try agent.historyJSON().contains("built by the host"))
        let exploded = try await agent.run("explode")
        XCTAssertEqual(exploded.text, "exploded")
        XCTAssertTrue(try agent.historyJSON().contains("Error starting command: sandbox unavailable"))
        let turn = Task { try await agent.run("wait") }
        let waiting = await eventually { shell.commands.count == 3 }
        XCTAssertTrue(waiting)
        turn.cancel()
        _ = await XCTAssertThrowsStatus(.cancelled) { try await turn.value }
        let stopped = await eventually { shell.sawCancel }
        XCTAssertTrue(stopped, "the executor's task was not cancelled with the turn")
        XCTAssertEqual(shell.commands, ["make all", "explode", "wait"])
    }
}
