import CAgentao

/// What a path is, in a `FileSystem` answer.
public enum FileKind: Int32, Sendable {
    case other = 0
    case file = 1
    case directory = 2
}

/// One entry of a directory listing (a name, not a path).
public struct DirectoryEntry: Sendable {
    public let name: String
    public let kind: FileKind
    public let size: UInt64
    public init(name: String, kind: FileKind, size: UInt64 = 0) {
        self.name = name
        self.kind = kind
        self.size = size
    }
}

/// One descendant found by `walk` (an absolute path under the walked directory).
public struct WalkEntry: Sendable {
    public let path: String
    public let kind: FileKind
    public init(path: String, kind: FileKind) {
        self.path = path
        self.kind = kind
    }
}

/// What `stat` answers (symlinks followed).
public struct FileStatus: Sendable {
    public let size: UInt64
    /// Seconds since the epoch.
    public let modificationTime: Double
    public let kind: FileKind
    public init(size: UInt64, modificationTime: Double, kind: FileKind) {
        self.size = size
        self.modificationTime = modificationTime
        self.kind = kind
    }
}

/// A file-system failure the tools report as the OS error `errno` names; any other thrown
/// error is reported as EIO.
public struct FileSystemError: Error, Sendable {
    public let errno: Int32
    public init(errno: Int32) { self.errno = errno }
    public static let notFound = FileSystemError(errno: 2)  // ENOENT
    public static let accessDenied = FileSystemError(errno: 13)  // EACCES
    public static let isDirectory = FileSystemError(errno: 21)  // EISDIR
}

/// A host file system (`agentao_file_system`) serving every file tool. Paths are absolute and
/// already checked by the path policy. Methods run on library threads, several at once, and
/// must answer before returning.
public protocol FileSystem: Sendable {
    /// The file's bytes: at most `maxBytes` from its start (more is cut), or all of it when
    /// `maxBytes` is `UInt64.max`.
    func read(path: String, maxBytes: UInt64) throws -> [UInt8]
    /// Replaces the content atomically (appends when `append`), creating parent directories.
    func write(path: String, data: [UInt8], append: Bool) throws
    func listDirectory(path: String) throws -> [DirectoryEntry]
    /// Every descendant of `base` down to `maxDepth` levels (negative: no limit).
    func walk(base: String, maxDepth: Int32) throws -> [WalkEntry]
    /// A missing path throws `FileSystemError.notFound`.
    func stat(path: String) throws -> FileStatus
}

/// A host memory store (`agentao_memory_store`); records are JSON objects (see agentao.h).
/// Calls of one agent never overlap. A thrown error fails that operation (`save_memory` then
/// reports `Error saving memory: ...`).
public protocol MemoryStore: Sendable {
    /// Inserts the record, or replaces the live one with the same scope and key_normalized.
    func upsert(recordJSON: String) throws
    /// The live records of `scope` ("user", "project", nil for both) as a JSON array.
    func list(scope: String?) throws -> String
}

private func errnoOf(_ error: any Error) -> Int32 {
    (error as? FileSystemError)?.errno ?? 5  // EIO
}

private final class FileSystemBox: Sendable {
    let fs: any FileSystem
    init(_ fs: any FileSystem) { self.fs = fs }
    static func from(_ ud: UnsafeMutableRawPointer?) -> any FileSystem {
        Unmanaged<FileSystemBox>.fromOpaque(ud!).takeUnretainedValue().fs
    }
}

private final class MemoryBox: Sendable {
    let store: any MemoryStore
    init(_ store: any MemoryStore) { self.store = store }
    static func from(_ ud: UnsafeMutableRawPointer?) -> any MemoryStore {
        Unmanaged<MemoryBox>.fromOpaque(ud!).takeUnretainedValue().store
    }
}

extension Agent {
    /// Serves the agent's file tools from `fs` (nil restores the local disk). Right after
    /// creation or between turns (`.turnInProgress` otherwise).
    public func setFileSystem(_ fs: (any FileSystem)?) throws(AgentaoError) {
        guard let fs else {
            try check { agentao_agent_set_file_system(handle, nil, $0) }
            return
        }
        var v = agentao_file_system()
        v.struct_size = UInt32(MemoryLayout<agentao_file_system>.size)
        // The library owns the box from here: userdata_free releases it, on failure too.
        v.userdata = retainHostBox(FileSystemBox(fs))
        v.userdata_free = releaseHostBox
        v.read = { ud, path, maxBytes, out in
            do {
                var data = try FileSystemBox.from(ud).read(path: String(cString: path!), maxBytes: maxBytes)
                if maxBytes != UInt64.max && UInt64(data.count) > maxBytes { data = Array(data.prefix(Int(maxBytes))) }
                _ = data.withUnsafeBufferPointer { agentao_fs_out_set_data(out, $0.baseAddress, $0.count, nil) }
                return 0
            } catch { return errnoOf(error) }
        }
        v.write = { ud, path, data, len, append in
            do {
                let bytes = len > 0 ? Array(UnsafeBufferPointer(start: data, count: len)) : []
                try FileSystemBox.from(ud).write(path: String(cString: path!), data: bytes, append: append)
                return 0
            } catch { return errnoOf(error) }
        }
        v.list_dir = { ud, path, out in
            do {
                for e in try FileSystemBox.from(ud).listDirectory(path: String(cString: path!)) {
                    _ = agentao_fs_out_add_entry(out, e.name, e.kind.rawValue, e.size, nil)
                }
                return 0
            } catch { return errnoOf(error) }
        }
        v.walk = { ud, base, depth, out in
            do {
                for e in try FileSystemBox.from(ud).walk(base: String(cString: base!), maxDepth: depth) {
                    _ = agentao_fs_out_add_path(out, e.path, e.kind.rawValue, nil)
                }
                return 0
            } catch { return errnoOf(error) }
        }
        v.stat = { ud, path, out in
            do {
                let s = try FileSystemBox.from(ud).stat(path: String(cString: path!))
                _ = agentao_fs_out_set_stat(out, s.size, s.modificationTime, s.kind.rawValue, nil)
                return 0
            } catch { return errnoOf(error) }
        }
        try check { agentao_agent_set_file_system(handle, &v, $0) }
    }

    /// Keeps the agent's memories in `store` (nil restores a new in-memory store). Right after
    /// creation or between turns.
    public func setMemoryStore(_ store: (any MemoryStore)?) throws(AgentaoError) {
        guard let store else {
            try check { agentao_agent_set_memory_store(handle, nil, $0) }
            return
        }
        var v = agentao_memory_store()
        v.struct_size = UInt32(MemoryLayout<agentao_memory_store>.size)
        // The library owns the box from here: userdata_free releases it, on failure too.
        v.userdata = retainHostBox(MemoryBox(store))
        v.userdata_free = releaseHostBox
        v.upsert = { ud, record, answer in
            do {
                try MemoryBox.from(ud).upsert(recordJSON: String(cString: record!))
            } catch {
                _ = agentao_memory_answer_fail(answer, String(describing: error), nil)
            }
        }
        v.list = { ud, scope, answer in
            do {
                let json = try MemoryBox.from(ud).list(scope: scope.map { String(cString: $0) })
                _ = agentao_memory_answer_json(answer, json, nil)
            } catch {
                _ = agentao_memory_answer_fail(answer, String(describing: error), nil)
            }
        }
        try check { agentao_agent_set_memory_store(handle, &v, $0) }
    }
}
