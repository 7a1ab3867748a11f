import LatchkeyEngineTestSupport
import LatchkeyModel
import XCTest

@testable import LatchkeyEngine

/// Apple's SecItem semantics for password items (../shared/reference/secitem-semantics.md).
final class SecItemSemanticsTests: XCTestCase {
    func testAddThenCopyDataAttributesAndArrays() throws {
        let (kc, _) = try makeKeychain()
        XCTAssertNil(try kc.add(genp("AYS", "mrgumby", ["v_Data": bytes("opendoor")])))
        // Data alone: the secret itself.
        XCTAssertEqual(try kc.copy(genp("AYS", "mrgumby", ["r_Data": .bool(true)])), bytes("opendoor"))
        // Attributes: a dictionary with the stored and defaulted attributes.
        guard case .dictionary(let attrs)? = try kc.copy(genp("AYS", "mrgumby", ["r_Attributes": .bool(true)])) else {
            return XCTFail("expected a dictionary")
        }
        XCTAssertEqual(attrs["svce"], .string("AYS"))
        XCTAssertEqual(attrs["pdmn"], .string("ak"), "default accessibility is WhenUnlocked")
        XCTAssertEqual(attrs["sync"], .int(0))
        XCTAssertEqual(attrs["agrp"], .string(Caller.defaultAccessGroup))
        XCTAssertNil(attrs["v_Data"], "attributes alone carry no secret")
        XCTAssertNil(attrs["class"], "class only comes back when a ref is requested")
        guard case .date(let cdat)? = attrs["cdat"], case .date(let mdat)? = attrs["mdat"] else {
            return XCTFail("dates")
        }
        XCTAssertEqual(cdat, mdat)
        XCTAssertEqual(cdat, Clock.now(), accuracy: 60)
        // Two return keys: a dictionary with v_Data and v_PersistentRef.
        guard
            case .dictionary(let both)? = try kc.copy(
                genp("AYS", "mrgumby", ["r_Data": .bool(true), "r_PersistentRef": .bool(true)]))
        else {
            return XCTFail("expected a dictionary")
        }
        XCTAssertEqual(both["v_Data"], bytes("opendoor"))
        XCTAssertEqual(both["v_PersistentRef"]?.dataValue?.count, 20)
        // Limit > 1: an array, even for one match.
        XCTAssertEqual(
            try kc.copy(genp("AYS", "mrgumby", ["r_Data": .bool(true), "m_Limit": .string("m_LimitAll")])),
            .array([bytes("opendoor")]))
        XCTAssertEqual(
            try kc.copy(genp("AYS", "mrgumby", ["r_Data": .bool(true), "m_Limit": .int(5)])),
            .array([bytes("opendoor")]))
        XCTAssertEqual(
            try kc.copy(genp("AYS", "mrgumby", ["r_Data": .bool(true), "m_Limit": .int(1)])), bytes("opendoor"))
        // No return keys: success and no result.
        XCTAssertNil(try kc.copy(genp("AYS", "mrgumby")))
        // A string and data with the same bytes match each other in a blob attribute.
        XCTAssertEqual(
            try kc.copy(["class": .string("genp"), "acct": bytes("mrgumby"), "r_Data": .bool(true)]), bytes("opendoor"))
        XCTAssertEqual(status { _ = try kc.copy(genp("AYS", "nobody")) }, SecStatus.itemNotFound)
    }

