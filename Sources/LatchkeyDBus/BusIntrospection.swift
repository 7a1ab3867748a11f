/// Introspection data (`org.freedesktop.DBus.Introspectable.Introspect`), built from the tables that
/// also drive dispatch, so that what an object says it has and what it answers cannot drift apart.
package enum BusIntrospection {
    static let introspectable = "org.freedesktop.DBus.Introspectable"
    static let peer = "org.freedesktop.DBus.Peer"
    static let properties = "org.freedesktop.DBus.Properties"

    /// A standard method: what introspection shows and what a call must carry.
    struct StandardMethod {
        let name: String
        let inputs: [BusArgument]
        let outputs: [BusArgument]
        var inputSignature: String { inputs.map(\.type).joined() }
    }

    /// `org.freedesktop.DBus.Properties`, which `BusObject.dispatch` answers from the property tables.
    static let propertiesMethods = [
        StandardMethod(
            name: "Get", inputs: [BusArgument("interface_name", "s"), BusArgument("property_name", "s")],
            outputs: [BusArgument("value", "v")]),
        StandardMethod(
            name: "GetAll", inputs: [BusArgument("interface_name", "s")], outputs: [BusArgument("props", "a{sv}")]),
        StandardMethod(
            name: "Set",
            inputs: [
                BusArgument("interface_name", "s"), BusArgument("property_name", "s"),
                BusArgument("value", "v"),
            ], outputs: []),
    ]

    static let propertiesChanged = BusSignal(
        "PropertiesChanged",
        [
            ("interface_name", "s"), ("changed_properties", "a{sv}"), ("invalidated_properties", "as"),
        ])

    /// The interfaces every object has: Introspectable and Properties (answered by `BusObject.dispatch`)
    /// and Peer (answered by sd-bus itself before any object sees the call).
    static let standardInterfaces = [
        interface(introspectable, [method("Introspect", inputs: [], outputs: [BusArgument("xml_data", "s")])]),
        interface(
            peer,
            [
                method("Ping", inputs: [], outputs: []),
                method("GetMachineId", inputs: [], outputs: [BusArgument("machine_uuid", "s")]),
            ]),
        interface(
            properties,
            propertiesMethods.map { method($0.name, inputs: $0.inputs, outputs: $0.outputs) }
                + [signal(propertiesChanged)]),
    ].joined()

    static let header = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">

        """

    /// A whole introspection document: the standard interfaces, then `interfaces` (`BusInterface.introspection`),
    /// then a `<node>` for each child name.
    package static func document(_ interfaces: [String] = [], children: [String] = []) -> String {
        header + "<node>\n" + standardInterfaces + interfaces.joined()
            + children.map { "  <node name=\"\(escaped($0))\"/>\n" }.joined() + "</node>\n"
    }

    static func interface(_ name: String, _ members: [String]) -> String {
        "  <interface name=\"\(escaped(name))\">\n" + members.joined() + "  </interface>\n"
    }

    static func method(_ name: String, inputs: [BusArgument], outputs: [BusArgument]) -> String {
        let arguments = inputs.map { argument($0, direction: "in") } + outputs.map { argument($0, direction: "out") }
        guard !arguments.isEmpty else { return "    <method name=\"\(escaped(name))\"/>\n" }
        return "    <method name=\"\(escaped(name))\">\n" + arguments.joined() + "    </method>\n"
    }

    static func signal(_ signal: BusSignal) -> String {
        guard !signal.arguments.isEmpty else { return "    <signal name=\"\(escaped(signal.name))\"/>\n" }
        return "    <signal name=\"\(escaped(signal.name))\">\n"
            + signal.arguments.map { argument($0, direction: nil) }.joined()
            + "    </signal>\n"
    }

    static func property(_ name: String, _ type: String, writable: Bool) -> String {
        "    <property name=\"\(escaped(name))\" type=\"\(escaped(type))\" access=\"\(writable ? "readwrite" : "read")\"/>\n"
    }

    private static func argument(_ argument: BusArgument, direction: String?) -> String {
        "      <arg name=\"\(escaped(argument.name))\" type=\"\(escaped(argument.type))\""
            + (direction.map { " direction=\"\($0)\"" } ?? "") + "/>\n"
    }

    /// D-Bus names and signatures never hold these; child node names come from the object's own data.
    private static func escaped(_ text: String) -> String {
        guard text.contains(where: { "&<>\"".contains($0) }) else { return text }
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
