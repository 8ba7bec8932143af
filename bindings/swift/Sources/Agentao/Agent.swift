import CAgentao
import Dispatch

/// One item of a streaming turn: text deltas for display, then the outcome as the last item.
public enum StreamItem: Sendable, Equatable {
    case text(String)
    /// Boxed: the item is then a string's size, and every delta's copy into and out of the
    /// stream's queue is one reference, not the outcome's seven fields.
    indirect case outcome(TurnOutcome)
}

/// An agent: one session with its history, tools, permissions and transport.
///
/// The C agent is thread-safe (one turn at a time; a second is `.turnInProgress`), hence
/// `@unchecked Sendable`. `deinit` frees the handle: a turn still running is cancelled, and
/// the transport is released once the last turn and request using it are gone.
public final class Agent: @unchecked Sendable {
    let handle: OpaquePointer
    /// The session id (a UUID).
    public let sessionID: String

    /// Creates an agent from a config JSON document (docs/config.md). Without a transport the
    /// agent approves every tool, answers questions non-interactively and stops at the
    /// iteration limit (the reference's NullTransport).
    public init(config: String, transport: (any Transport)? = nil) throws(AgentaoError) {
        let box = TransportBox(transport)
        var vtable = box.vtable()
        var handle: OpaquePointer?
        // On failure the library has already released the box through `userdata_free`.
        try check { agentao_agent_new(config, &vtable, &handle, $0) }
        self.handle = handle!
        self.sessionID = String(cString: agentao_agent_session_id(handle))
    }

    deinit { agentao_agent_free(handle) }

    /// Runs one turn and returns its outcome. `images` are sent with the message (checked
    /// before the turn: a bad one throws `.invalidArgument` and nothing is sent);
    /// `maxIterations` overrides the config's budget.
    ///
    /// Cancelling the calling task cancels the turn at once (reason `"task-cancelled"`); it then
    /// throws `AgentaoError` with status `.cancelled` and the partial outcome. Other failures
    /// throw `AgentaoError` too (`.turnInProgress`, `.hostError`, `.timeout`, ...).
    public func run(_ message: String, images: [Image] = [], maxIterations: Int? = nil) async throws -> TurnOutcome {
        let token = CancelToken()
        return try await withTaskCancellationHandler {
            // Unsafe (unchecked) continuation: `on_done` fires exactly once for an accepted call,
            // and a refused call resumes it here instead; the checked one costs an allocation and
            // atomics a turn.
            try await withUnsafeThrowingContinuation { (cont: UnsafeContinuation<TurnOutcome, any Error>) in
                let box = Unmanaged.passRetained(RunBox(cont))
                var err: OpaquePointer?
                let status = withCImages(images) { list, count in
                    // The handoff form: `on_done` only reads the outcome and resumes the
                    // continuation (which enqueues the task, never runs it here), so it may run
                    // where the turn ended; `agentao_agent_run_images` would first hand it to a
                    // blocking thread, a thread wake-up a turn.
                    agentao_agent_run_handoff(
                        handle, message, list, count, budget(maxIterations), token.raw,
                        { ud, status, outcome, err in
                            let box = Unmanaged<RunBox>.fromOpaque(ud!).takeRetainedValue()
                            box.cont.resume(with: turnResult(status, outcome, err))
                        },
                        box.toOpaque(), &err)
                }
                if status != Status.ok.rawValue {
                    // `on_done` does not fire for a call that was not accepted.
                    box.release()
                    cont.resume(throwing: AgentaoError(status: status, owned: err))
                }
            }
        } onCancel: {
            token.cancel(reason: "task-cancelled")
        }
    }

    /// Runs one turn as a stream: `.text` deltas, then `.outcome` as the last item. A turn that
    /// ends cancelled or in error throws `AgentaoError` after its deltas. Ending the iteration
    /// early (or cancelling the consuming task) cancels the turn (reason `"stream-ended"`).
    /// The stream keeps the agent alive until the turn ends. `images` as for `run`.
    public func stream(_ message: String, images: [Image] = [], maxIterations: Int? = nil) -> StreamedTurn {
        let turn = TurnStream(token: CancelToken())
        let box = Unmanaged.passRetained(StreamBox(turn, agent: self))
        var err: OpaquePointer?
        let status = withCImages(images) { list, count in
            agentao_agent_stream_images(
                handle, message, list, count, budget(maxIterations), turn.token.raw,
                { ud, delta in
                    let box = Unmanaged<StreamBox>.fromOpaque(ud!).takeUnretainedValue()
                    if let text = deltaText(delta!) { box.turn.push(.text(text)) }
                },
                { ud, status, outcome, err in
                    let box = Unmanaged<StreamBox>.fromOpaque(ud!).takeRetainedValue()
                    box.turn.finish(turnResult(status, outcome, err))
                },
                box.toOpaque(), &err)
        }
        if status != Status.ok.rawValue {
            // No turn: the sequence throws the refusal on its first step.
            box.release()
            turn.finish(.failure(AgentaoError(status: status, owned: err)))
        }
        // The sequence holds the reader; dropping it before the turn ended cancels the turn.
        return StreamedTurn(TurnStreamReader(turn))
    }

