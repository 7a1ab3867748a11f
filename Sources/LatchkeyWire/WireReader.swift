import LatchkeyCodec
import LatchkeyModel
import LatchkeySecrets

/// The codec's `ByteReader` as the protocol reads payloads: its failures become `WireError`s here, in
/// one place, and it adds the protocol's own fields (values, secrets).
///
/// Like `ByteReader`, only ever created inside a `withUnsafeBytes` closure and never stored.
struct WireReader {
    private var reader: ByteReader

    init(_ buffer: UnsafeRawBufferPointer) {
        reader = ByteReader(buffer)
    }

    mutating func u8() throws(WireError) -> UInt8 { try read { r throws(CodecError) in try r.u8() } }
    mutating func u16() throws(WireError) -> UInt16 { try read { r throws(CodecError) in try r.u16() } }
    mutating func u32() throws(WireError) -> UInt32 { try read { r throws(CodecError) in try r.u32() } }

    /// The next `count` bytes, as a view into the borrowed buffer (valid while the buffer is).
    mutating func bytes(_ count: Int) throws(WireError) -> UnsafeRawBufferPointer {
        try read { r throws(CodecError) in try r.bytes(count) }
    }

    /// One value (docs/PROTOCOL.md §3).
    mutating func value() throws(WireError) -> SecValue {
        try read { r throws(CodecError) in try ValueCodec.decode(from: &r, depth: 0) }
    }

    /// A value that must be a dictionary (request bodies, options).
    mutating func dictionary() throws(WireError) -> SecDictionary {
        try read { r throws(CodecError) in try ValueCodec.decodeDictionary(from: &r) }
    }

    /// A secret field (u32 length ≤ `Wire.maxSecretLength`, then bytes) copied straight into locked
    /// storage; no intermediate array holds the password.
    mutating func secret() throws(WireError) -> SecretBytes {
        let raw = try read { r throws(CodecError) in
            try r.bytes(try r.length(cap: Wire.maxSecretLength, what: "secret"))
        }
        let secret = SecretBytes(count: raw.count)
        secret.withUnsafeMutableBytes { $0.copyMemory(from: raw) }
        return secret
    }

    /// Rejects trailing bytes: a payload has exactly one valid encoding.
    func expectEnd() throws(WireError) {
        do throws(CodecError) { try reader.expectEnd() } catch { throw WireError(error) }
    }

    private mutating func read<T>(_ body: (inout ByteReader) throws(CodecError) -> T) throws(WireError) -> T {
        do throws(CodecError) { return try body(&reader) } catch { throw WireError(error) }
    }
}

extension Array where Element == UInt8 {
    /// A secret field: u32 length then the bytes.
    mutating func appendSecret(_ secret: SecretBytes) {
        appendLength(secret.count)
        secret.withUnsafeBytes { append(contentsOf: $0) }
    }
}
