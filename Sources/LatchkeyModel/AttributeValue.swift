/// Apple's attribute coercion rules and the canonical byte form used for matching and keyed hashes.
///
/// Matching in securityd compares S-columns as SHA-1 of `copyData(value)`, so a string and data with the
/// same bytes match each other; numbers compare as numbers. `canonicalBytes` reproduces that equivalence:
/// two values match exactly when their canonical bytes are equal. The engine feeds the same bytes to
/// HMAC for the on-disk index, so memory matching and index matching can never disagree.
package enum AttributeValue {
    /// Coerces a caller's value to the form stored for an attribute, or fails with errSecParam.
    package static func coerce(_ value: SecValue, for spec: AttributeSpec) throws(SecError) -> SecValue {
        switch (spec.kind, value) {
        case (.blob, .string), (.blob, .data), (.blob, .int), (.blob, .double):
            return value
        case (.blob, .bool(let b)):
            return .int(b ? 1 : 0)
        case (.data, .data):
            return value
        case (.data, .string(let s)):
            return .data(Array(s.utf8))
        case (.data, .int(let n)):
            return .data(littleEndianInt32(n))
        case (.data, .bool(let b)):
            return .data(littleEndianInt32(b ? 1 : 0))
        case (.string, .string):
            return value
        case (.string, .data(let bytes)):
            guard let s = String(strictUTF8: bytes) else {
                throw .param("attribute '\(spec.name)' expects a string; the data given is not UTF-8")
            }
            return .string(s)
        case (.number, .int):
            return value
        case (.number, .bool(let b)):
            return .int(b ? 1 : 0)
        case (.number, .double(let d)):
            if d.rounded() == d, let n = Int64(exactly: d) { return .int(n) }
            return value
        case (.number, .string(let s)):
            // securityd keeps the string unless it round-trips as an integer: ptcl "htps" stays a string.
            if let n = Int64(s), String(n) == s { return .int(n) }
            return value
        case (.date, .date):
            return value
        default:
            throw .param("attribute '\(spec.name)' cannot take a \(value.typeName) value")
        }
    }

    /// The canonical bytes of a stored (coerced) attribute value, prefixed by the attribute name so that
    /// equal values of different attributes never share a hash. A number kept in a blob attribute counts
    /// as its 4-byte SInt32, as securityd's `copyData` makes it.
    package static func canonicalBytes(_ spec: AttributeSpec, _ value: SecValue) -> [UInt8] {
        var out = Array(spec.name.utf8)
        out.append(0)
        switch value {
        case .string(let s):
            out.append(0x62)  // "b": bytes
            out.append(contentsOf: s.utf8)
        case .data(let d):
            out.append(0x62)
            out.append(contentsOf: d)
        case .int(let n) where spec.kind == .blob:
            out.append(0x62)
            out.append(contentsOf: littleEndianInt32(n))
        case .int(let n):
            out.append(0x69)  // "i"
            out.append(contentsOf: bigEndian64(UInt64(bitPattern: n)))
        case .bool(let b):
            out.append(0x69)
            out.append(contentsOf: bigEndian64(b ? 1 : 0))
        case .double(let d):
            out.append(0x66)  // "f"
            out.append(contentsOf: bigEndian64(d.bitPattern))
        case .date(let t):
            out.append(0x64)  // "d"
            out.append(contentsOf: bigEndian64(t.bitPattern))
        case .array, .dictionary, .null:
            out.append(0x3F)  // never produced by coerce(); kept distinct so it matches nothing real
        }
        return out
    }

    static func littleEndianInt32(_ n: Int64) -> [UInt8] {
        let v = UInt32(bitPattern: Int32(truncatingIfNeeded: n))
        return [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)]
    }

    static func bigEndian64(_ v: UInt64) -> [UInt8] {
        (0..<8).map { UInt8((v >> (56 - 8 * UInt64($0))) & 0xFF) }
    }
}
