import CAgentao

/// The transport's userdata: passed to C retained (`Unmanaged.passRetained`) and released by
/// the vtable's `userdata_free`, which the library calls exactly once. The vtable leaves
/// `subscribe` NULL: the library delivers stream deltas itself, so streaming needs no fan-out.
/// The field is immutable, hence `@unchecked Sendable`.
final class TransportBox: @unchecked Sendable {
    let transport: (any Transport)?

    init(_ transport: (any Transport)?) {
        self.transport = transport
    }

    /// The vtable; the thunks capture nothing and find the box through `userdata`. Without a
    /// Swift transport the request slots stay NULL, so the library's own defaults answer
    /// without a hop through Swift.
    func vtable() -> agentao_transport {
        var t = agentao_transport()
        t.struct_size = UInt32(MemoryLayout<agentao_transport>.size)
        t.userdata = retainHostBox(self)
        t.userdata_free = releaseHostBox
        guard transport != nil else { return t }
        t.emit = { ud, json in
            TransportBox.from(ud).transport?.emit(AgentEvent(cString: json!))
        }
        t.confirm_tool = { ud, name, description, args, callID, reply in
            let transport = TransportBox.from(ud).transport!
            let request = ToolConfirmation(
                toolName: String(cString: name!), description: String(cString: description!),
                argumentsJSON: String(cString: args!), callID: callID.map { String(cString: $0) } ?? "")
            let reply = Reply(reply!)
            Task {
                do {
                    reply.confirm(try await transport.confirmTool(request))
                } catch {
                    reply.fail(error)
                }
            }
        }
        t.ask_user = { ud, question, hints, reply in
            let transport = TransportBox.from(ud).transport!
            let q = Question(text: String(cString: question!), hintsJSON: String(cString: hints!))
            let reply = Reply(reply!)
            Task {
                do {
                    reply.text(try await transport.askUser(q))
                } catch {
                    reply.fail(error)
                }
            }
        }
        t.on_max_iterations = { ud, count, pending, reply in
            let transport = TransportBox.from(ud).transport!
            let calls = (try? decodeJSON([MaxIterationsRequest.PendingCall].self, String(cString: pending!))) ?? []
            let request = MaxIterationsRequest(count: count, pendingCalls: calls)
            let reply = Reply(reply!)
            Task {
                do {
                    reply.json(try await transport.onMaxIterations(request).json)
                } catch {
                    reply.fail(error)
                }
            }
        }
        return t
    }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> TransportBox {
        Unmanaged<TransportBox>.fromOpaque(userdata!).takeUnretainedValue()
    }
}

/// A pending `agentao_reply`: answered exactly once, from any thread (the library allows
/// that), hence `@unchecked Sendable`. Each answer consumes the handle.
struct Reply: @unchecked Sendable {
    let raw: OpaquePointer
    init(_ raw: OpaquePointer) { self.raw = raw }

    // The statuses are ignored: a reply to a turn that was cancelled meanwhile is dropped by
    // the library, and there is no one left to tell.
    func confirm(_ c: Confirmation) { _ = agentao_reply_confirm(raw, c.rawValue, nil) }
    func text(_ s: String) { _ = agentao_reply_text(raw, s, nil) }
    func json(_ s: String) { _ = agentao_reply_json(raw, s, nil) }
    func fail(_ error: any Error) { _ = agentao_reply_fail(raw, String(describing: error), nil) }
}
