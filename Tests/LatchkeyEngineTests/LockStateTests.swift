import Foundation
import LatchkeyEngineTestSupport
import LatchkeyModel
import XCTest

@testable import LatchkeyEngine

/// The locked-state table: what each operation does on each class after `lock` and `lock --all`.
final class LockStateTests: XCTestCase {
    let allClasses = ProtectionClass.allCases

    private func populate(_ kc: Keychain) throws {
        for cls in allClasses {
            _ = try kc.add(genp("svc", cls.pdmn, ["pdmn": .string(cls.pdmn), "v_Data": bytes("secret-\(cls.pdmn)")]))
        }
    }

    private func readable(_ kc: Keychain, _ cls: ProtectionClass) -> Int32 {
        status { _ = try kc.copy(genp("svc", cls.pdmn, ["r_Data": .bool(true)])) }
    }

    func testScreenLockDropsOnlyTheWhenUnlockedFamily() throws {
        let (kc, _) = try makeKeychain()
        try populate(kc)
        kc.lock(all: false)
        for cls in allClasses {
            let expected = cls.isWhenUnlockedFamily ? SecStatus.interactionNotAllowed : 0
            XCTAssertEqual(readable(kc, cls), expected, "copy \(cls.pdmn)")
            XCTAssertEqual(
                status { _ = try kc.add(genp("new", cls.pdmn, ["pdmn": .string(cls.pdmn)])) }, expected,
                "add \(cls.pdmn)")
            XCTAssertEqual(
                status { try kc.update(genp("svc", cls.pdmn), ["labl": .string("x")]) }, expected, "update \(cls.pdmn)")
        }
        let state = kc.status().available
        for cls in allClasses { XCTAssertEqual(state[cls], !cls.isWhenUnlockedFamily, cls.pdmn) }
        // Delete still works on a locked class, and only deletes the match.
        XCTAssertEqual(status { try kc.delete(genp("svc", "ak")) }, 0)
        XCTAssertEqual(status { try kc.delete(genp("svc", "ak")) }, SecStatus.itemNotFound)
        // A query that reaches a locked item fails; nothing is returned or deleted because of it.
        XCTAssertEqual(
            status { _ = try kc.copy(["class": .string("genp"), "m_Limit": .string("m_LimitAll")]) },
            SecStatus.interactionNotAllowed)
        // Unlock brings them back.
        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(readable(kc, .whenUnlockedThisDeviceOnly), 0)
        XCTAssertEqual(try kc.copy(genp("svc", "aku", ["r_Data": .bool(true)])), bytes("secret-aku"))
    }

    func testLogoutLockDropsEveryPasswordClass() throws {
        let (kc, _) = try makeKeychain()
        try populate(kc)
        kc.lock(all: true)
        for cls in allClasses {
            XCTAssertEqual(
                readable(kc, cls), cls.requiresPassword ? SecStatus.interactionNotAllowed : 0, "copy \(cls.pdmn)")
        }
        // Always items can still be added and read; their lookups fall back to scanning the class.
        XCTAssertEqual(try kc.copy(genp("svc", "dk", ["r_Data": .bool(true)])), bytes("secret-dk"))
        // Without the index key, filters cannot be evaluated for locked rows: refuse rather than guess.
        XCTAssertEqual(status { try kc.delete(genp("svc", "ak")) }, SecStatus.interactionNotAllowed)
        // Deleting a whole class needs no key at all.
        XCTAssertEqual(status { try kc.delete(["class": .string("genp"), "pdmn": .string("ak")]) }, 0)
        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(readable(kc, .whenUnlocked), SecStatus.itemNotFound)
        XCTAssertEqual(readable(kc, .afterFirstUnlock), 0)
    }

    func testAgentRestartStartsLockedWithAlwaysClassesAvailable() throws {
        let (kc, directory) = try makeKeychain()
        try populate(kc)
        let restarted = Keychain(location: KeychainLocation(directory: directory))
        for cls in allClasses {
            XCTAssertEqual(
                readable(restarted, cls), cls.requiresPassword ? SecStatus.interactionNotAllowed : 0, cls.pdmn)
        }
        XCTAssertEqual(status { try restarted.unlock(password: secret("wrong")) }, SecStatus.authFailed)
        XCTAssertEqual(
            readable(restarted, .whenUnlocked), SecStatus.interactionNotAllowed, "a wrong password unlocks nothing")
        try restarted.unlock(password: secret("pw"))
        for cls in allClasses { XCTAssertEqual(readable(restarted, cls), 0, cls.pdmn) }
    }

    func testPasswordChangeRewrapsClassKeysOnly() throws {
        let (kc, directory) = try makeKeychain()
        try populate(kc)
        XCTAssertEqual(status { try kc.changePassword(old: secret("nope"), new: secret("new")) }, SecStatus.authFailed)
        try kc.changePassword(
            old: secret("pw"), new: secret("new"), parameters: testParameters, allowWeakParameters: true)
        let reopened = Keychain(location: KeychainLocation(directory: directory))
        XCTAssertEqual(status { try reopened.unlock(password: secret("pw")) }, SecStatus.authFailed)
        try reopened.unlock(password: secret("new"))
        for cls in allClasses {
            XCTAssertEqual(
                try reopened.copy(genp("svc", cls.pdmn, ["r_Data": .bool(true)])), bytes("secret-\(cls.pdmn)"))
        }
    }
}
