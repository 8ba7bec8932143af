/// The items of a streamed turn on their way from the library thread that delivers them to the
/// task that reads them (``Agent/stream(_:images:maxIterations:)``).
///
/// A queue of its own under one lock, read through `AsyncThrowingStream(unfolding:)`, rather
/// than `AsyncThrowingStream`'s continuation: each of those `yield`s and `next`s took its lock,
/// a continuation and a cancellation handler, ~0.7 µs an item. Here a delivered delta is an
/// append, a read one a removal, and the reader is woken only when it waits, so a burst of
/// deltas costs one wake-up. Unbounded, as the continuation's default buffering was.
final class TurnStream: @unchecked Sendable {
    private enum End {
        case finished
        case failed(any Error)
    }

    /// The turn's; a reader that stops early cancels the turn with it.
    let token: CancelToken
    private let lock = Mutex()
    /// Guarded by `lock`: the items not read yet are `items[head...]`.
    private var items: [StreamItem] = []
    private var head = 0
    /// Guarded by `lock`: how the turn ended, once it has (after its items).
    private var end: End?
    /// Guarded by `lock`: set once the end was given to a reader (nil, or the error once).
    private var over = false
    /// Guarded by `lock`: readers waiting for an item (one, unless a host iterates twice).
    private var waiters: [UnsafeContinuation<Void, Never>] = []
    /// Guarded by `lock`: the reading task was cancelled.
    private var cancelled = false

    init(token: CancelToken) { self.token = token }

    // MARK: the library's side

    func push(_ item: StreamItem) {
        let wake = lock.run { () -> [UnsafeContinuation<Void, Never>] in
            items.append(item)
            return takeWaitersLocked()
        }
        for w in wake { w.resume() }
    }

    /// The turn ended: `.outcome` is the last item of a turn that ended ok; a failure is thrown
    /// after the items.
    func finish(_ result: Result<TurnOutcome, any Error>) {
        let wake = lock.run { () -> [UnsafeContinuation<Void, Never>] in
            switch result {
            case .success(let outcome):
                items.append(.outcome(outcome))
                end = .finished
            case .failure(let error):
                end = .failed(error)
            }
            return takeWaitersLocked()
        }
        for w in wake { w.resume() }
    }

    /// True once the library has ended the turn.
    var ended: Bool { lock.run { end != nil } }

    private func takeWaitersLocked() -> [UnsafeContinuation<Void, Never>] {
        if waiters.isEmpty { return [] }
        defer { waiters.removeAll() }
        return waiters
    }

    // MARK: the reader's side

    private enum Step {
        case item(StreamItem)
        case wait
        case done
        case fail(any Error)
    }

    private func stepLocked() -> Step {
        if cancelled || over { return .done }
        if head < items.count {
            let item = items[head]
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            }
            return .item(item)
        }
        switch end {
        case nil: return .wait
        case .finished?:
            over = true
            return .done
        case .failed(let error)?:
            over = true
            return .fail(error)
        }
    }

    /// The next item; nil at the end, or once the reading task is cancelled (which cancels the
    /// turn).
    func next() async throws -> StreamItem? {
        while true {
            switch lock.run({ stepLocked() }) {
            case .item(let item): return item
            case .done: return nil
            case .fail(let error): throw error
            case .wait:
                await withTaskCancellationHandler {
                    await withUnsafeContinuation { (c: UnsafeContinuation<Void, Never>) in
                        let now = lock.run { () -> Bool in
                            if cancelled || head < items.count || end != nil { return true }
                            waiters.append(c)
                            return false
                        }
                        if now { c.resume() }
                    }
                } onCancel: {
                    let wake = lock.run { () -> [UnsafeContinuation<Void, Never>] in
                        cancelled = true
                        return takeWaitersLocked()
                    }
                    for w in wake { w.resume() }
                    token.cancel(reason: "stream-ended")
                }
            }
        }
    }
}

/// The reading end a stream's sequence holds: when the sequence is dropped (the host stopped
/// iterating, or never started) before the turn ended, the turn is cancelled.
final class TurnStreamReader: Sendable {
    let stream: TurnStream

    init(_ stream: TurnStream) { self.stream = stream }

    deinit {
        if !stream.ended { stream.token.cancel(reason: "stream-ended") }
    }

    func next() async throws -> StreamItem? { try await stream.next() }
}
