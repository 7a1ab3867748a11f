import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The signals of each operation, in order, as docs/SECRET-SERVICE.md §6 ("Signals") lists them next to
/// gnome-keyring's: `PropertiesChanged` carries the new values in `changed_properties` (`Items`,
/// `Collections`, `Label`, `Modified`, `Locked`) and never invalidates one, on every path of the object.
/// An invalidated `Items` used to leave libsecret's cached collection without it, and its next
/// `ItemCreated` handler crashed the program (Seahorse: SeahorseTests).
final class SignalSequenceTests: SecretServiceTestCase {
    private var client: SecretServiceClient!
    private var seen = 0
    private var roles: [String: String] = [:]

    override func tearDown() {
        client = nil
        super.tearDown()
    }

    private static let properties = "org.freedesktop.DBus.Properties"
    private static let defaultAlias = SSPath.defaultAlias
    private static let loginAlias = "/org/freedesktop/secrets/aliases/login"

    /// A signal as one line: its path by role, member, and arguments (paths by role, times as <t>).
    private func describe(_ signal: SignalLog.Signal) -> String {
        "\(role(signal.path)) \(signal.member) " + signal.arguments.map(describe).joined(separator: " ")
    }

    private func describe(_ value: BusValue) -> String {
        switch value {
        case .objectPath(let path): role(path)
        case .string(let text): text.hasPrefix("org.freedesktop.Secret.") ? String(text.dropFirst(23)) : "'\(text)'"
        case .uint64: "<t>"
        case .boolean(let flag): "\(flag)"
        case .variant(let inner): describe(inner)
        case .dictEntry(.string(let key), let value): "\(key)=\(describe(value))"
        case .array(_, let elements): "[" + elements.map(describe).joined(separator: ",") + "]"
        default: "\(value)"
        }
    }

    private func role(_ path: String) -> String {
        let fixed = [
            SSPath.service: "/", SSPath.login: "login", Self.defaultAlias: "alias:default",
            Self.loginAlias: "alias:login", "/org/freedesktop/secrets/collection/session": "session",
        ]
        if let name = fixed[path] { return name }
        if path.hasPrefix("/org/freedesktop/secrets/aliases/") { return "alias:" + path.split(separator: "/").last! }
        if roles[path] == nil {
            let kind = path.split(separator: "/").count == 6 ? "item" : "collection"
            roles[path] = "<\(kind)\(roles.values.filter { $0.hasPrefix("<\(kind)") }.count + 1)>"
        }
        return roles[path]!
    }

    /// Waits for the signals that follow the last step, at least `expected.count` of them, and compares.
    private func expect(_ step: String, _ expected: [String], file: StaticString = #filePath, line: UInt = #line) {
        _ = Poll.until(within: 10) { client.signals.all.count - seen >= expected.count }
        let got = Array(client.signals.all.dropFirst(seen))
        seen += got.count
        XCTAssertEqual(got.map(describe), expected, step, file: file, line: line)
    }

    private func createItem(_ session: String, label: String, _ attributes: [(String, String)], secret: String)
        throws -> String
    {
        let properties = BusValue.dictionary(
            keyType: "s", valueType: "v",
            [
                (.string("org.freedesktop.Secret.Item.Label"), .variant(.string(label))),
                (
                    .string("org.freedesktop.Secret.Item.Attributes"),
                    .variant(SecretServiceClient.attributes(attributes))
                ),
            ])
        let reply = try client.call(
            SSPath.login, SSPath.collectionInterface, "CreateItem",
            [properties, SecretServiceClient.plainSecret(session, secret), .boolean(true)])
        return try XCTUnwrap(reply.first?.string)
    }

    private func start() throws -> String {
        try createKeychain()
        client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        try client.watchSignals()
        return session
    }

