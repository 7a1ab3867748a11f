import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyKeybag

/// ThisDeviceOnly classes of a device-bound keybag need the device factor (docs/KEYBAG.md "Device binding").
final class DeviceBindingTests: XCTestCase {
    private let machineSecret = SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))
    private let otherMachine = SecretBytes(copying: [UInt8](repeating: 0x43, count: 32))
    private let deviceClasses = ProtectionClass.allCases.filter(\.isThisDeviceOnly)

    func testBindingKeepsEveryClassKeyAndRewrapsOnlyDeviceClasses() throws {
        let (unbound, keys) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        XCTAssertFalse(unbound.isDeviceBound)
        let master = try unbound.deriveMasterKey(password: password("pw"))
        let factor = try unbound.deviceFactor(machineSecret: machineSecret, uid: 1000)
        let bound = try Keybag.parse(
            unbound.binding(masterKey: master, deviceFactor: factor).serialized(), path: "bound")

        XCTAssertTrue(bound.isDeviceBound)
        XCTAssertEqual(bound.id, unbound.id)
        XCTAssertEqual(bound.salt, unbound.salt)
        XCTAssertEqual(bound.verifier, unbound.verifier)
        for c in ProtectionClass.allCases {
            if c.isThisDeviceOnly {
                XCTAssertNotEqual(bound.wrappedKeys[c], unbound.wrappedKeys[c], "\(c) must be re-wrapped")
            } else {
                XCTAssertEqual(bound.wrappedKeys[c], unbound.wrappedKeys[c], "\(c) must be untouched")
            }
        }
        let all = try bound.unlockPasswordClasses(masterKey: master, deviceFactor: factor)
            .merging(bound.unlockAlwaysClasses(deviceFactor: factor))
        XCTAssertEqual(all.classes, ProtectionClass.allCases)
        for c in ProtectionClass.allCases { XCTAssertTrue(all[c]!.constantTimeEquals(keys[c]!), "\(c)") }
    }

    func testWithoutTheFactorDeviceClassesStayLockedAndTheRestUnlocks() throws {
        let (bound, _) = try boundKeybag()
        let master = try bound.deriveMasterKey(password: password("pw"))
        let keys = try bound.unlockPasswordClasses(masterKey: master).merging(bound.unlockAlwaysClasses())
        XCTAssertEqual(keys.classes, [.whenUnlocked, .afterFirstUnlock, .always])
    }

    func testFactorOfAnotherMachineOrUserIsWrongDevice() throws {
        let (bound, _) = try boundKeybag()
        let master = try bound.deriveMasterKey(password: password("pw"))
        for factor in [
            try bound.deviceFactor(machineSecret: otherMachine, uid: 1000),
            try bound.deviceFactor(machineSecret: machineSecret, uid: 1001),
        ] {
            assertKeybagError(.wrongDevice(path: "(new keybag)"), try bound.unlockAlwaysClasses(deviceFactor: factor))
            assertKeybagError(
                .wrongDevice(path: "(new keybag)"),
                try bound.unlockPasswordClasses(masterKey: master, deviceFactor: factor))
        }
        // A wrong password is still reported as such, before the factor matters.
        let wrong = try bound.deriveMasterKey(password: password("guess"))
        assertKeybagError(
            .wrongPassword,
            try bound.unlockPasswordClasses(
                masterKey: wrong,
                deviceFactor: bound.deviceFactor(machineSecret: machineSecret, uid: 1000)))
    }

    func testPasswordChangeOfBoundKeybagNeedsTheFactor() throws {
        let (bound, keys) = try boundKeybag()
        let master = try bound.deriveMasterKey(password: password("pw"))
        assertKeybagError(
            .deviceFactorRequired(path: "(new keybag)"),
            try bound.changingPassword(masterKey: master, newPassword: password("new")))
        let factor = try bound.deviceFactor(machineSecret: machineSecret, uid: 1000)
        let changed = try bound.changingPassword(masterKey: master, deviceFactor: factor, newPassword: password("new"))
        XCTAssertTrue(changed.isDeviceBound)
        XCTAssertEqual(changed.wrappedKeys[.alwaysThisDeviceOnly], bound.wrappedKeys[.alwaysThisDeviceOnly])
        let newMaster = try changed.deriveMasterKey(password: password("new"))
        let unlocked = try changed.unlockPasswordClasses(masterKey: newMaster, deviceFactor: factor)
        XCTAssertEqual(unlocked.classes, ProtectionClass.allCases.filter(\.requiresPassword))
        for c in unlocked.classes { XCTAssertTrue(unlocked[c]!.constantTimeEquals(keys[c]!), "\(c)") }
    }

    func testUnknownFlagBitsAreCorrupt() throws {
        let (bound, _) = try boundKeybag()
        var bytes = bound.serialized()
        XCTAssertEqual(bytes[11], 1)
        bytes[11] = 3
        assertCorrupt(try Keybag.parse(resealed(bytes), path: "test"))
        bytes[11] = 1
        bytes[10] = 0x80
        assertCorrupt(try Keybag.parse(resealed(bytes), path: "test"))
    }

    private func boundKeybag() throws -> (Keybag, ClassKeys) {
        let (unbound, keys) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        let master = try unbound.deriveMasterKey(password: password("pw"))
        return (
            try unbound.binding(
                masterKey: master,
                deviceFactor: unbound.deviceFactor(machineSecret: machineSecret, uid: 1000)), keys
        )
    }
}

/// Creation and password changes stay within what pam_latchkey accepts at login.
final class LoginLimitTests: XCTestCase {
    func testParametersAboveTheLoginLimitsAreRefused() throws {
        for parameters in [
            Argon2Parameters(timeCost: 17, memoryKiB: 64, parallelism: 1),
            Argon2Parameters(timeCost: 1, memoryKiB: 1_048_577, parallelism: 1),
            Argon2Parameters(timeCost: 1, memoryKiB: 64, parallelism: 9),
        ] {
            XCTAssertThrowsError(
                try Keybag.create(password: password("pw"), parameters: parameters, allowWeakParameters: true)
            ) {
                guard case .weakParameters? = $0 as? KeybagError else { return XCTFail("\($0)") }
            }
        }
        let (keybag, _) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        let master = try keybag.deriveMasterKey(password: password("pw"))
        XCTAssertThrowsError(
            try keybag.changingPassword(
                masterKey: master, newPassword: password("new"),
                parameters: Argon2Parameters(timeCost: 17, memoryKiB: 64, parallelism: 1),
                allowWeakParameters: true))
        XCTAssertNoThrow(
            try Keybag.create(
                password: password("pw"),
                parameters: Argon2Parameters(timeCost: 16, memoryKiB: 64, parallelism: 8),
                allowWeakParameters: true))
    }
}
