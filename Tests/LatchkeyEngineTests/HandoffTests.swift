import Foundation
import LatchkeyEngineTestSupport
import LatchkeyKeybag
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine

/// The PAM hand-off: a master key and device factor instead of a password (docs/PROTOCOL.md "Hand-off",
/// docs/KEYBAG.md "Device binding").
final class HandoffTests: XCTestCase {
    private let machineSecret = SecretBytes(copying: [UInt8](repeating: 7, count: 32))

    private func keybag(_ directory: String) throws -> Keybag {
        try Keybag.load(path: directory + "/keybag")
    }

    private func masterKey(_ directory: String, _ password: String = "pw") throws -> SecretBytes {
        try keybag(directory).deriveMasterKey(password: secret(password))
    }

    private func factor(_ directory: String, uid: UInt32 = 1000, machine: SecretBytes? = nil) throws -> SecretBytes {
        try keybag(directory).deviceFactor(machineSecret: machine ?? machineSecret, uid: uid)
    }

    private func item(_ account: String, _ pdmn: String) -> SecDictionary {
        genp("svc", account, ["pdmn": .string(pdmn), "v_Data": bytes("secret-\(account)")])
    }

    private func read(_ keychain: Keychain, _ account: String) -> Int32 {
        status { _ = try keychain.copy(genp("svc", account, ["r_Data": .bool(true)])) }
    }

    func testHandoffBindsTheKeybagAndUnlocksEveryClass() throws {
        let (keychain, directory) = try makeKeychain()
        for pdmn in ["ak", "aku", "cku", "dku", "akpu"] { _ = try keychain.add(item(pdmn, pdmn)) }
        XCTAssertFalse(try keybag(directory).isDeviceBound)
        keychain.lock(all: true)

        let df = try factor(directory)
        try keychain.handOff(masterKey: try masterKey(directory), deviceFactor: df)
        XCTAssertTrue(try keybag(directory).isDeviceBound, "the hand-off binds an unbound keybag")
        for pdmn in ["ak", "aku", "cku", "dku", "akpu"] { XCTAssertEqual(read(keychain, pdmn), 0, pdmn) }
        let state = keychain.status()
        XCTAssertTrue(state.deviceBound)
        XCTAssertTrue(state.deviceFactorHeld)

        // Items written before binding are still readable after an agent restart and a full unlock
        // (class keys did not change), but the device classes need the factor again.
        let restarted = Keychain(location: KeychainLocation(directory: directory))
        XCTAssertEqual(read(restarted, "dku"), SecStatus.interactionNotAllowed)
        try restarted.unlock(password: secret("pw"))
        XCTAssertEqual(read(restarted, "ak"), 0)
        XCTAssertEqual(read(restarted, "aku"), SecStatus.interactionNotAllowed)
        XCTAssertEqual(read(restarted, "akpu"), SecStatus.interactionNotAllowed)
        XCTAssertFalse(restarted.status().deviceFactorHeld)
        try restarted.handOff(masterKey: try masterKey(directory), deviceFactor: df)
        for pdmn in ["ak", "aku", "cku", "dku", "akpu"] { XCTAssertEqual(read(restarted, pdmn), 0, pdmn) }

        // With the factor held, a later `latchkey unlock` reopens the device classes too.
        restarted.lock(all: true)
        XCTAssertEqual(read(restarted, "aku"), SecStatus.interactionNotAllowed)
        try restarted.unlock(password: secret("pw"))
        XCTAssertEqual(read(restarted, "aku"), 0)
    }