    func testItemChangesThroughTheBusAndThroughSecItem() throws {
        let session = try start()
        let paths = ["login", "alias:default", "alias:login"]
        func onEveryPath(_ line: String) -> [String] { paths.map { "\($0) \(line)" } }

        let item = try createItem(session, label: "First", [("a", "1")], secret: "s1")
        expect(
            "CreateItem",
            onEveryPath("ItemCreated <item1>") + onEveryPath("PropertiesChanged Collection [Items=[<item1>]] []"))
        _ = try createItem(session, label: "First again", [("a", "1")], secret: "s2")
        expect(
            "CreateItem replacing",
            onEveryPath("ItemChanged <item1>") + [
                "<item1> PropertiesChanged Item [Label='First again',Modified=<t>] []"
            ])
        try client.call(item, SSPath.itemInterface, "SetSecret", [SecretServiceClient.plainSecret(session, "s3")])
        expect("SetSecret", onEveryPath("ItemChanged <item1>") + ["<item1> PropertiesChanged Item [Modified=<t>] []"])
        try client.call(
            item, Self.properties, "Set", [.string(SSPath.itemInterface), .string("Label"), .variant(.string("R"))])
        expect(
            "Label set",
            onEveryPath("ItemChanged <item1>") + ["<item1> PropertiesChanged Item [Label='R',Modified=<t>] []"])
        try client.call(
            item, Self.properties, "Set",
            [
                .string(SSPath.itemInterface), .string("Attributes"),
                .variant(SecretServiceClient.attributes([("b", "2")])),
            ])
        expect(
            "Attributes set",
            onEveryPath("ItemChanged <item1>") + ["<item1> PropertiesChanged Item [Attributes=[b='2'],Modified=<t>] []"]
        )
        try client.call(item, SSPath.itemInterface, "Delete")
        expect("Delete", onEveryPath("ItemDeleted <item1>") + onEveryPath("PropertiesChanged Collection [Items=[]] []"))

        // From outside, through SecItem.
        XCTAssertEqual(try cli(["add-generic-password", "-s", "svc", "-a", "acct", "-l", "L", "-w", "p1"]).status, 0)
        expect(
            "SecItem add",
            onEveryPath("ItemCreated <item2>") + onEveryPath("PropertiesChanged Collection [Items=[<item2>]] []"))
        XCTAssertEqual(
            try cli(["add-generic-password", "-s", "svc", "-a", "acct", "-l", "L2", "-w", "p2", "-U"]).status, 0)
        expect(
            "SecItem update",
            onEveryPath("ItemChanged <item2>") + [
                "<item2> PropertiesChanged Item [Label='L2',Attributes=[account='acct',service='svc',username='acct'],"
                    + "Modified=<t>] []"
            ])
        XCTAssertEqual(try cli(["delete-generic-password", "-s", "svc", "-a", "acct"]).status, 0)
        expect(
            "SecItem delete",
            onEveryPath("ItemDeleted <item2>") + onEveryPath("PropertiesChanged Collection [Items=[]] []"))
    }