    /// The Pitfalls post: a query with kSecAttrGeneric finds nothing, yet the add collides, because only
    /// service and account (plus group and sync) form the uniqueness constraint.
    func testPitfallsGenericAttributeReachesDuplicate() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("AYS", "mrgumby", ["gena": bytes("OtherHints"), "v_Data": bytes("x")]))
        let query = genp("AYS", "mrgumby", ["gena": bytes("SecItemHints")])
        XCTAssertEqual(status { _ = try kc.copy(query) }, SecStatus.itemNotFound)
        var add = query
        add["v_Data"] = bytes("opendoor")
        XCTAssertEqual(status { _ = try kc.add(add) }, SecStatus.duplicateItem)
    }

    func testUniquenessIgnoresAccessibilityButNotGroupOrSync() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "a", ["pdmn": .string("ak")]))
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["pdmn": .string("ck")])) }, SecStatus.duplicateItem)
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["agrp": .string("other.group")])) }, 0)
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["sync": .bool(true)])) }, 0)
        // "No account" and "account = empty string" are the same item.
        _ = try kc.add(["class": .string("genp"), "svce": .string("t")])
        XCTAssertEqual(status { _ = try kc.add(genp("t", "")) }, SecStatus.duplicateItem)
    }

    func testSynchronizableDefaultFilterAndAny() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "a", ["sync": .bool(true), "v_Data": bytes("1")]))
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "a")) }, SecStatus.itemNotFound)
        XCTAssertEqual(try kc.copy(genp("s", "a", ["sync": .string("syna"), "r_Data": .bool(true)])), bytes("1"))
        XCTAssertEqual(try kc.copy(genp("s", "a", ["sync": .bool(true), "r_Data": .bool(true)])), bytes("1"))
        XCTAssertEqual(status { _ = try kc.add(genp("s", "b", ["sync": .string("syna")])) }, SecStatus.param)
    }

    func testAttributeTheClassDoesNotHaveIsNoSuchAttr() throws {
        let (kc, _) = try makeKeychain()
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["atag": bytes("t")])) }, SecStatus.noSuchAttr)
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "a", ["srvr": .string("h")])) }, SecStatus.noSuchAttr)
        XCTAssertEqual(
            status { _ = try kc.copy(["class": .string("inet"), "svce": .string("x")]) }, SecStatus.noSuchAttr)
        XCTAssertEqual(status { try kc.update(genp("s", "a"), ["class": .string("genp")]) }, SecStatus.noSuchAttr)
        XCTAssertEqual(status { _ = try kc.copy(["class": .string("nope")]) }, SecStatus.noSuchClass)
    }

    func testMalformedDictionariesAreParam() throws {
        let (kc, _) = try makeKeychain()
        XCTAssertEqual(status { _ = try kc.add(["svce": .string("x")]) }, SecStatus.param, "no class")
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["v_Data": .string("not data")])) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "a", ["r_Data": .int(1)])) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "a", ["m_Limit": .string("many")])) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "a", ["cdat": .string("yesterday")])) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.copy(genp("s", "a", ["xyz_key": .bool(true)])) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["pdmn": .string("zz")])) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["labl": .null])) }, SecStatus.param)
        var many = genp("s", "a")
        for i in 0..<130 { many["f_\(i)"] = .bool(true) }
        XCTAssertEqual(status { _ = try kc.copy(many) }, SecStatus.param, "more than 128 keys")
        // kSecUseDataProtectionKeychain is accepted everywhere.
        XCTAssertEqual(status { _ = try kc.add(genp("s", "a", ["nleg": .bool(true)])) }, 0)
    }

    func testMatchLimitDefaultsForUpdateAndDelete() throws {
        let (kc, _) = try makeKeychain()
        for account in ["a", "b", "c"] { _ = try kc.add(genp("svc", account, ["v_Data": bytes("old")])) }
        XCTAssertEqual(
            status {
                try kc.update(
                    ["class": .string("genp"), "svce": .string("svc"), "m_Limit": .string("m_LimitAll")],
                    ["v_Data": bytes("new")])
            }, SecStatus.param)
        XCTAssertEqual(
            status {
                try kc.update(
                    ["class": .string("genp"), "svce": .string("svc"), "r_Data": .bool(true)],
                    ["v_Data": bytes("new")])
            }, SecStatus.param)
        XCTAssertEqual(
            status { try kc.delete(["class": .string("genp"), "m_Limit": .string("m_LimitOne")]) }, SecStatus.param)
        // Update with no limit changes every match.
        try kc.update(["class": .string("genp"), "svce": .string("svc")], ["v_Data": bytes("new")])
        XCTAssertEqual(
            try kc.copy([
                "class": .string("genp"), "svce": .string("svc"), "r_Data": .bool(true),
                "m_Limit": .string("m_LimitAll"),
            ]),
            .array([bytes("new"), bytes("new"), bytes("new")]))
        // CopyMatching defaults to one.
        XCTAssertEqual(
            try kc.copy(["class": .string("genp"), "svce": .string("svc"), "r_Data": .bool(true)]), bytes("new"))
        // Delete with no limit removes every match.
        try kc.delete(["class": .string("genp"), "svce": .string("svc")])
        XCTAssertEqual(status { _ = try kc.copy(["class": .string("genp")]) }, SecStatus.itemNotFound)
        XCTAssertEqual(status { try kc.delete(["class": .string("genp")]) }, SecStatus.itemNotFound)
        XCTAssertEqual(
            status { try kc.update(["class": .string("genp")], ["labl": .string("x")]) }, SecStatus.itemNotFound)
    }

    func testUpdateKeepsCreationDateAndAdvancesModificationDate() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "a", ["v_Data": bytes("1")]))
        let before = try attributes(kc, genp("s", "a"))
        try kc.update(genp("s", "a"), ["labl": .string("renamed")])
        try kc.update(genp("s", "a"), ["labl": .string("renamed again")])
        let after = try attributes(kc, genp("s", "a"))
        XCTAssertEqual(after["cdat"], before["cdat"])
        guard case .date(let m0)? = before["mdat"], case .date(let m1)? = after["mdat"] else { return XCTFail("dates") }
        XCTAssertGreaterThan(m1, m0)
        XCTAssertEqual(after["labl"], .string("renamed again"))
        XCTAssertEqual(try kc.copy(genp("s", "a", ["r_Data": .bool(true)])), bytes("1"), "the secret is kept")
    }

    func testUpdateOntoAnExistingItemIsDuplicateAndChangesNothing() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "a", ["v_Data": bytes("A")]))
        _ = try kc.add(genp("s", "b", ["v_Data": bytes("B")]))
        XCTAssertEqual(status { try kc.update(genp("s", "a"), ["acct": .string("b")]) }, SecStatus.duplicateItem)
        XCTAssertEqual(try kc.copy(genp("s", "a", ["r_Data": .bool(true)])), bytes("A"))
        XCTAssertEqual(try kc.copy(genp("s", "b", ["r_Data": .bool(true)])), bytes("B"))
    }

    func testPersistentReferences() throws {
        let (kc, _) = try makeKeychain()
        guard case .data(let ref)? = try kc.add(genp("s", "a", ["v_Data": bytes("1"), "r_PersistentRef": .bool(true)]))
        else {
            return XCTFail("no persistent ref")
        }
        XCTAssertEqual(Array(ref.prefix(4)), Array("genp".utf8))
        XCTAssertEqual(
            try kc.copy(["v_PersistentRef": .data(ref), "r_Data": .bool(true)]), bytes("1"), "class comes from the ref")
        // Stable across an update, even of a primary-key attribute.
        try kc.update(["v_PersistentRef": .data(ref)], ["acct": .string("renamed"), "v_Data": bytes("2")])
        XCTAssertEqual(try kc.copy(genp("s", "renamed", ["r_PersistentRef": .bool(true)])), .data(ref))
        XCTAssertEqual(
            status { _ = try kc.copy(["v_PersistentRef": .data(ref), "acct": .string("x")]) }, SecStatus.param)
        XCTAssertEqual(
            status { _ = try kc.copy(["class": .string("inet"), "v_PersistentRef": .data(ref)]) }, SecStatus.noSuchClass
        )
        XCTAssertEqual(status { _ = try kc.copy(["v_PersistentRef": bytes("garbage")]) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.add(genp("s", "z", ["v_PersistentRef": .data(ref)])) }, SecStatus.param)
        try kc.delete(["v_PersistentRef": .data(ref)])
        XCTAssertEqual(status { _ = try kc.copy(["v_PersistentRef": .data(ref)]) }, SecStatus.itemNotFound)
        XCTAssertEqual(status { try kc.delete(["v_PersistentRef": .data(ref)]) }, SecStatus.itemNotFound)
    }

    func testInternetPasswords() throws {
        let (kc, _) = try makeKeychain()
        let base: SecDictionary = [
            "class": .string("inet"), "srvr": .string("example.com"), "acct": .string("alice"),
            "ptcl": .string("htps"), "port": .int(443), "path": .string("/login"),
        ]
        var add = base
        add["v_Data"] = bytes("s3cret")
        add["labl"] = .string("Example")
        _ = try kc.add(add)
        XCTAssertEqual(status { _ = try kc.add(add) }, SecStatus.duplicateItem)
        var otherPort = add
        otherPort["port"] = .int(8443)
        XCTAssertEqual(status { _ = try kc.add(otherPort) }, 0, "port is part of the uniqueness constraint")
        var query = base
        query["r_Attributes"] = .bool(true)
        query["r_Data"] = .bool(true)
        guard case .dictionary(let found)? = try kc.copy(query) else { return XCTFail("no result") }
        XCTAssertEqual(found["ptcl"], .string("htps"), "a protocol string that is not a number stays a string")
        XCTAssertEqual(found["port"], .int(443))
        XCTAssertEqual(found["sdmn"], .data([]), "missing primary-key attributes default to empty")
        XCTAssertEqual(found["v_Data"], bytes("s3cret"))
        XCTAssertEqual(
            try kc.copy(["class": .string("inet"), "srvr": .string("example.com"), "m_Limit": .string("m_LimitAll")]),
            .array([]), "no return keys with limit > 1 gives an empty array")
    }

    func testAccessGroupIsStoredAndFilters() throws {
        let (kc, _) = try makeKeychain()
        _ = try kc.add(genp("s", "a", ["agrp": .string("TEAM.app"), "v_Data": bytes("team")]))
        _ = try kc.add(genp("s", "a", ["v_Data": bytes("default")]))
        XCTAssertEqual(
            try kc.copy(genp("s", "a", ["agrp": .string("TEAM.app"), "r_Data": .bool(true)])), bytes("team"))
        let restricted = Caller(uid: getuid(), pid: getpid(), accessGroups: ["mine"], mayUseAnyGroup: false)
        XCTAssertEqual(
            status { _ = try kc.copyMatching(genp("s", "a", ["agrp": .string("TEAM.app")]), caller: restricted) },
            SecStatus.missingEntitlement)
    }

    private func attributes(_ kc: Keychain, _ query: SecDictionary) throws -> SecDictionary {
        var q = query
        q["r_Attributes"] = .bool(true)
        guard case .dictionary(let d)? = try kc.copy(q) else { throw SecError.notFound }
        return d
    }
}
