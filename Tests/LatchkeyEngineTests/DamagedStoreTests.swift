import Foundation
import LatchkeyEngineTestSupport
import LatchkeyKeybag
import LatchkeyModel
import XCTest

@testable import LatchkeyEngine

/// A damaged write-ahead log or a missing database is reported by path and never replaced (issue 10,
/// defect 4; docs/SECURITY.md "Files and permissions", docs/STORE.md "The file").
final class DamagedStoreTests: XCTestCase {
    /// A copy of the keychain in `directory` as `kill -9` of the agent would leave it (the keybag, the
    /// database and its WAL, copied while the keychain is open), in a new directory.
    private func crashImage(of directory: String) throws -> KeychainLocation {
        let copy = NSTemporaryDirectory() + "latchkey-engine-image-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
        for name in ["keybag", "keychain.db", "keychain.db-wal"] {
            try FileManager.default.copyItem(atPath: directory + "/" + name, toPath: copy + "/" + name)
        }
        return KeychainLocation(directory: copy)
    }

    private func contents(_ path: String) -> Data? {
        FileManager.default.contents(atPath: path)
    }

    /// A keychain of twenty items (twenty commits in the WAL), and its crash image.
    private func imageWithItems() throws -> (Keychain, KeychainLocation) {
        let (keychain, directory) = try makeKeychain()
        for n in 0..<20 { _ = try keychain.add(genp("s", "a\(n)", ["pdmn": .string("dk"), "v_Data": bytes("p\(n)")])) }
        return (keychain, try crashImage(of: directory))
    }

    /// Every call is refused naming `path`, and `status` says so; nothing is written.
    private func assertRefusedNaming(
        _ path: String, _ location: KeychainLocation, file: StaticString = #filePath, line: UInt = #line
    ) {
        let keychain = Keychain(location: location)
        let problem = keychain.status().problem ?? "no problem reported"
        XCTAssertTrue(problem.contains(path), problem, file: file, line: line)
        for (name, call) in [
            ("copy", { _ = try keychain.copy(genp("s", "a0", ["r_Data": .bool(true)])) }),
            ("add", { _ = try keychain.add(genp("s", "new", ["pdmn": .string("dk")])) }),
            ("delete", { try keychain.delete(genp("s", "a1")) }),
            ("unlock", { try keychain.unlock(password: secret("pw")) }),
            (
                "create",
                { try keychain.create(password: secret("x"), parameters: testParameters, allowWeakParameters: true) }
            ),
        ] as [(String, () throws -> Void)] {
            do {
                try call()
                XCTFail("\(name) succeeded", file: file, line: line)
            } catch let error as SecError {
                XCTAssertEqual(error.status, SecStatus.invalidKeychain, "\(name): \(error)", file: file, line: line)
                XCTAssertTrue(error.detail?.contains(path) ?? false, "\(name): \(error)", file: file, line: line)
            } catch {
                XCTFail("\(name): \(error)", file: file, line: line)
            }
        }
    }

    func testAnIntactCrashImageOpensWithEveryItem() throws {
        let (keychain, image) = try imageWithItems()
        defer { _ = keychain }
        let reopened = Keychain(location: image)
        XCTAssertNil(reopened.status().problem)
        XCTAssertEqual(try reopened.copy(genp("s", "a19", ["r_Data": .bool(true)])), bytes("p19"))
    }

    func testAWALOfRandomBytesIsReportedAndNeverOverwritten() throws {
        let (keychain, image) = try imageWithItems()
        defer { _ = keychain }
        let wal = image.databasePath + "-wal"
        let size = try XCTUnwrap(contents(wal)).count
        var generator = SystemRandomNumberGenerator()
        try Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(
            to: URL(fileURLWithPath: wal))
        let before = (contents(image.databasePath), contents(wal))
        assertRefusedNaming(wal, image)
        XCTAssertEqual(contents(image.databasePath), before.0, "the database changed")
        XCTAssertEqual(contents(wal), before.1, "the WAL changed")
    }

    /// One frame in the middle of the WAL damaged: SQLite would open the items committed before it and
    /// drop every later one without a word.
    func testAWALWithOneDamagedFrameInTheMiddleIsReported() throws {
        let (keychain, image) = try imageWithItems()
        defer { _ = keychain }
        let wal = image.databasePath + "-wal"
        var bytes = [UInt8](try XCTUnwrap(contents(wal)))
        let pageSize = (8..<12).reduce(0) { $0 << 8 | Int(bytes[$1]) }
        let frames = (bytes.count - 32) / (24 + pageSize)
        bytes[32 + (frames / 2) * (24 + pageSize) + 24 + 200] ^= 0x10
        try Data(bytes).write(to: URL(fileURLWithPath: wal))
        assertRefusedNaming(wal, image)
        XCTAssertEqual(contents(wal), Data(bytes), "the WAL changed")
    }

    func testAMissingDatabaseBesideItsKeybagIsReportedAndNotCreated() throws {
        let (keychain, directory) = try makeKeychain()
        _ = try keychain.add(genp("s", "a0", ["pdmn": .string("dk")]))
        let location = KeychainLocation(directory: directory)
        for suffix in ["", "-wal", "-shm"] { unlink(location.databasePath + suffix) }
        let keybag = contents(location.keybagPath)
        assertRefusedNaming(location.databasePath, location)
        XCTAssertFalse(FileManager.default.fileExists(atPath: location.databasePath), "a database was created")
        XCTAssertEqual(contents(location.keybagPath), keybag)
    }

    /// pam_latchkey's auto_create writes an empty database file, then the keybag: the agent initialises
    /// the database it finds there.
    func testAKeybagBesideAnEmptyDatabaseIsANewKeychain() throws {
        let directory = NSTemporaryDirectory() + "latchkey-engine-new-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let location = KeychainLocation(directory: directory)
        XCTAssertTrue(FileManager.default.createFile(atPath: location.databasePath, contents: nil))
        let (keybag, _) = try Keybag.create(
            password: secret("pw"), parameters: testParameters, allowWeakParameters: true)
        try keybag.write(to: location.keybagPath)
        let keychain = Keychain(location: location)
        XCTAssertNil(keychain.status().problem)
        try keychain.unlock(password: secret("pw"))
        _ = try keychain.add(genp("s", "a", ["v_Data": bytes("p")]))
        XCTAssertEqual(try keychain.copy(genp("s", "a", ["r_Data": .bool(true)])), bytes("p"))
    }

    /// Creation writes the (empty) database before the keybag, so a crash between the two leaves an empty
    /// database and no keybag: that holds nothing, and the next creation finishes the job.
    func testCreationFinishesAfterACrashBeforeTheKeybag() throws {
        let directory = NSTemporaryDirectory() + "latchkey-engine-new-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let location = KeychainLocation(directory: directory)
        XCTAssertTrue(FileManager.default.createFile(atPath: location.databasePath, contents: nil))
        let keychain = Keychain(location: location)
        XCTAssertNil(keychain.status().problem)
        XCTAssertFalse(keychain.status().exists)
        try keychain.create(password: secret("pw"), parameters: testParameters, allowWeakParameters: true)
        _ = try keychain.add(genp("s", "a", ["v_Data": bytes("p")]))
        XCTAssertNil(Keychain(location: location).status().problem)
    }
}
