import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// An sd-bus message: a received signal, call or reply, or one being built to send.
///
/// Threading: confined to its connection's loop thread, like `Bus` (messages are not thread-safe and hold
/// a reference to their bus). The object owns one reference to the `sd_bus_message` and drops it on
/// `deinit`, so no reference leaks whatever path a handler takes.
package final class BusMessage {
    let pointer: OpaquePointer

    /// Wraps a message the caller already owns a reference to.
    init(adopting pointer: OpaquePointer) { self.pointer = pointer }

    /// Wraps a message borrowed from sd-bus (a callback argument), taking a reference of our own.
    init(borrowing pointer: OpaquePointer) { self.pointer = sd_bus_message_ref(pointer) }

    deinit { sd_bus_message_unref(pointer) }

    /// The D-Bus message types (`unknown` for a type this code does not know).
    package enum Kind: Sendable {
        case methodCall, methodReturn, methodError, signal, unknown
    }

    package var kind: Kind {
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
    package var sender: String? { sd_bus_message_get_sender(pointer).map { String(cString: $0) } }
    package var destination: String? { sd_bus_message_get_destination(pointer).map { String(cString: $0) } }
    package var path: String? { sd_bus_message_get_path(pointer).map { String(cString: $0) } }
    package var interface: String? { sd_bus_message_get_interface(pointer).map { String(cString: $0) } }
    package var member: String? { sd_bus_message_get_member(pointer).map { String(cString: $0) } }
    /// The signature of the whole body.
    package var signature: String { sd_bus_message_get_signature(pointer, 1).map { String(cString: $0) } ?? "" }

    /// The error carried by a method error reply.
    package var error: BusError? { sd_bus_message_get_error(pointer).map { BusError($0) } }

    // MARK: Reading

    /// Reads the whole body from the start (rewinding first), one value per complete type. Only byte
    /// arrays are capped (`maximumByteArray`); use `arguments(within:)` for input from untrusted peers.
    package func arguments() throws(BusError) -> [BusValue] {
        try arguments(within: ReadLimits())
    }

    /// Reads the whole body from the start like `arguments()`, but stops with `InvalidArgs` as soon as
    /// the body exceeds `limits`: a value too many, an array element too many, a string or byte
    /// array too long. The check comes before each value is built, so an oversized message costs
    /// what its first values cost, not what it holds.
    ///
    /// With `wipingByteArrays`, every byte array is zeroed inside the message once it has been copied
    /// out, so a secret the message carried is left only in the value returned (see
    /// `BusValue.wipeByteArrays`). Reading the message again then gives zeros.
    package func arguments(within limits: ReadLimits, wipingByteArrays: Bool = false) throws(BusError) -> [BusValue] {
        try check(sd_bus_message_rewind(pointer, 1), "rewinding a message")
        var reader = Reader(message: pointer, limits: limits, wipes: wipingByteArrays)
        var values: [BusValue] = []
        while let value = try reader.next() { values.append(value) }
        return values
    }

    /// The largest `ay` argument read by default (a secret of up to 1 MiB plus room for its framing).
    package static let maximumByteArray = (1 << 20) + 64 * 1024

    // MARK: Writing

    /// Appends values to the body of a message being built.
    package func append(_ values: [BusValue]) throws(BusError) {
        for value in values { try append(value) }
    }

    /// Appends one value to the body of a message being built.
    package func append(_ value: BusValue) throws(BusError) {
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
        case .byteArray(let bytes):
            try check(
                bytes.withUnsafeBytes {
                    sd_bus_message_append_array(pointer, CChar(UInt8(ascii: "y")), $0.baseAddress, $0.count)
                },
                "appending to a message")
        case .array(let elementType, let items): try appendContainer("a", elementType, items)
        case .structure(let fields): try appendContainer("r", fields.map(\.signature).joined(), fields)
        case .dictEntry(let key, let item): try appendContainer("e", key.signature + item.signature, [key, item])
        case .variant(let inner): try appendContainer("v", inner.signature, [inner])
        case .unixFD(let descriptor): try appendBasic("h", descriptor)
        }
    }

    private func appendBasic<T>(_ type: Unicode.Scalar, _ value: T) throws(BusError) {
        var copy = value
        try check(
            withUnsafePointer(to: &copy) { sd_bus_message_append_basic(pointer, CChar(type.value), $0) },
            "appending to a message")
    }

    private func appendString(_ type: Unicode.Scalar, _ value: String) throws(BusError) {
        // A C string would silently end at an embedded NUL; D-Bus strings cannot hold one. strlen on
        // the C string finds one in the same pass sd-bus makes anyway (`utf8.contains(0)` took an
        // unspecialised path: 12 % of the agent's CPU for a collection's `Items` of 3,000 paths).
        let length = value.utf8.count
        let result = value.withCString { text -> Int32? in
            guard strlen(text) == length else { return nil }
            return sd_bus_message_append_basic(pointer, CChar(type.value), text)
        }
        guard let result else {
            throw BusError(name: BusError.Name.invalidArgs, message: "a D-Bus string cannot contain NUL")
        }
        try check(result, "appending to a message")
    }

    private func appendContainer(_ type: Unicode.Scalar, _ contents: String, _ items: [BusValue]) throws(BusError) {
        try check(sd_bus_message_open_container(pointer, CChar(type.value), contents), "appending to a message")
        for item in items { try append(item) }
        try check(sd_bus_message_close_container(pointer), "appending to a message")
    }

    // MARK: Replying

    /// Sends a method return for this method call, carrying `values`. Does nothing when the caller asked
    /// for no reply.
    package func reply(_ values: [BusValue] = []) throws(BusError) {
        guard sd_bus_message_get_expect_reply(pointer) > 0 else { return }
        var raw: OpaquePointer?
        try check(sd_bus_message_new_method_return(pointer, &raw), "creating a reply")
        let reply = BusMessage(adopting: raw!)
        try reply.append(values)
        try check(sd_bus_send(nil, reply.pointer, nil), "sending a reply")
    }

    /// Sends an error reply for this method call. Does nothing when the caller asked for no reply.
    package func reply(error: BusError) throws(BusError) {
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
