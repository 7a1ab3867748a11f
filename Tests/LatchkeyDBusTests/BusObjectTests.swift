import Foundation
import LatchkeyTestSupport
import XCTest

@testable import LatchkeyDBus

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Objects described by tables (`BusObject`): dispatch, `Properties` and introspection from the same
/// table, against a real private dbus-daemon.
final class BusObjectTests: XCTestCase {
    /// What the counter objects share; touched on the service's loop thread, read by the test
    /// through `sync`.
    final class State: @unchecked Sendable {
        var value: UInt64 = 0
        var name = "counter"
        var exists = true
        /// The members whose bodies ran, in order.
        var ran: [String] = []
        /// A byte array a body kept (sharing the storage of what it was given).
        var kept: [UInt8] = []
    }

    /// `org.example.Counter` and `org.example.Extra` at /counter.
    struct Counter: BusObject {
        let state: State

        static let interfaces = [
            BusInterface<Counter>(
                "org.example.Counter",
                methods: [
                    BusMethod("Add", in: [("amount", "u")], out: [("total", "t")]) { counter, call in
                        counter.state.ran.append("Add")
                        guard case .uint32(let amount) = call.arguments[0] else { return }
                        counter.state.value += UInt64(amount)
                        try call.reply([.uint64(counter.state.value)])
                    },
                    BusMethod("Keep", in: [("secret", "ay"), ("note", "s")], options: .wipesByteArrays) {
                        counter, call in
                        counter.state.ran.append("Keep")
                        counter.state.kept = call.arguments[0].bytes ?? []
                        try call.reply()
                    },
                    BusMethod("Peek", out: [("value", "t")], options: .checksObjectItself) { counter, call in
                        counter.state.ran.append("Peek")
                        try call.reply([.uint64(counter.state.value)])
                    },
                    BusMethod(
                        "Sum", in: [("values", "au")], out: [("sum", "t")], limits: ReadLimits(maxArrayElements: 3)
                    ) {
                        counter, call in
                        counter.state.ran.append("Sum")
                        let values = call.arguments[0].elements ?? []
                        try call.reply([
                            .uint64(
                                values.reduce(0) { sum, value in
                                    if case .uint32(let v) = value { sum + UInt64(v) } else { sum }
                                })
                        ])
                    },
                ],
                properties: [
                    BusProperty("Value", "t") { .uint64($0.state.value) },
                    BusProperty(
                        "Name", "s", get: { .string($0.state.name) },
                        set: { counter, value in
                            guard case .string(let name) = value else { throw BusError.invalidArgs("Name is a string") }
                            counter.state.name = name
                        }),
                ],
                signals: [
                    BusSignal("Changed", [("value", "t")]),
                    BusSignal("Reset"),
                ]),
            BusInterface<Counter>(
                "org.example.Extra",
                methods: [
                    BusMethod("Add", in: [("text", "s")]) { counter, call in
                        counter.state.ran.append("Extra.Add")
                        try call.reply()
                    }
                ],
                properties: [
                    BusProperty("Flag", "b") { _ in .boolean(true) }
                ]),
        ]

        func checkExists() throws {
            state.ran.append("checkExists")
            guard state.exists else { throw BusError(name: "org.example.Error.Gone", message: "no counter") }
        }

        func childNodes() throws -> [String] {
            try checkExists()
            return ["a", "b"]
        }
    }

    /// An object type without properties, at /plain: it is never asked whether it exists for `Properties`.
    struct Plain: BusObject {
        let state: State
        static let interfaces = [
            BusInterface<Plain>("org.example.Plain", methods: [BusMethod("Close") { _, call in try call.reply() }])
        ]

        func checkExists() throws {
            state.ran.append("checkExists")
            throw BusError(name: "org.example.Error.Gone", message: "no plain")
        }
    }

    private var daemon: PrivateBus!
    private var service: BusConnection!
    private var client: BusConnection!
    private let state = State()

    override func setUpWithError() throws {
        daemon = try PrivateBus(system: false)
        service = try BusConnection(.address(daemon.address))
        let state = state
        try service.sync { bus in
            try bus.addObject(path: "/counter") { call in
                try Counter(state: state).dispatch(call)
                return .handled
            }
            try bus.addObject(path: "/plain") { call in
                try Plain(state: state).dispatch(call)
                return .handled
            }
            try bus.requestName("org.example.Counter")
        }
        client = try BusConnection(.address(daemon.address))
    }

