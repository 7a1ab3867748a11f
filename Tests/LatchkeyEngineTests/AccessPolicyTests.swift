import Foundation
import LatchkeyEngineTestSupport
import LatchkeyModel
import XCTest

@testable import LatchkeyEngine

/// The access policy seam: today's group rules, the default group of new items, and that every SecItem
/// request is put to the policy before it touches the store.
final class AccessPolicyTests: XCTestCase {
    private let restricted = Caller(
        uid: getuid(), pid: getpid(), accessGroups: ["mine", "ours"], mayUseAnyGroup: false)

    // MARK: - AccessGroupPolicy

    func testGroupPolicyAllowsTheCallersGroupsOnly() {
        let policy = AccessGroupPolicy()
        for kind in AccessKind.allCases {
            XCTAssertEqual(
                policy.decide(
                    AccessRequest(
                        kind, caller: restricted, itemClass: .genericPassword,
                        accessGroups: ["mine", "ours"])), .allow, "\(kind)")
            XCTAssertEqual(
                policy.decide(AccessRequest(kind, caller: restricted, itemClass: .genericPassword)), .allow,
                "\(kind): a request that names no group")
            guard
                case .deny(let error) = policy.decide(
                    AccessRequest(
                        kind, caller: restricted, itemClass: .key,
                        accessGroups: ["mine", "theirs"]))
            else {
                return XCTFail("\(kind): a group of someone else's is allowed")
            }
            XCTAssertEqual(error.status, SecStatus.missingEntitlement)
            XCTAssertEqual(
                policy.decide(AccessRequest(kind, caller: testCaller, itemClass: .key, accessGroups: ["theirs"])),
                .allow, "\(kind): a caller that may use every group")
        }
    }

    func testNewItemsGoToTheCallersFirstGroup() {
        let policy = AccessGroupPolicy()
        XCTAssertEqual(policy.defaultAccessGroup(for: restricted), "mine")
        XCTAssertEqual(policy.defaultAccessGroup(for: testCaller), Caller.defaultAccessGroup)
        let noGroups = Caller(uid: getuid(), pid: getpid(), accessGroups: [], mayUseAnyGroup: false)
        XCTAssertEqual(policy.defaultAccessGroup(for: noGroups), Caller.defaultAccessGroup)
        // The gate gives an add that names no group the default one, and the policy decides on that.
        let gate = RequestGate(policy: policy)
        XCTAssertEqual(
            try gate.admit(AccessRequest(.add, caller: restricted, itemClass: .genericPassword)).accessGroups,
            ["mine"])
        XCTAssertEqual(
            try gate.admit(AccessRequest(.readData, caller: restricted, itemClass: .genericPassword)).accessGroups,
            [], "only adds get a group")
        XCTAssertEqual(
            status { _ = try gate.admit(AccessRequest(.add, caller: noGroups, itemClass: .genericPassword)) },
            SecStatus.missingEntitlement, "the default group is checked too")
    }

    /// `kSecAttrAccessGroupToken`: every caller may query it (nothing there yet: tokens provide its
    /// items); no caller, not even one that may use every group, adds, changes, moves items into or
    /// deletes in it (Apple's writable groups leave it out; -34018).
    func testTheTokenGroupIsReadOnlyForEveryCaller() throws {
        let (kc, _) = try makeKeychain()
        let token = SecValue.string(Caller.tokenAccessGroup)
        _ = try kc.add(genp("s", "a", ["v_Data": bytes("mine")]), caller: restricted)
        for caller in [restricted, testCaller] {
            XCTAssertEqual(
                status { _ = try kc.copyMatching(genp("s", "a", ["agrp": token]), caller: caller) },
                SecStatus.itemNotFound, "a query of the token group finds no stored item")
            XCTAssertEqual(
                status { _ = try kc.add(genp("s", "t", ["agrp": token]), caller: caller) },
                SecStatus.missingEntitlement)
            XCTAssertEqual(
                status { try kc.update(genp("s", "a", ["agrp": token]), ["labl": .string("x")], caller: caller) },
                SecStatus.missingEntitlement)
            XCTAssertEqual(
                status { try kc.update(genp("s", "a"), ["agrp": token], caller: caller) },
                SecStatus.missingEntitlement, "moving an item into it")
            XCTAssertEqual(
                status { try kc.delete(genp("s", "a", ["agrp": token]), caller: caller) },
                SecStatus.missingEntitlement)
        }
        XCTAssertEqual(
            try kc.copy(genp("s", "a", ["agrp": .string("mine"), "r_Data": .bool(true)])), bytes("mine"), "unchanged")
    }

    // MARK: - The engine under the group policy

