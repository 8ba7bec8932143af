import Foundation

// The event types are generated from the schema (HostEvents.swift); this is how a JSON event
// the library hands out becomes one.
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
