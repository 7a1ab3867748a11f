import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyKeybag

/// Password change re-wraps only the password classes and keeps every class key.
final class PasswordChangeTests: XCTestCase {
    func testChangeKeepsClassKeysAndSwitchesPasswords() throws {
        let (keybag, keys) = try Keybag.create(
            password: password("old"), parameters: cheapParameters, allowWeakParameters: true)
        let oldMaster = try keybag.deriveMasterKey(password: password("old"))
        let changed = try keybag.changingPassword(masterKey: oldMaster, newPassword: password("new"))

        XCTAssertEqual(changed.id, keybag.id)
        XCTAssertEqual(changed.parameters, keybag.parameters)
        XCTAssertNotEqual(changed.salt, keybag.salt)
        XCTAssertNotEqual(changed.verifier, keybag.verifier)
        XCTAssertEqual(changed.alwaysSeed, keybag.alwaysSeed)
        for c in ProtectionClass.allCases {
            if c.requiresPassword {
                XCTAssertNotEqual(changed.wrappedKeys[c], keybag.wrappedKeys[c], "\(c) must be re-wrapped")
                XCTAssertNotEqual(changed.wrappedKeys[c]!.prefix(12), keybag.wrappedKeys[c]!.prefix(12), "fresh nonce")
            } else {
                XCTAssertEqual(changed.wrappedKeys[c], keybag.wrappedKeys[c], "\(c) must be untouched")
            }
        }

        let reparsed = try Keybag.parse(changed.serialized(), path: "changed")
        assertKeybagError(
            .wrongPassword,
            try reparsed.unlockPasswordClasses(
                masterKey: reparsed.deriveMasterKey(password: password("old"))))
        let newMaster = try reparsed.deriveMasterKey(password: password("new"))
        let unlocked = try reparsed.unlockPasswordClasses(masterKey: newMaster).merging(reparsed.unlockAlwaysClasses())
        XCTAssertEqual(unlocked.classes, ProtectionClass.allCases)
        for c in ProtectionClass.allCases {
            XCTAssertTrue(unlocked[c]!.constantTimeEquals(keys[c]!), "\(c)")
        }
    }

    func testChangeRequiresTheCurrentMasterKey() throws {
        let (keybag, _) = try Keybag.create(
            password: password("old"), parameters: cheapParameters, allowWeakParameters: true)
        let wrong = try keybag.deriveMasterKey(password: password("guess"))
        assertKeybagError(.wrongPassword, try keybag.changingPassword(masterKey: wrong, newPassword: password("new")))
    }

    func testChangeWithNewParameters() throws {
        let (keybag, _) = try Keybag.create(
            password: password("old"), parameters: cheapParameters, allowWeakParameters: true)
        let master = try keybag.deriveMasterKey(password: password("old"))
        let stronger = Argon2Parameters(timeCost: 2, memoryKiB: 128, parallelism: 2)
        // Explicit parameters below the floor need the same opt-in as creation.
        XCTAssertThrowsError(
            try keybag.changingPassword(masterKey: master, newPassword: password("new"), parameters: stronger)
        ) {
            guard case .weakParameters? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
        let changed = try keybag.changingPassword(
            masterKey: master, newPassword: password("new"), parameters: stronger,
            allowWeakParameters: true)
        XCTAssertEqual(changed.parameters, stronger)
        let newMaster = try changed.deriveMasterKey(password: password("new"))
        XCTAssertNoThrow(try changed.unlockPasswordClasses(masterKey: newMaster))
    }

    func testDeterministicChangeIsReproducible() throws {
        let (keybag, _) = try Keybag.create(
            password: password("old"), parameters: cheapParameters, allowWeakParameters: true)
        let master = try keybag.deriveMasterKey(password: password("old"))
        let salt = [UInt8](repeating: 9, count: 16)
        let nonces = Dictionary(
            uniqueKeysWithValues: ProtectionClass.allCases.map { ($0, [UInt8](repeating: $0.rawValue, count: 12)) })
        let a = try keybag.changingPassword(
            masterKey: master, newPassword: password("new"), parameters: cheapParameters,
            salt: salt, nonces: nonces)
        let b = try keybag.changingPassword(
            masterKey: master, newPassword: password("new"), parameters: cheapParameters,
            salt: salt, nonces: nonces)
        XCTAssertEqual(a.serialized(), b.serialized())
    }
}
