/// The items of a streamed turn (``Agent/stream(_:images:maxIterations:)``): `.text` deltas in
/// order, then `.outcome` as the last item. A turn that ends cancelled or in error throws
/// `AgentaoError` after its deltas; the sequence is over after that (`nil`).
///
/// Ending the iteration early (a `break`, or cancelling the consuming task: the next step
/// returns `nil`) or dropping the sequence unread cancels the turn (reason `"stream-ended"`).
///
/// A sequence type of the binding's own rather than `AsyncThrowingStream`: that one's `next`
/// installs a cancellation handler and takes a lock of its own for every item, about 0.3 µs, as
/// much as the rest of a delta. Here an item already queued is taken under one lock, and a
/// cancellation handler is installed only to wait.
public struct StreamedTurn: AsyncSequence, Sendable {
    public typealias Element = StreamItem
    public typealias Failure = any Error

    /// Shared by the sequence and its iterators: the last of them gone before the turn ended
    /// cancels the turn.
    let reader: TurnStreamReader

    init(_ reader: TurnStreamReader) { self.reader = reader }

    public func makeAsyncIterator() -> Iterator { Iterator(reader: reader) }

    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = StreamItem
        public typealias Failure = any Error

        let reader: TurnStreamReader
        var batch = TurnStream.Batch()

        public mutating func next() async throws -> StreamItem? {
            try await reader.stream.next(&batch, isolation: nil)
        }

        /// The step `for try await` takes: it stays on the caller's actor, no hop per item.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(any Error) -> StreamItem? {
            try await reader.stream.next(&batch, isolation: actor)
        }
    }
}

/// The items of a streamed turn on their way from the library thread that delivers them to the
/// task that reads them (``StreamedTurn``).
///
/// A queue of its own under one lock rather than `AsyncThrowingStream`'s continuation: each of
/// those `yield`s and `next`s took its lock, a continuation and a cancellation handler, ~0.7 µs
/// an item. Here a delivered delta is an append; a reader takes every queued item at once into
/// its own batch (the two arrays swapped, so neither allocates once warm) and gives them out
/// without the lock; it is woken only when it waits, so a burst of deltas costs one wake-up.
/// Unbounded, as the continuation's default buffering was.
final class TurnStream: @unchecked Sendable {
    private enum End {
        case finished
        case failed(any Error)
    }

    /// What one reader took from the queue and has not given out yet: `items[head...]`.
    struct Batch {
        var items: [StreamItem] = []
        var head = 0
    }

    /// The turn's; a reader that stops early cancels the turn with it.
    let token: CancelToken
    private let lock = Mutex()
    /// Guarded by `lock`: the items no reader has taken yet.
    private var items: [StreamItem] = []
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
        case took
        case wait
        case done
        case fail(any Error)
    }

    /// `batch` is empty: takes every queued item into it, or says why there is none.
    private func stepLocked(_ batch: inout [StreamItem]) -> Step {
        if cancelled || over { return .done }
        if !items.isEmpty {
            swap(&items, &batch)
            return .took
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

    /// The reading task was cancelled: the sequence ends (every later step gives nil) and so
    /// does the turn.
    private func readerCancelled() {
        let wake = lock.run { () -> [UnsafeContinuation<Void, Never>] in
            cancelled = true
            return takeWaitersLocked()
        }
        for w in wake { w.resume() }
        token.cancel(reason: "stream-ended")
    }

    /// The next item, from the reader's `batch` or else the queue; nil at the end, or once the
    /// reading task is cancelled (which cancels the turn). Runs on the caller's actor
    /// (`isolation`), so reading from an actor hops nowhere.
    func next(_ batch: inout Batch, isolation actor: isolated (any Actor)?) async throws -> StreamItem? {
        while true {
            // As `AsyncThrowingStream` did: a cancelled reader gets nil, queued items or not,
            // and so does every later step.
            if Task.isCancelled {
                batch = Batch()
                readerCancelled()
                return nil
            }
            if batch.head < batch.items.count {
                defer { batch.head += 1 }
                return batch.items[batch.head]
            }
            batch.items.removeAll(keepingCapacity: true)
            batch.head = 0
            switch lock.run({ stepLocked(&batch.items) }) {
            case .took: continue
            case .done: return nil
            case .fail(let error): throw error
            case .wait:
                await withTaskCancellationHandler {
                    await withUnsafeContinuation { (c: UnsafeContinuation<Void, Never>) in
                        let now = lock.run { () -> Bool in
                            if cancelled || !items.isEmpty || end != nil { return true }
                            waiters.append(c)
                            return false
                        }
                        if now { c.resume() }
                    }
                } onCancel: {
                    readerCancelled()
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
}
