import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// What the bus daemon knows of the process behind a connection: the reply to
/// `org.freedesktop.DBus.GetConnectionCredentials`, taken by the daemon when that connection was made.
///
/// `processFD` is a pidfd for that very process, which dbus-broker and dbus-daemon 1.16 give
/// (`ProcessFD`) and older daemons (Debian 12's 1.14) do not; with only `ProcessID`, the pid may have
/// been reused since (docs/IDENTITY.md). Read by hand rather than through `BusValue`, which carries no
/// file descriptors: the one here is duplicated out of the message and closed with this object.
package final class ConnectionCredentials {
    /// `UnixUserID`.
    package private(set) var uid: UInt32?
    /// `ProcessID`, in the daemon's (and, on one machine, the caller's) pid namespace.
    package private(set) var pid: UInt32?
    /// `ProcessFD`: a pidfd (close-on-exec) owned by this object, or nil.
    package private(set) var processFD: Int32?
    /// `LinuxSecurityLabel`: the security module's label (AppArmor's `snap.NAME.APP (enforce)`), as the
    /// daemon read it at connect time, without its trailing NUL.
    package private(set) var securityLabel: [UInt8]?

    /// More entries than a daemon sends (it sends seven at most today).
    static let maximumEntries = 64
    /// Longer than any label a security module gives.
    static let maximumLabel = 4096

    deinit { if let processFD { close(processFD) } }

    /// Reads the reply to `GetConnectionCredentials` (signature `a{sv}`): the entries above, each only
    /// with its documented type; others are skipped.
    package init(reply: BusMessage) throws(BusError) {
        let message = reply.pointer
        try check(sd_bus_message_rewind(message, 1), "reading credentials")
        try check(sd_bus_message_enter_container(message, Self.type("a"), "{sv}"), "reading credentials")
        var entries = 0
        while try check(sd_bus_message_enter_container(message, Self.type("e"), "sv"), "reading credentials") > 0 {
            entries += 1
            guard entries <= Self.maximumEntries else {
                throw BusError(name: BusError.Name.invalidArgs, message: "more than \(Self.maximumEntries) credentials")
            }
            var rawKey: UnsafePointer<CChar>?
            try check(sd_bus_message_read_basic(message, Self.type("s"), &rawKey), "reading credentials")
            let key = rawKey.map { String(cString: $0) } ?? ""
            var kind: CChar = 0
            var rawContents: UnsafePointer<CChar>?
            try check(sd_bus_message_peek_type(message, &kind, &rawContents), "reading credentials")
            switch (key, rawContents.map { String(cString: $0) }) {
            case ("UnixUserID", "u"): uid = try readNumber(message)
            case ("ProcessID", "u"): pid = try readNumber(message)
            case ("ProcessFD", "h"): try readDescriptor(message)
            case ("LinuxSecurityLabel", "ay"): try readLabel(message)
            default: try check(sd_bus_message_skip(message, "v"), "reading credentials")
            }
            try check(sd_bus_message_exit_container(message), "reading credentials")
        }
        try check(sd_bus_message_exit_container(message), "reading credentials")
    }

    /// A `u` in a variant.
    private func readNumber(_ message: OpaquePointer) throws(BusError) -> UInt32 {
        try check(sd_bus_message_enter_container(message, Self.type("v"), "u"), "reading credentials")
        var value: UInt32 = 0
        try check(sd_bus_message_read_basic(message, Self.type("u"), &value), "reading credentials")
        try check(sd_bus_message_exit_container(message), "reading credentials")
        return value
    }

    /// The message owns the descriptor it carries: a duplicate (close-on-exec) is this object's.
    private func readDescriptor(_ message: OpaquePointer) throws(BusError) {
        try check(sd_bus_message_enter_container(message, Self.type("v"), "h"), "reading credentials")
        var borrowed: Int32 = -1
        try check(sd_bus_message_read_basic(message, Self.type("h"), &borrowed), "reading credentials")
        try check(sd_bus_message_exit_container(message), "reading credentials")
        guard processFD == nil else { return }  // a second ProcessFD: the first stands
        let own = fcntl(borrowed, F_DUPFD_CLOEXEC, 3)
        guard own >= 0 else { throw BusError(errno: -errno, "duplicating the peer's pidfd") }
        processFD = own
    }

    private func readLabel(_ message: OpaquePointer) throws(BusError) {
        try check(sd_bus_message_enter_container(message, Self.type("v"), "ay"), "reading credentials")
        var data: UnsafeRawPointer?
        var size = 0
        try check(sd_bus_message_read_array(message, Self.type("y"), &data, &size), "reading credentials")
        try check(sd_bus_message_exit_container(message), "reading credentials")
        guard size <= Self.maximumLabel else { return }
        var label = data.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
        if label.last == 0 { label.removeLast() }
        securityLabel = label
    }

    private static func type(_ character: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: character)) }
}

extension Bus {
    /// The bus daemon's credentials for the connection that owns `name` (a unique name, `:1.42`).
    /// Blocks the loop thread for the daemon's answer (bounded by `timeout`), like `call`.
    package func connectionCredentials(of name: String, timeout: Duration? = .seconds(1)) throws(BusError)
        -> ConnectionCredentials
    {
        let reply = try call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetConnectionCredentials", [.string(name)], timeout: timeout)
        return try ConnectionCredentials(reply: reply)
    }
}
