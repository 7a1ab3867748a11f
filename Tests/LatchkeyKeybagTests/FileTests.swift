import Foundation
import LatchkeyCrypto
import LatchkeySecrets
import XCTest

@testable import LatchkeyKeybag

/// load/write: O_NOFOLLOW, mode 0600, atomic replacement and what a crash can leave behind.
final class FileTests: XCTestCase {
    private var directory = ""
    private var path: String { directory + "/keybag" }

    override func setUpWithError() throws {
        directory = try makeTemporaryDirectory()
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func entries() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    private func unlocks(_ keybag: Keybag, with text: String) -> Bool {
        guard let master = try? keybag.deriveMasterKey(password: password(text)) else { return false }
        return (try? keybag.unlockPasswordClasses(masterKey: master)) != nil
    }

    func testWriteThenLoadRoundTripsWithMode0600() throws {
        let (keybag, _) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        try keybag.write(to: path)
        XCTAssertEqual(try Keybag.load(path: path), keybag)
        XCTAssertEqual(try entries(), ["keybag"], "no temporary file may remain")
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        // Rewriting replaces the file in place.
        try keybag.write(to: path)
        XCTAssertEqual(try entries(), ["keybag"])
    }

    func testLoadNeverModifiesTheFile() throws {
        let (keybag, _) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        try keybag.write(to: path)
        let before = try FileManager.default.attributesOfItem(atPath: path)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        _ = try Keybag.load(path: path)
        let after = try FileManager.default.attributesOfItem(atPath: path)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), bytes)
        XCTAssertEqual(before[.modificationDate] as? Date, after[.modificationDate] as? Date)
    }

    func testLoadErrors() throws {
        assertKeybagError(.notFound(path: path), try Keybag.load(path: path))
        let (keybag, _) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        try keybag.write(to: directory + "/real")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: directory + "/real")
        assertKeybagError(.io(path: path, errno: ELOOP), try Keybag.load(path: path))
        assertKeybagError(.notAKeybag(path: directory), try Keybag.load(path: directory))
        let foreign = directory + "/foreign"
        try Data("not a keybag at all".utf8).write(to: URL(fileURLWithPath: foreign))
        assertKeybagError(.notAKeybag(path: foreign), try Keybag.load(path: foreign))
        let truncated = directory + "/truncated"
        try Data(keybag.serialized().prefix(300)).write(to: URL(fileURLWithPath: truncated))
        assertCorrupt(try Keybag.load(path: truncated), path: truncated)
    }

    func testWriteErrors() throws {
        let (keybag, _) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        XCTAssertThrowsError(try keybag.write(to: directory + "/missing/keybag")) {
            guard case .io(_, ENOENT)? = $0 as? KeybagError else { return XCTFail("\($0)") }
        }
    }

    /// The crash window: after the temporary file is durable and before the rename, the target
    /// still holds the complete old keybag and the temporary file the complete new one.
    func testCrashBeforeRenameLeavesOldKeybagIntact() throws {
        let (keybag, _) = try Keybag.create(
            password: password("old"), parameters: cheapParameters, allowWeakParameters: true)
        try keybag.write(to: path)
        let changed = try keybag.changingPassword(
            masterKey: keybag.deriveMasterKey(password: password("old")),
            newPassword: password("new"))
        var observedTemporary = ""
        struct SimulatedCrash: Error {}
        XCTAssertThrowsError(
            try changed.write(to: path) { temporary in
                observedTemporary = temporary
                XCTAssertTrue(temporary.hasPrefix(self.path + ".tmp-"))
                let current = try Keybag.load(path: self.path)
                XCTAssertTrue(self.unlocks(current, with: "old"))
                XCTAssertFalse(self.unlocks(current, with: "new"))
                XCTAssertTrue(self.unlocks(try Keybag.load(path: temporary), with: "new"))
                throw SimulatedCrash()
            }
        ) { XCTAssertTrue($0 is SimulatedCrash) }
        XCTAssertFalse(observedTemporary.isEmpty)
        XCTAssertEqual(try entries(), ["keybag"], "a failed write removes its temporary file")
        XCTAssertTrue(unlocks(try Keybag.load(path: path), with: "old"))

        // The write that completes switches the password in one step.
        try changed.write(to: path)
        let final = try Keybag.load(path: path)
        XCTAssertTrue(unlocks(final, with: "new"))
        XCTAssertFalse(unlocks(final, with: "old"))
    }

    /// A temporary file left by a real crash (hook never returned, process gone) is ignored by
    /// load and does not block later writes.
    func testLeftoverTemporaryFileIsIgnored() throws {
        let (keybag, _) = try Keybag.create(
            password: password("old"), parameters: cheapParameters, allowWeakParameters: true)
        try keybag.write(to: path)
        let leftover = path + ".tmp-00112233445566ff"
        try Data(keybag.serialized().prefix(100)).write(to: URL(fileURLWithPath: leftover))
        XCTAssertTrue(unlocks(try Keybag.load(path: path), with: "old"))
        let changed = try keybag.changingPassword(
            masterKey: keybag.deriveMasterKey(password: password("old")),
            newPassword: password("new"))
        try changed.write(to: path)
        XCTAssertTrue(unlocks(try Keybag.load(path: path), with: "new"))
        XCTAssertEqual(try entries(), ["keybag", "keybag.tmp-00112233445566ff"])
    }

    /// A symbolic link planted at the target is replaced, never written through.
    func testWriteReplacesASymlinkRatherThanFollowingIt() throws {
        let victim = directory + "/victim"
        try Data("do not touch".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: victim)
        let (keybag, _) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        try keybag.write(to: path)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), Data("do not touch".utf8))
        XCTAssertEqual(try Keybag.load(path: path), keybag)
    }
}