    /// The agent's host events (tool lifecycle, permission decisions, sub-agent lineage)
    /// published from now on, in order: the reference's `agent.events()` on the C pull stream.
    /// `session` keeps only that session's events (nil: all, relayed sub-agents' included).
    ///
    /// The library holds 64 unread events; past that the turn waits for the reader, so nothing
    /// is lost and memory stays bounded. Read while the turn runs, or drop the sequence: an
    /// unread, undropped sequence holds the turn once 64 events wait. A cancelled turn never
    /// waits: what finds no room is dropped, and the sequence ends by throwing
    /// `AgentaoError` with `.eventsDropped` (the count in its message) where the gap is.
    ///
    /// The sequence ends when the agent is freed (after the events it holds), when the
    /// consuming task is cancelled, or with the error; dropping it releases its queue. A second live sequence with
    /// the same `session` throws `.streamSubscribe` on its first step.
    public func events(session: String? = nil) -> AsyncThrowingStream<HostEvent, any Error> {
        var raw: OpaquePointer?
        var err: OpaquePointer?
        let status: Int32
        if let session {
            status = session.withCString { agentao_agent_host_events_open(handle, $0, &raw, &err) }
        } else {
            status = agentao_agent_host_events_open(handle, nil, &raw, &err)
        }
        guard status == Status.ok.rawValue, let raw else {
            let failure = AgentaoError(status: status, owned: err)
            return AsyncThrowingStream { $0.finish(throwing: failure) }
        }
        let reader = HostEventReader(raw)
        return AsyncThrowingStream(unfolding: { try await reader.next() })
    }

    /// The last turn's outcome (nil before the first turn).
    public func lastTurn() throws(AgentaoError) -> TurnOutcome? {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_last_turn(handle, &out, $0) }
        guard let json = takeString(out), json != "null" else { return nil }
        return try? decodeJSON(TurnOutcome.self, json)
    }

    /// The conversation history: a JSON array of chat messages.
    public func historyJSON() throws(AgentaoError) -> String {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_history(handle, &out, $0) }
        return takeString(out) ?? "[]"
    }

    /// Replaces the history (a JSON array of chat messages), between turns only.
    public func setHistoryJSON(_ json: String) throws(AgentaoError) {
        try check { agentao_agent_set_history(handle, json, $0) }
    }
}

/// The library version, e.g. `"0.1.0"`.
public var agentaoVersion: String { String(cString: agentao_version()) }

private struct TextDelta: Decodable { let text: String }

