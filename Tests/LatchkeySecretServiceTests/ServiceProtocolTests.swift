import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The D-Bus surface: spec errors for bad input (and the agent keeps serving), properties, signals,
/// collections and aliases, sessions that belong to their connection (docs/SECRET-SERVICE.md §6).
final class ServiceProtocolTests: SecretServiceTestCase {
    private func assertStillServing(file: StaticString = #filePath, line: UInt = #line) throws {
        let stored = try secretTool(["store", "--label", "alive", "probe", "\(UUID())"], input: "still here")
        XCTAssertEqual(stored.status, 0, stored.err, file: file, line: line)
        XCTAssertNotNil(agentPID(), "the agent is alive", file: file, line: line)
    }

    func testBadInputGetsDBusErrorsAndNeverACrash() throws {
        try createKeychain()
        let client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let invalid = "org.freedesktop.DBus.Error.InvalidArgs"

        // Wrong signatures.
        XCTAssertEqual(
            client.errorName(SSPath.service, SSPath.serviceInterface, "SearchItems", [.string("x")]), invalid)
        XCTAssertEqual(client.errorName(SSPath.service, SSPath.serviceInterface, "SearchItems"), invalid)
        XCTAssertEqual(
            client.errorName(SSPath.service, SSPath.serviceInterface, "OpenSession", [.string("plain")]), invalid)
        XCTAssertEqual(
            client.errorName(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [.string("a"), .string("b"), .boolean(true)]), invalid)
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "GetSecrets",
                [.array(elementType: "s", [.string("x")]), .objectPath(session)]), invalid)
        XCTAssertEqual(
            client.errorName(SSPath.service, "org.freedesktop.DBus.Properties", "Get", [.string("x")]), invalid)
        // Wrong value types inside a right signature.
        XCTAssertEqual(
            client.errorName(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(
                        keyType: "s", valueType: "v",
                        [(.string("org.freedesktop.Secret.Item.Attributes"), .variant(.uint32(7)))]),
                    SecretServiceClient.plainSecret(session, "x"), .boolean(false),
                ]), invalid)
        // A map far over the cap (100,000 pairs), a repeated name, an over-long value.
        let huge = SecretServiceClient.attributes((0..<100_000).map { ("k\($0)", "v") })
        XCTAssertEqual(client.errorName(SSPath.service, SSPath.serviceInterface, "SearchItems", [huge]), invalid)
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "SearchItems",
                [SecretServiceClient.attributes([("k", "1"), ("k", "2")])]), invalid)
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "SearchItems",
                [SecretServiceClient.attributes([("k", String(repeating: "v", count: 5000))])]), invalid)
        // Unknown objects, methods and sessions.
        XCTAssertEqual(
            client.errorName(
                "/org/freedesktop/secrets/collection/nope", SSPath.collectionInterface, "SearchItems",
                [SecretServiceClient.attributes([])]), "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(
            client.errorName(
                SSPath.login + "/00112233445566778899aabbccddeeff", SSPath.itemInterface,
                "GetSecret", [.objectPath(session)]), "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(
            client.errorName("/org/freedesktop/secrets/aliases/nothing", SSPath.collectionInterface, "Delete"),
            "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertNotNil(client.errorName(SSPath.login + "/not-hex", SSPath.itemInterface, "Delete"))
        XCTAssertEqual(
            client.errorName(SSPath.service, SSPath.serviceInterface, "Frobnicate"),
            "org.freedesktop.DBus.Error.UnknownMethod")
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "GetSecrets",
                [
                    .array(elementType: "o", []), .objectPath("/org/freedesktop/secrets/session/999"),
                ]), "org.freedesktop.Secret.Error.NoSession")
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "OpenSession",
                [.string("rot13"), .variant(.string(""))]), "org.freedesktop.DBus.Error.NotSupported")
        // DH with a degenerate public key.
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "OpenSession",
                [
                    .string("dh-ietf1024-sha256-aes128-cbc-pkcs7"), .variant(.array(elementType: "y", [.byte(1)])),
                ]), invalid)
        // A secret that claims a DH session it does not have, a read-only property, deleting login.
        XCTAssertEqual(
            client.errorName(
                SSPath.login, "org.freedesktop.DBus.Properties", "Set",
                [
                    .string(SSPath.collectionInterface), .string("Locked"), .variant(.boolean(false)),
                ]), "org.freedesktop.DBus.Error.PropertyReadOnly")
        XCTAssertEqual(
            client.errorName(SSPath.login, SSPath.collectionInterface, "Delete"),
            "org.freedesktop.DBus.Error.NotSupported")
        // Another connection's session is not yours.
        let other = try SecretServiceClient(bus.address)
        XCTAssertEqual(
            other.errorName(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(keyType: "s", valueType: "v", []), SecretServiceClient.plainSecret(session, "x"),
                    .boolean(false),
                ]), "org.freedesktop.Secret.Error.NoSession")

        try assertStillServing()
    }

    /// A map of 100,000 pairs (about 2.4 MB) to each method that takes an attribute map: refused by the
    /// capped reader after its 257th entry, never parsed whole, and the agent keeps serving.
    func testHugeAttributeMapsAreRefusedWhileReading() throws {
        try createKeychain()
        let client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let made = try client.call(
            SSPath.login, SSPath.collectionInterface, "CreateItem",
            [
                .dictionary(keyType: "s", valueType: "v", []), SecretServiceClient.plainSecret(session, "x"),
                .boolean(false),
            ])
        let item = try XCTUnwrap(made.first?.string)
        let huge = SecretServiceClient.attributes((0..<100_000).map { ("k\($0)", "v") })
        let refused = "message refused while reading it: an array has more than 256 elements"
        func error(_ path: String, _ interface: String, _ member: String, _ arguments: [BusValue]) -> BusError? {
            do {
                try client.call(path, interface, member, arguments)
                return nil
            } catch {
                return error as? BusError
            }
        }
        let calls: [(String, String, String, [BusValue])] = [
            (SSPath.service, SSPath.serviceInterface, "SearchItems", [huge]),
            (SSPath.login, SSPath.collectionInterface, "SearchItems", [huge]),
            (
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(
                        keyType: "s", valueType: "v",
                        [(.string("org.freedesktop.Secret.Item.Attributes"), .variant(huge))]),
                    SecretServiceClient.plainSecret(session, "x"), .boolean(false),
                ]
            ),
            (
                item, "org.freedesktop.DBus.Properties", "Set",
                [.string(SSPath.itemInterface), .string("Attributes"), .variant(huge)]
            ),
        ]
        for (path, interface, member, arguments) in calls {
            let failure = error(path, interface, member, arguments)
            XCTAssertEqual(failure?.name, "org.freedesktop.DBus.Error.InvalidArgs", "\(member)")
            XCTAssertEqual(failure?.message, refused, "\(member)")
        }
        // 256 pairs are fine; 257 are refused by the same reader.
        let full = SecretServiceClient.attributes((0..<256).map { ("k\($0)", "v") })
        XCTAssertEqual(try client.call(SSPath.service, SSPath.serviceInterface, "SearchItems", [full]).count, 2)
        let over = SecretServiceClient.attributes((0..<257).map { ("k\($0)", "v") })
        XCTAssertEqual(error(SSPath.service, SSPath.serviceInterface, "SearchItems", [over])?.message, refused)
        // Nothing was stored or changed, and the agent is still there.
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Attributes"), .array(elementType: "{ss}", []))
        XCTAssertEqual(
            try client.property(SSPath.login, SSPath.collectionInterface, "Items")?.elements, [.objectPath(item)])
        try assertStillServing()
    }

    func testPropertiesSignalsCollectionsAndAliases() throws {
        try createKeychain()
        let client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        let session = try client.openPlainSession()

        // login, and the in-memory session collection (SessionCollectionTests).
        XCTAssertEqual(
            try client.property(SSPath.service, SSPath.serviceInterface, "Collections")?.elements,
            [.objectPath(SSPath.login), .objectPath("/org/freedesktop/secrets/collection/session")])
        XCTAssertEqual(
            try client.call(SSPath.service, SSPath.serviceInterface, "ReadAlias", [.string("default")]),
            [.objectPath(SSPath.login)])
        XCTAssertEqual(
            try client.call(SSPath.service, SSPath.serviceInterface, "ReadAlias", [.string("none")]),
            [.objectPath("/")])
        XCTAssertEqual(try client.property(SSPath.defaultAlias, SSPath.collectionInterface, "Label"), .string("Login"))

        // CreateItem through the alias path: ItemCreated on the collection, the item's properties.
        let properties = BusValue.dictionary(
            keyType: "s", valueType: "v",
            [
                (.string("org.freedesktop.Secret.Item.Label"), .variant(.string("Wi-Fi"))),
                (
                    .string("org.freedesktop.Secret.Item.Attributes"),
                    .variant(SecretServiceClient.attributes([("connection-uuid", "42"), ("setting-key", "psk")]))
                ),
            ])
        let created = try client.call(
            SSPath.defaultAlias, SSPath.collectionInterface, "CreateItem",
            [
                properties, SecretServiceClient.plainSecret(session, "psk!", contentType: "text/plain"),
                .boolean(true),
            ])
        let item = try XCTUnwrap(created.first?.string)
        XCTAssertTrue(item.hasPrefix(SSPath.login + "/"), item)
        XCTAssertEqual(created.last, .objectPath("/"))
        XCTAssertNotNil(client.signals.wait { $0.member == "ItemCreated" && $0.arguments == [.objectPath(item)] })
        let all = try client.call(item, "org.freedesktop.DBus.Properties", "GetAll", [.string(SSPath.itemInterface)])
        let props = try XCTUnwrap(all.first?.stringKeyedEntries)
        XCTAssertEqual(props["Label"]?.variantValue, .string("Wi-Fi"))
        XCTAssertEqual(props["Locked"]?.variantValue, .boolean(false))
        XCTAssertEqual(
            props["Attributes"]?.variantValue?.stringKeyedEntries,
            ["connection-uuid": .string("42"), "setting-key": .string("psk")])
        let createdAt = try XCTUnwrap(
            props["Created"]?.variantValue.flatMap { if case .uint64(let t) = $0 { t } else { nil } })
        XCTAssertEqual(Double(createdAt), Date().timeIntervalSince1970, accuracy: 10)

        // Set Label and Attributes: PropertiesChanged on the item, ItemChanged on the collection.
        try client.call(
            item, "org.freedesktop.DBus.Properties", "Set",
            [.string(SSPath.itemInterface), .string("Label"), .variant(.string("Home Wi-Fi"))])
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Label"), .string("Home Wi-Fi"))
        XCTAssertNotNil(client.signals.wait { $0.member == "ItemChanged" && $0.arguments == [.objectPath(item)] })
        XCTAssertNotNil(client.signals.wait { $0.path == item && $0.member == "PropertiesChanged" })
        try client.call(
            item, "org.freedesktop.DBus.Properties", "Set",
            [
                .string(SSPath.itemInterface), .string("Attributes"),
                .variant(SecretServiceClient.attributes([("service", "wifi"), ("account", "home")])),
            ])
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "wifi", kSecAttrAccount: "home",
                    kSecReturnData: true,
                ] as NSDictionary, &data), errSecSuccess)
        XCTAssertEqual((data as? Data).map { String(decoding: $0, as: UTF8.self) }, "psk!")

        // SetSecret and GetSecret with a content type.
        try client.call(
            item, SSPath.itemInterface, "SetSecret",
            [SecretServiceClient.plainSecret(session, "\u{1}\u{2}", contentType: "application/octet-stream")])
        let secret = try client.call(item, SSPath.itemInterface, "GetSecret", [.objectPath(session)]).first
        XCTAssertEqual(SecretServiceClient.bytes(secret?.fields?[2]), [1, 2])
        XCTAssertEqual(secret?.fields?[3], .string("application/octet-stream"))

        // Collections: create with an alias, move default, delete with its items.
        let made = try client.call(
            SSPath.service, SSPath.serviceInterface, "CreateCollection",
            [
                .dictionary(
                    keyType: "s", valueType: "v",
                    [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("Work")))]),
                .string("work"),
            ])
        let work = try XCTUnwrap(made.first?.string)
        XCTAssertEqual(work, "/org/freedesktop/secrets/collection/Work")
        XCTAssertEqual(made.last, .objectPath("/"))
        XCTAssertNotNil(client.signals.wait { $0.member == "CollectionCreated" && $0.arguments == [.objectPath(work)] })
        XCTAssertEqual(
            try client.call(SSPath.service, SSPath.serviceInterface, "ReadAlias", [.string("work")]),
            [.objectPath(work)])
        XCTAssertEqual(try client.property(SSPath.service, SSPath.serviceInterface, "Collections")?.elements?.count, 3)
        let workItem = try client.call(
            work, SSPath.collectionInterface, "CreateItem",
            [properties, SecretServiceClient.plainSecret(session, "w"), .boolean(false)]
        ).first?.string
        XCTAssertEqual(
            try client.property(work, SSPath.collectionInterface, "Items")?.elements,
            [workItem.map { .objectPath($0) }!])
        try client.call(SSPath.service, SSPath.serviceInterface, "SetAlias", [.string("default"), .objectPath(work)])
        XCTAssertEqual(
            try client.call(SSPath.service, SSPath.serviceInterface, "ReadAlias", [.string("default")]),
            [.objectPath(work)])
        XCTAssertEqual(try secretTool(["store", "--label", "into work", "k", "v"], input: "via default").status, 0)
        XCTAssertEqual(try client.property(work, SSPath.collectionInterface, "Items")?.elements?.count, 2)
        try client.call(
            SSPath.service, SSPath.serviceInterface, "SetAlias", [.string("default"), .objectPath(SSPath.login)])
        XCTAssertEqual(try client.call(work, SSPath.collectionInterface, "Delete"), [.objectPath("/")])
        XCTAssertNotNil(client.signals.wait { $0.member == "CollectionDeleted" && $0.arguments == [.objectPath(work)] })
        XCTAssertEqual(
            try client.property(SSPath.service, SSPath.serviceInterface, "Collections")?.elements,
            [.objectPath(SSPath.login), .objectPath("/org/freedesktop/secrets/collection/session")])
        XCTAssertEqual(try secretTool(["lookup", "k", "v"]).out, "", "deleted with its collection")

        // Item.Delete: ItemDeleted, and the object is gone.
        XCTAssertEqual(try client.call(item, SSPath.itemInterface, "Delete"), [.objectPath("/")])
        XCTAssertNotNil(client.signals.wait { $0.member == "ItemDeleted" && $0.arguments == [.objectPath(item)] })
        XCTAssertEqual(
            client.errorName(item, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.NoSuchObject")

        // Introspection, for libsecret and d-feet.
        let xml =
            try client.call(SSPath.service, "org.freedesktop.DBus.Introspectable", "Introspect").first?.string ?? ""
        XCTAssertTrue(xml.contains("<interface name=\"org.freedesktop.Secret.Service\">"), xml)
        XCTAssertTrue(xml.contains("<node name=\"collection\"/>"), xml)
        let collectionXML =
            try client.call(SSPath.login, "org.freedesktop.DBus.Introspectable", "Introspect").first?.string ?? ""
        XCTAssertTrue(collectionXML.contains("org.freedesktop.Secret.Collection"), collectionXML)
    }

    func testSecItemChangesAreSignalled() throws {
        try createKeychain()
        let client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "signals", kSecAttrAccount: "a",
                    kSecValueData: Data("1".utf8),
                ] as NSDictionary, nil), errSecSuccess)
        let created = try XCTUnwrap(client.signals.wait { $0.member == "ItemCreated" && $0.path == SSPath.login })
        let item = try XCTUnwrap(created.arguments.first?.string)
        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "signals")])])
        XCTAssertEqual(found.first?.elements, [.objectPath(item)], "the signal names the item's path")
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassGenericPassword, kSecAttrService: "signals"] as NSDictionary,
                [kSecAttrLabel: "new label"] as NSDictionary), errSecSuccess)
        XCTAssertNotNil(client.signals.wait { $0.member == "ItemChanged" && $0.arguments == [.objectPath(item)] })
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Label"), .string("new label"))
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: "signals"] as NSDictionary),
            errSecSuccess)
        XCTAssertNotNil(client.signals.wait { $0.member == "ItemDeleted" && $0.arguments == [.objectPath(item)] })
        // Internet passwords are not Secret Service items: no signal. The service announces changes in
        // the order they are made, so once a generic password added afterwards is announced, a signal
        // for the internet password would already be here.
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com",
                    kSecValueData: Data("x".utf8),
                ] as NSDictionary, nil), errSecSuccess)
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "signals", kSecAttrAccount: "after",
                    kSecValueData: Data("2".utf8),
                ] as NSDictionary, nil), errSecSuccess)
        let after = try XCTUnwrap(
            client.signals.wait {
                $0.member == "ItemCreated" && $0.path == SSPath.login && $0.arguments != created.arguments
            })
        let announced = client.signals.all.filter { $0.member == "ItemCreated" && $0.path == SSPath.login }
        XCTAssertEqual(
            announced.map(\.arguments), [created.arguments, after.arguments],
            "the internet password was not announced")
    }

    func testSessionsCloseWhenTheirConnectionLeaves() throws {
        // A total of 96 (LATCHKEY_MAX_SESSIONS lowers the 65,536 for this agent): three full connections
        // reach it, where 2,048 would be needed for the real cap.
        setenv("LATCHKEY_MAX_SESSIONS", "96", 1)
        defer { unsetenv("LATCHKEY_MAX_SESSIONS") }
        try createKeychain()
        let limitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
        func openFull() throws -> SecretServiceClient {
            let client = try SecretServiceClient(bus.address)
            for _ in 0..<32 { _ = try client.openPlainSession() }
            XCTAssertEqual(
                client.errorName(
                    SSPath.service, SSPath.serviceInterface, "OpenSession",
                    [.string("plain"), .variant(.string(""))]),
                limitsExceeded, "at most 32 per connection")
            return client
        }
        var open = [try openFull(), try openFull(), try openFull()]
        let bystander = try SecretServiceClient(bus.address)
        for round in 0..<4 {
            // The total is reached: a connection with no session of its own gets none.
            XCTAssertEqual(
                bystander.errorName(
                    SSPath.service, SSPath.serviceInterface, "OpenSession",
                    [.string("plain"), .variant(.string(""))]), limitsExceeded,
                "round \(round): the total cap holds")
            // The oldest connection leaves: its 32 sessions close, so a new connection gets all of its.
            let leaving = open.removeFirst()
            let name = leaving.uniqueName
            leaving.connection.close()
            try waitUntilGone(name, watchedFrom: bystander)
            open.append(try openFull())
        }
        for client in open {
            client.connection.close()
            try waitUntilGone(client.uniqueName, watchedFrom: bystander)
        }
        let session = try bystander.openPlainSession()
        try bystander.call(session, SSPath.sessionInterface, "Close")
        XCTAssertEqual(
            bystander.errorName(session, SSPath.sessionInterface, "Close"), "org.freedesktop.Secret.Error.NoSuchObject")
        try assertStillServing()
    }

    /// Returns once the bus has seen `name` leave. The bus sends NameOwnerChanged to the agent when it sees
    /// the name go, before it can answer that the name has no owner; so the agent handles it before any
    /// call made after this returns, and no fixed wait is needed.
    private func waitUntilGone(_ name: String, watchedFrom client: SecretServiceClient) throws {
        let gone = try Poll.until(within: 10) {
            try client.connection.sync { bus in
                try bus.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "NameHasOwner", [.string(name)]
                )
                .arguments().first?.bool == false
            }
        }
        XCTAssertTrue(gone, "\(name) left the bus")
    }
}
