import Foundation
import LatchkeyEngine
import LatchkeyEngineTestSupport
import LatchkeyModel
import XCTest

@testable import LatchkeySecretService

/// Every Secret Service request is put to the engine's access policy once, as socket requests are, and
/// new Secret Service items go to the group the policy gives.
final class SecretServicePolicyTests: XCTestCase {
    private func attrs(_ pairs: KeyValuePairs<String, String>) -> SecretAttributes {
        SecretAttributes(pairs.map { SecretAttributes.Pair($0.key, $0.value) })!
    }

    private let login = SecretServiceKeychain.login

    func testNewItemsGoToThePolicysDefaultGroup() throws {
        let (kc, _) = try makeKeychain()
        let made = try kc.secretService.createItem(
            in: login, label: "", attributes: attrs(["service": "s", "account": "a"]),
            secret: SecretServiceSecret(value: [1], contentType: "x"), replace: false)
        XCTAssertTrue(made.created)
        XCTAssertNotNil(
            try kc.copy(genp("s", "a", ["agrp": .string(Caller.defaultAccessGroup), "r_PersistentRef": .bool(true)])))

        let policy = RecordingPolicy(defaultGroup: "from-the-policy")
        let (other, _) = try makeKeychain(policy: policy)
        _ = try other.secretService.createItem(
            in: login, label: "", attributes: attrs(["service": "s", "account": "a"]),
            secret: SecretServiceSecret(value: [1], contentType: "x"), replace: false)
        let asked = policy.take()
        XCTAssertEqual(asked.map(\.kind), [.add])
        XCTAssertEqual(asked.first?.caller, UnlistedBusClients().caller(ofBusClient: nil))
        XCTAssertEqual(asked.first?.itemClass, .genericPassword)
        XCTAssertNotNil(
            try other.copy(genp("s", "a", ["agrp": .string("from-the-policy"), "r_PersistentRef": .bool(true)])))
    }

    func testEveryRequestIsPutToThePolicy() throws {
        let policy = RecordingPolicy(defaultGroup: Caller.defaultAccessGroup)
        let (kc, _) = try makeKeychain(policy: policy)
        let ss = kc.secretService
        let work = try ss.createCollection(label: "Work", alias: "").collection
        let made = try ss.createItem(
            in: work.id, label: "l", attributes: attrs(["service": "s"]),
            secret: SecretServiceSecret(value: Array("v".utf8), contentType: "text/plain"),
            replace: false)
        XCTAssertEqual(policy.take().map(\.kind), [.update, .add])

        policy.deny = SecError(SecStatus.interactionRequired, "refused by the test policy")
        let requests: [(String, AccessKind, () throws -> Void)] = [
            ("state", .readAttributes, { _ = try ss.state() }),
            ("createCollection", .update, { _ = try ss.createCollection(label: "Other", alias: "") }),
            ("setLabel", .update, { try ss.setLabel("W", ofCollection: work.id) }),
            ("setAlias", .update, { try ss.setAlias("default", to: work.id) }),
            ("deleteCollection", .delete, { _ = try ss.deleteCollection(work.id) }),
            ("items", .readAttributes, { _ = try ss.items(in: work.id) }),
            ("search", .readAttributes, { _ = try ss.search(self.attrs(["service": "s"])) }),
            ("info", .readAttributes, { _ = try ss.info(item: made.id, in: work.id) }),
            ("item", .readAttributes, { _ = try ss.item(made.id, in: work.id) }),
            ("secret", .readData, { _ = try ss.secret(made.id, in: work.id) }),
            (
                "createItem", .add,
                {
                    _ = try ss.createItem(
                        in: work.id, label: "", attributes: self.attrs(["x": "y"]),
                        secret: SecretServiceSecret(value: [], contentType: ""), replace: false)
                }
            ),
            ("updateItem", .update, { try ss.updateItem(made.id, in: work.id, label: "changed") }),
            ("deleteItem", .delete, { try ss.deleteItem(made.id, in: work.id) }),
        ]
        for (what, kind, request) in requests {
            XCTAssertEqual(status(request), SecStatus.interactionRequired, what)
            XCTAssertEqual(policy.take().map(\.kind), [kind], what)
        }
        XCTAssertEqual(
            ss.lockState(), SecretServiceLockState(collectionsLocked: false, searchable: true),
            "the lock state names no item")

        policy.deny = nil
        XCTAssertEqual(try ss.state().collections.map(\.label), ["Login", "Work"], "nothing changed")
        XCTAssertEqual(try ss.state().aliases, SecretServiceState.initial.aliases)
        XCTAssertEqual(try ss.items(in: work.id).map(\.id), [made.id])
        XCTAssertEqual(try ss.item(made.id, in: work.id).label, "l")
    }
}
