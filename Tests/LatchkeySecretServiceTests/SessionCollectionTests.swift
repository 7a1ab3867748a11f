import Foundation
import LatchkeyDBus
import XCTest

@testable import Latchkey

/// The `session` collection, gnome-keyring's in-memory collection (docs/SECRET-SERVICE.md §4a): listed
/// with the others, named by the alias `session`, its items kept in the agent's memory only, locked
/// with the keychain, and gone when the agent exits.
final class SessionCollectionTests: SecretServiceTestCase {
    static let session = "/org/freedesktop/secrets/collection/session"
    static let sessionAlias = "/org/freedesktop/secrets/aliases/session"
    private var client: SecretServiceClient!

    override func tearDown() {
        client = nil
        super.tearDown()
    }

    private func properties(_ label: String, _ attributes: [(String, String)]) -> BusValue {
        .dictionary(
            keyType: "s", valueType: "v",
            [
                (.string("org.freedesktop.Secret.Item.Label"), .variant(.string(label))),
                (
                    .string("org.freedesktop.Secret.Item.Attributes"),
                    .variant(SecretServiceClient.attributes(attributes))
                ),
            ])
    }

    @discardableResult
    private func createItem(
        in collection: String, _ label: String, _ attributes: [(String, String)], secret: String,
        session: String, replace: Bool = false
    ) throws -> String {
        let reply = try client.call(
            collection, SSPath.collectionInterface, "CreateItem",
            [properties(label, attributes), SecretServiceClient.plainSecret(session, secret), .boolean(replace)])
        XCTAssertEqual(reply.last, .objectPath("/"), "no prompt")
        return try XCTUnwrap(reply.first?.string)
    }

    private func secret(_ item: String, _ session: String) throws -> String? {
        let reply = try client.call(item, SSPath.itemInterface, "GetSecret", [.objectPath(session)])
        return SecretServiceClient.bytes(reply.first?.fields?[2]).map { String(decoding: $0, as: UTF8.self) }
    }

    private func search(_ pairs: [(String, String)]) throws -> (unlocked: [BusValue], locked: [BusValue]) {
        let reply = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems", [SecretServiceClient.attributes(pairs)])
        return (reply.first?.elements ?? [], reply.last?.elements ?? [])
    }

    func testSessionCollectionKeepsItemsInTheAgentsMemoryOnly() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        // Listed after login, and named by the alias `session`, as gnome-keyring does.
        XCTAssertEqual(
            try client.property(SSPath.service, SSPath.serviceInterface, "Collections")?.elements,
            [.objectPath(SSPath.login), .objectPath(Self.session)])
        XCTAssertEqual(
            try client.call(SSPath.service, SSPath.serviceInterface, "ReadAlias", [.string("session")]),
            [.objectPath(Self.session)])
        XCTAssertEqual(try client.property(Self.session, SSPath.collectionInterface, "Locked"), .boolean(false))
        XCTAssertEqual(try client.property(Self.session, SSPath.collectionInterface, "Items")?.elements, [])
        XCTAssertEqual(try client.property(Self.sessionAlias, SSPath.collectionInterface, "Label"), .string(""))
        let session = try client.openPlainSession()

        // Created through the alias path, as libsecret's SECRET_COLLECTION_SESSION does.
        let item = try createItem(
            in: Self.sessionAlias, "Ephemeral", [("kind", "session-test"), ("n", "1")], secret: "in memory",
            session: session)
        XCTAssertTrue(item.hasPrefix(Self.session + "/"), item)
        XCTAssertNotNil(
            client.signals.wait {
                $0.path == Self.session && $0.member == "ItemCreated" && $0.arguments == [.objectPath(item)]
            })
        let all = try client.call(item, "org.freedesktop.DBus.Properties", "GetAll", [.string(SSPath.itemInterface)])
        let props = try XCTUnwrap(all.first?.stringKeyedEntries)
        XCTAssertEqual(props["Label"]?.variantValue, .string("Ephemeral"))
        XCTAssertEqual(props["Locked"]?.variantValue, .boolean(false))
        XCTAssertEqual(
            props["Attributes"]?.variantValue?.stringKeyedEntries,
            ["kind": .string("session-test"), "n": .string("1")])
        let created = try XCTUnwrap(
            props["Created"]?.variantValue.flatMap { if case .uint64(let t) = $0 { t } else { nil } })
        XCTAssertEqual(Double(created), Date().timeIntervalSince1970, accuracy: 10)
        XCTAssertEqual(try secret(item, session), "in memory")

