import CAgentao

/// The OpenTelemetry exporter's state (`agentao_agent_telemetry_status`;
/// docs/observability.md). Agents with the same telemetry settings share one exporter, and so
/// its counts.
public struct TelemetryStatus: Decodable, Sendable, Equatable {
    /// False (and the counts zero) when no exporter is configured.
    public let enabled: Bool
    /// Counts since the exporter started.
    public let exportedSpans: UInt64
    public let droppedSpans: UInt64
    public let failedExports: UInt64
    /// The last failed export's reason; nil when none failed.
    public let lastError: String?

    enum CodingKeys: String, CodingKey {
        case enabled
        case exportedSpans = "exported_spans"
        case droppedSpans = "dropped_spans"
        case failedExports = "failed_exports"
        case lastError = "last_error"
    }
}

extension Agent {
    /// Makes every later turn a child of the host's span: `traceparent` is a W3C `traceparent`
    /// header value (`00-<32 hex>-<16 hex>-<2 hex>`), `tracestate` its `tracestate`. nil clears
    /// it (each turn then starts a trace of its own). A malformed value throws
    /// `.invalidArgument` and changes nothing. Any thread, also from a transport callback.
    public func setTraceparent(_ traceparent: String?, tracestate: String? = nil) throws(AgentaoError) {
        try setTraceparent(traceparent, tracestate, nextTurnOnly: false)
    }

    /// As `setTraceparent`, for the next turn only: it wins over the agent's once, then later
    /// turns go back to the agent's. nil withdraws a value set for the next turn.
    public func setTurnTraceparent(_ traceparent: String?, tracestate: String? = nil) throws(AgentaoError) {
        try setTraceparent(traceparent, tracestate, nextTurnOnly: true)
    }

    /// The trace id (32 lowercase hex digits) of the turn that runs (called from one of its
    /// callbacks, e.g. `emit`), else of the last turn; empty before the first turn or when no
    /// exporter is configured (`agentao_agent_trace_id`).
    public func traceID() throws(AgentaoError) -> String {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_trace_id(handle, &out, $0) }
        return takeString(out) ?? ""
    }

    /// The exporter's counters (`agentao_agent_telemetry_status`).
    public func telemetryStatus() throws(AgentaoError) -> TelemetryStatus {
        var out: UnsafeMutablePointer<CChar>?
        try check { agentao_agent_telemetry_status(handle, &out, $0) }
        do {
            return try decodeJSON(TelemetryStatus.self, takeString(out) ?? "")
        } catch {
            throw AgentaoError(status: .internal, message: "the telemetry status does not decode: \(error)")
        }
    }

    // nil is NULL to the library: no traceparent (clear) / no tracestate.
    private func setTraceparent(_ traceparent: String?, _ tracestate: String?, nextTurnOnly: Bool) throws(AgentaoError) {
        func set(_ tp: UnsafePointer<CChar>?, _ ts: UnsafePointer<CChar>?, _ err: UnsafeMutablePointer<OpaquePointer?>) -> Int32 {
            nextTurnOnly
                ? agentao_agent_set_turn_traceparent(handle, tp, ts, err)
                : agentao_agent_set_traceparent(handle, tp, ts, err)
        }
        func withState(_ tp: UnsafePointer<CChar>?, _ err: UnsafeMutablePointer<OpaquePointer?>) -> Int32 {
            guard let tracestate else { return set(tp, nil, err) }
            return tracestate.withCString { set(tp, $0, err) }
        }
        try check { err in
            guard let traceparent else { return withState(nil, err) }
            return traceparent.withCString { withState($0, err) }
        }
    }
}
