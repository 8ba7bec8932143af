import CAgentao

/// The id of a host-event observer (``Agent/addHostEventObserver(_:)``).
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

extension Agent {
    /// Adds a host-event observer (`agentao_agent_add_host_event_observer`): `observer` runs
    /// for every host event of this agent (tool lifecycle, permission decisions, sub-agent
    /// lineage), inline on a library thread, in order, never concurrently with another observer
    /// call of this agent. The turn waits for it, so it must return quickly (hand slow work to
    /// a task). An observer added before `run` sees every event of the turn.
    ///
    /// This is the cheap way to the events: no queue, no hop between threads, the event
    /// decoded from the library's buffer. ``events(session:)`` is the pull form, for a task
    /// that awaits them.
    ///
    /// The observer is released when it is removed or the agent is freed.
    @discardableResult
    public func addHostEventObserver(_ observer: @escaping @Sendable (HostEvent) -> Void) throws(AgentaoError)
        -> HostEventObserverID
    {
        let ud = retainHostBox(ObserverBox(observer))
        var id: UInt64 = 0
        // On failure the library has already released the box through `userdata_free`.
        try check {
            agentao_agent_add_host_event_observer(
                handle,
                { ud, json in
                    guard let json else { return }
                    let box = Unmanaged<ObserverBox>.fromOpaque(ud!).takeUnretainedValue()
                    box.observer(withCStringBytes(json) { HostEvent.decode(utf8: $0, recent: box.recent) })
                },
                ud, releaseHostBox, &id, $0)
        }
        return HostEventObserverID(rawValue: id)
    }

    /// Removes an observer; true when it was registered. Idempotent.
    @discardableResult
    public func removeHostEventObserver(_ id: HostEventObserverID) -> Bool {
        agentao_agent_remove_host_event_observer(handle, id.rawValue)
    }
}