        // Found by the service's search and by the collection's, not by login's.
        XCTAssertEqual(try search([("kind", "session-test")]).unlocked, [.objectPath(item)])
        XCTAssertEqual(
            try client.call(
                Self.session, SSPath.collectionInterface, "SearchItems",
                [SecretServiceClient.attributes([("n", "1")])]
            ).first?.elements, [.objectPath(item)])
        XCTAssertEqual(
            try client.call(
                SSPath.login, SSPath.collectionInterface, "SearchItems",
                [SecretServiceClient.attributes([("kind", "session-test")])]
            ).first?.elements, [])

        // replace = true changes the item with exactly these attributes; false makes another.
        XCTAssertEqual(
            try createItem(
                in: Self.session, "Replaced", [("n", "1"), ("kind", "session-test")], secret: "second",
                session: session, replace: true), item)
        XCTAssertEqual(try secret(item, session), "second")
        XCTAssertNotNil(client.signals.wait { $0.member == "ItemChanged" && $0.arguments == [.objectPath(item)] })
        let duplicate = try createItem(
            in: Self.session, "Duplicate", [("kind", "session-test"), ("n", "1")], secret: "third", session: session)
        XCTAssertNotEqual(duplicate, item)
        XCTAssertEqual(try search([("kind", "session-test")]).unlocked.count, 2)

        // SetSecret, Label, Attributes.
        try client.call(item, SSPath.itemInterface, "SetSecret", [SecretServiceClient.plainSecret(session, "fourth")])
        XCTAssertEqual(try secret(item, session), "fourth")
        try client.call(
            item, "org.freedesktop.DBus.Properties", "Set",
            [.string(SSPath.itemInterface), .string("Label"), .variant(.string("Renamed"))])
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Label"), .string("Renamed"))
        try client.call(
            item, "org.freedesktop.DBus.Properties", "Set",
            [
                .string(SSPath.itemInterface), .string("Attributes"),
                .variant(SecretServiceClient.attributes([("kind", "moved")])),
            ])
        XCTAssertEqual(try search([("kind", "moved")]).unlocked, [.objectPath(item)])
        XCTAssertNotNil(client.signals.wait { $0.path == item && $0.member == "PropertiesChanged" })

