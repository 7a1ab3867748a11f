import LatchkeyModel

// Bounds-checked big-endian primitives, shared by the value codec and the wire protocol (`package`:
// nothing outside latchkey builds on them). The reader works on a borrowed buffer rather than an array
// so decoding never takes an extra reference to the caller's storage: a second reference would make
// the caller's later in-place wipe copy the buffer first and leave the original (with any password or
// item data in it) unwiped on the heap.

/// A cursor over a borrowed buffer. Every read checks the bytes remaining first and throws
/// `.truncated` instead of trapping. Only ever created inside a `withUnsafeBytes` closure and never
/// stored, so the borrowed pointer cannot outlive the buffer.
package struct ByteReader {
    private let buffer: UnsafeRawBufferPointer
    /// Offset of the next unread byte.
    package private(set) var offset: Int

    package init(_ buffer: UnsafeRawBufferPointer, offset: Int = 0) {
        self.buffer = buffer
        self.offset = offset
    }

    package var remaining: Int { buffer.count - offset }
    package var isAtEnd: Bool { offset == buffer.count }

    package mutating func u8() throws(CodecError) -> UInt8 {
        guard remaining >= 1 else { throw .truncated }
        defer { offset += 1 }
        return buffer[offset]
    }

    package mutating func u16() throws(CodecError) -> UInt16 {
        UInt16(try bigEndian(2))
    }

    package mutating func u32() throws(CodecError) -> UInt32 {
        UInt32(try bigEndian(4))
    }

    package mutating func u64() throws(CodecError) -> UInt64 {
        try bigEndian(8)
    }

    private mutating func bigEndian(_ width: Int) throws(CodecError) -> UInt64 {
        guard remaining >= width else { throw .truncated }
        var v: UInt64 = 0
        for i in 0..<width { v = v << 8 | UInt64(buffer[offset + i]) }
        offset += width
        return v
    }

    /// Reads a u32 length and checks it against `cap` (a named limit; `.malformed`) and then against
    /// the bytes remaining (`.truncated`), so the caller may allocate `length` bytes: a claim larger than
    /// what is left fails without allocating. Fields with no cap of their own are bounded by the buffer.
    package mutating func length(cap: Int = .max, what: StaticString) throws(CodecError) -> Int {
        let n = Int(try u32())
        guard n <= cap else { throw .malformed("\(what) length \(n) exceeds the limit of \(cap)") }
        guard n <= remaining else { throw .truncated }
        return n
    }

    /// The next `count` bytes, as a view into the borrowed buffer (valid while the buffer is).
    package mutating func bytes(_ count: Int) throws(CodecError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw .truncated }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])
    }

    /// A u32-length-prefixed UTF-8 string; invalid UTF-8 is an error, never repaired, so that two
    /// different byte strings can never decode to the same key.
    package mutating func string(what: StaticString) throws(CodecError) -> String {
        let n = try length(what: what)
        let raw = try bytes(n)
        guard let s = String(strictUTF8: raw.assumingMemoryBound(to: UInt8.self)) else {
            throw .malformed("\(what) is not valid UTF-8")
        }
        return s
    }

    /// Rejects trailing bytes: a payload has exactly one valid encoding, which keeps fuzzing and
    /// version checks honest (an old decoder must not silently skip fields it does not know).
    package func expectEnd() throws(CodecError) {
        guard isAtEnd else { throw .malformed("\(remaining) unexpected trailing bytes") }
    }
}

extension Array where Element == UInt8 {
    package mutating func appendBE(_ v: UInt16) {
        append(UInt8(truncatingIfNeeded: v >> 8))
        append(UInt8(truncatingIfNeeded: v))
    }

    package mutating func appendBE(_ v: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }

    package mutating func appendBE(_ v: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    /// A u32 length prefix. Lengths beyond u32 cannot be encoded at all, so exceeding it is a programming
    /// error on the encoding side (every decoder's caps are far smaller anyway).
    package mutating func appendLength(_ n: Int) {
        precondition(n >= 0 && n <= Int(UInt32.max), "length \(n) does not fit a u32 field")
        appendBE(UInt32(n))
    }
}
