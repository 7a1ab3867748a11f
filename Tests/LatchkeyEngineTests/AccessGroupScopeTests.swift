import Foundation
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeyStore
import XCTest

@testable import LatchkeyEngine

/// Items of other access groups are, for a caller restricted to its own, not there (issue 12; Apple's
/// `agrp IN (<caller groups>)`, secitem-semantics §6): queries, updates, deletes, persistent references
/// and key operations never reach them, while a query that names such a group is errSecMissingEntitlement
/// (`AccessPolicyTests`).
final class AccessGroupScopeTests: XCTestCase {
    private let alice = Caller(uid: getuid(), pid: 1, accessGroups: ["alice"], mayUseAnyGroup: false)
    private let bob = Caller(uid: getuid(), pid: 2, accessGroups: ["bob", "shared"], mayUseAnyGroup: false)
    private let unlisted = Caller(
        uid: getuid(), pid: 3, accessGroups: [Caller.defaultAccessGroup], mayUseAnyGroup: false)

    private func data(_ kc: Keychain, _ query: SecDictionary, _ caller: Caller) -> SecValue? {
        var query = query
        query["r_Data"] = .bool(true)
        return try? kc.copyMatching(query, caller: caller)
    }

    /// Group names are their bytes: "café" precomposed and "café" with a combining accent are two
    /// groups (as the store's keyed hashes tell them apart), though Swift's `==` calls them equal. A
    /// caller granted one spelling neither adds to, reads, changes nor deletes in the other.
    func testGroupsThatAreCanonicallyEquivalentAreStillTwoGroups() throws {
        let (kc, _) = try makeKeychain()
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        XCTAssertEqual(composed, decomposed, "Swift's == is canonical equivalence")
        let owner = Caller(uid: getuid(), pid: 4, accessGroups: [decomposed], mayUseAnyGroup: false)
        let other = Caller(uid: getuid(), pid: 5, accessGroups: [composed], mayUseAnyGroup: false)
        let made = try kc.add(
            genp("s", "a", ["v_Data": bytes("owner's"), "r_PersistentRef": .bool(true)]), caller: owner)
        let ref = try XCTUnwrap(made?.dataValue)
        let byRef: SecDictionary = ["class": .string("genp"), "v_PersistentRef": .data(ref)]
        XCTAssertNil(data(kc, byRef, other), "read by persistent reference")
        XCTAssertEqual(
            status { try kc.update(byRef, ["v_Data": bytes("changed")], caller: other) }, SecStatus.itemNotFound)
        XCTAssertEqual(status { try kc.delete(byRef, caller: other) }, SecStatus.itemNotFound)
        for kind in ["add", "copy"] {
            let query = genp("s", "b", ["agrp": .string(decomposed), "v_Data": bytes("planted")])
            XCTAssertEqual(
                status {
                    if kind == "add" {
                        _ = try kc.add(query, caller: other)
                    } else {
                        _ = try kc.copyMatching(query, caller: other)
                    }
                }, SecStatus.missingEntitlement, kind)
        }
        XCTAssertEqual(data(kc, byRef, owner), bytes("owner's"), "unchanged")
    }

    func testQueriesUpdatesAndDeletesSeeOnlyTheCallersGroups() throws {
        let (kc, _) = try makeKeychain()
        XCTAssertNil(try kc.add(genp("mail", "me", ["v_Data": bytes("alice's")]), caller: alice))
        // The same primary key in another group is another item, not a duplicate.
        XCTAssertNil(try kc.add(genp("mail", "me", ["v_Data": bytes("bob's")]), caller: bob))
        XCTAssertNil(try kc.add(genp("mail", "me", ["v_Data": bytes("everyone's")]), caller: unlisted))

        XCTAssertEqual(data(kc, genp("mail", "me"), alice), bytes("alice's"))
        XCTAssertEqual(data(kc, genp("mail", "me"), bob), bytes("bob's"))
        XCTAssertEqual(data(kc, genp("mail", "me"), unlisted), bytes("everyone's"))
        guard
            case .array(let all)? = try kc.copyMatching(
                ["class": .string("genp"), "m_Limit": .string("m_LimitAll"), "r_Attributes": .bool(true)],
                caller: alice)
        else { return XCTFail("alice finds nothing") }
        XCTAssertEqual(
            all.compactMap { value -> String? in
                guard case .dictionary(let attributes) = value else { return nil }
                return attributes["agrp"]?.stringValue
            }, ["alice"], "a query of everything")

        try kc.update(genp("mail", "me"), ["v_Data": bytes("alice's, changed")], caller: alice)
        XCTAssertEqual(data(kc, genp("mail", "me"), bob), bytes("bob's"), "an update reaches the caller's group only")
        try kc.delete(["class": .string("genp")], caller: bob)
        XCTAssertEqual(data(kc, genp("mail", "me"), alice), bytes("alice's, changed"), "a delete of everything")
        XCTAssertEqual(data(kc, genp("mail", "me"), unlisted), bytes("everyone's"))
        XCTAssertEqual(status { _ = try kc.copyMatching(genp("mail", "me"), caller: bob) }, SecStatus.itemNotFound)
        XCTAssertEqual(status { try kc.delete(genp("mail", "me"), caller: bob) }, SecStatus.itemNotFound)
        XCTAssertEqual(
            status { try kc.update(genp("mail", "me"), ["labl": .string("x")], caller: bob) }, SecStatus.itemNotFound)

        // A caller that may use every group (the administrator's) sees both that are left.
        guard
            case .array(let left)? = try kc.copyMatching(
                ["class": .string("genp"), "m_Limit": .string("m_LimitAll"), "r_Attributes": .bool(true)],
                caller: testCaller)
        else { return XCTFail("nothing left") }
        XCTAssertEqual(left.count, 2)
    }

