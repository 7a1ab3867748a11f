/// A D-Bus object described by tables (`BusInterface`): `dispatch` answers a method call to it from
/// them, with `org.freedesktop.DBus.Introspectable` and `org.freedesktop.DBus.Properties` built in.
///
/// A value of the type stands for one object for one call: its handlers and property accessors
/// receive it, and it may keep what it looked up (the object's record, say) for the rest of the call.
/// Threading: `dispatch` runs on the connection's loop thread (it is called from an object handler).
///
/// What `dispatch` checks, in order, for a call to one of the object's own interfaces (a nil
/// interface means any of them):
/// 1. `checkExists()`, unless the method found has `.checksObjectItself`;
/// 2. that the interface has the member, else `UnknownMethod`;
/// 3. that the body has the method's input signature, else `InvalidArgs`; then the arguments are read
///    within the caps;
/// 4. the method's body, which replies through its `BusMethodCall` or throws the error to reply with.
///
/// `Introspect` (with or without its interface) replies with `introspection(children:)` and the
/// object's `childNodes()`. `Properties` calls (only with that interface named) have their signature
/// checked first; then `prepareToReadProperties()` (Get, GetAll) or `checkExists()` (Set) runs, for an
/// object type that has properties at all; then the tables answer. An interface name of "" means all
/// of the object's interfaces.
package protocol BusObject {
    /// The object's own interfaces (the standard ones are added by `dispatch` and introspection).
    static var interfaces: [BusInterface<Self>] { get }
    /// Caps for reading a call's arguments, unless the method sets its own.
    static var readLimits: ReadLimits { get }
    /// Caps for reading a `Properties.Set` call (the value may be of any property's type).
    static var propertyWriteLimits: ReadLimits { get }

    /// Throws the error to reply with when the object is not there (or not there for this caller).
    func checkExists() throws
    /// Runs before properties are read; by default `checkExists()`. An object that answers even when
    /// it cannot be read (with properties that say so) overrides it.
    func prepareToReadProperties() throws
    /// The names of the child nodes introspection lists; throws like `checkExists()`.
    func childNodes() throws -> [String]
}

extension BusObject {
    package static var readLimits: ReadLimits { ReadLimits() }
    package static var propertyWriteLimits: ReadLimits { readLimits }
    package func checkExists() throws {}
    package func prepareToReadProperties() throws { try checkExists() }
    package func childNodes() throws -> [String] { [] }

    /// The introspection document of an object of this type with `children`.
    package static func introspection(children: [String] = []) -> String {
        BusIntrospection.document(interfaces.map(\.introspection), children: children)
    }

    /// Answers a method call addressed to this object (see `BusObject`): replies, or throws the error
    /// to reply with. Errors from handlers pass through unchanged.
    package func dispatch(_ call: BusMessage) throws {
        let member = call.member ?? ""
        let interface = call.interface
        if member == "Introspect", interface == nil || interface == BusIntrospection.introspectable {
            // Its body is not looked at: Introspect takes no arguments, and a caller that sends some
            // still gets the data, as the objects have always answered.
            try call.reply([.string(Self.introspection(children: try childNodes()))])
            return
        }
        if interface == BusIntrospection.properties {
            try dispatchProperties(call, member)
            return
        }
        let method = Self.method(interface, member)
        let checksItself = method?.options.contains(.checksObjectItself) ?? false
        if !checksItself { try checkExists() }
        guard let method else { throw BusError.unknownMethod(interface, member) }
        let wipes = method.options.contains(.wipesByteArrays)
        let arguments = try Self.arguments(
            of: call, method.inputSignature, within: method.limits ?? Self.readLimits,
            wipingByteArrays: wipes)
        defer { if wipes { for argument in arguments { argument.wipeByteArrays() } } }
        try method.body(self, BusMethodCall(message: call, arguments: arguments))
    }

    private func dispatchProperties(_ call: BusMessage, _ member: String) throws {
        guard let standard = BusIntrospection.propertiesMethods.first(where: { $0.name == member }) else {
            throw BusError.unknownMethod(BusIntrospection.properties, member)
        }
        let arguments = try Self.arguments(
            of: call, standard.inputSignature,
            within: member == "Set" ? Self.propertyWriteLimits : Self.readLimits)
        let checked = BusMethodCall(message: call, arguments: arguments)
        let interface = try checked.string(0)
        // An object type without properties has nothing to look up, whichever object is asked.
        let hasProperties = Self.interfaces.contains { !$0.properties.isEmpty }
        switch member {
        case "Get":
            let name = try checked.string(1)
            if hasProperties { try prepareToReadProperties() }
            guard let property = Self.property(interface, name) else {
                throw BusError.invalidArgs("no property \(interface).\(name) here")
            }
            try call.reply([.variant(try value(of: property))])

        case "GetAll":
            if hasProperties { try prepareToReadProperties() }
            var entries: [(BusValue, BusValue)] = []
            for candidate in Self.interfaces where interface.isEmpty || candidate.name == interface {
                for property in candidate.properties {
                    entries.append((.string(property.name), .variant(try value(of: property))))
                }
            }
            try call.reply([.dictionary(keyType: "s", valueType: "v", entries)])

        default:  // Set
            let name = try checked.string(1)
            let value = try checked.variant(2)
            if hasProperties { try checkExists() }
            guard let property = Self.property(interface, name) else {
                throw BusError.invalidArgs("no writable property \(interface).\(name) here")
            }
            guard let setter = property.setter else {
                throw BusError(name: BusError.Name.propertyReadOnly, message: "\(name) is read-only")
            }
            try setter(self, value)
            try call.reply()
        }
    }

    private func value(of property: BusProperty<Self>) throws -> BusValue {
        let value = try property.getter(self)
        assert(
            value.signature == property.type,
            "\(property.name) is declared \(property.type), read as \(value.signature)")
        return value
    }

    /// The method `member` of `interface` (nil: of any of the object's interfaces, the first found).
    static func method(_ interface: String?, _ member: String) -> BusMethod<Self>? {
        for candidate in interfaces where interface == nil || candidate.name == interface {
            if let method = candidate.methods.first(where: { $0.name == member }) { return method }
        }
        return nil
    }

    /// The property `name` of `interface` ("": of any of the object's interfaces, the first found).
    static func property(_ interface: String, _ name: String) -> BusProperty<Self>? {
        for candidate in interfaces where interface.isEmpty || candidate.name == interface {
            if let property = candidate.properties.first(where: { $0.name == name }) { return property }
        }
        return nil
    }

    /// The call's arguments, if its body has exactly `signature`, read within `limits`.
    static func arguments(
        of call: BusMessage, _ signature: String, within limits: ReadLimits,
        wipingByteArrays: Bool = false
    ) throws(BusError) -> [BusValue] {
        guard call.signature == signature else {
            throw BusError.invalidArgs("expected arguments (\(signature)), got (\(call.signature))")
        }
        return try call.arguments(within: limits, wipingByteArrays: wipingByteArrays)
    }
}