    func testWrongMasterKeyChangesNothing() throws {
        let (keychain, directory) = try makeKeychain()
        _ = try keychain.add(item("a", "ak"))
        keychain.lock(all: true)
        let before = try Data(contentsOf: URL(fileURLWithPath: directory + "/keybag"))
        XCTAssertEqual(
            status {
                try keychain.handOff(masterKey: try masterKey(directory, "wrong"), deviceFactor: try factor(directory))
            },
            SecStatus.authFailed)
        XCTAssertEqual(read(keychain, "a"), SecStatus.interactionNotAllowed)
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: directory + "/keybag")), before, "not bound by a wrong key")
    }

    func testFactorFromAnotherMachineOpensNoDeviceClass() throws {
        let (keychain, directory) = try makeKeychain()
        _ = try keychain.add(item("a", "ak"))
        _ = try keychain.add(item("d", "aku"))
        try keychain.handOff(masterKey: try masterKey(directory), deviceFactor: try factor(directory))

        // The home directory copied to another machine: same password, another machine secret.
        let copy = Keychain(location: KeychainLocation(directory: directory))
        let other = SecretBytes(copying: [UInt8](repeating: 9, count: 32))
        try copy.handOff(masterKey: try masterKey(directory), deviceFactor: try factor(directory, machine: other))
        XCTAssertEqual(read(copy, "a"), 0, "the password classes open")
        XCTAssertEqual(read(copy, "d"), SecStatus.interactionNotAllowed, "the device classes do not")
        XCTAssertFalse(copy.status().deviceFactorHeld)
        // Another uid on the same machine does not get the factor either.
        try copy.handOff(masterKey: try masterKey(directory), deviceFactor: try factor(directory, uid: 1001))
        XCTAssertEqual(read(copy, "d"), SecStatus.interactionNotAllowed)
    }

    func testPasswordChangeOfBoundKeychainNeedsTheFactor() throws {
        let (keychain, directory) = try makeKeychain()
        let df = try factor(directory)
        try keychain.handOff(masterKey: try masterKey(directory), deviceFactor: df)

        let restarted = Keychain(location: KeychainLocation(directory: directory))
        XCTAssertEqual(
            status { try restarted.changePassword(old: secret("pw"), new: secret("new")) },
            SecStatus.interactionNotAllowed)
        try restarted.handOff(masterKey: try masterKey(directory), deviceFactor: df)
        try restarted.changePassword(old: secret("pw"), new: secret("new"))
        XCTAssertEqual(status { try restarted.unlock(password: secret("pw")) }, SecStatus.authFailed)
        XCTAssertNoThrow(try restarted.unlock(password: secret("new")))
    }

    func testKeybagReplacedByAnotherProcessIsReread() throws {
        let (keychain, directory) = try makeKeychain()
        _ = try keychain.add(item("a", "ak"))
        keychain.lock(all: true)
        // pam_latchkey (chauthtok) rewrites the keybag file while the agent runs.
        let bag = try keybag(directory)
        let changed = try bag.changingPassword(
            masterKey: try bag.deriveMasterKey(password: secret("pw")), newPassword: secret("new"))
        try changed.write(to: directory + "/keybag")

        XCTAssertEqual(status { try keychain.unlock(password: secret("pw")) }, SecStatus.authFailed)
        try keychain.unlock(password: secret("new"))
        XCTAssertEqual(read(keychain, "a"), 0)
    }

    func testOutOfStepMarkerIsReportedAndClearedByPasswordChange() throws {
        let (keychain, directory) = try makeKeychain()
        XCTAssertNil(keychain.status().passwordOutOfStep)
        try "the login password changed without the old one\n".write(
            toFile: directory + "/password-out-of-step",
            atomically: true, encoding: .utf8)
        XCTAssertEqual(keychain.status().passwordOutOfStep, "the login password changed without the old one")
        try keychain.changePassword(old: secret("pw"), new: secret("login"))
        XCTAssertNil(keychain.status().passwordOutOfStep)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/password-out-of-step"))
    }

    func testHandoffWithoutKeychainIsNoDefaultKeychain() throws {
        let directory = NSTemporaryDirectory() + "latchkey-engine-\(UUID().uuidString)"
        let keychain = Keychain(location: KeychainLocation(directory: directory))
        XCTAssertEqual(
            status { try keychain.handOff(masterKey: SecretBytes(count: 32), deviceFactor: nil) },
            SecStatus.noDefaultKeychain)
    }
}
