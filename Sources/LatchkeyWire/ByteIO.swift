import LatchkeySecrets

// Bounds-checked big-endian primitives. The reader works on a borrowed buffer rather than an array so
// decoding never takes an extra reference to the caller's storage: a second reference would make the
// caller's later in-place wipe copy the buffer first and leave the original (with any password in it)
// unwiped on the heap.

/// A cursor over a borrowed payload. Every read checks the bytes remaining first and throws
/// `.truncated` instead of trapping. Only ever created inside a `withUnsafeBytes` closure and never
/// stored, so the borrowed pointer cannot outlive the buffer.
struct WireReader {
    private let buffer: UnsafeRawBufferPointer
    /// Offset of the next unread byte.
    private(set) var offset: Int

    init(_ buffer: UnsafeRawBufferPointer, offset: Int = 0) {
        self.buffer = buffer
        self.offset = offset
    }

    var remaining: Int { buffer.count - offset }
    var isAtEnd: Bool { offset == buffer.count }

    mutating func u8() throws(WireError) -> UInt8 {
        guard remaining >= 1 else { throw .truncated }
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func u16() throws(WireError) -> UInt16 {
        UInt16(try bigEndian(2))
    }

    mutating func u32() throws(WireError) -> UInt32 {
        UInt32(try bigEndian(4))
    }

    mutating func u64() throws(WireError) -> UInt64 {
        try bigEndian(8)
    }

    private mutating func bigEndian(_ width: Int) throws(WireError) -> UInt64 {
        guard remaining >= width else { throw .truncated }
        var v: UInt64 = 0
        for i in 0..<width { v = v << 8 | UInt64(buffer[offset + i]) }
        offset += width
        return v
    }

    /// Reads a u32 length and checks it against `cap` (a named limit; `.malformed`) and then against
    /// the bytes remaining (`.truncated`), so the caller may allocate `length` bytes: a claim larger than
    /// what is left fails without allocating. Fields with no cap of their own are bounded by the frame.
    mutating func length(cap: Int = .max, what: StaticString) throws(WireError) -> Int {
        let n = Int(try u32())
        guard n <= cap else { throw .malformed("\(what) length \(n) exceeds the limit of \(cap)") }
        guard n <= remaining else { throw .truncated }
        return n
    }

    /// The next `count` bytes, as a view into the borrowed buffer (valid while the buffer is).
    mutating func bytes(_ count: Int) throws(WireError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw .truncated }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])
    }

    /// A u32-length-prefixed UTF-8 string; invalid UTF-8 is an error, never repaired, so that two
    /// different byte strings can never decode to the same key.
    mutating func string(what: StaticString) throws(WireError) -> String {
        let n = try length(what: what)
        let raw = try bytes(n)
        guard let s = String(validating: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
            throw .malformed("\(what) is not valid UTF-8")
        }
        return s
    }

    /// A secret field (u32 length ≤ `Wire.maxSecretLength`, then bytes) copied straight into locked
    /// storage; no intermediate array holds the password.
    mutating func secret() throws(WireError) -> SecretBytes {
        let n = try length(cap: Wire.maxSecretLength, what: "secret")
        let raw = try bytes(n)
        let secret = SecretBytes(count: n)
        secret.withUnsafeMutableBytes { $0.copyMemory(from: raw) }
        return secret
    }

    /// Rejects trailing bytes: a payload has exactly one valid encoding, which keeps fuzzing and
    /// version checks honest (an old decoder must not silently skip fields it does not know).
    func expectEnd() throws(WireError) {
        guard isAtEnd else { throw .malformed("\(remaining) unexpected trailing bytes") }
    }
}

extension Array where Element == UInt8 {
    mutating func appendBE(_ v: UInt16) {
        append(UInt8(truncatingIfNeeded: v >> 8)); append(UInt8(truncatingIfNeeded: v))
    }

    mutating func appendBE(_ v: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }

    mutating func appendBE(_ v: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    /// A u32 length prefix. Lengths beyond u32 cannot be framed at all, so exceeding it is a programming
    /// error on the sending side (the peer's caps are far smaller anyway).
    mutating func appendLength(_ n: Int) {
        precondition(n >= 0 && n <= Int(UInt32.max), "length \(n) does not fit the wire's u32 field")
        appendBE(UInt32(n))
    }

    /// A secret field: u32 length then the bytes.
    mutating func appendSecret(_ secret: SecretBytes) {
        appendLength(secret.count)
        secret.withUnsafeBytes { append(contentsOf: $0) }
    }
}