    override func tearDown() {
        client?.close()
        service?.close()
        daemon?.stop()
    }

    private func call(
        _ interface: String?, _ member: String, _ arguments: [BusValue] = [], at path: String = "/counter"
    )
        throws -> [BusValue]
    {
        try client.sync { bus in
            let call = try bus.methodCall(
                destination: "org.example.Counter", path: path, interface: interface, member: member)
            try call.append(arguments)
            return try bus.call(call).arguments()
        }
    }

    private func failure(
        _ interface: String?, _ member: String, _ arguments: [BusValue] = [], at path: String = "/counter"
    )
        -> BusError?
    {
        do {
            _ = try call(interface, member, arguments, at: path)
            return nil
        } catch {
            return error as? BusError
        }
    }

    /// What ran on the service since the last look, and forgets it.
    private func ran() throws -> [String] {
        let state = state
        return try service.sync { _ in
            defer { state.ran = [] }
            return state.ran
        }
    }

    func testMethodsAreFoundByInterfaceAndMemberAndGetTheirArguments() throws {
        XCTAssertEqual(try call("org.example.Counter", "Add", [.uint32(2)]), [.uint64(2)])
        // No interface: the first interface that has the member.
        XCTAssertEqual(try call(nil, "Add", [.uint32(3)]), [.uint64(5)])
        XCTAssertEqual(try call("org.example.Extra", "Add", [.string("x")]), [])
        XCTAssertEqual(try ran(), ["checkExists", "Add", "checkExists", "Add", "checkExists", "Extra.Add"])
    }

    func testUnknownMembersAndWrongSignaturesNeverReachABody() throws {
        let unknown = failure("org.example.Counter", "Frobnicate")
        XCTAssertEqual(unknown?.name, BusError.Name.unknownMethod)
        XCTAssertEqual(unknown?.message, "no method org.example.Counter.Frobnicate here")
        XCTAssertEqual(failure(nil, "Frobnicate")?.message, "no method Frobnicate here")
        // A member of another of the object's interfaces, and one of an interface it does not have.
        XCTAssertEqual(failure("org.example.Extra", "Peek")?.message, "no method org.example.Extra.Peek here")
        XCTAssertEqual(
            failure("org.example.Other", "Add", [.uint32(1)])?.message, "no method org.example.Other.Add here")
        // Properties members only with the Properties interface named.
        XCTAssertEqual(failure(nil, "GetAll", [.string("")])?.message, "no method GetAll here")
        XCTAssertEqual(
            failure("org.freedesktop.DBus.Properties", "Frobnicate")?.message,
            "no method org.freedesktop.DBus.Properties.Frobnicate here")

        let wrong = failure("org.example.Counter", "Add", [.string("2")])
        XCTAssertEqual(wrong?.name, BusError.Name.invalidArgs)
        XCTAssertEqual(wrong?.message, "expected arguments (u), got (s)")
        XCTAssertEqual(failure("org.example.Counter", "Add")?.message, "expected arguments (u), got ()")
        XCTAssertEqual(
            failure("org.example.Counter", "Add", [.uint32(1), .uint32(2)])?.message,
            "expected arguments (u), got (uu)")
        XCTAssertEqual(failure(nil, "Add", [.string("x"), .string("y")])?.message, "expected arguments (u), got (ss)")
        XCTAssertEqual(
            failure("org.freedesktop.DBus.Properties", "Get", [.string("x")])?.message,
            "expected arguments (ss), got (s)")
        XCTAssertEqual(
            failure("org.freedesktop.DBus.Properties", "Set", [.string(""), .string("Name"), .string("x")])?.message,
            "expected arguments (ssv), got (sss)")
        XCTAssertFalse(try ran().contains { !$0.hasPrefix("checkExists") }, "no body ran")
        // A method's own caps, checked while the call is read.
        XCTAssertEqual(
            failure("org.example.Counter", "Sum", [.array(elementType: "u", (0..<4).map { .uint32($0) })])?.message,
            "message refused while reading it: an array has more than 3 elements")
        XCTAssertFalse(try ran().contains("Sum"))
        XCTAssertEqual(
            try call("org.example.Counter", "Sum", [.array(elementType: "u", [.uint32(1), .uint32(2)])]), [.uint64(3)])
    }

