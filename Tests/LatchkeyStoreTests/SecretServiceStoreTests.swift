import Foundation
import XCTest

@testable import LatchkeyStore

/// The `v2-secret-service` migration and the store calls the Secret Service uses.
final class SecretServiceStoreTests: StoreTestCase {
    /// A database exactly as a v1-only latchkey wrote it: the v1 schema, its migrations row, two genp
    /// rows and one inet row.
    private func makeV1Database() throws -> String {
        let path = dbPath()
        let raw = try RawDatabase(path: path)
        let v1 = try XCTUnwrap(Schema.migrations.first { $0.name == "v1-items" })
        try raw.execute("PRAGMA journal_mode = WAL")
        try raw.execute(
            "BEGIN; \(Schema.migrationsTable); PRAGMA application_id = \(Schema.applicationID); \(v1.sql)"
                + " INSERT INTO migrations(name, applied_at) VALUES ('v1-items', 1); COMMIT")
        for (n, itemClass) in [(1, 1), (2, 2), (3, 1)] {
            let ref = blob(0x01, n).map { String(format: "%02x", $0) }.joined()
            try raw.execute(
                """
                INSERT INTO items(persistref, class, pdmn, sync, uniq, wrappedkey, metadata, secret)
                VALUES (X'\(ref)', \(itemClass), 1, 0, X'0\(n)', X'00', X'00', X'00')
                """)
        }
        raw.close()
        return path
    }

    func testMigrationFromV1KeepsRowsAndQueuesGenericPasswordsForReindexing() throws {
        let path = try makeV1Database()
        let store = try Store(path: path)
        XCTAssertEqual(try store.count(itemClass: nil), 3)
        XCTAssertTrue(try store.hasPendingIndexRows())
        let pending = try store.pendingIndexRows(protections: [1], limit: 10)
        XCTAssertEqual(pending.map(\.persistentRef), [blob(0x01, 1), blob(0x01, 3)], "genp rows only, in id order")
        XCTAssertEqual(try store.pendingIndexRows(protections: [2, 3], limit: 10), [], "only the classes asked for")
        XCTAssertEqual(try store.pendingIndexRows(protections: [1], limit: 1).count, 1)

        try store.completeIndex(item: pending[0].id, adding: [hash(0x20, 1), hash(0x20, 1), hash(0x21, 1)])
        XCTAssertEqual(
            try store.headers(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x20, 1), hash(0x21, 1)]))
                .map(\.id), [pending[0].id])
        // Adding a hash the row already has is harmless (a SecItemUpdate may have re-indexed it first).
        try store.completeIndex(item: pending[1].id, adding: [])
        try store.completeIndex(item: pending[1].id, adding: [hash(0x20, 1)])
        XCTAssertFalse(try store.hasPendingIndexRows())
        store.close()

        let raw = try RawDatabase(path: path)
        XCTAssertEqual(
            try raw.rows("SELECT name FROM migrations ORDER BY name"), [["v1-items"], ["v2-secret-service"]])
    }

    func testDeletingARowRemovesItFromTheReindexList() throws {
        let store = try Store(path: try makeV1Database())
        let pending = try store.pendingIndexRows(protections: [1], limit: 10)
        XCTAssertEqual(try store.delete(ids: pending.map(\.id)), 2)
        XCTAssertFalse(try store.hasPendingIndexRows())
    }

    func testANewDatabaseHasNothingToReindex() throws {
        let store = try openStore()
        _ = try store.insert(makeRow(1))
        XCTAssertFalse(try store.hasPendingIndexRows())
    }

    func testStateValuesAreStoredReplacedAndRemovedInTransactions() throws {
        let store = try openStore()
        XCTAssertNil(try store.stateValue(named: "collections"))
        try store.setStateValue([1, 2, 3], named: "collections")
        try store.setStateValue([4], named: "collections")
        XCTAssertEqual(try store.stateValue(named: "collections"), [4])
        XCTAssertThrowsError(
            try store.transaction {
                try store.setStateValue([9], named: "collections")
                throw StoreError.notFound
            })
        XCTAssertEqual(try store.stateValue(named: "collections"), [4], "rolled back with the transaction")
        try store.setStateValue(nil, named: "collections")
        XCTAssertNil(try store.stateValue(named: "collections"))
    }

    func testHashFrequenciesStopAtTheCap() throws {
        let store = try openStore()
        for n in 0..<30 {
            _ = try store.insert(makeRow(n, hashes: [hash(0x30, 0), hash(0x31, n)]))
        }
        XCTAssertEqual(try store.hashFrequencies([hash(0x30, 0), hash(0x31, 5), hash(0x32, 0)], cap: 10), [10, 1, 0])
        XCTAssertEqual(try store.hashFrequencies([hash(0x30, 0)], cap: 100), [30])
    }
}
