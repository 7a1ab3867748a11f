import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// An sd-bus message: a received signal, call or reply, or one being built to send.
///
/// Threading: confined to its connection's loop thread, like `Bus` (messages are not thread-safe and hold
/// a reference to their bus). The object owns one reference to the `sd_bus_message` and drops it on
/// `deinit`, so no reference leaks whatever path a handler takes.
public final class BusMessage {
    let pointer: OpaquePointer

    /// Wraps a message the caller already owns a reference to.
    init(adopting pointer: OpaquePointer) { self.pointer = pointer }

    /// Wraps a message borrowed from sd-bus (a callback argument), taking a reference of our own.
    init(borrowing pointer: OpaquePointer) { self.pointer = sd_bus_message_ref(pointer) }

    deinit { sd_bus_message_unref(pointer) }

    /// The D-Bus message types (`unknown` for a type this code does not know).
    public enum Kind: Sendable {
        case methodCall, methodReturn, methodError, signal, unknown
    }

    public var kind: Kind {
        var type: UInt8 = 0
        guard sd_bus_message_get_type(pointer, &type) >= 0 else { return .unknown }
        switch Int(type) {
        case SD_BUS_MESSAGE_METHOD_CALL: return .methodCall
        case SD_BUS_MESSAGE_METHOD_RETURN: return .methodReturn
        case SD_BUS_MESSAGE_METHOD_ERROR: return .methodError
        case SD_BUS_MESSAGE_SIGNAL: return .signal
        default: return .unknown
        }
    }

    /// The sender's unique name (`:1.5`), stamped by the bus daemon; nil for local or peer-to-peer messages.
    public var sender: String? { sd_bus_message_get_sender(pointer).map { String(cString: $0) } }
    public var destination: String? { sd_bus_message_get_destination(pointer).map { String(cString: $0) } }
    public var path: String? { sd_bus_message_get_path(pointer).map { String(cString: $0) } }
    public var interface: String? { sd_bus_message_get_interface(pointer).map { String(cString: $0) } }
    public var member: String? { sd_bus_message_get_member(pointer).map { String(cString: $0) } }
    /// The signature of the whole body.
    public var signature: String { sd_bus_message_get_signature(pointer, 1).map { String(cString: $0) } ?? "" }

    /// The error carried by a method error reply.
    public var error: BusError? { sd_bus_message_get_error(pointer).map { BusError($0) } }

    // MARK: Reading

    /// Reads the whole body from the start (rewinding first), one value per complete type.
    public func arguments() throws(BusError) -> [BusValue] {
        try check(sd_bus_message_rewind(pointer, 1), "rewinding a message")
        var values: [BusValue] = []
        while let value = try readValue() { values.append(value) }
        return values
    }

    /// The largest `ay` argument read (a secret of up to 1 MiB plus room for its framing).
    public static let maximumByteArray = (1 << 20) + 64 * 1024