    func testAMissingObjectIsCheckedFirstUnlessTheMethodChecksItself() throws {
        let state = state
        try service.sync { _ in state.exists = false }
        for (interface, member, arguments) in [
            ("org.example.Counter", "Add", [BusValue.uint32(1)]),
            ("org.example.Counter", "Add", [.string("wrong")]),
            ("org.example.Counter", "Frobnicate", []),
            ("org.example.Other", "Add", []),
        ] {
            XCTAssertEqual(
                failure(interface, member, arguments)?.name, "org.example.Error.Gone", "\(interface).\(member)")
        }
        XCTAssertEqual(try ran(), ["checkExists", "checkExists", "checkExists", "checkExists"])
        XCTAssertEqual(try call("org.example.Counter", "Peek"), [.uint64(0)])
        XCTAssertEqual(try ran(), ["Peek"])
        // Properties check the signature first, then the object; Introspect asks for the children.
        XCTAssertEqual(
            failure("org.freedesktop.DBus.Properties", "Get", [.string("x")])?.name, BusError.Name.invalidArgs)
        XCTAssertEqual(
            failure("org.freedesktop.DBus.Properties", "GetAll", [.string("")])?.name, "org.example.Error.Gone")
        XCTAssertEqual(
            failure("org.freedesktop.DBus.Properties", "Set", [.string(""), .string("Name"), .variant(.string("x"))])?
                .name,
            "org.example.Error.Gone")
        XCTAssertEqual(failure(nil, "Introspect")?.name, "org.example.Error.Gone")
        XCTAssertEqual(try service.sync { _ in state.name }, "counter")
    }

    func testPropertiesComeFromTheTable() throws {
        let properties = "org.freedesktop.DBus.Properties"
        _ = try call("org.example.Counter", "Add", [.uint32(7)])
        XCTAssertEqual(
            try call(properties, "Get", [.string("org.example.Counter"), .string("Value")]), [.variant(.uint64(7))])
        XCTAssertEqual(try call(properties, "Get", [.string(""), .string("Flag")]), [.variant(.boolean(true))])
        XCTAssertEqual(
            try call(properties, "GetAll", [.string("org.example.Counter")]),
            [
                .dictionary(
                    keyType: "s", valueType: "v",
                    [
                        (.string("Value"), .variant(.uint64(7))), (.string("Name"), .variant(.string("counter"))),
                    ])
            ])
        XCTAssertEqual(try call(properties, "GetAll", [.string("")]).first?.elements?.count, 3, "every interface's")
        XCTAssertEqual(
            try call(properties, "GetAll", [.string("org.example.Other")]), [.array(elementType: "{sv}", [])])

        XCTAssertEqual(
            try call(properties, "Set", [.string("org.example.Counter"), .string("Name"), .variant(.string("c2"))]), [])
        XCTAssertEqual(try call(properties, "Get", [.string(""), .string("Name")]), [.variant(.string("c2"))])
        XCTAssertEqual(
            failure(properties, "Set", [.string(""), .string("Name"), .variant(.uint32(1))])?.message,
            "Name is a string")
        let readOnly = failure(properties, "Set", [.string(""), .string("Value"), .variant(.uint64(1))])
        XCTAssertEqual(readOnly?.name, BusError.Name.propertyReadOnly)
        XCTAssertEqual(readOnly?.message, "Value is read-only")
        let missing = failure(properties, "Get", [.string("org.example.Extra"), .string("Value")])
        XCTAssertEqual(missing?.name, BusError.Name.invalidArgs)
        XCTAssertEqual(missing?.message, "no property org.example.Extra.Value here")
        XCTAssertEqual(
            failure(properties, "Set", [.string(""), .string("Nope"), .variant(.uint64(1))])?.message,
            "no writable property .Nope here")

        // An object type without properties answers from its empty table without looking at the object.
        XCTAssertEqual(try call(properties, "GetAll", [.string("")], at: "/plain"), [.array(elementType: "{sv}", [])])
        XCTAssertEqual(
            failure(properties, "Get", [.string(""), .string("X")], at: "/plain")?.message, "no property .X here")
        _ = try ran()
        XCTAssertEqual(
            failure(properties, "Set", [.string(""), .string("X"), .variant(.uint64(1))], at: "/plain")?.name,
            BusError.Name.invalidArgs)
        XCTAssertEqual(try ran(), [])
        XCTAssertEqual(failure("org.example.Plain", "Close", at: "/plain")?.message, "no plain")
    }