        // libsecret: secret-tool reads it (it searches every collection) and stores into it.
        var result = try secretTool(["lookup", "kind", "moved"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertEqual(result.out, "fourth")
        result = try secretTool(
            ["store", "--collection=session", "--label=From secret-tool", "app", "st"], input: "st!")
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertEqual(try client.property(Self.session, SSPath.collectionInterface, "Items")?.elements?.count, 3)
        XCTAssertEqual(try secretTool(["lookup", "app", "st"]).out, "st!")

        // Nothing of it is in the keychain: SecItem sees no generic password, login has no item.
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitAll] as NSDictionary, &data),
            errSecItemNotFound)
        XCTAssertEqual(try client.property(SSPath.login, SSPath.collectionInterface, "Items")?.elements, [])

        // Delete: ItemDeleted, and the object is gone.
        XCTAssertEqual(try client.call(duplicate, SSPath.itemInterface, "Delete"), [.objectPath("/")])
        XCTAssertNotNil(
            client.signals.wait { $0.member == "ItemDeleted" && $0.arguments == [.objectPath(duplicate)] })
        XCTAssertEqual(
            client.errorName(duplicate, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.NoSuchObject")

        // Gone when the agent exits: the next agent's session collection is empty.
        client = nil
        stopAgent()
        XCTAssertEqual(try cli(["status"]).status, 0)
        try waitForServiceName()
        client = try SecretServiceClient(bus.address)
        XCTAssertEqual(try client.property(Self.session, SSPath.collectionInterface, "Items")?.elements, [])
        XCTAssertEqual(
            try client.call(
                Self.session, SSPath.collectionInterface, "SearchItems", [SecretServiceClient.attributes([])]
            ).first?.elements, [])
    }

    func testSessionItemsLockWithTheKeychainAndUnlockThroughThePrompt() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        let session = try client.openPlainSession()
        let item = try createItem(
            in: Self.session, "L", [("kind", "locking")], secret: "behind the lock", session: session)

        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertNotNil(
            client.signals.wait {
                $0.path == Self.session && $0.member == "PropertiesChanged"
                    && $0.arguments.count == 3
                    && $0.arguments[1].stringKeyedEntries?["Locked"]?.variantValue == .boolean(true)
            }, "PropertiesChanged(Locked) on the session collection")
        XCTAssertEqual(try client.property(Self.session, SSPath.collectionInterface, "Locked"), .boolean(true))
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Locked"), .boolean(true))
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Label"), .string(""))
        XCTAssertEqual(
            client.errorName(item, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.IsLocked")
        XCTAssertEqual(
            client.errorName(
                Self.session, SSPath.collectionInterface, "CreateItem",
                [properties("x", []), SecretServiceClient.plainSecret(session, "x"), .boolean(false)]),
            "org.freedesktop.Secret.Error.IsLocked")
        let found = try search([("kind", "locking")])
        XCTAssertEqual(found.unlocked, [])
        XCTAssertEqual(found.locked, [.objectPath(item)])

        // libsecret unlocks the locked match through the prompter and reads it.
        let result = try secretTool(["lookup", "kind", "locking"])
        XCTAssertEqual(result.status, 0, result.err + agentLog())
        XCTAssertEqual(result.out, "behind the lock")
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Locked"), .boolean(false))
    }

    func testSessionCollectionStaysWhatItIs() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        let notSupported = "org.freedesktop.DBus.Error.NotSupported"
        XCTAssertEqual(client.errorName(Self.session, SSPath.collectionInterface, "Delete"), notSupported)
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "SetAlias",
                [.string("session"), .objectPath(SSPath.login)]), notSupported)
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "SetAlias",
                [.string("default"), .objectPath(Self.session)]), notSupported,
            "the default collection must keep what is stored in it")
        // CreateCollection with the alias returns the collection the alias names.
        let made = try client.call(
            SSPath.service, SSPath.serviceInterface, "CreateCollection",
            [
                .dictionary(
                    keyType: "s", valueType: "v",
                    [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("x")))]),
                .string("session"),
            ])
        XCTAssertEqual(made, [.objectPath(Self.session), .objectPath("/")])
        // A collection labelled "session" gets another id.
        let labelled = try client.call(
            SSPath.service, SSPath.serviceInterface, "CreateCollection",
            [
                .dictionary(
                    keyType: "s", valueType: "v",
                    [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("session")))]),
                .string(""),
            ])
        XCTAssertEqual(labelled.first, .objectPath("/org/freedesktop/secrets/collection/session_2"))
        XCTAssertEqual(
            try client.call(SSPath.service, SSPath.serviceInterface, "ReadAlias", [.string("session")]),
            [.objectPath(Self.session)])
    }

    func testSessionCollectionHoldsAtMost16MiB() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let megabyte = String(repeating: "m", count: 1 << 20)
        var made: [String] = []
        var refused: String?
        for n in 0..<20 {
            do {
                made.append(
                    try createItem(in: Self.session, "big \(n)", [("n", "\(n)")], secret: megabyte, session: session))
            } catch {
                refused = (error as? BusError)?.name
                break
            }
        }
        XCTAssertEqual(refused, "org.freedesktop.DBus.Error.LimitsExceeded")
        XCTAssertEqual(made.count, 15, "16 MiB less what the labels and attributes take")
        // Deleting makes room again.
        guard let first = made.first else { return }
        try client.call(first, SSPath.itemInterface, "Delete")
        XCTAssertNoThrow(try createItem(in: Self.session, "again", [("n", "x")], secret: megabyte, session: session))
    }
}
