/// One argument of a method or a signal: its name, shown by introspection, and its single complete type.
package struct BusArgument: Sendable, Equatable {
    package let name: String
    package let type: String

    package init(_ name: String, _ type: String) {
        self.name = name
        self.type = type
    }
}

/// How a call of a `BusMethod` is read and checked.
package struct BusMethodOptions: OptionSet, Sendable {
    package let rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }

    /// The call carries secrets in byte arrays: they are zeroed in the message as they are read,
    /// and in the values read once the body returns (see `BusValue.wipeByteArrays`).
    package static let wipesByteArrays = BusMethodOptions(rawValue: 1 << 0)
    /// The body itself finds out whether the object is there (a hot path that does it in one step
    /// with its work): the object's `checkExists` does not run first.
    package static let checksObjectItself = BusMethodOptions(rawValue: 1 << 1)
}

/// A method of an interface that `Object` serves: its name and arguments, which both dispatch
/// (`BusObject.dispatch`) and introspection read, and what it does.
///
/// The body runs only once the call's body has exactly the input signature, and gets the arguments
/// read within the object's caps (or the method's own).
package struct BusMethod<Object>: Sendable {
    package let name: String
    package let inputs: [BusArgument]
    package let outputs: [BusArgument]
    /// Caps for reading the arguments; nil: the object's `readLimits`.
    package let limits: ReadLimits?
    package let options: BusMethodOptions
    /// The input signature a call must have, the types of `inputs` in order.
    package let inputSignature: String
    let body: @Sendable (Object, BusMethodCall) throws -> Void

    /// A method taking `inputs` and replying with `outputs`, given as (name, type) pairs in order.
    package init(
        _ name: String, in inputs: [(String, String)] = [], out outputs: [(String, String)] = [],
        limits: ReadLimits? = nil, options: BusMethodOptions = [],
        _ body: @escaping @Sendable (Object, BusMethodCall) throws -> Void
    ) {
        self.name = name
        self.inputs = inputs.map { BusArgument($0.0, $0.1) }
        self.outputs = outputs.map { BusArgument($0.0, $0.1) }
        self.limits = limits
        self.options = options
        self.inputSignature = inputs.map(\.1).joined()
        self.body = body
    }
}

/// A property of an interface that `Object` serves, for `org.freedesktop.DBus.Properties` and
/// introspection: read-only unless it has a setter.
package struct BusProperty<Object>: Sendable {
    package let name: String
    /// The value's single complete type.
    package let type: String
    let getter: @Sendable (Object) throws -> BusValue
    let setter: (@Sendable (Object, BusValue) throws -> Void)?

    /// Whether `Set` may change it.
    package var isWritable: Bool { setter != nil }

    /// A property whose value `get` reads; `set`, when given, receives the new value (the variant's
    /// content, of any type: it checks the type itself).
    package init(
        _ name: String, _ type: String, get: @escaping @Sendable (Object) throws -> BusValue,
        set: (@Sendable (Object, BusValue) throws -> Void)? = nil
    ) {
        self.name = name
        self.type = type
        self.getter = get
        self.setter = set
    }
}

/// A signal of an interface, for introspection.
package struct BusSignal: Sendable, Equatable {
    package let name: String
    package let arguments: [BusArgument]

    /// A signal carrying `arguments`, given as (name, type) pairs in order.
    package init(_ name: String, _ arguments: [(String, String)] = []) {
        self.name = name
        self.arguments = arguments.map { BusArgument($0.0, $0.1) }
    }
}

/// One D-Bus interface of the objects of type `Object`: the one description of its methods,
/// properties and signals, from which dispatch, `Properties` and introspection are all served.
package struct BusInterface<Object>: Sendable {
    package let name: String
    package let methods: [BusMethod<Object>]
    package let properties: [BusProperty<Object>]
    package let signals: [BusSignal]

    package init(
        _ name: String, methods: [BusMethod<Object>] = [], properties: [BusProperty<Object>] = [],
        signals: [BusSignal] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }

    /// The interface's `<interface>` element: properties, methods and signals in table order.
    package var introspection: String {
        BusIntrospection.interface(
            name,
            properties.map { BusIntrospection.property($0.name, $0.type, writable: $0.isWritable) }
                + methods.map { BusIntrospection.method($0.name, inputs: $0.inputs, outputs: $0.outputs) }
                + signals.map(BusIntrospection.signal))
    }
}
