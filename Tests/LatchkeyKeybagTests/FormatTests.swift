import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyKeybag

/// Parsing, integrity checking and the wrong-password / corrupt distinction.
final class FormatTests: XCTestCase {
    private var keybag: Keybag!
    private var classKeys: ClassKeys!
    private var file: [UInt8] = []

    override func setUpWithError() throws {
        (keybag, classKeys) = try Keybag.create(
            password: password("hunter2"), parameters: cheapParameters,
            allowWeakParameters: true)
        file = keybag.serialized()
    }

    func testLayoutSizeAndRoundTrip() throws {
        XCTAssertEqual(file.count, 580)
        XCTAssertEqual(Keybag.fileSize, 580)
        XCTAssertEqual(Array(file.prefix(8)), Array("LKKEYBAG".utf8))
        let parsed = try Keybag.parse(file, path: "test")
        XCTAssertEqual(parsed, keybag)
        XCTAssertEqual(parsed.serialized(), file)
        XCTAssertEqual(parsed.parameters, cheapParameters)
        XCTAssertEqual(parsed.id.count, 16)
    }

    func testCreateReturnsAllSevenDistinctKeysThatUnlock() throws {
        XCTAssertEqual(classKeys.classes, ProtectionClass.allCases)
        let distinct = Set(classKeys.keys.values.map { $0.unsafeCopyToArray() })
        XCTAssertEqual(distinct.count, 7)
        let master = try keybag.deriveMasterKey(password: password("hunter2"))
        let unlocked = try keybag.unlockPasswordClasses(masterKey: master)
        XCTAssertEqual(unlocked.classes, ProtectionClass.allCases.filter(\.requiresPassword))
        let always = try keybag.unlockAlwaysClasses()
        XCTAssertEqual(always.classes, [.always, .alwaysThisDeviceOnly])
        for (c, key) in unlocked.merging(always).keys {
            XCTAssertTrue(key.constantTimeEquals(classKeys[c]!), "\(c)")
        }
    }

    func testWrongPasswordIsDetectedNotGarbage() throws {
        let master = try keybag.deriveMasterKey(password: password("hunter3"))
        XCTAssertFalse(keybag.verify(masterKey: master))
        assertKeybagError(.wrongPassword, try keybag.unlockPasswordClasses(masterKey: master))
        // The empty password and a prefix are just wrong passwords too.
        assertKeybagError(
            .wrongPassword,
            try keybag.unlockPasswordClasses(
                masterKey: keybag.deriveMasterKey(password: SecretBytes(count: 0))))
        assertKeybagError(.wrongPassword, try keybag.unlockPasswordClasses(masterKey: SecretBytes(count: 32)))
    }

    func testEveryFlippedByteIsRejected() {
        for offset in file.indices {
            var damaged = file
            damaged[offset] ^= 0x40
            if offset < 8 {
                assertKeybagError(.notAKeybag(path: "test"), try Keybag.parse(damaged, path: "test"))
            } else {
                assertCorrupt(try Keybag.parse(damaged, path: "test"))
            }
        }
    }

    func testEveryTruncationAndExtensionIsCorrupt() {
        for length in 0..<file.count {
            assertCorrupt(try Keybag.parse(Array(file.prefix(length)), path: "test"))
        }
        assertCorrupt(try Keybag.parse(file + [0], path: "test"))
        assertCorrupt(try Keybag.parse(resealed(file + [0]), path: "test"))
    }

    func testForeignFilesAreNotKeybags() {
        assertKeybagError(.notAKeybag(path: "x"), try Keybag.parse(Array("hello, world".utf8), path: "x"))
        assertKeybagError(.notAKeybag(path: "x"), try Keybag.parse([0x7f], path: "x"))
        assertKeybagError(.notAKeybag(path: "x"), try Keybag.parse([UInt8](repeating: 0, count: 580), path: "x"))
    }

    func testIntactNewerVersionIsUnsupported() {
        var newer = file
        newer[9] = 2
        assertKeybagError(
            .unsupportedVersion(path: "test", version: 2), try Keybag.parse(resealed(newer), path: "test"))
        // A newer format may have another size; the checksum trailer still decides integrity.
        assertKeybagError(
            .unsupportedVersion(path: "test", version: 2),
            try Keybag.parse(resealed(newer + [1, 2, 3]), path: "test"))
    }

