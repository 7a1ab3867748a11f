import Foundation
import LatchkeyDBus
import XCTest

/// What each object answers to a member it does not have, to arguments of the wrong signature, and to
/// a call on an object that is not there, and in which order those are checked: the errors
/// (names and messages) the service has always given (docs/SECRET-SERVICE.md §6).
final class DispatchErrorTests: SecretServiceTestCase {
    private var client: SecretServiceClient!

    override func tearDown() {
        client = nil
        super.tearDown()
    }

    private static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
    private static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    private static let noSuchObject = "org.freedesktop.Secret.Error.NoSuchObject"
    private static let properties = "org.freedesktop.DBus.Properties"

    /// The error a call fails with (interface nil: none in the message), or nil when it succeeds.
    private func failure(_ path: String, _ interface: String?, _ member: String, _ arguments: [BusValue] = [])
        -> BusError?
    {
        do {
            _ = try client.connection.sync { bus in
                let call = try bus.methodCall(
                    destination: "org.freedesktop.secrets", path: path, interface: interface,
                    member: member)
                try call.append(arguments)
                return try bus.call(call, timeout: .seconds(20)).arguments()
            }
            return nil
        } catch {
            return error as? BusError ?? BusError(name: "not a BusError", message: "\(error)")
        }
    }

    private func assertFails(
        _ path: String, _ interface: String?, _ member: String, _ arguments: [BusValue] = [],
        _ name: String, _ message: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        let error = failure(path, interface, member, arguments)
        XCTAssertEqual(error?.name, name, "\(path) \(interface ?? "-").\(member)", file: file, line: line)
        XCTAssertEqual(error?.message, message, "\(path) \(interface ?? "-").\(member)", file: file, line: line)
    }

    /// Every method of `interface` at `path`, called with one `u` argument (no method takes that).
    private func assertWrongSignatures(
        _ path: String, _ interface: String, _ methods: [(String, String)],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        for (member, signature) in methods {
            assertFails(
                path, interface, member, [.uint32(7)], Self.invalidArgs,
                "expected arguments (\(signature)), got (u)", file: file, line: line)
        }
    }

    private func assertUnknownMembers(
        _ path: String, _ interface: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        assertFails(
            path, interface, "Frobnicate", [], Self.unknownMethod, "no method \(interface).Frobnicate here",
            file: file, line: line)
        assertFails(
            path, nil, "Frobnicate", [], Self.unknownMethod, "no method Frobnicate here", file: file, line: line)
        // A member of another interface, and a Properties member without the Properties interface.
        assertFails(
            path, "org.example.Other", "Delete", [], Self.unknownMethod, "no method org.example.Other.Delete here",
            file: file, line: line)
        assertFails(
            path, nil, "GetAll", [.string("")], Self.unknownMethod, "no method GetAll here", file: file, line: line)
        assertFails(
            path, Self.properties, "Frobnicate", [], Self.unknownMethod,
            "no method org.freedesktop.DBus.Properties.Frobnicate here", file: file, line: line)
        assertWrongSignatures(
            path, Self.properties, [("Get", "ss"), ("GetAll", "s"), ("Set", "ssv")], file: file, line: line)
    }

