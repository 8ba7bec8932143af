import Foundation

// The event types are generated from the schema (HostEvents.swift), and so are their readers
// (HostEventsDecode.swift); this is how a JSON event the library hands out becomes one.
extension HostEvent {
    /// Decodes an event's JSON (its bytes, borrowed for the call): by `JSONReader` when the
    /// event is of a known type and the reader takes it, else by `JSONDecoder`, whose answer is
    /// then the one given (see `JSONReader`). `recent`: the strings of the reader's recent
    /// events, shared where this one repeats them (see `RecentStrings`).
    static func decode(utf8 bytes: UnsafeBufferPointer<UInt8>, recent: RecentStrings? = nil) -> HostEvent {
        read(utf8: bytes, recent: recent) ?? decodeWithFoundation(String(decoding: bytes, as: UTF8.self))
    }

    /// The event as `JSONReader` reads it; nil when it leaves the event to `JSONDecoder` (a type
    /// this binding does not know, or a shape the reader does not take).
    static func read(utf8 bytes: UnsafeBufferPointer<UInt8>, recent: RecentStrings? = nil) -> HostEvent? {
        guard let type = JSONReader.leadingString(bytes, key: #"{"event_type":""#) else { return nil }
        var reader = JSONReader(bytes, recent: recent)
        guard let event = read(eventType: type, &reader), reader.finished() else { return nil }
        return event
    }

    /// The full decode, with `JSONDecoder`: every shape it accepts.
    static func decodeWithFoundation(_ json: String) -> HostEvent {
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
