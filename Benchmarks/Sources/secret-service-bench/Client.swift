import CBenchSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// A minimal synchronous Secret Service client on sd-bus: the same code talks to every provider, so
/// the figures compare the providers and nothing else. One blocking call at a time on this thread.
final class Client {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let bus: OpaquePointer
    static let destination = "org.freedesktop.secrets"
    static let service = "/org/freedesktop/secrets"

    /// Connects to `address`.
    init(address: String) throws {
        var raw: OpaquePointer?
        var r = sd_bus_new(&raw)
        guard r >= 0, let created = raw else { throw Failure(description: "sd_bus_new: \(r)") }
        r = sd_bus_set_address(created, address)
        if r >= 0 { r = sd_bus_set_bus_client(created, 1) }
        if r >= 0 { r = sd_bus_start(created) }
        guard r >= 0 else {
            sd_bus_unref(created)
            throw Failure(description: "cannot connect to \(address): \(String(cString: strerror(-r)))")
        }
        bus = created
    }

    deinit { sd_bus_flush_close_unref(bus) }

    // MARK: Calls

    /// Builds a call, sends it, and hands the reply to `read`.
    private func call<T>(
        _ path: String, _ interface: String, _ member: String, destination: String = Client.destination,
        append: (OpaquePointer) throws -> Void = { _ in },
        read: (OpaquePointer) throws -> T
    ) throws -> T {
        var message: OpaquePointer?
        try check(sd_bus_message_new_method_call(bus, &message, destination, path, interface, member), member)
        defer { sd_bus_message_unref(message) }
        try append(message!)
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let r = sd_bus_call(bus, message, 120_000_000, &error, &reply)
        guard r >= 0, let reply else {
            let name = error.name.map { String(cString: $0) } ?? "errno \(-r)"
            let text = error.message.map { String(cString: $0) } ?? ""
            throw Failure(description: "\(member): \(name) \(text)")
        }
        defer { sd_bus_message_unref(reply) }
        return try read(reply)
    }

    /// `org.freedesktop.DBus.Peer.Ping` to the provider: the bus round trip every call pays.
    func ping() throws {
        try call(Self.service, "org.freedesktop.DBus.Peer", "Ping") { _ in }
    }