    func testSecretArgumentsAreWipedOnceTheBodyReturns() throws {
        XCTAssertEqual(try call("org.example.Counter", "Keep", [.byteArray([1, 2, 3]), .string("note")]), [])
        let state = state
        XCTAssertEqual(try service.sync { _ in state.kept }, [0, 0, 0])
    }

    // MARK: - Introspection

    /// Every method, property, signal and child node in introspection data, as lines to compare.
    final class Parser: NSObject, XMLParserDelegate {
        var lines: [String] = []
        var interface = ""
        var member = ""
        var arguments: [String] = []

        static func parse(_ xml: String) -> [String]? {
            let delegate = Parser()
            let parser = XMLParser(data: Data(xml.utf8))
            parser.delegate = delegate
            return parser.parse() ? delegate.lines.sorted() : nil
        }

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            switch element {
            case "interface": interface = attributes["name"] ?? ""
            case "method", "signal":
                member = "\(interface) \(element) \(attributes["name"] ?? "")"
                arguments = []
            case "arg":
                let fields = [attributes["name"], attributes["type"], attributes["direction"]]
                arguments.append(fields.compactMap { $0 }.joined(separator: ":"))
            case "property":
                let fields = [attributes["name"], attributes["type"], attributes["access"]].map { $0 ?? "" }
                lines.append("\(interface) property " + fields.joined(separator: " "))
            case "node" where attributes["name"] != nil: lines.append("node \(attributes["name"]!)")
            default: break
            }
        }

        func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
            if element == "method" || element == "signal" {
                lines.append(member + "(" + arguments.joined(separator: ", ") + ")")
            }
        }
    }

    func testIntrospectionIsTheTable() throws {
        let xml = try XCTUnwrap(try call("org.freedesktop.DBus.Introspectable", "Introspect").first?.string)
        XCTAssertEqual(try call(nil, "Introspect").first?.string, xml)
        let lines = try XCTUnwrap(Parser.parse(xml), xml)
        let standard = [
            "org.freedesktop.DBus.Introspectable method Introspect(xml_data:s:out)",
            "org.freedesktop.DBus.Peer method GetMachineId(machine_uuid:s:out)",
            "org.freedesktop.DBus.Peer method Ping()",
            "org.freedesktop.DBus.Properties method Get(interface_name:s:in, property_name:s:in, value:v:out)",
            "org.freedesktop.DBus.Properties method GetAll(interface_name:s:in, props:a{sv}:out)",
            "org.freedesktop.DBus.Properties method Set(interface_name:s:in, property_name:s:in, value:v:in)",
            "org.freedesktop.DBus.Properties signal PropertiesChanged(interface_name:s, changed_properties:a{sv}, "
                + "invalidated_properties:as)",
        ]
        XCTAssertEqual(
            lines,
            (standard + [
                "node a", "node b",
                "org.example.Counter method Add(amount:u:in, total:t:out)",
                "org.example.Counter method Keep(secret:ay:in, note:s:in)",
                "org.example.Counter method Peek(value:t:out)",
                "org.example.Counter method Sum(values:au:in, sum:t:out)",
                "org.example.Counter property Name s readwrite",
                "org.example.Counter property Value t read",
                "org.example.Counter signal Changed(value:t)",
                "org.example.Counter signal Reset()",
                "org.example.Extra method Add(text:s:in)",
                "org.example.Extra property Flag b read",
            ]).sorted())

        let plain = try XCTUnwrap(Parser.parse(try call(nil, "Introspect", at: "/plain").first?.string ?? ""))
        XCTAssertEqual(plain, (standard + ["org.example.Plain method Close()"]).sorted())
        XCTAssertEqual(Parser.parse(BusIntrospection.document()), standard.sorted())
        XCTAssertEqual(
            Parser.parse(BusIntrospection.document(children: ["x<&\"y"])), (standard + ["node x<&\"y"]).sorted())
    }
}