    func testUnknownMembersAndWrongSignatures() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let item = try XCTUnwrap(
            try client.call(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(keyType: "s", valueType: "v", []), SecretServiceClient.plainSecret(session, "x"),
                    .boolean(false),
                ]
            ).first?.string)

        assertUnknownMembers(SSPath.service, SSPath.serviceInterface)
        assertWrongSignatures(
            SSPath.service, SSPath.serviceInterface,
            [
                ("OpenSession", "sv"), ("CreateCollection", "a{sv}s"), ("SearchItems", "a{ss}"), ("Unlock", "ao"),
                ("Lock", "ao"), ("GetSecrets", "aoo"), ("ReadAlias", "s"), ("SetAlias", "so"),
            ])
        // Every call is read within the service's caps, not only those with an attribute map.
        let paths = BusValue.array(elementType: "o", (0...1024).map { _ in .objectPath(SSPath.login) })
        assertFails(
            SSPath.service, SSPath.serviceInterface, "Unlock", [paths], Self.invalidArgs,
            "message refused while reading it: an array has more than 1024 elements")
        for collection in [SSPath.login, SSPath.defaultAlias] {
            assertUnknownMembers(collection, SSPath.collectionInterface)
            assertWrongSignatures(
                collection, SSPath.collectionInterface,
                [("Delete", ""), ("SearchItems", "a{ss}"), ("CreateItem", "a{sv}(oayays)b")])
        }
        assertUnknownMembers(item, SSPath.itemInterface)
        assertWrongSignatures(
            item, SSPath.itemInterface, [("Delete", ""), ("GetSecret", "o"), ("SetSecret", "(oayays)")])
        assertUnknownMembers(session, SSPath.sessionInterface)
        assertWrongSignatures(session, SSPath.sessionInterface, [("Close", "")])

        // Properties: names that are not there, and one that cannot be written.
        assertFails(
            SSPath.login, Self.properties, "Get", [.string(SSPath.collectionInterface), .string("Nope")],
            Self.invalidArgs, "no property org.freedesktop.Secret.Collection.Nope here")
        assertFails(
            SSPath.login, Self.properties, "Get", [.string(SSPath.itemInterface), .string("Label")],
            Self.invalidArgs, "no property org.freedesktop.Secret.Item.Label here")
        assertFails(
            SSPath.login, Self.properties, "Set", [.string(""), .string("Nope"), .variant(.string("x"))],
            Self.invalidArgs, "no writable property .Nope here")
        assertFails(
            SSPath.login, Self.properties, "Set",
            [.string(SSPath.collectionInterface), .string("Created"), .variant(.uint64(1))],
            "org.freedesktop.DBus.Error.PropertyReadOnly", "Created is read-only")
        assertFails(
            SSPath.service, Self.properties, "Set", [.string(""), .string("Collections"), .variant(.string("x"))],
            "org.freedesktop.DBus.Error.PropertyReadOnly", "Collections is read-only")
        assertFails(
            item, Self.properties, "Set",
            [.string(SSPath.collectionInterface), .string("Label"), .variant(.string("x"))],
            Self.invalidArgs, "no writable property org.freedesktop.Secret.Collection.Label here")
        XCTAssertEqual(
            try client.call(SSPath.login, Self.properties, "GetAll", [.string("org.example.Other")]),
            [.array(elementType: "{sv}", [])])
        // A session has no properties, whoever asks.
        XCTAssertEqual(
            try client.call(session, Self.properties, "GetAll", [.string("")]), [.array(elementType: "{sv}", [])])
        assertFails(
            session, Self.properties, "Get", [.string(""), .string("Label")], Self.invalidArgs,
            "no property .Label here")

        // Objects that are not there (or not the caller's): the object is looked at first, except by
        // Item.GetSecret, Properties and Introspect.
        let missingItem = SSPath.login + "/00112233445566778899aabbccddeeff"
        let missingCollection = "/org/freedesktop/secrets/collection/nope"
        let missingAlias = "/org/freedesktop/secrets/aliases/nothing"
        let missingSession = "/org/freedesktop/secrets/session/999"
        let missingPrompt = "/org/freedesktop/secrets/prompt/999"
        for (member, arguments) in [("Frobnicate", [BusValue]()), ("Delete", [.uint32(7)])] {
            assertFails(
                missingCollection, SSPath.collectionInterface, member, arguments, Self.noSuchObject,
                "no collection 'nope'")
            assertFails(
                missingCollection, "org.example.Other", member, arguments, Self.noSuchObject, "no collection 'nope'")
            assertFails(
                missingAlias, SSPath.collectionInterface, member, arguments, Self.noSuchObject,
                "no collection has the alias 'nothing'")
            assertFails(missingItem, SSPath.itemInterface, member, arguments, Self.noSuchObject, "no such item")
            assertFails(
                missingSession, SSPath.sessionInterface, member, arguments, Self.noSuchObject, "no such session")
            assertFails(
                missingPrompt, SSPath.promptInterface, member, arguments, Self.noSuchObject,
                "no such prompt for this connection")
        }
        assertFails(
            missingItem, SSPath.itemInterface, "GetSecret", [.uint32(7)], Self.invalidArgs,
            "expected arguments (o), got (u)")
        assertFails(
            missingItem, SSPath.itemInterface, "GetSecret", [.objectPath(session)], Self.noSuchObject, "no such object")
        assertFails(
            missingCollection, Self.properties, "Get", [.uint32(7)], Self.invalidArgs,
            "expected arguments (ss), got (u)")
        assertFails(
            missingCollection, Self.properties, "GetAll", [.string("org.example.Other")], Self.noSuchObject,
            "no collection 'nope'")
        assertFails(
            missingItem, Self.properties, "Set", [.string(""), .string("Locked"), .variant(.boolean(true))],
            Self.noSuchObject, "no such item")
        assertFails(missingCollection, nil, "Introspect", [], Self.noSuchObject, "no collection 'nope'")
        assertFails(missingItem, nil, "Introspect", [], Self.noSuchObject, "no such item")
        XCTAssertEqual(
            try client.call(missingSession, Self.properties, "GetAll", [.string("")]), [.array(elementType: "{sv}", [])]
        )
        XCTAssertNotNil(
            try client.call(missingSession, "org.freedesktop.DBus.Introspectable", "Introspect").first?.string)

        // Another connection's session is not there for it.
        let other = try SecretServiceClient(bus.address)
        let otherClient = client
        client = other
        assertFails(session, SSPath.sessionInterface, "Close", [], Self.noSuchObject, "no such session")
        client = otherClient

        // A prompt of this connection's.
        XCTAssertEqual(try cli(["lock"]).status, 0)
        let prompt = try XCTUnwrap(
            try client.call(
                SSPath.service, SSPath.serviceInterface, "Unlock",
                [.array(elementType: "o", [.objectPath(SSPath.login)])]
            ).last?.string)
        XCTAssertNotEqual(prompt, "/")
        assertUnknownMembers(prompt, SSPath.promptInterface)
        assertWrongSignatures(prompt, SSPath.promptInterface, [("Prompt", "s"), ("Dismiss", "")])
        client = other
        assertFails(
            prompt, SSPath.promptInterface, "Dismiss", [], Self.noSuchObject, "no such prompt for this connection")
        client = otherClient
        try client.call(prompt, SSPath.promptInterface, "Dismiss")

        // After `lock --all` an item still answers as an object; what needs its keys is IsLocked, and
        // its properties read as a locked item's.
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        let isLocked = "org.freedesktop.Secret.Error.IsLocked"
        assertFails(
            item, SSPath.itemInterface, "Delete", [.uint32(7)], Self.invalidArgs, "expected arguments (), got (u)")
        assertFails(
            item, SSPath.itemInterface, "Frobnicate", [], Self.unknownMethod,
            "no method org.freedesktop.Secret.Item.Frobnicate here")
        assertFails(
            item, SSPath.itemInterface, "GetSecret", [.uint32(7)], Self.invalidArgs, "expected arguments (o), got (u)")
        assertFails(item, SSPath.itemInterface, "GetSecret", [.objectPath(session)], isLocked, "the keychain is locked")
        assertFails(
            item, Self.properties, "Set", [.string(""), .string("Label"), .variant(.string("x"))],
            isLocked, "the keychain is locked")
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Label"), .string(""))
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Locked"), .boolean(true))
        XCTAssertNotNil(try client.call(item, "org.freedesktop.DBus.Introspectable", "Introspect").first?.string)
    }
}