    /// Structurally invalid files with a valid checksum (written by a buggy or hostile writer).
    func testSemanticChecksBehindTheChecksum() {
        func edited(_ change: (inout [UInt8]) -> Void) -> [UInt8] {
            var copy = file
            change(&copy)
            return resealed(copy)
        }
        let entry = { (index: Int) in 121 + index * 61 }
        let cases: [(String, [UInt8])] = [
            ("reserved flag bit", edited { $0[11] = 2 }),
            ("time cost 0", edited { $0[28...31] = [0, 0, 0, 0] }),
            ("parallelism 0", edited { $0[36...39] = [0, 0, 0, 0] }),
            ("parallelism 17", edited { $0[36...39] = [0, 0, 0, 17] }),
            ("memory > 4 GiB", edited { $0[32...35] = [0xff, 0xff, 0xff, 0xff] }),
            ("entry count", edited { $0[120] = 6 }),
            ("unknown class", edited { $0[entry(2)] = 9 }),
            ("class 0", edited { $0[entry(0)] = 0 }),
            ("duplicate class", edited { $0[entry(1)] = 1 }),
            ("missing class 7", edited { $0[entry(6)] = 6 }),
            ("out of order", edited { $0.swapAt(entry(0), entry(1)) }),
        ]
        for (label, bytes) in cases {
            XCTAssertThrowsError(try Keybag.parse(bytes, path: "test"), label) { error in
                guard case .corrupt? = error as? KeybagError else { return XCTFail("\(label): \(error)") }
            }
        }
    }

    /// A wrapped key damaged behind a valid checksum: password verifies but the entry does not
    /// open, which must be reported as corruption, not as a wrong password.
    func testDamagedWrappedKeyWithGoodVerifierIsCorrupt() throws {
        let master = try keybag.deriveMasterKey(password: password("hunter2"))
        for (index, c) in ProtectionClass.allCases.enumerated() {
            var copy = file
            copy[121 + index * 61 + 30] ^= 1
            let damaged = try Keybag.parse(resealed(copy), path: "damaged")
            if c.requiresPassword {
                assertCorrupt(try damaged.unlockPasswordClasses(masterKey: master), path: "damaged")
                XCTAssertNoThrow(try damaged.unlockAlwaysClasses())
            } else {
                assertCorrupt(try damaged.unlockAlwaysClasses(), path: "damaged")
                XCTAssertNoThrow(try damaged.unlockPasswordClasses(masterKey: master))
            }
        }
    }

    func testEntriesCannotBeSwappedBetweenKeybags() throws {
        let (other, _) = try Keybag.create(
            password: password("hunter2"), parameters: cheapParameters, allowWeakParameters: true)
        // Same password and salt would give the same KEKs; the id in the AAD still binds entries.
        var spliced = other.serialized()
        spliced.replaceSubrange(121..<548, with: file[121..<548])
        spliced.replaceSubrange(40..<56, with: file[40..<56])
        spliced.replaceSubrange(56..<88, with: file[56..<88])
        let keybag2 = try Keybag.parse(resealed(spliced), path: "spliced")
        let master = try keybag2.deriveMasterKey(password: password("hunter2"))
        assertCorrupt(try keybag2.unlockPasswordClasses(masterKey: master), path: "spliced")
    }

    func testParameterPolicy() throws {
        let weak = Argon2Parameters(timeCost: 1, memoryKiB: 65535, parallelism: 1)
        XCTAssertThrowsError(try Keybag.create(password: password("x"), parameters: weak)) {
            guard case .weakParameters? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
        XCTAssertNoThrow(try Keybag.create(password: password("x"), parameters: weak, allowWeakParameters: true))
        let invalid = Argon2Parameters(timeCost: 0, memoryKiB: 65536, parallelism: 1)
        XCTAssertThrowsError(try Keybag.create(password: password("x"), parameters: invalid, allowWeakParameters: true))
        {
            guard case .weakParameters? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
    }

    func testDescriptionsNameTheFileAndHideSecrets() {
        let seedHex = hexString(keybag.alwaysSeed)
        XCTAssertFalse(keybag.description.contains(seedHex))
        XCTAssertFalse(String(describing: keybag!).contains(hexString(keybag.verifier)))
        XCTAssertTrue(
            KeybagError.corrupt(path: "/home/u/kb", reason: "checksum mismatch").description.contains("/home/u/kb"))
        XCTAssertTrue(KeybagError.io(path: "/p", errno: ENOENT).description.contains("/p"))
        XCTAssertTrue(KeybagError.unsupportedVersion(path: "/p", version: 9).description.contains("9"))
    }
}
