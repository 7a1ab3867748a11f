import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// A D-Bus error: the error name (`org.freedesktop.DBus.Error.ServiceUnknown`) and its message, whether a
/// peer replied with it or sd-bus failed locally (then the name is the one sd-bus maps the errno to, such
/// as `System.Error.ENOENT`, and `errno` is set).
package struct BusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The D-Bus error name.
    package var name: String
    /// The human-readable message; may be empty.
    package var message: String
    /// The errno sd-bus associates with the error (positive), if any.
    package var errno: Int32?

    /// Creates an error to reply with or to throw.
    package init(name: String, message: String, errno: Int32? = nil) {
        self.name = name
        self.message = message
        self.errno = errno
    }

    /// The error for a negative sd-bus return value, with the operation that failed.
    init(errno code: Int32, _ operation: String) {
        let positive = code < 0 ? -code : code
        var error = sd_bus_error()
        sd_bus_error_set_errno(&error, positive)
        defer { sd_bus_error_free(&error) }
        let detail = String(cString: strerror(positive))
        self.init(
            name: error.name.map { String(cString: $0) } ?? Self.Name.failed,
            message: "\(operation): \(detail)", errno: positive)
    }

    /// Copies an `sd_bus_error` (it stays owned by the caller).
    init(_ error: UnsafePointer<sd_bus_error>) {
        let code = sd_bus_error_get_errno(error)
        self.init(
            name: error.pointee.name.map { String(cString: $0) } ?? Self.Name.failed,
            message: error.pointee.message.map { String(cString: $0) } ?? "",
            errno: code > 0 ? code : nil)
    }

    package var description: String { message.isEmpty ? name : "\(name): \(message)" }

    /// The bus connection was closed or lost; the work was not done.
    static let connectionClosed = BusError(name: Name.disconnected, message: "the bus connection is closed")

    /// Well-known error names (the D-Bus specification's and the bus daemon's).
    package enum Name {
        package static let failed = "org.freedesktop.DBus.Error.Failed"
        package static let noReply = "org.freedesktop.DBus.Error.NoReply"
        package static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        package static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        package static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        package static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        package static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
        package static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        package static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
    }
}

/// Throws a `BusError` for a negative sd-bus return value; returns non-negative ones.
@discardableResult
func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(BusError) -> Int32 {
    if result < 0 { throw BusError(errno: result, operation()) }
    return result
}
