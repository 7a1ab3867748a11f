import Foundation
import LatchkeyTestSupport
import XCTest

@testable import LatchkeyDBus

/// The sd-bus wrapper against a real private dbus-daemon.
final class BusConnectionTests: XCTestCase {
    private var daemon: PrivateBus!

    override func setUpWithError() throws {
        daemon = try PrivateBus(system: false)
    }

    override func tearDown() {
        daemon?.stop()
        daemon = nil
    }

    /// Serves `org.example.Echo` at /echo: `Echo` returns its arguments, `Fail` throws a D-Bus error,
    /// anything else is left to sd-bus.
    private func startEchoService() throws -> BusConnection {
        let service = try BusConnection(.address(daemon.address))
        try service.sync { bus in
            try bus.addObject(path: "/echo") { call in
                switch call.member {
                case "Echo":
                    try call.reply(call.arguments())
                    return .handled
                case "Fail":
                    throw BusError(name: "org.example.Error.Nope", message: "it failed on purpose")
                default:
                    return .notHandled
                }
            }
            try bus.requestName("org.example.Echo")
        }
        return service
    }

    func testEveryTypeRoundTrips() throws {
        let service = try startEchoService()
        defer { service.close() }
        let client = try BusConnection(.address(daemon.address))
        defer { client.close() }

        let values: [BusValue] = [
            .byte(0xFE), .boolean(true), .boolean(false), .int16(-2), .uint16(65535), .int32(Int32.min),
            .uint32(UInt32.max), .int64(Int64.min), .uint64(UInt64.max), .double(-0.5),
            .string("héllo, wörld"), .string(""), .objectPath("/org/example/a_1"), .signature("a{sv}"),
            .strings(["a", "b"]), .array(elementType: "(susso)", []),
            .dictionary(
                keyType: "s", valueType: "v",
                [
                    (.string("flag"), .variant(.boolean(true))),
                    (.string("nested"), .variant(.variant(.strings(["x"])))),
                    (.string("struct"), .variant(.structure([.uint32(7), .objectPath("/")]))),
                ]),
            .structure([.string("c1"), .uint32(1000), .string("me"), .string("seat0"), .objectPath("/s/1")]),
            .array(elementType: "ay", [.byteArray([0, 1]), .byteArray([])]),
            .byteArray([0xFF, 0, 7]),
        ]
        let echoed = try client.sync { bus in
            try bus.call(
                destination: "org.example.Echo", path: "/echo", interface: "org.example.Echo",
                member: "Echo", values
            ).arguments()
        }
        XCTAssertEqual(echoed, values)
        // A byte array written value by value is the same D-Bus value; it is read back in one buffer.
        let written = try client.sync { bus in
            try bus.call(
                destination: "org.example.Echo", path: "/echo", interface: "org.example.Echo", member: "Echo",
                [.array(elementType: "y", [.byte(0), .byte(1)])]
            ).arguments()
        }
        XCTAssertEqual(written, [.byteArray([0, 1])])
        XCTAssertEqual(written.first?.bytes, [0, 1])
        XCTAssertEqual(written.first?.elements, [.byte(0), .byte(1)])
    }

    func testOversizedByteArraysAreRefusedBeforeTheyAreUnpacked() throws {
        let service = try startEchoService()
        defer { service.close() }
        let client = try BusConnection(.address(daemon.address))
        defer { client.close() }
        func echo(_ count: Int) throws -> [BusValue] {
            let bytes = BusValue.byteArray([UInt8](repeating: 7, count: count))
            return try client.sync { bus in
                try bus.call(
                    destination: "org.example.Echo", path: "/echo", interface: "org.example.Echo",
                    member: "Echo", [bytes]
                ).arguments()
            }
        }
        // (Compared as bytes: a failure message must not print a million values.)
        XCTAssertTrue(
            try echo(BusMessage.maximumByteArray).first?.bytes
                == [UInt8](repeating: 7, count: BusMessage.maximumByteArray))
        XCTAssertThrowsError(try echo(BusMessage.maximumByteArray + 1)) { error in
            XCTAssertEqual((error as? BusError)?.name, BusError.Name.invalidArgs, "\(error)")
        }
    }

