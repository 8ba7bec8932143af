import CAgentao

#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// An `agentao_cancel_token`. The C token is thread-safe and its cancel is idempotent and
/// non-blocking, hence `@unchecked Sendable`.
final class CancelToken: @unchecked Sendable {
    let raw: OpaquePointer

    init() { raw = agentao_cancel_token_new() }
    deinit { agentao_cancel_token_free(raw) }

    func cancel(reason: String) { agentao_cancel_token_cancel(raw, reason) }
}

/// Hears a C token's cancel through `agentao_cancel_token_watch`: the library calls back on the
/// cancelling thread, so a task awaits the cancel without polling. Call `remove()` before the
/// token is freed.
final class TokenWatch: @unchecked Sendable {
    private let lock = Mutex()
    /// Guarded by `lock`: the token was cancelled, or the task waiting was.
    private var over = false
    private var waiter: CheckedContinuation<Void, Never>?
    private var id: UInt64 = 0
    private let token: OpaquePointer

    init(_ token: OpaquePointer) {
        self.token = token
        // The library holds a reference until the watch's userdata_free, which also runs when
        // the call fails.
        let ud = Unmanaged.passRetained(self).toOpaque()
        var id: UInt64 = 0
        let status = agentao_cancel_token_watch(
            token,
            { ud, _ in Unmanaged<TokenWatch>.fromOpaque(ud!).takeUnretainedValue().end() },
            ud,
            { ud in Unmanaged<TokenWatch>.fromOpaque(ud!).release() },
            &id, nil)
        _ = status
        lock.run { self.id = id }
    }

    private func end() {
        let waiting: CheckedContinuation<Void, Never>? = lock.run {
            over = true
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume()
    }

    /// Returns once the token is cancelled, or the calling task is.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = lock.run { () -> Bool in
                    if over { return true }
                    waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            end()
        }
    }

    /// Stops watching; a watch that has not fired releases the library's reference now.
    func remove() { _ = agentao_cancel_token_unwatch(token, lock.run { id }) }
}

/// A pthread mutex: the Synchronization module's `Mutex` needs macOS 15.
final class Mutex: @unchecked Sendable {
    private var m = pthread_mutex_t()
    init() { pthread_mutex_init(&m, nil) }
    deinit { pthread_mutex_destroy(&m) }
    func run<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&m)
        defer { pthread_mutex_unlock(&m) }
        return body()
    }
}