/// A delta's text. The library writes `{"type":"text_delta","text":"…"}`, read in place; any
/// other shape goes to `JSONDecoder`, as every delta did before.
private func deltaText(_ json: UnsafePointer<CChar>) -> String? {
    withCStringBytes(json) { bytes -> String? in
        var reader = JSONReader(bytes)
        reader.expectLiteral(#"{"type":"text_delta","text":"#)
        let text = reader.string()
        reader.expect(UInt8(ascii: "}"))
        if let text, reader.finished() { return text }
        return try? decodeJSON(TextDelta.self, String(decoding: bytes, as: UTF8.self)).text
    }
}

private func budget(_ maxIterations: Int?) -> Int32 {
    guard let m = maxIterations else { return -1 }
    return Int32(clamping: m)
}

/// The result of a finished turn from its `on_done` arguments (borrowed for the call).
private func turnResult(_ status: Int32, _ outcome: UnsafePointer<CChar>?, _ err: OpaquePointer?)
    -> Result<TurnOutcome, any Error>
{
    let o = TurnOutcome(json: outcome)
    if status == Status.ok.rawValue, let o { return .success(o) }
    return .failure(AgentaoError(status: status, borrowed: err, outcome: o))
}

private final class RunBox: Sendable {
    let cont: UnsafeContinuation<TurnOutcome, any Error>
    init(_ cont: UnsafeContinuation<TurnOutcome, any Error>) { self.cont = cont }
}

/// A stream's userdata: the queue its deltas go to, and the agent, kept alive until the turn
/// ends.
private final class StreamBox: Sendable {
    let turn: TurnStream
    let agent: Agent
    init(_ turn: TurnStream, agent: Agent) {
        self.turn = turn
        self.agent = agent
    }
}

/// The reading end of a C host-event stream. `next` takes a queued event at once, and otherwise
/// waits in the library on a Dispatch thread; a cancel of the consuming task closes the C stream
/// (`agentao_host_event_stream_close`), which wakes that wait, so nothing polls. The stream is
/// freed when the sequence ends or is dropped.
private final class HostEventReader: @unchecked Sendable {
    /// Serializes the waits in the library with the handle's release.
    private let lock = Mutex()
    /// Guarded by `lock`; nil once freed.
    private var stream: OpaquePointer?
    /// Used under `lock`: the strings the stream's recent events repeat (see `RecentStrings`).
    private let recent = RecentStrings()
    /// Guards `raw` and `cancelled`: the handle as a cancel sees it, so a cancel wakes a wait
    /// without taking `lock`, and never touches a freed handle.
    private let wakeLock = Mutex()
    private var raw: OpaquePointer?
    private var cancelled = false

    init(_ stream: OpaquePointer) {
        self.stream = stream
        raw = stream
    }

    deinit { lock.run { freeLocked() } }

    private enum Poll: Sendable {
        case event(HostEvent)
        case nothingYet
        case end
        case failed(AgentaoError)
    }

    /// The consuming task was cancelled: a wait in the library returns `.closed` at once.
    private func wake() {
        wakeLock.run {
            cancelled = true
            if let raw { agentao_host_event_stream_close(raw) }
        }
    }

    /// Frees the C stream; under `lock`.
    private func freeLocked() {
        guard let s = stream else { return }
        wakeLock.run { raw = nil }
        agentao_host_event_stream_free(s)
        stream = nil
    }

    /// `timeoutMs` 0: only what is queued already, without waiting.
    private func poll(timeoutMs: UInt32 = UInt32.max) -> Poll {
        lock.run { pollLocked(timeoutMs: timeoutMs) }
    }

    private func pollLocked(timeoutMs: UInt32) -> Poll {
        guard let s = stream, !wakeLock.run({ cancelled }) else {
            freeLocked()
            return .end
        }
        var json: UnsafeMutablePointer<CChar>?
        var err: OpaquePointer?
        let status = agentao_host_event_stream_next(s, timeoutMs, &json, &err)
        switch status {
        case Status.ok.rawValue:
            guard let json else { return .event(HostEvent.decodeWithFoundation("")) }
            defer { agentao_string_free(json) }
            return .event(withCStringBytes(json) { HostEvent.decode(utf8: $0, recent: recent) })
        case Status.timeout.rawValue:
            agentao_error_free(err)
            return .nothingYet
        case Status.closed.rawValue:
            agentao_error_free(err)
            freeLocked()
            return .end
        default:
            // The sequence ends here: release the queue at once, or a turn would wait for a
            // reader that is gone.
            freeLocked()
            return .failed(AgentaoError(status: status, owned: err))
        }
    }

    /// Polls until there is an item. Blocks: run on a Dispatch thread.
    private func waitForItem() -> Poll {
        while true {
            let p = poll()
            if case .nothingYet = p { continue }
            return p
        }
    }

    func next() async throws -> HostEvent? {
        // An event already queued (a turn publishes them in runs) is taken on the calling task:
        // a hop to a Dispatch thread and back would cost more than the rest of the event.
        if !Task.isCancelled {
            switch poll(timeoutMs: 0) {
            case .event(let e): return e
            case .failed(let e): throw e
            case .end: return nil
            case .nothingYet: break
            }
        }
        // The Dispatch thread borrows the reader without a reference of its own: a reference
        // released there after the consumer has resumed would keep the stream open (and a new
        // sequence with the same filter refused) for a moment after this one is dropped.
        let borrowed = Unmanaged.passUnretained(self)
        let item = await withTaskCancellationHandler {
            await withCheckedContinuation { (cont: CheckedContinuation<Poll, Never>) in
                DispatchQueue.global().async {
                    cont.resume(returning: borrowed._withUnsafeGuaranteedRef { $0.waitForItem() })
                }
            }
        } onCancel: {
            wake()
        }
        withExtendedLifetime(self) {}
        switch item {
        case .event(let e): return e
        case .failed(let e): throw e
        case .end, .nothingYet: return nil
        }
    }
}
