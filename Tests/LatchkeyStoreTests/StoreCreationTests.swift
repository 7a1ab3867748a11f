import Foundation
import XCTest

@testable import LatchkeyStore

/// Who may create a database: only a keychain's creator, which makes it empty before the keybag
/// (docs/STORE.md, "The file"); an opener for an existing keychain never does (issue 10, defect 4).
final class StoreCreationTests: StoreTestCase {
    func testAMissingDatabaseThatMustExistIsNotCreated() throws {
        let path = dbPath()
        XCTAssertThrowsError(try Store(path: path, mustExist: true)) { error in
            XCTAssertEqual(error as? StoreError, .missingDatabase(path: path))
            XCTAssertTrue(String(describing: error).contains(path))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        // Its log alone is no database either: SQLite would lay it over a new, empty file.
        let store = try Store(path: dbPath("other.db"))
        _ = try store.insert(makeRow(1))
        try FileManager.default.copyItem(atPath: dbPath("other.db") + "-wal", toPath: path + "-wal")
        XCTAssertThrowsError(try Store(path: path, mustExist: true))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        store.close()
    }

    func testAnEmptyDatabaseIsInitialisedByItsFirstOpener() throws {
        let path = dbPath()
        XCTAssertTrue(try Store.createEmpty(path: path))
        XCTAssertEqual(try bytes(of: path).count, 0)
        XCTAssertTrue(Store.holdsNothing(path: path))
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        // An empty one already there (a creation interrupted before its keybag) is used again.
        XCTAssertFalse(try Store.createEmpty(path: path))
        let store = try Store(path: path, mustExist: true)
        _ = try store.insert(makeRow(1))
        XCTAssertFalse(Store.holdsNothing(path: path))
        // Anything else is not taken over.
        XCTAssertThrowsError(try Store.createEmpty(path: path)) { error in
            XCTAssertEqual(error as? StoreError, .notAKeychainDatabase(path: path))
        }
        store.close()
        XCTAssertEqual(try Store(path: path, mustExist: true).count(itemClass: nil), 1)
    }

    /// An empty main file is not empty when its log holds pages: a database nothing was checkpointed
    /// from yet.
    func testAnEmptyMainFileWithALogHoldsSomething() throws {
        let path = dbPath()
        XCTAssertTrue(try Store.createEmpty(path: path))
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path + "-wal"))
        XCTAssertFalse(Store.holdsNothing(path: path))
        XCTAssertThrowsError(try Store.createEmpty(path: path))
    }
}