    func testErrorsCarryTheirNameAndMessage() throws {
        let service = try startEchoService()
        defer { service.close() }
        let client = try BusConnection(.address(daemon.address))
        defer { client.close() }

        func callError(_ destination: String, _ member: String) -> BusError? {
            do {
                try client.sync { bus in
                    _ = try bus.call(
                        destination: destination, path: "/echo", interface: "org.example.Echo",
                        member: member)
                }
                return nil
            } catch {
                return error as? BusError
            }
        }
        XCTAssertEqual(callError("org.example.Echo", "Fail")?.name, "org.example.Error.Nope")
        XCTAssertEqual(callError("org.example.Echo", "Fail")?.message, "it failed on purpose")
        XCTAssertEqual(callError("org.example.Echo", "Missing")?.name, BusError.Name.unknownMethod)
        XCTAssertEqual(callError("org.example.Nobody", "Echo")?.name, BusError.Name.serviceUnknown)

        // A local failure: a string D-Bus cannot carry.
        XCTAssertThrowsError(
            try client.sync { bus in
                try bus.methodCall(destination: "org.example.Echo", path: "/echo", interface: nil, member: "Echo")
                    .append(.string("a\0b"))
            }
        ) { XCTAssertEqual(($0 as? BusError)?.name, BusError.Name.invalidArgs) }
    }

    func testAsyncCallsFallbacksAndMatches() throws {
        let service = try BusConnection(.address(daemon.address))
        defer { service.close() }
        try service.sync { bus in
            _ = try bus.addFallback(prefix: "/org/example/items") { call in
                try call.reply([.objectPath(call.path ?? "")])
                return .handled
            }
        }
        let client = try BusConnection(.address(daemon.address))
        defer { client.close() }

        let replied = expectation(description: "async reply")
        // Ping /a, Done /b (cancels the Ping match), Ping /c (dropped), Done /d.
        let signalled = expectation(description: "signals")
        signalled.expectedFulfillmentCount = 3
        signalled.assertForOverFulfill = true
        let serviceName = service.uniqueName
        let received = Box<[String]>([])
        try client.sync { bus in
            try bus.callAsync(
                destination: serviceName, path: "/org/example/items/42", interface: "org.example.Items",
                member: "Get"
            ) { result in
                XCTAssertEqual(try? result.get().arguments(), [.objectPath("/org/example/items/42")])
                replied.fulfill()
            }
            let slot = try bus.addMatch(Bus.signalRule(interface: "org.example.Signals", member: "Ping")) { message in
                received.value.append("ping \(message.path ?? "")")
                signalled.fulfill()
            }
            try bus.addMatch(Bus.signalRule(interface: "org.example.Signals", member: "Done")) { message in
                slot.cancel()
                received.value.append("done \(message.path ?? "")")
                signalled.fulfill()
            }
        }
        try service.sync { bus in
            for (path, member) in [("/a", "Ping"), ("/b", "Done"), ("/c", "Ping"), ("/d", "Done")] {
                try bus.emitSignal(path: path, interface: "org.example.Signals", member: member)
            }
        }
        wait(for: [replied, signalled], timeout: 5)
        // One sender's signals arrive in order, so Ping /c was already dispatched (to nobody) before Done /d.
        XCTAssertEqual(try client.sync { _ in received.value }, ["ping /a", "done /b", "done /d"])
    }