    func testPersistentReferencesResolveOnlyInTheCallersGroups() throws {
        let (kc, _) = try makeKeychain()
        let ref = try XCTUnwrap(
            kc.add(genp("s", "a", ["v_Data": bytes("secret"), "r_PersistentRef": .bool(true)]), caller: alice)?
                .dataValue)
        let byRef: SecDictionary = ["class": .string("genp"), "v_PersistentRef": .data(ref)]
        XCTAssertEqual(data(kc, byRef, alice), bytes("secret"))
        XCTAssertEqual(status { _ = try kc.copyMatching(byRef, caller: bob) }, SecStatus.itemNotFound)
        XCTAssertEqual(
            status { try kc.update(byRef, ["v_Data": bytes("overwritten")], caller: bob) }, SecStatus.itemNotFound)
        XCTAssertEqual(status { try kc.delete(byRef, caller: bob) }, SecStatus.itemNotFound)
        XCTAssertEqual(data(kc, byRef, alice), bytes("secret"), "still there, unchanged")
        try kc.delete(byRef, caller: alice)
        XCTAssertEqual(status { _ = try kc.copyMatching(byRef, caller: alice) }, SecStatus.itemNotFound)
    }

    func testKeysAndIdentitiesOfOtherGroupsCannotBeUsed() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.generateKey(
            ["type": .int(KeyReference.typeEC), "bsiz": .int(256), "perm": .bool(true)], caller: alice)
        let keyRef = try XCTUnwrap(
            kc.copyMatching(
                ["class": .string("keys"), "kcls": .int(1), "r_PersistentRef": .bool(true)], caller: alice)?.dataValue)
        var sign: SecDictionary = [
            KeyOperation.Field.key: .data(keyRef), KeyOperation.Field.operation: .string("sign"),
            KeyOperation.Field.algorithm: .string("algid:sign:ECDSA:message-X962:SHA256"),
            KeyOperation.Field.input: bytes("hello"),
        ]
        XCTAssertNotNil(try kc.keyOperation(sign, caller: alice))
        XCTAssertEqual(status { _ = try kc.keyOperation(sign, caller: bob) }, SecStatus.itemNotFound, "sign")
        sign[KeyOperation.Field.operation] = .string("export")
        XCTAssertEqual(status { _ = try kc.keyOperation(sign, caller: bob) }, SecStatus.itemNotFound, "export")
        XCTAssertEqual(
            status { _ = try kc.copyMatching(["class": .string("keys")], caller: bob) }, SecStatus.itemNotFound)
        XCTAssertEqual(
            status { try kc.delete(["class": .string("keys")], caller: bob) }, SecStatus.itemNotFound)
        XCTAssertNotNil(
            try kc.copyMatching(
                ["class": .string("keys"), "kcls": .int(1), "r_Attributes": .bool(true)], caller: alice))
    }

    /// Deletes work while WhenUnlocked is locked (a screen lock), by keyed hashes alone: the scope must
    /// hold there too, where no item is opened.
    func testDeletesWhileLockedStayInTheCallersGroups() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "a", ["v_Data": bytes("alice's")]), caller: alice)
        let ref = try XCTUnwrap(
            kc.add(genp("s", "b", ["v_Data": bytes("alice's too"), "r_PersistentRef": .bool(true)]), caller: alice)?
                .dataValue)
        XCTAssertTrue(kc.lock(all: false))
        XCTAssertEqual(status { try kc.delete(["class": .string("genp")], caller: bob) }, SecStatus.itemNotFound)
        XCTAssertEqual(
            status { try kc.delete(["class": .string("genp"), "v_PersistentRef": .data(ref)], caller: bob) },
            SecStatus.itemNotFound)
        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(data(kc, genp("s", "a"), alice), bytes("alice's"))
        XCTAssertEqual(data(kc, genp("s", "b"), alice), bytes("alice's too"))

        // After lock --all the agent's kept lookup key still scopes a delete.
        XCTAssertTrue(kc.lock(all: true))
        XCTAssertEqual(status { try kc.delete(["class": .string("genp")], caller: bob) }, SecStatus.itemNotFound)
        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(data(kc, genp("s", "a"), alice), bytes("alice's"))

        // Before the first unlock no key names a group: a scoped delete is refused, not guessed.
        let fresh = Keychain(location: kc.location)
        XCTAssertEqual(
            status { try fresh.delete(["class": .string("genp")], caller: bob) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(data(kc, genp("s", "a"), alice), bytes("alice's"))
    }

    /// The sealed `agrp` decides, not the index: an item whose hashes claim another group is not shown.
    func testAnOpenedItemOfAnotherGroupIsNotShownWhateverTheIndexSays() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "a", ["v_Data": bytes("alice's")]), caller: alice)
        // Every row, unscoped, checked as the rules check what they opened.
        func visible(in scope: GroupScope) throws -> [Bool] {
            try kc.withItems(scope: scope) { items throws(SecError) -> [Bool] in
                do {
                    return try items.store.rows(matching: RowFilter(itemClass: 1, synchronizable: nil)).map { row in
                        items.isVisible(try ItemSealer.open(row, keys: items.keys))
                    }
                } catch {
                    throw EngineErrors.map(error)
                }
            }
        }
        XCTAssertEqual(try visible(in: .only(["bob"])), [false])
        XCTAssertEqual(try visible(in: .only(["bob", "alice"])), [true])
        XCTAssertEqual(try visible(in: .all), [true])
    }
}
