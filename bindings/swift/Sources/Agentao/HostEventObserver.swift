import CAgentao

/// The id of a host-event observer, typed (``Agent/addHostEventObserver(_:)``) or of the JSON
/// (``Agent/addHostEventJSONObserver(_:)``): both kinds share the library's ids and are removed by
/// ``Agent/removeHostEventObserver(_:)``.
public struct HostEventObserverID: Hashable, Sendable {
    public let rawValue: UInt64
}

/// The observer's userdata: passed to C retained (``retainHostBox``), released by the library's
/// `userdata_free` exactly once (when the observer is removed, the agent is gone, or the
/// registration fails).
private final class ObserverBox: Sendable {
    let observer: @Sendable (HostEvent) -> Void
    /// The strings this observer's recent events repeat (ids, timestamps): used only inside
    /// the observer's calls, which the library never makes two at once.
    let recent = RecentStrings()
    init(_ observer: @escaping @Sendable (HostEvent) -> Void) { self.observer = observer }
}

/// The JSON observer's userdata, owned as ``ObserverBox`` is.
private final class JSONObserverBox: Sendable {
    let observer: @Sendable (String) -> Void
    init(_ observer: @escaping @Sendable (String) -> Void) { self.observer = observer }
}

extension Agent {
    /// Adds a host-event observer (`agentao_agent_add_host_event_observer`): `observer` runs
    /// for every host event of this agent (tool lifecycle, permission decisions, sub-agent
    /// lineage), inline on a library thread, in order, never concurrently with another observer
    /// call of this agent. The turn waits for it, so it must return quickly (hand slow work to
    /// a task). An observer added before `run` sees every event of the turn.
    ///
    /// This is the cheap way to the events: no queue, no hop between threads, the event
    /// decoded from the library's buffer. ``events(session:)`` is the pull form, for a task
    /// that awaits them; ``addHostEventJSONObserver(_:)`` hands the events' JSON undecoded, for
    /// a host that only forwards them.
    ///
    /// The observer is released when it is removed or the agent is freed.
    @discardableResult
    public func addHostEventObserver(_ observer: @escaping @Sendable (HostEvent) -> Void) throws(AgentaoError)
        -> HostEventObserverID
    {
        try addObserver(ObserverBox(observer)) { ud, json in
            guard let json else { return }
            let box = Unmanaged<ObserverBox>.fromOpaque(ud!).takeUnretainedValue()
            box.observer(withCStringBytes(json) { HostEvent.decode(utf8: $0, recent: box.recent) })
        }
    }

    /// Adds an observer of the host events' JSON (`agentao_agent_add_host_event_observer`, as C
    /// and C++ hand it): `observer` gets each event of this agent as the library wrote it,
    /// `{"event_type":...}`, byte for byte, with no decoding. For a host that forwards events (to
    /// a log, a socket, another process) and has no use for ``HostEvent``; one that reads their
    /// fields wants ``addHostEventObserver(_:)``, whose decode costs more than this copy.
    ///
    /// The `String` is the closure's own: a copy of the library's bytes made for the call, which
    /// the closure may keep or send anywhere (the library's text is valid only during the call).
    ///
    /// The rules of ``addHostEventObserver(_:)``: inline on a library thread, in order, never
    /// concurrently with another observer call of this agent; the turn waits for it, so it must
    /// return quickly. The closure cannot throw, so nothing crosses into C. Its id is removed by
    /// ``removeHostEventObserver(_:)``; the closure (and what it captures) is released exactly
    /// once, when it is removed or the agent is freed.
    @discardableResult
    public func addHostEventJSONObserver(_ observer: @escaping @Sendable (String) -> Void) throws(AgentaoError)
        -> HostEventObserverID
    {
        try addObserver(JSONObserverBox(observer)) { ud, json in
            guard let json else { return }
            let box = Unmanaged<JSONObserverBox>.fromOpaque(ud!).takeUnretainedValue()
            box.observer(String(cString: json))
        }
    }

    /// Registers `callback` with `box` as its userdata: retained here, released by the
    /// library's `userdata_free` exactly once (on removal, with the agent, or at once when the
    /// registration fails).
    private func addObserver(_ box: AnyObject, _ callback: agentao_event_fn) throws(AgentaoError)
        -> HostEventObserverID
    {
        let ud = retainHostBox(box)
        var id: UInt64 = 0
        try check { agentao_agent_add_host_event_observer(handle, callback, ud, releaseHostBox, &id, $0) }
        return HostEventObserverID(rawValue: id)
    }

    /// Removes an observer, typed or of the JSON; true when it was registered. Idempotent.
    @discardableResult
    public func removeHostEventObserver(_ id: HostEventObserverID) -> Bool {
        agentao_agent_remove_host_event_observer(handle, id.rawValue)
    }
}
