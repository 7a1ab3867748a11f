import LatchkeyModel

/// The binary encoding of `SecValue`: one tag byte, then a fixed layout per type. Encoding is
/// deterministic (dictionary keys sorted by their UTF-8 bytes), so one value has exactly one encoding
/// from this encoder (stable bytes for tests, fuzzers and keyed hashes).
///
/// Two formats use it, so it lives apart from both, free of I/O: the agent protocol's values
/// (docs/PROTOCOL.md §3) and the sealed attributes and Secret Service state at rest (docs/STORE.md).
package enum ValueCodec {
    /// Type tags. Part of the protocol and of every keychain on disk: never renumber; a new tag needs a
    /// new protocol version and a store migration.
    enum Tag: UInt8 {
        case string = 0x01, data = 0x02, int = 0x03, bool = 0x04, double = 0x05, date = 0x06
        case array = 0x07, dictionary = 0x08, null = 0x09
    }

    /// Deepest nesting of arrays and dictionaries in one value (8); the outermost container counts as
    /// 1. Bounds the decoder's recursion, hence its stack use. The protocol's `Wire.maxValueDepth`.
    package static let maxDepth = 8

    /// Most entries in one array or dictionary (1,048,576). Memory stays bounded regardless, because
    /// every count is checked against the bytes left before anything is reserved. The protocol's
    /// `Wire.maxCollectionCount`.
    package static let maxCollectionCount = 1 << 20

    // Smallest possible encodings, used to reject counts the remaining bytes cannot possibly hold
    // before reserving any capacity for them.
    private static let minValueSize = 1  // a tag (null)
    private static let minEntrySize = 4 + 1  // an empty key's length, then a null value

    // MARK: Encoding

    /// Appends the encoding of `value` to `out`.
    ///
    /// Does not check the caps; call `validate(_:)` first when the value comes from outside your
    /// control, since a peer rejects what exceeds them.
    package static func encode(_ value: SecValue, into out: inout [UInt8]) {
        switch value {
        case .string(let s):
            out.append(Tag.string.rawValue)
            out.appendLength(s.utf8.count)
            out.append(contentsOf: s.utf8)
        case .data(let d):
            out.append(Tag.data.rawValue)
            out.appendLength(d.count)
            out.append(contentsOf: d)
        case .int(let i):
            out.append(Tag.int.rawValue)
            out.appendBE(UInt64(bitPattern: i))
        case .bool(let b):
            out.append(Tag.bool.rawValue)
            out.append(b ? 1 : 0)
        case .double(let d):
            out.append(Tag.double.rawValue)
            out.appendBE(d.bitPattern)
        case .date(let d):
            out.append(Tag.date.rawValue)
            out.appendBE(d.bitPattern)
        case .array(let a):
            out.append(Tag.array.rawValue)
            out.appendLength(a.count)
            for element in a { encode(element, into: &out) }
        case .dictionary(let d):
            out.append(Tag.dictionary.rawValue)
            out.appendLength(d.count)
            for (key, element) in sortedEntries(d) {
                out.appendLength(key.utf8.count)
                out.append(contentsOf: key.utf8)
                encode(element, into: &out)
            }
        case .null:
            out.append(Tag.null.rawValue)
        }
    }

    /// The encoding of `value` in a freshly allocated array of exactly the right capacity.
    ///
    /// Exact capacity matters for item data: a growing array leaves copies of its earlier contents in
    /// freed heap memory that nobody wipes.
    package static func encode(_ value: SecValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(encodedSize(value))
        encode(value, into: &out)
        return out
    }

    /// Number of bytes `encode` produces for `value`.
    package static func encodedSize(_ value: SecValue) -> Int {
        switch value {
        case .string(let s): 1 + 4 + s.utf8.count
        case .data(let d): 1 + 4 + d.count
        case .int, .double, .date: 1 + 8
        case .bool: 1 + 1
        case .null: 1
        case .array(let a): a.reduce(1 + 4) { $0 + encodedSize($1) }
        case .dictionary(let d): d.reduce(1 + 4) { $0 + 4 + $1.key.utf8.count + encodedSize($1.value) }
        }
    }

    /// Keys in ascending order of their UTF-8 bytes. Not Swift's `<` on String, which compares by
    /// Unicode canonical equivalence and would not give a byte-defined order another implementation
    /// could reproduce.
    static func sortedEntries(_ d: SecDictionary) -> [(key: String, value: SecValue)] {
        d.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }

    /// Checks `value` against the decoder's caps (depth, entries per collection), so a sender can
    /// report errSecParam itself instead of having the peer reject the frame.
    package static func validate(_ value: SecValue) throws(CodecError) {
        try validate(value, depth: 0)
    }

    private static func validate(_ value: SecValue, depth: Int) throws(CodecError) {
        switch value {
        case .array(let a):
            try checkContainer(count: a.count, depth: depth + 1)
            for element in a { try validate(element, depth: depth + 1) }
        case .dictionary(let d):
            try checkContainer(count: d.count, depth: depth + 1)
            for element in d.values { try validate(element, depth: depth + 1) }
        default:
            break
        }
    }

    private static func checkContainer(count: Int, depth: Int) throws(CodecError) {
        guard depth <= maxDepth else {
            throw .malformed("values nest deeper than \(maxDepth) levels")
        }
        guard count <= maxCollectionCount else {
            throw .malformed("collection of \(count) entries exceeds the limit of \(maxCollectionCount)")
        }
    }

    // MARK: Decoding

    /// Decodes one value that must fill `bytes` exactly.
    package static func decode(_ bytes: [UInt8]) throws(CodecError) -> SecValue {
        var offset = 0
        let value = try decode(bytes, offset: &offset)
        guard offset == bytes.count else {
            throw .malformed("\(bytes.count - offset) unexpected trailing bytes")
        }
        return value
    }

    /// Decodes one value starting at `offset` and advances `offset` past it.
    package static func decode(_ bytes: [UInt8], offset: inout Int) throws(CodecError) -> SecValue {
        guard offset >= 0, offset <= bytes.count else { throw .truncated }
        let start = offset
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(CodecError) -> (SecValue, Int) in
                var reader = ByteReader(raw, offset: start)
                let value = try decode(from: &reader, depth: 0)
                return (value, reader.offset)
            }
        }
        let (value, end) = try result.get()
        offset = end
        return value
    }

    /// Decodes a value that must be a dictionary (request bodies, options).
    package static func decodeDictionary(from reader: inout ByteReader) throws(CodecError) -> SecDictionary {
        guard case .dictionary(let d) = try decode(from: &reader, depth: 0) else {
            throw .malformed("expected a dictionary")
        }
        return d
    }

    /// `depth` is the number of containers enclosing this value.
    package static func decode(from reader: inout ByteReader, depth: Int) throws(CodecError) -> SecValue {
        let tagByte = try reader.u8()
        guard let tag = Tag(rawValue: tagByte) else {
            throw .malformed("unknown value tag \(hexByte(tagByte))")
        }
        switch tag {
        case .string:
            return .string(try reader.string(what: "string"))
        case .data:
            let n = try reader.length(what: "data")
            return .data(Array(try reader.bytes(n)))
        case .int:
            return .int(Int64(bitPattern: try reader.u64()))
        case .bool:
            switch try reader.u8() {
            case 0: return .bool(false)
            case 1: return .bool(true)
            case let b: throw .malformed("boolean byte \(hexByte(b)) is neither 0 nor 1")
            }
        case .double:
            return .double(Double(bitPattern: try reader.u64()))
        case .date:
            return .date(Double(bitPattern: try reader.u64()))
        case .array:
            let count = try containerCount(&reader, depth: depth + 1, minEntry: minValueSize)
            var elements: [SecValue] = []
            elements.reserveCapacity(count)
            for _ in 0..<count { elements.append(try decode(from: &reader, depth: depth + 1)) }
            return .array(elements)
        case .dictionary:
            let count = try containerCount(&reader, depth: depth + 1, minEntry: minEntrySize)
            var entries = SecDictionary(minimumCapacity: count)
            for _ in 0..<count {
                let key = try reader.string(what: "dictionary key")
                // Swift String equality is canonical equivalence, so two keys with different bytes
                // can collide here too; either way the dictionary would silently lose an entry (and a
                // peer could smuggle a second "class" past a check), so reject. Key order is not
                // checked: senders sort, but other implementations need not.
                guard entries[key] == nil else { throw .malformed("duplicate dictionary key") }
                entries[key] = try decode(from: &reader, depth: depth + 1)
            }
            return .dictionary(entries)
        case .null:
            return .null
        }
    }

    /// Reads a collection count and rejects it, before anything is allocated, if the depth or count
    /// cap is exceeded or the remaining bytes cannot hold that many entries.
    private static func containerCount(_ reader: inout ByteReader, depth: Int, minEntry: Int) throws(CodecError) -> Int
    {
        guard depth <= maxDepth else {
            throw .malformed("values nest deeper than \(maxDepth) levels")
        }
        let count = Int(try reader.u32())
        guard count <= maxCollectionCount else {
            throw .malformed("collection of \(count) entries exceeds the limit of \(maxCollectionCount)")
        }
        guard count * minEntry <= reader.remaining else { throw .truncated }
        return count
    }
}
