import CAgentao

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One command for a `ShellExecutor`.
public struct ShellRequest: Sendable {
    /// Runs as `sh -c <command>`.
    public let command: String
    /// Absolute, inside the workspace; whether it exists is the executor's check.
    public let cwd: String
    /// `NAME=value` strings (provider credentials removed).
    public let environment: [String]
    /// Stop the command after this long without output and report `timedOut`.
    public let inactivityTimeoutMs: UInt64
}

/// The output stream a chunk comes from.
public enum ShellStream: Int32, Sendable {
    case stdout = 1
    case stderr = 2
}

/// How a command ended: `code` (negative: killed by that signal), stopped for inactivity
/// (`timedOut`) or because its task was cancelled (`cancelled`).
public struct ShellExit: Sendable {
    public let code: Int32
    public let timedOut: Bool
    public let cancelled: Bool
    public init(code: Int32, timedOut: Bool = false, cancelled: Bool = false) {
        self.code = code
        self.timedOut = timedOut
        self.cancelled = cancelled
    }
}

/// A host shell executor (`agentao_shell_executor`, POSIX) for run_shell_command's foreground
/// commands; the permission decision, the hardline floor and the working-directory policy have
/// run first. Each run is a task of its own, cancelled when the turn is cancelled or the library
/// stops the run. A thrown error means the command could not start
/// (`Error starting command: <description>`).
public protocol ShellExecutor: Sendable {
    func run(_ request: ShellRequest, output: @Sendable (ShellStream, [UInt8]) -> Void) async throws -> ShellExit
}

/// One `agentao_shell_run`: output until it is answered, then nothing (the lock orders them).
private final class RunHandle: @unchecked Sendable {
    private let lock = Mutex()
    private var raw: OpaquePointer?
    /// A child of the run's token, owned here, and its watch.
    private let token: OpaquePointer
    let cancelled: TokenWatch
    init(_ raw: OpaquePointer, token: OpaquePointer) {
        self.raw = raw
        self.token = token
        cancelled = TokenWatch(token)
    }
    deinit {
        cancelled.remove()
        agentao_cancel_token_free(token)
    }
    func output(_ stream: ShellStream, _ bytes: [UInt8]) {
        lock.run {
            guard let raw else { return }
            _ = bytes.withUnsafeBufferPointer { agentao_shell_run_output(raw, stream.rawValue, $0.baseAddress, $0.count, nil) }
        }
    }
    func take() -> OpaquePointer? { lock.run { defer { raw = nil }; return raw } }
}


private final class ShellBox: Sendable {
    let executor: any ShellExecutor
    init(_ executor: any ShellExecutor) { self.executor = executor }
}

extension Agent {
    /// Runs the agent's shell commands through `executor` (nil restores the local one). Right
    /// after creation or between turns.
    public func setShellExecutor(_ executor: (any ShellExecutor)?) throws(AgentaoError) {
        guard let executor else {
            try check { agentao_agent_set_shell_executor(handle, nil, $0) }
            return
        }
        var v = agentao_shell_executor()
        v.struct_size = UInt32(MemoryLayout<agentao_shell_executor>.size)
        // The library owns the box from here: userdata_free releases it, on failure too.
        v.userdata = retainHostBox(ShellBox(executor))
        v.userdata_free = releaseHostBox
        v.dialect = 0  // AGENTAO_SHELL_DIALECT_POSIX
        v.run = { ud, req, run in
            let executor = Unmanaged<ShellBox>.fromOpaque(ud!).takeUnretainedValue().executor
            let r = req!.pointee
            let request = ShellRequest(
                command: String(cString: r.command), cwd: String(cString: r.cwd),
                environment: (0..<r.env_len).map { String(cString: r.env[$0]!) },
                inactivityTimeoutMs: r.timeout_ms)
            let handle = RunHandle(run!, token: agentao_cancel_token_child(r.cancel))
            Task {
                // The executor races the run's cancel.
                let result = await withTaskGroup(of: Result<ShellExit, any Error>?.self) { group in
                    group.addTask {
                        do {
                            return .success(try await executor.run(request) { handle.output($0, $1) })
                        } catch {
                            return .failure(error)
                        }
                    }
                    group.addTask {
                        await handle.cancelled.wait()
                        return nil
                    }
                    var answer: Result<ShellExit, any Error>?
                    for await r in group {
                        if let r { answer = r }
                        group.cancelAll()
                    }
                    return answer ?? .success(ShellExit(code: -15, cancelled: true))
                }
                guard let raw = handle.take() else { return }
                switch result {
                case .success(let exit):
                    _ = agentao_shell_run_finish(raw, exit.code, exit.timedOut, exit.cancelled, nil)
                case .failure(let error):
                    _ = agentao_shell_run_fail(raw, String(describing: error), nil)
                }
            }
        }
        try check { agentao_agent_set_shell_executor(handle, &v, $0) }
    }
}
