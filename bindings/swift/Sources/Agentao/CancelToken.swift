import CAgentao

/// An `agentao_cancel_token`. The C token is thread-safe and its cancel is idempotent and
/// non-blocking, hence `@unchecked Sendable`.
final class CancelToken: @unchecked Sendable {
    let raw: OpaquePointer

    init() { raw = agentao_cancel_token_new() }
    deinit { agentao_cancel_token_free(raw) }

    func cancel(reason: String) { agentao_cancel_token_cancel(raw, reason) }
}
