import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Where the service was checked against gnome-keyring (`scripts/compare-secret-service`) and the
/// specification, and answered differently (issue 11, §2.3–2.4): error names for paths that name no
/// object, the built-in aliases, the login collection's dates, and the signals a lock change makes.
final class GnomeKeyringParityTests: SecretServiceTestCase {
    private var client: SecretServiceClient!

    override func tearDown() {
        client = nil
        super.tearDown()
    }

    private static let noSuchObject = "org.freedesktop.Secret.Error.NoSuchObject"
    private static let properties = "org.freedesktop.DBus.Properties"

    private func uint64(_ value: BusValue?) -> UInt64? {
        if case .uint64(let n)? = value { n } else { nil }
    }

    /// Every path under the service's root that names no object, whatever its form, answers
    /// NoSuchObject to every member (it used to be UnknownProperty, UnknownInterface or UnknownMethod
    /// from sd-bus for a path the service could not parse).
    func testPathsThatNameNoObjectAnswerNoSuchObject() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let paths = [
            SSPath.login + "/999",  // gnome-keyring's form of item path
            SSPath.login + "/not_an_item",
            SSPath.login + "/00112233445566778899AABBCCDDEEFF",  // upper case: not a path this service makes
            SSPath.login + "/00112233445566778899aabbccddeeff/deeper",
            "/org/freedesktop/secrets/collection/nope/00112233445566778899aabbccddeeff",
            "/org/freedesktop/secrets/aliases/nothing/999",
            "/org/freedesktop/secrets/prompt/not_a_number",
            "/org/freedesktop/secrets/session/not_a_number",
            "/org/freedesktop/secrets/nothing",
            "/org/freedesktop/secrets/collection/login/x/y/z",
        ]
        for path in paths {
            let calls: [(String, String, [BusValue])] = [
                (Self.properties, "Get", [.string(SSPath.itemInterface), .string("Label")]),
                (Self.properties, "GetAll", [.string(SSPath.itemInterface)]),
                (Self.properties, "Set", [.string(SSPath.itemInterface), .string("Label"), .variant(.string("x"))]),
                (SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
                (SSPath.itemInterface, "SetSecret", [SecretServiceClient.plainSecret(session, "x")]),
                (SSPath.itemInterface, "Delete", []),
                (SSPath.collectionInterface, "SearchItems", [SecretServiceClient.attributes([])]),
                (SSPath.promptInterface, "Dismiss", []),
                ("org.freedesktop.DBus.Introspectable", "Introspect", []),
            ]
            for (interface, member, arguments) in calls {
                XCTAssertEqual(
                    client.errorName(path, interface, member, arguments), Self.noSuchObject, "\(path) \(member)")
            }
        }
        // The nodes between the service and its objects still introspect, and name nothing else.
        XCTAssertNotNil(
            try client.call(
                "/org/freedesktop/secrets/collection", "org.freedesktop.DBus.Introspectable", "Introspect"
            ).first?.string)
        XCTAssertEqual(
            client.errorName(
                "/org/freedesktop/secrets/collection", Self.properties, "GetAll", [.string(SSPath.collectionInterface)]),
            Self.noSuchObject)
        // secretstorage turns NoSuchObject into ItemNotFoundException; the agent still serves.
        XCTAssertEqual(try secretTool(["store", "--label", "alive", "k", "v"], input: "x").status, 0)
    }

    /// `login` is the keychain: its `Created` is when the keychain was made (it was 0), and `Modified`
    /// is never before it. gnome-keyring gives its login collection's creation time too.
    func testLoginCollectionDatesAreTheKeychains() throws {
        let before = UInt64(Date().timeIntervalSince1970)
        try createKeychain()
        let after = UInt64(Date().timeIntervalSince1970.rounded(.up))
        client = try SecretServiceClient(bus.address)
        for path in [SSPath.login, SSPath.defaultAlias] {
            let created = try XCTUnwrap(uint64(try client.property(path, SSPath.collectionInterface, "Created")))
            XCTAssertTrue((before...after).contains(created), "\(created) not in \(before)...\(after)")
            let modified = try XCTUnwrap(uint64(try client.property(path, SSPath.collectionInterface, "Modified")))
            XCTAssertGreaterThanOrEqual(modified, created)
        }
        try client.call(
            SSPath.login, Self.properties, "Set",
            [.string(SSPath.collectionInterface), .string("Label"), .variant(.string("Mine"))])
        let created = try XCTUnwrap(uint64(try client.property(SSPath.login, SSPath.collectionInterface, "Created")))
        XCTAssertTrue((before...after).contains(created), "a label change keeps Created")
        // After `lock --all` the dates still read (they are not secret; the keychain's creation time is in
        // the database in the clear).
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        XCTAssertEqual(uint64(try client.property(SSPath.login, SSPath.collectionInterface, "Created")), created)
    }

    /// gnome-keyring answers ReadAlias("login") with the login collection, and an alias path of it.
    func testBuiltInAliases() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        XCTAssertEqual(
            try client.call(SSPath.service, SSPath.serviceInterface, "ReadAlias", [.string("login")]),
            [.objectPath(SSPath.login)])
        XCTAssertEqual(
            try client.property("/org/freedesktop/secrets/aliases/login", SSPath.collectionInterface, "Label"),
            .string("Login"))
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "SetAlias",
                [.string("login"), .objectPath("/")]), "org.freedesktop.DBus.Error.NotSupported")
        // CreateCollection with an alias that names a collection returns that one, without a prompt.
        XCTAssertEqual(
            try client.call(
                SSPath.service, SSPath.serviceInterface, "CreateCollection",
                [.dictionary(keyType: "s", valueType: "v", []), .string("default")]),
            [.objectPath(SSPath.login), .objectPath("/")])
    }

    /// A lock change is announced for every item too, as gnome-keyring does: `PropertiesChanged` with
    /// the item's `Locked`, and `ItemChanged` on its collection, so that a client's cached item
    /// proxies (libsecret's `SecretItem`) do not go on saying "unlocked".
    func testLockChangesAreAnnouncedOnEveryItem() throws {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        var items: [String] = []
        for n in 0..<3 {
            let reply = try client.call(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(
                        keyType: "s", valueType: "v",
                        [
                            (
                                .string("org.freedesktop.Secret.Item.Attributes"),
                                .variant(SecretServiceClient.attributes([("n", "\(n)")]))
                            )
                        ]),
                    SecretServiceClient.plainSecret(session, "\(n)"), .boolean(false),
                ])
            items.append(try XCTUnwrap(reply.first?.string))
        }
        try client.watchSignals()
        /// Whether `item` was announced as `locked`, with its `times`-th ItemChanged.
        func announced(_ item: String, locked: Bool, times: Int) -> Bool {
            let changed = client.signals.wait {
                $0.path == item && $0.member == "PropertiesChanged" && $0.arguments.count == 3
                    && $0.arguments[0] == .string(SSPath.itemInterface)
                    && $0.arguments[1].stringKeyedEntries?["Locked"]?.variantValue == .boolean(locked)
            }
            let counted = Poll.until(within: 10) {
                client.signals.all.filter {
                    $0.path == SSPath.login && $0.member == "ItemChanged" && $0.arguments == [.objectPath(item)]
                }.count >= times
            }
            return changed != nil && counted
        }
        XCTAssertEqual(try cli(["lock"]).status, 0)
        for item in items { XCTAssertTrue(announced(item, locked: true, times: 1), item) }
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        for item in items { XCTAssertTrue(announced(item, locked: false, times: 2), item) }
    }
}
