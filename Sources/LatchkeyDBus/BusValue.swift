#if canImport(Glibc)
    import Glibc
#endif

/// One D-Bus value with its type: what `BusMessage` reads and writes. Containers carry their element
/// signature so an empty array still has a type.
///
/// A dictionary is an array of dictionary entries: `a{sv}` is
/// `.array(elementType: "{sv}", [.dictEntry(.string("k"), .variant(.boolean(true)))])`; `BusValue.dictionary`
/// builds one. A byte array is read as `.byteArray`, one contiguous buffer; `.array(elementType: "y", …)`
/// of `.byte` values is the same D-Bus value but is only ever written. A Unix file descriptor (`h`) read
/// from a message is the message's own (`.unixFD`): valid only while the message lives, never closed
/// by its reader; one appended is duplicated into the message by sd-bus.
package indirect enum BusValue: Sendable, Equatable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// A byte array (`ay`) in one buffer: how byte arrays are read, and the cheap way to write one.
    case byteArray([UInt8])
    /// An array whose elements all have the single complete type `elementType`.
    case array(elementType: String, [BusValue])
    /// A struct, signature `(…)`.
    case structure([BusValue])
    /// A dictionary entry, only valid as the element of an array.
    case dictEntry(BusValue, BusValue)
    /// A variant: a value that carries its own signature.
    case variant(BusValue)
    /// A Unix file descriptor (`h`). Read from a message, it is borrowed from the message, which closes
    /// it when it is freed: duplicate it to keep it. Appended, sd-bus duplicates it.
    case unixFD(Int32)

    /// The value's D-Bus signature (one complete type).
    package var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .byteArray: "ay"
        case .array(let elementType, _): "a" + elementType
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .variant: "v"
        case .unixFD: "h"
        }
    }

    /// A dictionary (`a{…}`) from key/value pairs, in order.
    package static func dictionary(keyType: String, valueType: String, _ entries: [(BusValue, BusValue)]) -> BusValue {
        .array(elementType: "{\(keyType)\(valueType)}", entries.map { .dictEntry($0.0, $0.1) })
    }

    /// An `as` array.
    package static func strings(_ values: [String]) -> BusValue {
        .array(elementType: "s", values.map { .string($0) })
    }
}

// Accessors: nil when the value has another type.
extension BusValue {
    /// The string of an `s`, `o` or `g` value.
    package var string: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): s
        default: nil
        }
    }

    package var bool: Bool? {
        if case .boolean(let b) = self { b } else { nil }
    }

    package var uint32: UInt32? {
        if case .uint32(let u) = self { u } else { nil }
    }

    /// The bytes of a byte array (either representation).
    package var bytes: [UInt8]? {
        switch self {
        case .byteArray(let bytes): return bytes
        case .array("y", let items):
            var bytes: [UInt8] = []
            for item in items {
                guard case .byte(let b) = item else { return nil }
                bytes.append(b)
            }
            return bytes
        default: return nil
        }
    }

    /// The elements of an array (for a `.byteArray`, its bytes as `.byte` values).
    package var elements: [BusValue]? {
        switch self {
        case .array(_, let items): items
        case .byteArray(let bytes): bytes.map { .byte($0) }
        default: nil
        }
    }

    /// The fields of a struct.
    package var fields: [BusValue]? {
        if case .structure(let fields) = self { fields } else { nil }
    }

    /// The value inside a variant.
    package var variantValue: BusValue? {
        if case .variant(let inner) = self { inner } else { nil }
    }

    /// The entries of a dictionary with string keys (`a{s…}`); a repeated key keeps its last value.
    package var stringKeyedEntries: [String: BusValue]? {
        guard case .array(_, let items) = self else { return nil }
        var result: [String: BusValue] = [:]
        for item in items {
            guard case .dictEntry(let key, let value) = item, let name = key.string else { return nil }
            result[name] = value
        }
        return result
    }
}

// Wiping.
extension BusValue {
    /// Zeroes, in place, the storage of every `.byteArray` in this value (nested ones too).
    ///
    /// Swift arrays share their storage between copies until one is changed, so this zeroes every
    /// copy that still shares it: the bytes a message was read into, the `[UInt8]` taken out of it,
    /// the value handed to `append`. That is the point, and the caller must be done with all of them.
    /// Byte arrays written as `.array(elementType: "y", …)` are separate `.byte` values and cannot
    /// be wiped; secrets are never built that way.
    package func wipeByteArrays() {
        switch self {
        case .byteArray(let bytes):
            BusValue.wipeShared(bytes)
        case .array(_, let items), .structure(let items):
            for item in items { item.wipeByteArrays() }
        case .dictEntry(let key, let value):
            key.wipeByteArrays()
            value.wipeByteArrays()
        case .variant(let inner):
            inner.wipeByteArrays()
        default:
            break
        }
    }

    /// Zeroes the storage `bytes` shares with every copy of it (see `wipeByteArrays`).
    package static func wipeShared(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return }
            explicit_bzero(UnsafeMutableRawPointer(mutating: base), buffer.count)
        }
    }
}
