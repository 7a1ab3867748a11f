import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// Caps on what reading one message may build (`BusMessage.arguments(within:)`).
///
/// sd-bus receives a whole message (up to its own 128 MiB limit) before anyone looks at it, but it
/// walks the body only as the reader asks for values. These caps are checked before each value is
/// built, so a peer that sends a 100,000-entry map costs the reader what its first entries cost, and
/// the reply is `InvalidArgs` naming the cap.
package struct ReadLimits: Sendable, Equatable {
    /// Values in the whole body. Every basic value, every container (array, struct, dictionary entry,
    /// variant) and every byte array counts one.
    package var maxValues: Int
    /// Elements of any one array other than a byte array.
    package var maxArrayElements: Int
    /// Bytes of any one string, object path or signature.
    package var maxStringBytes: Int
    /// Bytes of any one byte array (`ay`, read in one piece).
    package var maxByteArray: Int

    /// No caps but the byte-array one (`BusMessage.maximumByteArray`): for messages from the bus
    /// daemon and from peers whose signals the daemon already filtered by owner.
    package init(
        maxValues: Int = .max, maxArrayElements: Int = .max, maxStringBytes: Int = .max,
        maxByteArray: Int = BusMessage.maximumByteArray
    ) {
        self.maxValues = maxValues
        self.maxArrayElements = maxArrayElements
        self.maxStringBytes = maxStringBytes
        self.maxByteArray = maxByteArray
    }
}

/// Walks a message body for `BusMessage.arguments(within:)`, counting against `ReadLimits`.
struct Reader {
    let message: OpaquePointer
    let limits: ReadLimits
    let wipes: Bool
    private var values = 0

    init(message: OpaquePointer, limits: ReadLimits, wipes: Bool) {
        self.message = message
        self.limits = limits
        self.wipes = wipes
    }

    /// The next value of the current container, nil at its end.
    mutating func next() throws(BusError) -> BusValue? {
        var type: CChar = 0
        var contentsPointer: UnsafePointer<CChar>?
        guard try check(sd_bus_message_peek_type(message, &type, &contentsPointer), "reading a message") > 0 else {
            return nil
        }
        values += 1
        guard values <= limits.maxValues else {
            throw Self.refused("the message holds more than \(limits.maxValues) values")
        }
        let contents = contentsPointer.map { String(cString: $0) } ?? ""  // invalid after the next read
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "y"): return .byte(try basic(type, UInt8(0)))
        case UInt8(ascii: "b"): return .boolean(try basic(type, Int32(0)) != 0)
        case UInt8(ascii: "n"): return .int16(try basic(type, Int16(0)))
        case UInt8(ascii: "q"): return .uint16(try basic(type, UInt16(0)))
        case UInt8(ascii: "i"): return .int32(try basic(type, Int32(0)))
        case UInt8(ascii: "u"): return .uint32(try basic(type, UInt32(0)))
        case UInt8(ascii: "x"): return .int64(try basic(type, Int64(0)))
        case UInt8(ascii: "t"): return .uint64(try basic(type, UInt64(0)))
        case UInt8(ascii: "d"): return .double(try basic(type, Double(0)))
        case UInt8(ascii: "s"): return .string(try string(type))
        case UInt8(ascii: "o"): return .objectPath(try string(type))
        case UInt8(ascii: "g"): return .signature(try string(type))
        // The message keeps the descriptor (sd-bus closes it with the message); the value only names it.
        case UInt8(ascii: "h"): return .unixFD(try basic(type, Int32(-1)))
        case UInt8(ascii: "a") where contents == "y":
            return .byteArray(try byteArray())
        case UInt8(ascii: "a"):
            return .array(elementType: contents, try container(type, contents, isArray: true))
        case UInt8(ascii: "r"):
            return .structure(try container(type, contents, isArray: false))
        case UInt8(ascii: "e"):
            let pair = try container(type, contents, isArray: false)
            guard pair.count == 2 else { throw BusError(errno: -EBADMSG, "reading a dictionary entry") }
            return .dictEntry(pair[0], pair[1])
        case UInt8(ascii: "v"):
            let inner = try container(type, contents, isArray: false)
            guard inner.count == 1 else { throw BusError(errno: -EBADMSG, "reading a variant") }
            return .variant(inner[0])
        default:
            throw BusError(
                name: BusError.Name.invalidArgs,
                message: "unsupported D-Bus type '\(Character(Unicode.Scalar(UInt8(bitPattern: type))))'")
        }
    }

    private func basic<T>(_ type: CChar, _ initial: T) throws(BusError) -> T {
        var value = initial
        try check(
            withUnsafeMutablePointer(to: &value) { sd_bus_message_read_basic(message, type, $0) },
            "reading a message")
        return value
    }

    private func string(_ type: CChar) throws(BusError) -> String {
        // Points into the message body: measure it before copying, and copy before the next read.
        guard let raw = try basic(type, UnsafePointer<CChar>?.none) else { return "" }
        let length = strlen(raw)
        guard length <= limits.maxStringBytes else {
            throw Self.refused("a string is longer than \(limits.maxStringBytes) bytes")
        }
        return String(decoding: UnsafeRawBufferPointer(start: raw, count: length), as: UTF8.self)
    }

    /// A byte array in one call, refused before it is copied when over the cap: a 32 MiB `ay` read
    /// value by value would become tens of millions of values.
    private func byteArray() throws(BusError) -> [UInt8] {
        var data: UnsafeRawPointer?
        var size = 0
        try check(sd_bus_message_read_array(message, CChar(UInt8(ascii: "y")), &data, &size), "reading a byte array")
        guard size <= limits.maxByteArray else {
            throw BusError(
                name: BusError.Name.invalidArgs,
                message: "byte array of \(size) bytes is larger than \(limits.maxByteArray)")
        }
        guard let data, size > 0 else { return [] }
        let bytes = Array(UnsafeRawBufferPointer(start: data, count: size))
        // The body is our own heap copy of what the socket delivered (sd-bus hands it to the message);
        // nothing reads it again unless the message is rewound.
        if wipes { explicit_bzero(UnsafeMutableRawPointer(mutating: data), size) }
        return bytes
    }

    private mutating func container(_ type: CChar, _ contents: String, isArray: Bool) throws(BusError) -> [BusValue] {
        try check(sd_bus_message_enter_container(message, type, contents), "reading a message")
        var elements: [BusValue] = []
        while true {
            // Refused before the extra element is read.
            if isArray && elements.count == limits.maxArrayElements {
                let atEnd = try check(sd_bus_message_at_end(message, 0), "reading a message")
                if atEnd == 0 { throw Self.refused("an array has more than \(limits.maxArrayElements) elements") }
            }
            guard let value = try next() else { break }
            elements.append(value)
        }
        try check(sd_bus_message_exit_container(message), "reading a message")
        return elements
    }

    private static func refused(_ why: String) -> BusError {
        BusError(name: BusError.Name.invalidArgs, message: "message refused while reading it: \(why)")
    }
}