    /// Whether `name` has an owner on the bus.
    func nameHasOwner(_ name: String) throws -> Bool {
        try call(
            "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", destination: "org.freedesktop.DBus",
            append: { try appendString($0, "s", name) }
        ) { reply in
            var value: Int32 = 0
            try check(sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "b")), &value), "NameHasOwner")
            return value != 0
        }
    }

    /// The pid of the connection that owns `name`.
    func ownerPID(_ name: String) throws -> pid_t {
        try call(
            "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixProcessID",
            destination: "org.freedesktop.DBus",
            append: { try appendString($0, "s", name) }
        ) { reply in
            var pid: UInt32 = 0
            try check(sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &pid), "GetConnectionUnixProcessID")
            return pid_t(pid)
        }
    }

    /// `OpenSession("plain", "")`: the session path.
    func openPlainSession() throws -> String {
        try call(
            Self.service, "org.freedesktop.Secret.Service", "OpenSession",
            append: { m in
                try appendString(m, "s", "plain")
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "v")), "s"), "OpenSession")
                try appendString(m, "s", "")
                try check(sd_bus_message_close_container(m), "OpenSession")
            }
        ) { reply in
            try check(sd_bus_message_skip(reply, "v"), "OpenSession")
            return try readString(reply, "o")
        }
    }

    /// `Collection.CreateItem`: the new item's path.
    func createItem(
        collection: String, label: String, attributes: [(String, String)], secret: [UInt8],
        session: String, replace: Bool
    ) throws -> String {
        try call(
            collection, "org.freedesktop.Secret.Collection", "CreateItem",
            append: { m in
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "a")), "{sv}"), "CreateItem")
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "e")), "sv"), "CreateItem")
                try appendString(m, "s", "org.freedesktop.Secret.Item.Label")
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "v")), "s"), "CreateItem")
                try appendString(m, "s", label)
                try check(sd_bus_message_close_container(m), "CreateItem")
                try check(sd_bus_message_close_container(m), "CreateItem")
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "e")), "sv"), "CreateItem")
                try appendString(m, "s", "org.freedesktop.Secret.Item.Attributes")
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "v")), "a{ss}"), "CreateItem")
                try appendAttributes(m, attributes)
                try check(sd_bus_message_close_container(m), "CreateItem")
                try check(sd_bus_message_close_container(m), "CreateItem")
                try check(sd_bus_message_close_container(m), "CreateItem")
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "r")), "oayays"), "CreateItem")
                try appendString(m, "o", session)
                try check(sd_bus_message_append_array(m, CChar(UInt8(ascii: "y")), nil, 0), "CreateItem")
                _ = try secret.withUnsafeBytes { raw in
                    try check(
                        sd_bus_message_append_array(m, CChar(UInt8(ascii: "y")), raw.baseAddress, raw.count),
                        "CreateItem")
                }
                try appendString(m, "s", "text/plain")
                try check(sd_bus_message_close_container(m), "CreateItem")
                var flag: Int32 = replace ? 1 : 0
                try check(sd_bus_message_append_basic(m, CChar(UInt8(ascii: "b")), &flag), "CreateItem")
            }
        ) { reply in
            let item = try readString(reply, "o")
            let prompt = try readString(reply, "o")
            guard prompt == "/" else { throw Failure(description: "CreateItem asked for a prompt (locked?)") }
            return item
        }
    }

    /// `Service.SearchItems`: unlocked and locked paths.
    func searchItems(_ attributes: [(String, String)]) throws -> (unlocked: [String], locked: [String]) {
        try call(
            Self.service, "org.freedesktop.Secret.Service", "SearchItems",
            append: { m in
                try appendAttributes(m, attributes)
            }
        ) { reply in
            (try readPaths(reply), try readPaths(reply))
        }
    }

    /// `Item.GetSecret`: the secret's value.
    func getSecret(_ item: String, session: String) throws -> [UInt8] {
        try call(
            item, "org.freedesktop.Secret.Item", "GetSecret",
            append: { m in
                try appendString(m, "o", session)
            }
        ) { reply in
            try check(sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "r")), "oayays"), "GetSecret")
            _ = try readString(reply, "o")
            _ = try readBytes(reply)
            let value = try readBytes(reply)
            _ = try readString(reply, "s")
            try check(sd_bus_message_exit_container(reply), "GetSecret")
            return value
        }
    }

    /// `Item.Delete`.
    func deleteItem(_ item: String) throws {
        try call(item, "org.freedesktop.Secret.Item", "Delete") { _ in }
    }

    /// `Service.Unlock([collection])`: whether it was unlocked without a prompt.
    func unlockWithoutPrompt(_ collection: String) throws -> Bool {
        try call(
            Self.service, "org.freedesktop.Secret.Service", "Unlock",
            append: { m in
                try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "a")), "o"), "Unlock")
                try appendString(m, "o", collection)
                try check(sd_bus_message_close_container(m), "Unlock")
            }
        ) { reply in
            _ = try readPaths(reply)
            return try readString(reply, "o") == "/"
        }
    }

    // MARK: Encoding helpers

    private func appendString(_ m: OpaquePointer, _ type: Unicode.Scalar, _ value: String) throws {
        try check(value.withCString { sd_bus_message_append_basic(m, CChar(type.value), $0) }, "append")
    }

    private func appendAttributes(_ m: OpaquePointer, _ attributes: [(String, String)]) throws {
        try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "a")), "{ss}"), "append")
        for (key, value) in attributes {
            try check(sd_bus_message_open_container(m, CChar(UInt8(ascii: "e")), "ss"), "append")
            try appendString(m, "s", key)
            try appendString(m, "s", value)
            try check(sd_bus_message_close_container(m), "append")
        }
        try check(sd_bus_message_close_container(m), "append")
    }

    private func readString(_ m: OpaquePointer, _ type: Unicode.Scalar) throws -> String {
        var pointer: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(m, CChar(type.value), &pointer), "read")
        return pointer.map { String(cString: $0) } ?? ""
    }

    private func readPaths(_ m: OpaquePointer) throws -> [String] {
        try check(sd_bus_message_enter_container(m, CChar(UInt8(ascii: "a")), "o"), "read")
        var paths: [String] = []
        while true {
            var pointer: UnsafePointer<CChar>?
            let r = sd_bus_message_read_basic(m, CChar(UInt8(ascii: "o")), &pointer)
            try check(r, "read")
            if r == 0 { break }
            paths.append(String(cString: pointer!))
        }
        try check(sd_bus_message_exit_container(m), "read")
        return paths
    }

    private func readBytes(_ m: OpaquePointer) throws -> [UInt8] {
        var pointer: UnsafeRawPointer?
        var size = 0
        try check(sd_bus_message_read_array(m, CChar(UInt8(ascii: "y")), &pointer, &size), "read")
        guard let pointer, size > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: size))
    }
}

@discardableResult
private func check(_ result: Int32, _ what: String) throws -> Int32 {
    if result < 0 { throw Client.Failure(description: "\(what): \(String(cString: strerror(-result)))") }
    return result
}