    func testCollectionChangesAndAliases() throws {
        _ = try start()
        let label = BusValue.dictionary(
            keyType: "s", valueType: "v",
            [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("Work")))])
        let work = try XCTUnwrap(
            try client.call(SSPath.service, SSPath.serviceInterface, "CreateCollection", [label, .string("")]).first?
                .string)
        expect(
            "CreateCollection",
            [
                "/ CollectionCreated <collection1>",
                "/ PropertiesChanged Service [Collections=[login,session,<collection1>]] []",
            ])
        try client.call(
            work, Self.properties, "Set",
            [.string(SSPath.collectionInterface), .string("Label"), .variant(.string("W2"))])
        expect(
            "collection Label set",
            [
                "/ CollectionChanged <collection1>",
                "<collection1> PropertiesChanged Collection [Label='W2',Modified=<t>] []",
            ])
        try client.call(SSPath.service, SSPath.serviceInterface, "SetAlias", [.string("work"), .objectPath(work)])
        expect(
            "SetAlias",
            [
                "/ CollectionChanged <collection1>",
                "alias:work PropertiesChanged Collection [Items=[],Label='W2',Locked=false,Created=<t>,Modified=<t>] []",
            ])
        try client.call(work, SSPath.collectionInterface, "Delete")
        expect(
            "collection Delete",
            ["/ CollectionDeleted <collection1>", "/ PropertiesChanged Service [Collections=[login,session]] []"])
    }

    /// `latchkey lock` and `unlock` from outside: each item's `Locked`, then the collections' on
    /// every path, with their new values (Seahorse then shows "Keyring is locked", and the items again).
    func testLockAndUnlockFromOutside() throws {
        let session = try start()
        _ = try createItem(session, label: "I", [("i", "1")], secret: "s")
        _ = Poll.until(within: 10) { client.signals.all.count >= 6 }
        _ = role(try XCTUnwrap(client.signals.all.first?.arguments.first?.string))
        seen = 6
        func sequence(locked: Bool) -> [String] {
            [
                "login ItemChanged <item1>", "/ CollectionChanged login",
                "<item1> PropertiesChanged Item [Locked=\(locked)] []",
                "login PropertiesChanged Collection [Locked=\(locked)] []",
                "alias:default PropertiesChanged Collection [Locked=\(locked)] []",
                "alias:login PropertiesChanged Collection [Locked=\(locked)] []",
                "/ CollectionChanged session",
                "session PropertiesChanged Collection [Locked=\(locked)] []",
                "alias:session PropertiesChanged Collection [Locked=\(locked)] []",
            ]
        }
        XCTAssertEqual(try cli(["lock"]).status, 0)
        expect("latchkey lock", sequence(locked: true))
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        expect("latchkey unlock", sequence(locked: false))
        // `lock --all` too; the keys that list the members are kept (§2), so `Items` does not change.
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        expect("latchkey lock --all", sequence(locked: true))
        XCTAssertFalse(
            client.signals.all.contains {
                $0.member == "PropertiesChanged" && $0.arguments.last?.elements?.isEmpty == false
            },
            "nothing is ever invalidated")
    }

    /// The `Items` a signal carries is the collection's whole list as an unlisted program reads it,
    /// however the keychain changed since the last signal. The service remembers the list between
    /// signals and brings it up to date with its own calls' items only while nothing else committed
    /// (SecretService.broadcastItems): every step here compares the last signalled list with a fresh
    /// `Get` of the property.
    func testSignalledItemsFollowEveryChange() throws {
        let session = try start()
        var signalled = 0
        func lastSignalledItems() -> [String]? {
            let changes = client.signals.all.filter {
                $0.path == SSPath.login && $0.member == "PropertiesChanged"
                    && $0.arguments.dropFirst().first?.stringKeyedEntries?["Items"] != nil
            }
            guard changes.count > signalled else { return nil }
            return changes.last?.arguments.dropFirst().first?.stringKeyedEntries?["Items"]?.variantValue?
                .elements?.compactMap(\.string)
        }
        func check(_ step: String, count: Int, line: UInt = #line) throws {
            XCTAssertTrue(Poll.until(within: 10) { lastSignalledItems() != nil }, step, line: line)
            let got = lastSignalledItems() ?? []
            signalled =
                client.signals.all.filter {
                    $0.path == SSPath.login && $0.member == "PropertiesChanged"
                        && $0.arguments.dropFirst().first?.stringKeyedEntries?["Items"] != nil
                }.count
            let now = try client.call(
                SSPath.login, Self.properties, "Get", [.string(SSPath.collectionInterface), .string("Items")])
            let expected = now.first?.variantValue?.elements?.compactMap(\.string) ?? []
            XCTAssertEqual(got, expected, step, line: line)
            XCTAssertEqual(got.count, count, step, line: line)
        }

        let first = try createItem(session, label: "A", [("k", "a")], secret: "a")
        try check("create A", count: 1)
        _ = try createItem(session, label: "B", [("k", "b")], secret: "b")
        try check("create B", count: 2)
        XCTAssertEqual(try cli(["add-generic-password", "-s", "svc", "-a", "c", "-w", "c"]).status, 0)
        try check("SecItem add", count: 3)
        try client.call(first, SSPath.itemInterface, "Delete")
        try check("delete A", count: 2)
        XCTAssertEqual(try cli(["delete-generic-password", "-s", "svc", "-a", "c"]).status, 0)
        try check("SecItem delete", count: 1)
        _ = try createItem(session, label: "D", [("k", "d")], secret: "d")
        try check("create D after a SecItem change", count: 2)
        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        _ = Poll.until(within: 10) { client.signals.all.contains { $0.member == "CollectionChanged" } }
        _ = try createItem(session, label: "E", [("k", "e")], secret: "e")
        try check("create E after a lock", count: 3)
        // A replacing CreateItem changes an item (ItemChanged, no `Items`); the next create is right too.
        _ = try createItem(session, label: "E2", [("k", "e")], secret: "e2")
        _ = try createItem(session, label: "F", [("k", "f")], secret: "f")
        try check("create F after a replacing create", count: 4)
    }
}