    func testRestrictedCallerAddsToItsGroupAndCannotReachOthers() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "theirs", ["agrp": .string("theirs"), "v_Data": bytes("theirs")]))
        XCTAssertNil(try kc.add(genp("s", "a", ["v_Data": bytes("mine")]), caller: restricted))
        XCTAssertEqual(
            try kc.copy(genp("s", "a", ["agrp": .string("mine"), "r_Data": .bool(true)])), bytes("mine"),
            "an add naming no group goes to the caller's first")
        XCTAssertEqual(
            status { _ = try kc.add(genp("s", "b", ["agrp": .string("theirs")]), caller: restricted) },
            SecStatus.missingEntitlement)
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "b")) }, SecStatus.itemNotFound, "nothing was added")
        XCTAssertEqual(status { _ = try kc.add(genp("s", "c", ["agrp": .string("ours")]), caller: restricted) }, 0)

        for (what, query) in [
            ("read", genp("s", "theirs", ["agrp": .string("theirs"), "r_Data": .bool(true)])),
            ("attributes", genp("s", "theirs", ["agrp": .string("theirs")])),
        ] {
            XCTAssertEqual(
                status { _ = try kc.copyMatching(query, caller: restricted) }, SecStatus.missingEntitlement, what)
        }
        XCTAssertEqual(
            status {
                try kc.update(
                    genp("s", "theirs", ["agrp": .string("theirs")]), ["labl": .string("x")],
                    caller: restricted)
            }, SecStatus.missingEntitlement)
        XCTAssertEqual(
            status {
                try kc.update(
                    genp("s", "a", ["agrp": .string("mine")]), ["agrp": .string("theirs")],
                    caller: restricted)
            }, SecStatus.missingEntitlement,
            "moving an item to someone else's group")
        XCTAssertEqual(
            status { try kc.delete(genp("s", "theirs", ["agrp": .string("theirs")]), caller: restricted) },
            SecStatus.missingEntitlement)
        XCTAssertEqual(try kc.copy(genp("s", "theirs", ["r_Data": .bool(true)])), bytes("theirs"), "left alone")
        XCTAssertEqual(try kc.copy(genp("s", "a", ["agrp": .string("mine"), "r_Data": .bool(true)])), bytes("mine"))

        // The halves of a generated key are admitted each: a private half for someone else's group stores nothing.
        var parameters = Self.ecKeyParameters()
        parameters["private"] = .dictionary(["agrp": .string("theirs")])
        XCTAssertEqual(status { _ = try kc.generateKey(parameters, caller: restricted) }, SecStatus.missingEntitlement)
        XCTAssertEqual(status { _ = try kc.copy(["class": .string("keys")]) }, SecStatus.itemNotFound)
        _ = try kc.generateKey(Self.ecKeyParameters(), caller: restricted)
        XCTAssertNotNil(
            try kc.copy([
                "class": .string("keys"), "agrp": .string("mine"), "kcls": .int(1),
                "r_PersistentRef": .bool(true),
            ]), "the private key went to the caller's group")
    }

    // MARK: - Every request goes through the policy

    func testEveryItemRequestIsPutToThePolicyBeforeItTouchesTheStore() throws {
        let policy = RecordingPolicy(defaultGroup: "recorded")
        let (kc, _) = try makeKeychain(policy: policy)
        _ = try kc.add(genp("s", "a", ["v_Data": bytes("1")]))
        XCTAssertEqual(policy.take().map(\.kind), [.add])
        XCTAssertEqual(
            try kc.copy(genp("s", "a", ["agrp": .string("recorded"), "r_Data": .bool(true)])), bytes("1"),
            "new items go to the policy's default group")
        XCTAssertEqual(policy.take().map(\.accessGroups), [["recorded"]], "the group a query names reaches the policy")
        _ = try kc.generateKey(Self.ecKeyParameters(), caller: testCaller)
        XCTAssertEqual(policy.take().map(\.kind), [.add, .add], "one admission per half stored")
        let keyRef = try XCTUnwrap(
            kc.copy(["class": .string("keys"), "kcls": .int(1), "r_PersistentRef": .bool(true)])?.dataValue)
        _ = policy.take()
        let sign: SecDictionary = [
            KeyOperation.Field.key: .data(keyRef), KeyOperation.Field.operation: .string("sign"),
            KeyOperation.Field.algorithm: .string("algid:sign:ECDSA:message-X962:SHA256"),
            KeyOperation.Field.input: bytes("hello"),
        ]
        XCTAssertNotNil(try kc.keyOperation(sign, caller: testCaller))
        XCTAssertEqual(policy.take().map(\.kind), [.useKey])

        policy.deny = SecError(SecStatus.interactionRequired, "refused by the test policy")
        var export = sign
        export[KeyOperation.Field.operation] = .string("export")
        let requests: [(String, AccessKind, () throws -> Void)] = [
            ("add", .add, { _ = try kc.add(genp("s", "b", ["v_Data": bytes("2")])) }),
            ("copy data", .readData, { _ = try kc.copy(genp("s", "a", ["r_Data": .bool(true)])) }),
            ("copy attributes", .readAttributes, { _ = try kc.copy(genp("s", "a", ["r_Attributes": .bool(true)])) }),
            ("copy ref", .readAttributes, { _ = try kc.copy(["class": .string("keys"), "r_Ref": .bool(true)]) }),
            ("update", .update, { try kc.update(genp("s", "a"), ["v_Data": bytes("changed")]) }),
            ("delete", .delete, { try kc.delete(genp("s", "a"), caller: testCaller) }),
            ("sign", .useKey, { _ = try kc.keyOperation(sign, caller: testCaller) }),
            ("export", .readData, { _ = try kc.keyOperation(export, caller: testCaller) }),
            ("generate", .add, { _ = try kc.generateKey(Self.ecKeyParameters(), caller: testCaller) }),
        ]
        for (what, kind, request) in requests {
            XCTAssertEqual(status(request), SecStatus.interactionRequired, what)
            XCTAssertEqual(policy.take().map(\.kind), [kind], what)
        }
        policy.deny = nil
        XCTAssertEqual(try kc.copy(genp("s", "a", ["r_Data": .bool(true)])), bytes("1"), "nothing changed")
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "b")) }, SecStatus.itemNotFound, "nothing added")
        guard
            case .array(let keys)? = try kc.copy([
                "class": .string("keys"), "m_Limit": .string("m_LimitAll"),
                "r_Attributes": .bool(true),
            ])
        else { return XCTFail("no keys") }
        XCTAssertEqual(keys.count, 2, "one key pair, no second")
    }

    private static func ecKeyParameters() -> SecDictionary {
        ["type": .int(KeyReference.typeEC), "bsiz": .int(256), "perm": .bool(true)]
    }
}
