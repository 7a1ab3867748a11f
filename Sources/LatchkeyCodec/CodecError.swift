/// Why bytes could not be decoded as a value.
///
/// The wire protocol turns these into the `WireError` cases of the same names; the engine reports them
/// as a damaged item. Messages never quote the bytes: they may hold a password or item data.
package enum CodecError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes ran out before the value did.
    case truncated
    /// The bytes are structurally invalid (unknown tag, cap exceeded, invalid UTF-8, trailing bytes...).
    case malformed(String)

    /// A human-readable description, safe for logs.
    package var description: String {
        switch self {
        case .truncated: "truncated value"
        case .malformed(let why): "malformed value: \(why)"
        }
    }
}

/// "0x1f": tags (and the protocol's opcodes) are conventionally written in hex in the specs.
package func hexByte(_ b: UInt8) -> String {
    let digits: [Character] = Array("0123456789abcdef")
    return "0x" + String(digits[Int(b >> 4)]) + String(digits[Int(b & 0xf)])
}
