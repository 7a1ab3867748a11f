import Foundation
import LatchkeyDBus
import XCTest

@testable import Latchkey

/// Searches while the keychain is locked: after `latchkey lock --all` (the Secret Service keeps its
/// lookup keys) and before the first unlock (pending searches), each through libsecret's whole path:
/// the search, `Unlock` of what it found, the prompt, the secret asked for (docs/SECRET-SERVICE.md §2,
/// §4; issue 11, §2.1).
final class LockedSearchTests: SecretServiceTestCase {
    private var client: SecretServiceClient!
    private var item = ""

    override func tearDown() {
        client = nil
        super.tearDown()
    }

    /// A keychain with one item made through secret-tool, and a client.
    private func prepare() throws {
        try createKeychain()
        let stored = try secretTool(["store", "--label", "L", "service", "s", "account", "a"], input: "the secret")
        XCTAssertEqual(stored.status, 0, stored.err)
        client = try SecretServiceClient(bus.address)
        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s")])])
        item = try XCTUnwrap(found.first?.elements?.first?.string)
    }

    private func locked(_ path: String, _ interface: String) throws -> Bool? {
        try client.property(path, interface, "Locked")?.bool
    }

    /// After `latchkey lock --all` (or a logout) the Secret Service still evaluates searches (with the
    /// index key it keeps for them, docs/SECURITY.md), so libsecret sees the match as locked, unlocks
    /// it through the prompter and prints the secret (issue 11, §2.1).
    func testLockAllStillFindsItemsAsLockedAndSecretToolPromptsForThem() throws {
        try prepare()
        let session = try client.openPlainSession()
        let work = try XCTUnwrap(
            try client.call(
                SSPath.service, SSPath.serviceInterface, "CreateCollection",
                [
                    .dictionary(
                        keyType: "s", valueType: "v",
                        [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("Work")))]),
                    .string(""),
                ]
            ).first?.string)
        let workItem = try XCTUnwrap(
            try client.call(
                work, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(
                        keyType: "s", valueType: "v",
                        [
                            (
                                .string("org.freedesktop.Secret.Item.Attributes"),
                                .variant(SecretServiceClient.attributes([("service", "s"), ("account", "w")]))
                            )
                        ]),
                    SecretServiceClient.plainSecret(session, "work secret"), .boolean(false),
                ]
            ).first?.string)

        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), true)
        // The matches, as locked; the collections still told apart.
        var found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s")])])
        XCTAssertEqual(found.first?.elements, [])
        XCTAssertEqual(found.last?.elements, [.objectPath(item), .objectPath(workItem)])
        found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s"), ("account", "a")])])
        XCTAssertEqual(found.last?.elements, [.objectPath(item)])
        XCTAssertEqual(
            try client.call(
                work, SSPath.collectionInterface, "SearchItems", [SecretServiceClient.attributes([("service", "s")])]
            ).first?.elements, [.objectPath(workItem)])
        XCTAssertEqual(
            try client.property(SSPath.login, SSPath.collectionInterface, "Items")?.elements, [.objectPath(item)])
        XCTAssertEqual(
            try client.property(work, SSPath.collectionInterface, "Items")?.elements, [.objectPath(workItem)])
        XCTAssertEqual(
            try client.property(SSPath.service, SSPath.serviceInterface, "Collections")?.elements?.contains(
                .objectPath(work)),
            true)
        // What is sealed stays sealed: no label, no attributes, no secret.
        XCTAssertEqual(try locked(item, SSPath.itemInterface), true)
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Label"), .string(""))
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Attributes"), .array(elementType: "{ss}", []))
        XCTAssertEqual(
            client.errorName(item, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.IsLocked")
        // SecItem is unchanged: without the index key nothing can be matched there.
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassGenericPassword, kSecAttrService: "s", kSecReturnData: true] as NSDictionary,
                &data), errSecInteractionNotAllowed)

        // libsecret: Unlock of the locked match, the prompt through the prompter, the secret.
        let result = try secretTool(["lookup", "service", "s", "account", "a"])
        XCTAssertEqual(result.status, 0, result.err + agentLog())
        XCTAssertEqual(result.out, "the secret")
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), false)
    }

    /// An agent that never had the password (a fresh start, an autologin desktop) holds no index key, so
    /// a search cannot be evaluated: it is answered as one locked item standing for it
    /// (PendingSearches). libsecret unlocks that, the prompt asks for the password, and the secret printed
    /// is the one asked for, not the first item of the keychain (issue 11, §2.1).
    func testSearchBeforeTheFirstUnlockPromptsAndFindsWhatWasAskedFor() throws {
        try prepare()
        let stored = try secretTool(["store", "--label", "B", "service", "s", "account", "b"], input: "second secret")
        XCTAssertEqual(stored.status, 0, stored.err)
        let second = try XCTUnwrap(
            try client.call(
                SSPath.service, SSPath.serviceInterface, "SearchItems",
                [SecretServiceClient.attributes([("account", "b")])]
            ).first?.elements?.first?.string)
        client = nil
        stopAgent()
        XCTAssertEqual(try cli(["status"]).status, 0)
        try waitForServiceName()
        client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()

        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s"), ("account", "b")])])
        XCTAssertEqual(found.first?.elements, [])
        let pending = try XCTUnwrap(found.last?.elements?.first?.string)
        XCTAssertEqual(found.last?.elements?.count, 1)
        XCTAssertTrue(pending.hasPrefix(SSPath.login + "/"), pending)
        XCTAssertNotEqual(pending, item)
        XCTAssertNotEqual(pending, second)
        // A locked item to its client, and nothing to anyone else.
        XCTAssertEqual(try locked(pending, SSPath.itemInterface), true)
        XCTAssertEqual(try client.property(pending, SSPath.itemInterface, "Label"), .string(""))
        XCTAssertEqual(
            client.errorName(pending, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.IsLocked")
        XCTAssertEqual(
            client.errorName(pending, SSPath.itemInterface, "Delete"), "org.freedesktop.Secret.Error.IsLocked")
        let other = try SecretServiceClient(bus.address)
        XCTAssertEqual(
            other.errorName(pending, "org.freedesktop.DBus.Properties", "GetAll", [.string(SSPath.itemInterface)]),
            "org.freedesktop.Secret.Error.NoSuchObject")
        // The collection's search too.
        let inLogin = try client.call(
            SSPath.login, SSPath.collectionInterface, "SearchItems",
            [SecretServiceClient.attributes([("account", "a")])])
        XCTAssertEqual(inLogin.first?.elements?.count, 1)

        // libsecret: SearchItems, Unlock of what it found, the prompt, GetSecret of what the prompt
        // reports: the item asked for.
        let result = try secretTool(["lookup", "service", "s", "account", "b"])
        XCTAssertEqual(result.status, 0, result.err + agentLog())
        XCTAssertEqual(result.out, "second secret")
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), false)
        // Now the path stands for the search's match, and Unlock reports the match.
        let secret = try client.call(pending, SSPath.itemInterface, "GetSecret", [.objectPath(session)]).first
        XCTAssertEqual(SecretServiceClient.bytes(secret?.fields?[2]), Array("second secret".utf8))
        let unlocked = try client.call(
            SSPath.service, SSPath.serviceInterface, "Unlock", [.array(elementType: "o", [.objectPath(pending)])])
        XCTAssertEqual(unlocked.first?.elements, [.objectPath(second)])
        XCTAssertEqual(unlocked.last, .objectPath("/"))
        // Once unlocked, `lock --all` keeps searches evaluated.
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        let again = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s")])])
        XCTAssertEqual(again.last?.elements, [.objectPath(item), .objectPath(second)])
    }

    /// A pending search that matches nothing: libsecret prompts, then finds nothing (a lookup that
    /// fails, never another item's secret).
    func testPendingSearchThatMatchesNothingFindsNothing() throws {
        try prepare()
        client = nil
        stopAgent()
        XCTAssertEqual(try cli(["status"]).status, 0)
        try waitForServiceName()
        let result = try secretTool(["lookup", "service", "nothing-like-it"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertEqual(result.out, "")
        client = try SecretServiceClient(bus.address)
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), false, "the prompt unlocked it")
    }
}
