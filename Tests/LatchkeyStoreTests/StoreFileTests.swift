import Foundation
import XCTest

@testable import LatchkeyStore

/// Opening, file format and on-disk properties, always with real files.
final class StoreFileTests: StoreTestCase {
    private func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func testNewFileIsWALWithMode0600AndRecordsV1() throws {
        let path = dbPath()
        let store = try Store(path: path)
        _ = try store.insert(makeRow(1))
        XCTAssertEqual(try mode(path), 0o600)
        XCTAssertEqual(try mode(path + "-wal"), 0o600, "SQLite copies the main file's mode")

        let raw = try RawDatabase(path: path)
        XCTAssertEqual(try raw.rows("PRAGMA journal_mode"), [["wal"]])
        XCTAssertEqual(try raw.rows("PRAGMA application_id"), [["\(0x4C4B_4348)"]])
        XCTAssertEqual(
            try raw.rows("SELECT name FROM migrations ORDER BY name"), [["v1-items"], ["v2-secret-service"]])
        let appliedAt = try XCTUnwrap(Double(raw.rows("SELECT applied_at FROM migrations")[0][0]))
        XCTAssertEqual(appliedAt, Date().timeIntervalSince1970, accuracy: 60)
        raw.close()

        // Connection settings the store relies on.
        XCTAssertEqual(try store.connection.scalarInt("PRAGMA synchronous"), 2, "FULL")
        XCTAssertEqual(try store.connection.scalarInt("PRAGMA foreign_keys"), 1)
        XCTAssertEqual(try store.connection.scalarInt("PRAGMA secure_delete"), 1)
        XCTAssertEqual(try store.connection.scalarInt("PRAGMA busy_timeout"), 5_000)
        store.close()
    }

    func testModeIs0600EvenWithPermissiveUmask() throws {
        let old = umask(0)
        defer { umask(old) }
        let path = dbPath()
        try Store(path: path).close()
        XCTAssertEqual(try mode(path), 0o600)
    }

