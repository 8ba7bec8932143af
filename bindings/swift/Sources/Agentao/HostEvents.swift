import Foundation

/// A host event (the reference's v3 wire form, docs/schema/host.events.v3.schema.json). Host
/// events never carry prompt text, arguments or tool output.
public enum HostEvent: Decodable, Sendable {
    case toolLifecycle(ToolLifecycleEvent)
    case permissionDecision(PermissionDecisionEvent)
    case subagentLifecycle(SubagentLifecycleEvent)
    /// An event this binding does not know (a newer type) or could not decode, as raw JSON.
    case unknown(eventType: String, json: String)

    // Decoded with `.convertFromSnakeCase`, as every event struct here.
    private struct Header: Decodable { let eventType: String }

    public init(from decoder: any Decoder) throws {
        switch try Header(from: decoder).eventType {
        case "tool_lifecycle": self = .toolLifecycle(try ToolLifecycleEvent(from: decoder))
        case "permission_decision": self = .permissionDecision(try PermissionDecisionEvent(from: decoder))
        case "subagent_lifecycle": self = .subagentLifecycle(try SubagentLifecycleEvent(from: decoder))
        case let other: self = .unknown(eventType: other, json: "")
        }
    }
}

/// A tool call's lifecycle: `started`, then `completed` or `failed` (a cancelled call is
/// `failed` with outcome `cancelled`).
public struct ToolLifecycleEvent: Decodable, Sendable {
    public let sessionId: String
    public let turnId: String?
    public let toolCallId: String
    public let toolName: String
    /// `started`, `completed` or `failed`.
    public let phase: String
    /// `ok`, `error`, `cancelled` on a terminal phase.
    public let outcome: String?
    public let startedAt: String
    public let completedAt: String?
    public let summary: String?
    public let errorType: String?
}

/// One permission decision (fires on every decision, `allow` included).
public struct PermissionDecisionEvent: Decodable, Sendable {
    public let sessionId: String
    public let turnId: String?
    public let toolCallId: String?
    public let toolName: String
    public let decisionId: String
    /// `allow`, `deny` or `prompt`.
    public let outcome: String
    public let mode: String
    /// The rule that decided, as written (its keys are not converted).
    public internal(set) var matchedRule: [String: JSONValue]?
    public let reason: String?
    public let loadedSources: [String]
    public let decidedAt: String
}

/// A sub-agent task's lineage: `spawned`, then `completed`, `failed` or `cancelled`.
public struct SubagentLifecycleEvent: Decodable, Sendable {
    public struct Usage: Decodable, Sendable {
        public let promptTokens: Int?
        public let completionTokens: Int?
        public let cacheReadTokens: Int?
        public let cacheCreationTokens: Int?
        public let reasoningTokens: Int?
    }

    public let sessionId: String
    public let childSessionId: String?
    public let childTaskId: String
    public let parentSessionId: String?
    public let parentTaskId: String?
    public let parentToolCallId: String?
    public let phase: String
    public let taskSummary: String?
    public let startedAt: String
    public let completedAt: String?
    public let errorType: String?
    public let usage: Usage?
}

extension HostEvent {
    static func decode(_ json: String) -> HostEvent {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        switch try? decoder.decode(HostEvent.self, from: Data(json.utf8)) {
        case .unknown(let type, _): return .unknown(eventType: type, json: json)
        case .permissionDecision(var decision)?:
            // Older Foundations apply the snake-case strategy to dictionary keys too, which
            // would rename the rule's own keys (swift-corelibs 6 does not).
            struct Rule: Decodable { let matched_rule: [String: JSONValue]? }
            decision.matchedRule = (try? JSONDecoder().decode(Rule.self, from: Data(json.utf8)))?.matched_rule
            return .permissionDecision(decision)
        case let event?: return event
        case nil:
            let type = (try? decoder.decode(Header.self, from: Data(json.utf8)))?.eventType ?? ""
            return .unknown(eventType: type, json: json)
        }
    }
}
