/// A method call that passed its checks, as the method's body sees it: the arguments, read and of
/// the method's input signature, and the message to reply to. Threading: the loop thread only, like
/// `BusMessage`.
package struct BusMethodCall {
    /// The call as received.
    package let message: BusMessage
    /// The arguments, one per input of the method.
    package let arguments: [BusValue]

    /// The caller's unique name ("" when the bus did not stamp one).
    package var sender: String { message.sender ?? "" }

    /// Sends the method return, carrying `values` (see `BusMessage.reply`).
    package func reply(_ values: [BusValue] = []) throws(BusError) {
        try message.reply(values)
    }

    /// Argument `index` as a string. The signature was checked, so the `InvalidArgs` thrown here
    /// (and by the accessors below) is only for a body that asks for another type than it declared.
    package func string(_ index: Int) throws(BusError) -> String {
        guard case .string(let value) = arguments[index] else { throw BusError.invalidArgs("expected a string") }
        return value
    }

    /// Argument `index` as an object path.
    package func objectPath(_ index: Int) throws(BusError) -> String {
        guard case .objectPath(let value) = arguments[index] else {
            throw BusError.invalidArgs("expected an object path")
        }
        return value
    }

    /// Argument `index` as a boolean.
    package func boolean(_ index: Int) throws(BusError) -> Bool {
        guard case .boolean(let value) = arguments[index] else { throw BusError.invalidArgs("expected a boolean") }
        return value
    }

    /// Argument `index` as a Unix file descriptor, borrowed from the message: valid until the call's
    /// body returns, and not to be closed (duplicate it to keep it).
    package func unixFD(_ index: Int) throws(BusError) -> Int32 {
        guard case .unixFD(let descriptor) = arguments[index] else {
            throw BusError.invalidArgs("expected a file descriptor")
        }
        return descriptor
    }

    /// The value inside variant argument `index`.
    package func variant(_ index: Int) throws(BusError) -> BusValue {
        guard case .variant(let value) = arguments[index] else { throw BusError.invalidArgs("expected a variant") }
        return value
    }
}

extension BusError {
    /// `UnknownMethod` for `member` of `interface` (nil: none named).
    package static func unknownMethod(_ interface: String?, _ member: String) -> BusError {
        BusError(name: Name.unknownMethod, message: "no method \(interface.map { $0 + "." } ?? "")\(member) here")
    }

    /// `InvalidArgs` with `message`.
    package static func invalidArgs(_ message: String) -> BusError {
        BusError(name: Name.invalidArgs, message: message)
    }
}

extension BusError.Name {
    package static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
}