    func testNameOwnership() throws {
        let first = try BusConnection(.address(daemon.address))
        defer { first.close() }
        let second = try BusConnection(.address(daemon.address))
        defer { second.close() }
        XCTAssertTrue(try first.sync { try $0.requestName("org.example.Owned") })
        XCTAssertFalse(try second.sync { try $0.requestName("org.example.Owned", flags: .queue) })
        let owner = try second.sync { bus in
            try bus.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "GetNameOwner", [.string("org.example.Owned")]
            )
            .arguments()
        }
        XCTAssertEqual(owner, [.string(first.uniqueName)])
        try first.sync { try $0.releaseName("org.example.Owned") }
        let newOwner = try second.sync { bus in
            try bus.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "GetNameOwner", [.string("org.example.Owned")]
            )
            .arguments()
        }
        XCTAssertEqual(newOwner, [.string(second.uniqueName)])  // the queued request was promoted
    }

    /// Closing frees the bus: every handler closure (and what it captured) is released, which also shows
    /// that no message reference kept the bus alive. Afterwards work is refused.
    func testCloseReleasesHandlersAndRefusesWork() throws {
        let connection = try BusConnection(.address(daemon.address))
        weak var weakToken: Token?
        try {
            let token = Token()
            weakToken = token
            let received = expectation(description: "signal seen")
            try connection.sync { bus in
                try bus.addMatch(Bus.signalRule(interface: "org.example.Signals")) { message in
                    _ = token
                    _ = try? message.arguments()
                    received.fulfill()
                }
                // An object that never replies, so the call below is still pending at close.
                try bus.addObject(path: "/held") { _ in
                    _ = token
                    return .handled
                }
                let call = try bus.methodCall(
                    destination: bus.uniqueName, path: "/held", interface: "org.example.X",
                    member: "Slow")
                try bus.callAsync(call, timeout: .seconds(60)) { _ in _ = token }
                try bus.emitSignal(path: "/", interface: "org.example.Signals", member: "Hello", [.string("x")])
            }
            wait(for: [received], timeout: 5)
        }()
        connection.close()
        XCTAssertNil(weakToken, "handlers still referenced after close")
        XCTAssertFalse(connection.isOpen)
        XCTAssertFalse(connection.perform { _ in XCTFail("ran after close") })
        XCTAssertThrowsError(try connection.sync { _ in 1 }) {
            XCTAssertEqual(($0 as? BusError)?.name, BusError.Name.disconnected)
        }
        connection.close()  // idempotent
    }

    func testLostBusIsReportedOnceAndFailsPendingCalls() throws {
        let lost = expectation(description: "disconnect reported")
        lost.assertForOverFulfill = true
        let connection = try BusConnection(.address(daemon.address)) { _ in lost.fulfill() }
        defer { connection.close() }
        let failed = expectation(description: "pending call failed")
        try connection.sync { bus in
            try bus.addObject(path: "/never") { _ in .handled }  // never replies
            try bus.callAsync(
                destination: bus.uniqueName, path: "/never", interface: "org.example.X", member: "Wait",
                timeout: .seconds(60)
            ) { result in
                if case .failure = result { failed.fulfill() }
            }
        }
        daemon.stop()
        // Pending calls fail first, then the loss is reported, once.
        wait(for: [failed, lost], timeout: 5, enforceOrder: true)
        XCTAssertFalse(connection.isOpen)
    }

    func testSessionEndpointUsesTheEnvironment() throws {
        let names: [String] = ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"]
        let saved = names.map { ($0, getenv($0).map { String(cString: $0) }) }
        defer { for (name, value) in saved { if let value { setenv(name, value, 1) } else { unsetenv(name) } } }

        setenv("DBUS_SESSION_BUS_ADDRESS", daemon.address, 1)
        let viaAddress = try BusConnection(.session)
        XCTAssertTrue(viaAddress.uniqueName.hasPrefix(":"))
        viaAddress.close()

        // Without DBUS_SESSION_BUS_ADDRESS, sd-bus uses $XDG_RUNTIME_DIR/bus.
        let runtime = try PrivateBus(system: false, socketName: "bus")
        defer { runtime.stop() }
        unsetenv("DBUS_SESSION_BUS_ADDRESS")
        setenv("XDG_RUNTIME_DIR", runtime.directory, 1)
        let viaRuntimeDirectory = try BusConnection(.session)
        XCTAssertTrue(viaRuntimeDirectory.uniqueName.hasPrefix(":"))
        viaRuntimeDirectory.close()

        unsetenv("XDG_RUNTIME_DIR")
        XCTAssertThrowsError(try BusConnection(.session)) { error in
            XCTAssertTrue("\(error)".contains("neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR"), "\(error)")
        }
    }
}

/// Something for handlers to capture, to see when they are released.
private final class Token: Sendable {}

/// A mutable value shared with handlers that run on a loop thread; read back through `sync`.
final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}