    func testReopenKeepsDataAndDoesNotReapplyMigrations() throws {
        let path = dbPath()
        let first = try Store(path: path)
        let id = try first.insert(makeRow(1))
        first.close()

        let second = try Store(path: path)
        XCTAssertEqual(try second.row(persistentRef: makeRow(1).persistentRef)?.id, id)
        XCTAssertEqual(try second.rows(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x10, 1)])).map(\.id), [id])
        second.close()

        let raw = try RawDatabase(path: path)
        XCTAssertEqual(try raw.rows("SELECT count(*) FROM migrations"), [["2"]])
    }

    func testEmptyFileIsInitialised() throws {
        let path = dbPath()
        XCTAssertTrue(
            FileManager.default.createFile(atPath: path, contents: Data(), attributes: [.posixPermissions: 0o644]))
        let store = try Store(path: path)
        _ = try store.insert(makeRow(1))
        XCTAssertEqual(try store.count(itemClass: nil), 1)
        XCTAssertEqual(try mode(path), 0o600)
    }

    func testMissingDirectoryNamesThePath() throws {
        let path = directory.appendingPathComponent("no/such/dir/keychain.db").path
        XCTAssertThrowsError(try Store(path: path)) { error in
            XCTAssertTrue("\(error)".contains(path), "\(error)")
        }
    }

    // MARK: - Files that must be refused and left untouched

    func testGarbageFileIsCorruptAndUntouched() throws {
        for (name, size) in [("tiny.db", 10), ("small.db", 700), ("big.db", 64 * 1024)] {
            let path = dbPath(name)
            var generator = SystemRandomNumberGenerator()
            let garbage = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
            try garbage.write(to: URL(fileURLWithPath: path))
            try assertRefusedUntouched(path) { if case .corrupt = $0 { return true } else { return false } }
        }
        let text = dbPath("text.db")
        try Data(String(repeating: "not a database\n", count: 100).utf8).write(to: URL(fileURLWithPath: text))
        try assertRefusedUntouched(text) { if case .corrupt = $0 { return true } else { return false } }
    }

    func testTruncatedDatabaseIsCorruptAndUntouched() throws {
        let path = dbPath()
        let store = try Store(path: path)
        try store.transaction {
            for n in 0..<500 { _ = try store.insert(makeRow(n)) }
        }
        try store.checkpoint()
        store.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-wal"))

        let full = try bytes(of: path)
        try full.prefix(full.count / 2).write(to: URL(fileURLWithPath: path))
        try assertRefusedUntouched(path) { if case .corrupt = $0 { return true } else { return false } }
    }

    func testDamagedPageFailsQuickCheck() throws {
        let path = dbPath()
        let store = try Store(path: path)
        try store.transaction {
            for n in 0..<500 { _ = try store.insert(makeRow(n)) }
        }
        try store.checkpoint()
        store.close()

        // Overwrite the middle of the file (b-tree pages, not page 1) with garbage.
        var data = try bytes(of: path)
        let start = data.count / 2
        data.replaceSubrange(start..<start + 4096, with: Data(repeating: 0xEE, count: 4096))
        try data.write(to: URL(fileURLWithPath: path))
        try assertRefusedUntouched(path) { if case .corrupt = $0 { return true } else { return false } }
    }

    func testForeignDatabaseIsRefusedAndUntouched() throws {
        let path = dbPath("other.db")
        let raw = try RawDatabase(path: path)
        try raw.execute("CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES ('hello');")
        raw.close()
        try assertRefusedUntouched(path) { $0 == .notAKeychainDatabase(path: path) }

        // Even one that happens to have a migrations table: ownership is the application_id.
        let lookalike = dbPath("lookalike.db")
        let raw2 = try RawDatabase(path: lookalike)
        try raw2.execute("CREATE TABLE migrations(name TEXT PRIMARY KEY, applied_at REAL NOT NULL);")
        raw2.close()
        try assertRefusedUntouched(lookalike) { $0 == .notAKeychainDatabase(path: lookalike) }
    }

    func testDatabaseOwnedByAnotherApplicationIsRefusedEvenWithoutTables() throws {
        let path = dbPath("owned.db")
        let raw = try RawDatabase(path: path)
        try raw.execute("PRAGMA application_id = 1234; PRAGMA user_version = 7;")
        raw.close()
        try assertRefusedUntouched(path) { $0 == .notAKeychainDatabase(path: path) }
    }

    func testNewerSchemaIsRefusedAndUntouched() throws {
        let path = dbPath()
        let store = try Store(path: path)
        _ = try store.insert(makeRow(1))
        store.close()
        let raw = try RawDatabase(path: path)
        try raw.execute("INSERT INTO migrations VALUES ('v2-from-the-future', 1e9)")
        raw.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-wal"), "closing checkpointed the WAL")

        try assertRefusedUntouched(path) { $0 == .newerSchema(path: path, migration: "v2-from-the-future") }
    }

    // MARK: - What ends up in the file

    func testFileHoldsOnlySchemaAndGivenBytes() throws {
        // Baseline: printable runs in an empty store are the schema and SQLite's own header.
        let emptyPath = dbPath("empty.db")
        let empty = try Store(path: emptyPath)
        try empty.checkpoint()
        empty.close()
        let baseline = printableRuns(try bytes(of: emptyPath))
        XCTAssertTrue(baseline.contains { $0.contains("CREATE TABLE items") })

        // Populated with blobs of non-printable bytes plus explicit markers in every column.
        let path = dbPath()
        let store = try Store(path: path)
        var markers: [String] = []
        for n in 0..<50 {
            var row = makeRow(n, hashes: [hash(0x10, n) + Array("LKMARK-hash-\(n)".utf8)])
            for column in ["uniq", "wrappedkey", "metadata", "secret"] {
                let marker = "LKMARK-\(column)-\(n)"
                markers.append(marker)
                switch column {
                case "uniq": row.uniqueHash += Array(marker.utf8)
                case "wrappedkey": row.wrappedKey += Array(marker.utf8)
                case "metadata": row.metadata += Array(marker.utf8)
                default: row.secret += Array(marker.utf8)
                }
            }
            markers.append("LKMARK-hash-\(n)")
            _ = try store.insert(row)
        }
        try store.checkpoint()
        store.close()

        let data = try bytes(of: path)
        for marker in markers {
            XCTAssertTrue(contains(data, Array(marker.utf8)), "given bytes are stored as given: \(marker)")
        }
        // A table name followed by a one-byte integer that happens to be printable (sqlite_sequence
        // stores "items" next to the last id: 50 is "2") is schema bookkeeping, not content.
        let tableNames = ["items", "item_index", "migrations", "sqlite_sequence"]
        let added = printableRuns(data).subtracting(baseline).filter { run in
            !run.contains("LKMARK-") && !tableNames.contains(String(run.dropLast()))
        }
        XCTAssertEqual(added, [], "printable bytes the store added on its own")
    }

    func testDeletedSecretsDoNotLingerAfterCheckpoint() throws {
        let path = dbPath()
        let store = try Store(path: path)
        let secret = Array("LKMARK-deleted-secret".utf8)
        let big = Array(repeating: UInt8(0xAB), count: 6_000) + Array("LKMARK-overflow-secret".utf8)
        let small = try store.insert(makeRow(1, secret: secret))
        let overflow = try store.insert(makeRow(2, secret: big))
        _ = try store.insert(makeRow(3))
        try store.checkpoint()
        XCTAssertTrue(contains(try bytes(of: path), secret))

        XCTAssertEqual(try store.delete(ids: [small, overflow]), 2)
        try store.checkpoint()
        store.close()
        let data = try bytes(of: path)
        XCTAssertFalse(contains(data, secret), "secure_delete zeroes deleted cells")
        XCTAssertFalse(contains(data, Array("LKMARK-overflow-secret".utf8)), "and freed overflow pages")
        XCTAssertFalse(contains(data, makeRow(1).uniqueHash), "and index entries")
    }
}
