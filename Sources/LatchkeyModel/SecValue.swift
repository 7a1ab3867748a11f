import LatchkeySecrets

/// A value in a SecItem dictionary, in a form every layer can carry without Foundation.
///
/// The public library converts Core Foundation style values (`NSString`, `Data`, `NSNumber`, `Bool`,
/// `Date`, ...) into `SecValue` keeping the caller's type, because Apple's coercion rules depend on it
/// (a CFString and a CFData with the same bytes match each other in a blob attribute, but a CFNumber is
/// not a CFBoolean for `kSecReturnData`). The agent parses and validates these values; results come back
/// the same way.
package enum SecValue: Sendable, Equatable {
    case string(String)
    case data([UInt8])
    case int(Int64)
    case bool(Bool)
    case double(Double)
    /// A date as `CFAbsoluteTime`: seconds since 2001-01-01 00:00:00 UTC.
    case date(Double)
    case array([SecValue])
    case dictionary([String: SecValue])
    /// `kCFNull`.
    case null

    /// A short name of the value's type, for error messages (never the value itself).
    package var typeName: String {
        switch self {
        case .string: "string"
        case .data: "data"
        case .int: "number"
        case .bool: "boolean"
        case .double: "number"
        case .date: "date"
        case .array: "array"
        case .dictionary: "dictionary"
        case .null: "null"
        }
    }

    /// The string payload, if this is a string.
    package var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The bytes payload, if this is data.
    package var dataValue: [UInt8]? {
        if case .data(let d) = self { return d }
        return nil
    }

    /// The boolean payload, if this is a boolean.
    package var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
}

/// A SecItem dictionary: keys are the `kSec*` string values ("class", "acct", "m_Limit", ...).
package typealias SecDictionary = [String: SecValue]

extension SecValue {
    /// Zeroes, in place, the bytes of every `.data` value reachable from this one: item secrets that
    /// arrived in a request or leave in a response.
    ///
    /// Swift arrays are copy-on-write, so mutating a copy would allocate a fresh buffer and leave the
    /// original untouched. This writes through the existing storage instead, which every copy shares:
    /// call it only when no holder needs the bytes any more (the agent does, after a response is sent).
    package func wipeDataInPlace() {
        switch self {
        case .data(let bytes):
            bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress, raw.count > 0 else { return }
                SecretBytes.wipe(UnsafeMutableRawPointer(mutating: base), count: raw.count)
            }
        case .array(let values):
            for value in values { value.wipeDataInPlace() }
        case .dictionary(let dictionary):
            for value in dictionary.values { value.wipeDataInPlace() }
        case .string, .int, .bool, .double, .date, .null:
            break
        }
    }
}