    /// Reads the next value of the current container, nil at its end.
    private func readValue() throws(BusError) -> BusValue? {
        var type: CChar = 0
        var contentsPointer: UnsafePointer<CChar>?
        guard try check(sd_bus_message_peek_type(pointer, &type, &contentsPointer), "reading a message") > 0 else {
            return nil
        }
        let contents = contentsPointer.map { String(cString: $0) } ?? "" // invalid after the next read
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "y"): return .byte(try readBasic(type, UInt8(0)))
        case UInt8(ascii: "b"): return .boolean(try readBasic(type, Int32(0)) != 0)
        case UInt8(ascii: "n"): return .int16(try readBasic(type, Int16(0)))
        case UInt8(ascii: "q"): return .uint16(try readBasic(type, UInt16(0)))
        case UInt8(ascii: "i"): return .int32(try readBasic(type, Int32(0)))
        case UInt8(ascii: "u"): return .uint32(try readBasic(type, UInt32(0)))
        case UInt8(ascii: "x"): return .int64(try readBasic(type, Int64(0)))
        case UInt8(ascii: "t"): return .uint64(try readBasic(type, UInt64(0)))
        case UInt8(ascii: "d"): return .double(try readBasic(type, Double(0)))
        case UInt8(ascii: "s"): return .string(try readString(type))
        case UInt8(ascii: "o"): return .objectPath(try readString(type))
        case UInt8(ascii: "g"): return .signature(try readString(type))
        case UInt8(ascii: "a") where contents == "y":
            // Byte arrays in one call, and refused before any value is built when larger than any
            // message of ours needs: a 32 MiB `ay` would otherwise become tens of millions of values.
            var data: UnsafeRawPointer?
            var size = 0
            try check(sd_bus_message_read_array(pointer, CChar(UInt8(ascii: "y")), &data, &size), "reading a byte array")
            guard size <= BusMessage.maximumByteArray else {
                throw BusError(name: BusError.Name.invalidArgs,
                               message: "byte array of \(size) bytes is larger than \(BusMessage.maximumByteArray)")
            }
            let bytes = data.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
            return .array(elementType: "y", bytes.map { .byte($0) })
        case UInt8(ascii: "a"):
            return .array(elementType: contents, try readContainer(type, contents))
        case UInt8(ascii: "r"):
            return .structure(try readContainer(type, contents))
        case UInt8(ascii: "e"):
            let pair = try readContainer(type, contents)
            guard pair.count == 2 else { throw BusError(errno: -EBADMSG, "reading a dictionary entry") }
            return .dictEntry(pair[0], pair[1])
        case UInt8(ascii: "v"):
            let inner = try readContainer(type, contents)
            guard inner.count == 1 else { throw BusError(errno: -EBADMSG, "reading a variant") }
            return .variant(inner[0])
        default:
            throw BusError(name: BusError.Name.invalidArgs,
                           message: "unsupported D-Bus type '\(Character(Unicode.Scalar(UInt8(bitPattern: type))))'")
        }
    }

    private func readBasic<T>(_ type: CChar, _ initial: T) throws(BusError) -> T {
        var value = initial
        try check(withUnsafeMutablePointer(to: &value) { sd_bus_message_read_basic(pointer, type, $0) },
                  "reading a message")
        return value
    }

    private func readString(_ type: CChar) throws(BusError) -> String {
        // Points into the message body, so copy it before anything else happens to the message.
        let raw = try readBasic(type, UnsafePointer<CChar>?.none)
        return raw.map { String(cString: $0) } ?? ""
    }

    private func readContainer(_ type: CChar, _ contents: String) throws(BusError) -> [BusValue] {
        try check(sd_bus_message_enter_container(pointer, type, contents), "reading a message")
        var values: [BusValue] = []
        while let value = try readValue() { values.append(value) }
        try check(sd_bus_message_exit_container(pointer), "reading a message")
        return values
    }

    // MARK: Writing

    /// Appends values to the body of a message being built.
    public func append(_ values: [BusValue]) throws(BusError) {
        for value in values { try append(value) }
    }

    /// Appends one value to the body of a message being built.
    public func append(_ value: BusValue) throws(BusError) {
        switch value {
        case .byte(let v): try appendBasic("y", v)
        case .boolean(let v): try appendBasic("b", Int32(v ? 1 : 0))
        case .int16(let v): try appendBasic("n", v)
        case .uint16(let v): try appendBasic("q", v)
        case .int32(let v): try appendBasic("i", v)
        case .uint32(let v): try appendBasic("u", v)
        case .int64(let v): try appendBasic("x", v)
        case .uint64(let v): try appendBasic("t", v)
        case .double(let v): try appendBasic("d", v)
        case .string(let s): try appendString("s", s)
        case .objectPath(let s): try appendString("o", s)
        case .signature(let s): try appendString("g", s)
        case .array(let elementType, let items): try appendContainer("a", elementType, items)
        case .structure(let fields): try appendContainer("r", fields.map(\.signature).joined(), fields)
        case .dictEntry(let key, let item): try appendContainer("e", key.signature + item.signature, [key, item])
        case .variant(let inner): try appendContainer("v", inner.signature, [inner])
        }
    }

    private func appendBasic<T>(_ type: Unicode.Scalar, _ value: T) throws(BusError) {
        var copy = value
        try check(withUnsafePointer(to: &copy) { sd_bus_message_append_basic(pointer, CChar(type.value), $0) },
                  "appending to a message")
    }

    private func appendString(_ type: Unicode.Scalar, _ value: String) throws(BusError) {
        // A C string would silently end at an embedded NUL; D-Bus strings cannot hold one.
        guard !value.utf8.contains(0) else {
            throw BusError(name: BusError.Name.invalidArgs, message: "a D-Bus string cannot contain NUL")
        }
        try check(value.withCString { sd_bus_message_append_basic(pointer, CChar(type.value), $0) },
                  "appending to a message")
    }

    private func appendContainer(_ type: Unicode.Scalar, _ contents: String, _ items: [BusValue]) throws(BusError) {
        try check(sd_bus_message_open_container(pointer, CChar(type.value), contents), "appending to a message")
        for item in items { try append(item) }
        try check(sd_bus_message_close_container(pointer), "appending to a message")
    }

    // MARK: Replying

    /// Sends a method return for this method call, carrying `values`. Does nothing when the caller asked
    /// for no reply.
    public func reply(_ values: [BusValue] = []) throws(BusError) {
        guard sd_bus_message_get_expect_reply(pointer) > 0 else { return }
        var raw: OpaquePointer?
        try check(sd_bus_message_new_method_return(pointer, &raw), "creating a reply")
        let reply = BusMessage(adopting: raw!)
        try reply.append(values)
        try check(sd_bus_send(nil, reply.pointer, nil), "sending a reply")
    }

    /// Sends an error reply for this method call. Does nothing when the caller asked for no reply.
    public func reply(error: BusError) throws(BusError) {
        guard sd_bus_message_get_expect_reply(pointer) > 0 else { return }
        var raw: OpaquePointer?
        var cError = sd_bus_error()
        defer { sd_bus_error_free(&cError) }
        sd_bus_error_set(&cError, error.name, error.message)
        try check(sd_bus_message_new_method_error(pointer, &raw, &cError), "creating an error reply")
        let reply = BusMessage(adopting: raw!)
        try check(sd_bus_send(nil, reply.pointer, nil), "sending an error reply")
    }
}
