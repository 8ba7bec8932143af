#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// The strings a run of host events repeats (the session and turn ids in every event, a call's
/// timestamp in its decision and both lifecycle events, a reason, a summary), kept so that a
/// field with the same bytes as a recent one shares that `String` instead of allocating its
/// own: a heap allocation, a copy and a UTF-8 check, most of what reading an event cost.
/// The values are the same either way; only their storage is shared.
///
/// Only plain bodies (ASCII, no escape: `JSONReader` knows their bytes are their value) of 16 to
/// 128 bytes: shorter strings live inside the `String` (no allocation), longer ones seldom
/// repeat. Sixteen slots, direct-mapped on the length and a few bytes (ids and timestamps
/// differ at their ends), so a lookup is one comparison; a miss replaces the slot. Bounded: at
/// most 16 strings of 128 bytes.
///
/// Not thread-safe: one per reader that is never called twice at once (an observer's box: the
/// library never calls one agent's observers concurrently; a host-event stream's reader, under
/// its lock).
final class RecentStrings: @unchecked Sendable {
    private static let slotMask = 15
    private static let maxBytes = 128
    private var slots = [String?](repeating: nil, count: slotMask + 1)

    init() {}

    /// The string of `body`'s bytes, which are plain ASCII (checked by the caller).
    func string(ascii body: UnsafeBufferPointer<UInt8>) -> String {
        let n = body.count
        guard n > 15, n <= Self.maxBytes else { return String(decoding: body, as: UTF8.self) }
        let mix = n &* 31 &+ Int(body[n - 1]) &* 7 &+ Int(body[n - 2]) &* 3 &+ Int(body[n - 3]) &+ Int(body[n >> 1]) &* 5
        let slot = mix & Self.slotMask
        if let s = slots[slot], Self.same(s, body) { return s }
        let s = String(decoding: body, as: UTF8.self)
        slots[slot] = s
        return s
    }

    private static func same(_ s: String, _ body: UnsafeBufferPointer<UInt8>) -> Bool {
        let utf8 = s.utf8
        guard utf8.count == body.count else { return false }
        return utf8.withContiguousStorageIfAvailable { mine in
            memcmp(mine.baseAddress!, body.baseAddress!, body.count) == 0
        } ?? false
    }
}
