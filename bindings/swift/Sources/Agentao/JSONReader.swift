#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Reads the JSON documents the library hands out (a stream's delta, an event's envelope, a host
/// event, a turn's outcome) straight from their bytes, without Foundation's `JSONDecoder`, whose
/// set-up and boxing cost a few microseconds a document: most of what a delta, an `emit`, a host
/// event and a turn cost in Swift.
///
/// It reads the shapes the library writes, strictly. Anything it is not sure `JSONDecoder`
/// reads the same way (a syntax error, a repeated key, a key that `.convertFromSnakeCase` could
/// turn into a field's name, a number with a fraction where an integer is wanted, a lone
/// surrogate, nesting past 512) sets `failed`, and the caller decodes the document again with
/// `JSONDecoder`, whose answer is then the one given. So a document it accepts decodes as
/// `JSONDecoder` decodes it, and what it refuses is left to `JSONDecoder`.
///
/// The bytes are borrowed: a reader lives inside the call that lent them.
struct JSONReader {
    /// `bytes` are exactly `text` (ASCII).
    static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        let p = text.utf8Start
        for k in 0..<bytes.count where bytes[k] != p[k] { return false }
        return true
    }

    /// The value of a leading `{"<key>":"` member when it is a plain string (no escape, ASCII),
    /// as the library writes a document's discriminator first; nil for any other shape.
    static func leadingString(_ bytes: UnsafeBufferPointer<UInt8>, key prefix: StaticString) -> UnsafeBufferPointer<UInt8>? {
        let n = prefix.utf8CodeUnitCount
        guard bytes.count > n, equal(UnsafeBufferPointer(rebasing: bytes[0..<n]), prefix) else { return nil }
        var i = n
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\\") || c >= 0x80 || c < 0x20 { return nil }
            if c == UInt8(ascii: "\"") { return UnsafeBufferPointer(rebasing: bytes[n..<i]) }
            i += 1
        }
        return nil
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    /// Where a plain string that repeats one of a recent document is shared from (nil: none).
    private let recent: RecentStrings?
    private(set) var pos = 0
    /// Sticky: once set, every read returns at once.
    private(set) var failed = false
    /// Right after an object's `{` (no member read yet).
    private var first = false
    /// The current member's key, without its quotes (plain ASCII: other keys fail).
    private var keyStart = 0
    private var keyEnd = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>, recent: RecentStrings? = nil) {
        self.bytes = bytes
        self.recent = recent
    }

    mutating func fail() { failed = true }

    /// True at the end of the document (white space aside) with nothing failed.
    mutating func finished() -> Bool {
        ws()
        return !failed && pos == bytes.count
    }

    private mutating func ws() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    /// The next byte after white space, 0 at the end.
    private mutating func peek() -> UInt8 {
        ws()
        return pos < bytes.count ? bytes[pos] : 0
    }

    /// Steps over `byte` if it is next; fails otherwise.
    mutating func expect(_ byte: UInt8) {
        if failed { return }
        if peek() == byte { pos += 1 } else { fail() }
    }

    /// Steps over `text` (ASCII) if the bytes from `pos` are exactly it; fails otherwise.
    mutating func expectLiteral(_ text: StaticString) {
        if failed { return }
        let n = text.utf8CodeUnitCount
        guard bytes.count - pos >= n, memEqual(pos, text) else { return fail() }
        pos += n
    }

    // MARK: objects

    /// Reads an object's `{`; false (and failed) for anything else.
    mutating func object() -> Bool {
        if failed { return false }
        guard peek() == UInt8(ascii: "{") else {
            fail()
            return false
        }
        pos += 1
        first = true
        return true
    }

    /// Reads the next member's key and its `:`; false at the object's `}` (consumed) or on
    /// failure. An escaped or non-ASCII key fails: `JSONDecoder`'s own matching decides.
    mutating func member() -> Bool {
        if failed { return false }
        var c = peek()
        if c == UInt8(ascii: "}") {
            pos += 1
            first = false
            return false
        }
        if !first {
            guard c == UInt8(ascii: ",") else {
                fail()
                return false
            }
            pos += 1
            c = peek()
        }
        first = false
        guard c == UInt8(ascii: "\"") else {
            fail()
            return false
        }
        let (start, end, plain) = stringToken()
        guard !failed, plain else {
            fail()
            return false
        }
        keyStart = start
        keyEnd = end
        expect(UInt8(ascii: ":"))
        return !failed
    }

    /// The current key is exactly `name`.
    func keyIs(_ name: StaticString) -> Bool {
        keyEnd - keyStart == name.utf8CodeUnitCount && memEqual(keyStart, name)
    }

    /// Marks field `bit` read; a repeated key fails (which occurrence `JSONDecoder` keeps is
    /// its business).
    mutating func once(_ seen: inout UInt64, _ bit: Int) -> Bool {
        let mask: UInt64 = 1 << UInt64(bit)
        if seen & mask != 0 {
            fail()
            return false
        }
        seen |= mask
        return true
    }

    /// Skips the value of a key no field has. `.convertFromSnakeCase` could still turn it into
    /// a field's name (`sessionId`, `SESSION_ID`, `session__id` all become `sessionId`): a key
    /// equal to one of `folded` (the fields' names without `_`, lower case) once folded the
    /// same way fails instead.
    mutating func unknownKey(folded: [StaticString]) {
        for name in folded where keyFolds(to: name) {
            fail()
            return
        }
        skip()
    }

    private func keyFolds(to name: StaticString) -> Bool {
        let n = name.utf8CodeUnitCount
        var j = 0
        for i in keyStart..<keyEnd {
            var c = bytes[i]
            if c == UInt8(ascii: "_") { continue }
            if c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") { c += 0x20 }
            guard j < n, c == name.utf8Start[j] else { return false }
            j += 1
        }
        return j == n
    }

    // MARK: values

    /// Reads a null if one is next.
    mutating func null() -> Bool {
        if failed || peek() != UInt8(ascii: "n") { return false }
        expectLiteral("null")
        return !failed
    }

    mutating func string() -> String? {
        if failed { return nil }
        guard peek() == UInt8(ascii: "\"") else {
            fail()
            return nil
        }
        let (start, end, plain) = stringToken()
        if failed { return nil }
        let body = UnsafeBufferPointer(rebasing: bytes[start..<end])
        if plain {
            if let recent { return recent.string(ascii: body) }
            return String(decoding: body, as: UTF8.self)
        }
        return unescaped(body)
    }

    /// A string, or nil for null (or a failure).
    mutating func optionalString() -> String? {
        null() ? nil : string()
    }

    mutating func bool() -> Bool? {
        if failed { return nil }
        switch peek() {
        case UInt8(ascii: "t"):
            expectLiteral("true")
            return failed ? nil : true
        case UInt8(ascii: "f"):
            expectLiteral("false")
            return failed ? nil : false
        default:
            fail()
            return nil
        }
    }

    /// An integer that fits an `Int`; a fraction or an exponent fails (as reading an `Int` from
    /// `1.0` may or may not in `JSONDecoder`, which then decides).
    mutating func int() -> Int? {
        if failed { return nil }
        let c = peek()
        guard c == UInt8(ascii: "-") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) else {
            fail()
            return nil
        }
        let (start, end, integral) = numberToken()
        guard !failed, integral else {
            fail()
            return nil
        }
        var i = start
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var n = 0
        while i < end {
            let (times, o1) = n.multipliedReportingOverflow(by: 10)
            let digit = Int(bytes[i] - UInt8(ascii: "0"))
            let (sum, o2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !o1, !o2 else {
                fail()
                return nil
            }
            n = sum
            i += 1
        }
        return n
    }

    mutating func optionalInt() -> Int? {
        null() ? nil : int()
    }

    /// An array of strings; a null element fails.
    mutating func stringList() -> [String]? {
        if failed { return nil }
        guard peek() == UInt8(ascii: "[") else {
            fail()
            return nil
        }
        pos += 1
        var list: [String] = []
        if peek() == UInt8(ascii: "]") {
            pos += 1
            return list
        }
        while !failed {
            guard let s = string() else { return nil }
            list.append(s)
            switch peek() {
            case UInt8(ascii: ","): pos += 1
            case UInt8(ascii: "]"):
                pos += 1
                return list
            default: fail()
            }
        }
        return nil
    }

    mutating func optionalStringList() -> [String]? {
        null() ? nil : stringList()
    }

    /// A JSON object as written (its keys are not converted).
    mutating func jsonObject() -> [String: JSONValue]? {
        guard case .object(let o)? = value(depth: 0) else {
            fail()
            return nil
        }
        return o
    }

    mutating func optionalJSONObject() -> [String: JSONValue]? {
        null() ? nil : jsonObject()
    }

    /// Nesting past this fails (and goes to `JSONDecoder`).
    private static let maxDepth = 512

    /// Any value, as `JSONValue.init(from:)` reads it.
    private mutating func value(depth: Int) -> JSONValue? {
        if failed { return nil }
        guard depth <= Self.maxDepth else {
            fail()
            return nil
        }
        switch peek() {
        case UInt8(ascii: "\""): return string().map { .string($0) }
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return bool().map { .bool($0) }
        case UInt8(ascii: "n"): return null() ? .null : nil
        case UInt8(ascii: "["):
            pos += 1
            var list: [JSONValue] = []
            if peek() == UInt8(ascii: "]") {
                pos += 1
                return .array(list)
            }
            while !failed {
                guard let v = value(depth: depth + 1) else { return nil }
                list.append(v)
                switch peek() {
                case UInt8(ascii: ","): pos += 1
                case UInt8(ascii: "]"):
                    pos += 1
                    return .array(list)
                default: fail()
                }
            }
            return nil
        case UInt8(ascii: "{"):
            pos += 1
            var object: [String: JSONValue] = [:]
            if peek() == UInt8(ascii: "}") {
                pos += 1
                return .object(object)
            }
            while !failed {
                guard let key = string() else { return nil }
                expect(UInt8(ascii: ":"))
                guard let v = value(depth: depth + 1) else { return nil }
                guard object.updateValue(v, forKey: key) == nil else {
                    fail()
                    return nil
                }
                switch peek() {
                case UInt8(ascii: ","): pos += 1
                case UInt8(ascii: "}"):
                    pos += 1
                    return .object(object)
                default: fail()
                }
            }
            return nil
        default:
            let (start, end, _) = numberToken()
            if failed { return nil }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            guard let d = Double(text), d.isFinite else {
                fail()
                return nil
            }
            return .number(d)
        }
    }

    /// Skips one value of any kind, checking it as `value` would, without building it.
    mutating func skip() {
        skip(depth: 0)
    }

    private mutating func skip(depth: Int) {
        if failed { return }
        guard depth <= Self.maxDepth else { return fail() }
        switch peek() {
        case UInt8(ascii: "\""):
            let (start, end, plain) = stringToken()
            // Escapes are checked by decoding them (rare in what the library writes).
            if !failed && !plain { _ = unescaped(UnsafeBufferPointer(rebasing: bytes[start..<end])) }
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = bool()
        case UInt8(ascii: "n"): if !null() { fail() }
        case UInt8(ascii: "["):
            pos += 1
            if peek() == UInt8(ascii: "]") {
                pos += 1
                return
            }
            while !failed {
                skip(depth: depth + 1)
                switch peek() {
                case UInt8(ascii: ","): pos += 1
                case UInt8(ascii: "]"):
                    pos += 1
                    return
                default: fail()
                }
            }
        case UInt8(ascii: "{"):
            // Objects are built: a repeated key must stop the reader here as in `value`.
            _ = value(depth: depth)
        default:
            let (start, end, _) = numberToken()
            if failed { return }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            if Double(text).map({ !$0.isFinite }) ?? true { fail() }
        }
    }

    // MARK: tokens

    /// Reads a string (`pos` at its `"`): the bounds of its body, and whether it is plain (no
    /// escape, only ASCII: its bytes are its value). A non-ASCII body must be valid UTF-8, as
    /// `JSONDecoder` requires. Fails on a control character or a missing end.
    private mutating func stringToken() -> (start: Int, end: Int, plain: Bool) {
        let start = pos + 1
        var i = start
        var escaped = false
        var ascii = true
        let n = bytes.count
        // Eight bytes at a time while none of them is `"`, `\`, a control byte or non-ASCII
        // (each test is exact for "any byte of the word"; the loop below finds which).
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while i + 8 <= n {
                let w = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                let quote = w ^ (ones &* 0x22)
                let backslash = w ^ (ones &* 0x5C)
                let special =
                    ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((w &- ones &* 0x20) & ~w) | w
                if special & highs != 0 { break }
                i += 8
            }
        }
        while i < n {
            let c = bytes[i]
            // The common byte first: printable ASCII other than `"` and `\`.
            if c >= 0x20 && c < 0x80 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") {
                i += 1
                continue
            }
            if c == UInt8(ascii: "\"") {
                pos = i + 1
                if !ascii && !escaped && !validUTF8(start, i) { fail() }
                return (start, i, !escaped && ascii)
            }
            if c == UInt8(ascii: "\\") {
                escaped = true
                i += 2
                continue
            }
            if c < 0x20 { break }
            if c >= 0x80 { ascii = false }
            i += 1
        }
        fail()
        return (0, 0, false)
    }

    private func validUTF8(_ start: Int, _ end: Int) -> Bool {
        let body = UnsafeBufferPointer(rebasing: bytes[start..<end])
        // Decoding repairs invalid sequences, so the result has other bytes exactly then.
        return String(decoding: body, as: UTF8.self).utf8.elementsEqual(body)
    }

    /// A string body with escapes, decoded; nil (and failed) for a bad escape, a lone surrogate
    /// or invalid UTF-8.
    private mutating func unescaped(_ body: UnsafeBufferPointer<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(body.count)
        var i = 0
        func hex4(_ at: Int) -> UInt32? {
            guard at + 4 <= body.count else { return nil }
            var v: UInt32 = 0
            for k in at..<at + 4 {
                let c = body[k]
                let d: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
                default: return nil
                }
                v = v << 4 | UInt32(d)
            }
            return v
        }
        while i < body.count {
            let c = body[i]
            guard c == UInt8(ascii: "\\") else {
                out.append(c)
                i += 1
                continue
            }
            guard i + 1 < body.count else { break }
            let e = body[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard var v = hex4(i) else {
                    fail()
                    return nil
                }
                i += 4
                if v >= 0xD800 && v < 0xDC00 {
                    // A high surrogate needs its low one right after.
                    guard i + 1 < body.count, body[i] == UInt8(ascii: "\\"), body[i + 1] == UInt8(ascii: "u"),
                        let low = hex4(i + 2), low >= 0xDC00 && low < 0xE000
                    else {
                        fail()
                        return nil
                    }
                    i += 6
                    v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(v) else {
                    fail()
                    return nil
                }
                out.append(contentsOf: UTF8.encode(scalar)!)
            default:
                fail()
                return nil
            }
        }
        let s = String(decoding: out, as: UTF8.self)
        guard s.utf8.elementsEqual(out) else {
            fail()
            return nil
        }
        return s
    }

    /// Reads a JSON number (the whole grammar); `integral` when it has no fraction or exponent.
    private mutating func numberToken() -> (start: Int, end: Int, integral: Bool) {
        let bytes = self.bytes
        let start = pos
        var i = pos
        var integral = true
        func digits() -> Bool {
            let from = i
            while i < bytes.count && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9") { i += 1 }
            return i > from
        }
        if i < bytes.count && bytes[i] == UInt8(ascii: "-") { i += 1 }
        if i < bytes.count && bytes[i] == UInt8(ascii: "0") {
            i += 1
        } else if !digits() {
            fail()
            return (0, 0, false)
        }
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
            i += 1
            integral = false
            guard digits() else {
                fail()
                return (0, 0, false)
            }
        }
        if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            i += 1
            integral = false
            if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
            guard digits() else {
                fail()
                return (0, 0, false)
            }
        }
        pos = i
        return (start, i, integral)
    }

    private func memEqual(_ at: Int, _ text: StaticString) -> Bool {
        let n = text.utf8CodeUnitCount
        let p = text.utf8Start
        for k in 0..<n where bytes[at + k] != p[k] { return false }
        return true
    }
}

/// Runs `body` over the bytes of a NUL-terminated C string (borrowed for the call).
@inline(__always)
func withCStringBytes<T>(_ s: UnsafePointer<CChar>, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
    let count = strlen(s)
    return s.withMemoryRebound(to: UInt8.self, capacity: count) { body(UnsafeBufferPointer(start: $0, count: count)) }
}
