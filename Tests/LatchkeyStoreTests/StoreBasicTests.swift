import XCTest

@testable import LatchkeyStore

final class StoreBasicTests: StoreTestCase {
    func testInsertFetchRoundTrip() throws {
        let store = try openStore()
        let new = makeRow(1, itemClass: 2, protection: 5, sync: true)
        let id = try store.insert(new)
        let expected = StoreRow(
            id: id, persistentRef: new.persistentRef, itemClass: 2, protection: 5,
            synchronizable: true, uniqueHash: new.uniqueHash, wrappedKey: new.wrappedKey,
            metadata: new.metadata, secret: new.secret)
        XCTAssertEqual(try store.row(persistentRef: new.persistentRef), expected)
        XCTAssertEqual(try store.rows(matching: RowFilter(itemClass: 2, synchronizable: true)), [expected])
        XCTAssertEqual(
            try store.headers(matching: RowFilter(itemClass: 2, synchronizable: nil)),
            [RowHeader(id: id, persistentRef: new.persistentRef, protection: 5, synchronizable: true)])
        XCTAssertNil(try store.row(persistentRef: blob(0x01, 999)))
        XCTAssertEqual(try store.count(itemClass: 2), 1)
        XCTAssertEqual(try store.count(itemClass: 1), 0)
        XCTAssertEqual(try store.count(itemClass: nil), 1)
    }

    func testEmptyBlobsAreStoredAsEmptyNotNull() throws {
        let store = try openStore()
        let new = NewRow(
            persistentRef: blob(0x01, 1), itemClass: 1, protection: 1, uniqueHash: [],
            wrappedKey: [], metadata: [], secret: [], indexHashes: [[]])
        let id = try store.insert(new)
        let row = try XCTUnwrap(store.row(persistentRef: new.persistentRef))
        XCTAssertEqual(row.id, id)
        XCTAssertEqual([row.uniqueHash, row.wrappedKey, row.metadata, row.secret], [[], [], [], []])
        XCTAssertEqual(try store.rows(matching: RowFilter(itemClass: 1, allOfHashes: [[]])).map(\.id), [id])
    }

    func testUniqueClassAndHashIsDuplicate() throws {
        let store = try openStore()
        let first = makeRow(1)
        _ = try store.insert(first)

        var sameUniq = makeRow(2)
        sameUniq.uniqueHash = first.uniqueHash
        XCTAssertThrowsError(try store.insert(sameUniq)) { XCTAssertEqual($0 as? StoreError, .duplicate) }

        var samePersistentRef = makeRow(3)
        samePersistentRef.persistentRef = first.persistentRef
        XCTAssertThrowsError(try store.insert(samePersistentRef)) { XCTAssertEqual($0 as? StoreError, .duplicate) }

        // The failed inserts left nothing behind, not even index rows.
        XCTAssertEqual(try store.count(itemClass: nil), 1)
        XCTAssertEqual(try store.rows(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x10, 2)])), [])

        // The same unique hash in another class is a different item.
        sameUniq.itemClass = 2
        XCTAssertNoThrow(try store.insert(sameUniq))
        XCTAssertEqual(try store.count(itemClass: nil), 2)
    }

    func testDuplicateIndexHashesAreIgnored() throws {
        let store = try openStore()
        let id = try store.insert(makeRow(1, hashes: [hash(0x10, 1), hash(0x10, 1)]))
        XCTAssertEqual(
            try store.rows(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x10, 1), hash(0x10, 1)]))
                .map(\.id), [id])
    }

    func testReplaceKeepsIdentityAndSwapsIndexHashes() throws {
        let store = try openStore()
        let id = try store.insert(makeRow(1, hashes: [hash(0x10, 1), hash(0x11, 1)]))
        let other = try store.insert(makeRow(2))

        var updated = makeRow(
            1, protection: 6, sync: true, hashes: [hash(0x11, 1), hash(0x12, 7)],
            secret: Array("new secret".utf8))
        updated.uniqueHash = blob(0x02, 100, length: 32)
        try store.replace(id: id, with: updated)

        let row = try XCTUnwrap(store.row(persistentRef: updated.persistentRef))
        XCTAssertEqual(row.id, id)
        XCTAssertEqual(row.protection, 6)
        XCTAssertTrue(row.synchronizable)
        XCTAssertEqual(row.uniqueHash, updated.uniqueHash)
        XCTAssertEqual(row.secret, Array("new secret".utf8))

        let any = RowFilter(itemClass: 1, synchronizable: nil)
        func ids(_ hashes: [[UInt8]]) throws -> [Int64] {
            var filter = any
            filter.allOfHashes = hashes
            return try store.rows(matching: filter).map(\.id)
        }
        XCTAssertEqual(try ids([hash(0x10, 1)]), [], "old hash must be gone")
        XCTAssertEqual(try ids([hash(0x11, 1)]), [id], "kept hash")
        XCTAssertEqual(try ids([hash(0x12, 7)]), [id], "new hash")
        XCTAssertEqual(try ids([hash(0x10, 2)]), [other])
    }

    func testReplaceClashIsDuplicateAndLeavesOldRow() throws {
        let store = try openStore()
        let id = try store.insert(makeRow(1))
        let clashWith = makeRow(2)
        _ = try store.insert(clashWith)
        let before = try store.row(persistentRef: makeRow(1).persistentRef)

        var clash = makeRow(1, protection: 7, hashes: [hash(0x13, 1)])
        clash.uniqueHash = clashWith.uniqueHash
        XCTAssertThrowsError(try store.replace(id: id, with: clash)) { XCTAssertEqual($0 as? StoreError, .duplicate) }

        XCTAssertEqual(try store.row(persistentRef: makeRow(1).persistentRef), before)
        XCTAssertEqual(try store.rows(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x10, 1)])).map(\.id), [id])
        XCTAssertEqual(try store.rows(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x13, 1)])), [])
    }

    func testReplaceMissingOrMismatchedIsNotFound() throws {
        let store = try openStore()
        let id = try store.insert(makeRow(1))
        XCTAssertThrowsError(try store.replace(id: id + 100, with: makeRow(1))) {
            XCTAssertEqual($0 as? StoreError, .notFound)
        }
        XCTAssertThrowsError(try store.replace(id: id, with: makeRow(5))) {
            XCTAssertEqual($0 as? StoreError, .notFound, "another persistent reference")
        }
        XCTAssertThrowsError(try store.replace(id: id, with: makeRow(1, itemClass: 3))) {
            XCTAssertEqual($0 as? StoreError, .notFound, "another class")
        }
    }

    func testDeleteCascadesIndexRowsAndIdsAreNotReused() throws {
        let store = try openStore()
        let first = try store.insert(makeRow(1))
        let second = try store.insert(makeRow(2))
        XCTAssertEqual(try store.delete(ids: [first, second, 999]), 2)
        XCTAssertEqual(try store.delete(ids: []), 0)
        XCTAssertEqual(try store.count(itemClass: nil), 0)

        let raw = try RawDatabase(path: dbPath())
        XCTAssertEqual(try raw.rows("SELECT count(*) FROM item_index"), [["0"]])
        raw.close()

        let third = try store.insert(makeRow(1))
        XCTAssertGreaterThan(third, second, "AUTOINCREMENT: ids are never reused")
    }

    struct Boom: Error {}

    func testTransactionRollsBackOnThrow() throws {
        let store = try openStore()
        XCTAssertThrowsError(
            try store.transaction {
                _ = try store.insert(makeRow(1))
                _ = try store.insert(makeRow(2))
                throw Boom()
            }
        ) { XCTAssertTrue($0 is Boom, "the body's error is rethrown unchanged") }
        XCTAssertEqual(try store.count(itemClass: nil), 0)

        let value = try store.transaction { () -> Int in
            _ = try store.insert(makeRow(3))
            return 42
        }
        XCTAssertEqual(value, 42)
        XCTAssertEqual(try store.count(itemClass: nil), 1)
    }

    func testNestedFailureUndoesOnlyItsOwnChanges() throws {
        let store = try openStore()
        let kept = makeRow(1)
        try store.transaction {
            _ = try store.insert(kept)
            // A failed insert inside a transaction must not leave a half-inserted row behind.
            var clash = makeRow(2)
            clash.uniqueHash = kept.uniqueHash
            XCTAssertThrowsError(try store.insert(clash))
            XCTAssertThrowsError(
                try store.transaction {
                    _ = try store.insert(makeRow(3))
                    throw Boom()
                })
            _ = try store.insert(makeRow(4))
        }
        XCTAssertEqual(
            try store.rows(matching: RowFilter(itemClass: 1)).map(\.persistentRef),
            [makeRow(1).persistentRef, makeRow(4).persistentRef])
        XCTAssertEqual(try store.rows(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x10, 2)])), [])
    }

    func testClosedStoreThrows() throws {
        let store = try openStore()
        store.close()
        store.close()
        XCTAssertThrowsError(try store.count(itemClass: nil)) { error in
            guard case .sqlite(code: 21, _, _)? = error as? StoreError else { return XCTFail("\(error)") }
        }
    }

    func testSQLiteErrorsKeepCodeAndSQL() throws {
        let store = try openStore()
        XCTAssertThrowsError(try store.connection.execute("SELECT nope FROM items")) { error in
            guard case .sqlite(let code, let message, let sql)? = error as? StoreError else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(code, 1)
            XCTAssertTrue(message.contains("nope"))
            XCTAssertEqual(sql, "SELECT nope FROM items")
        }
    }
}

/// `CommitCount`: what the Secret Service's remembered `Items` relies on (one more per commit, none
/// for reads or a rolled-back transaction).
final class CommitCountTests: StoreTestCase {
    func testEveryCommitIsCountedAndNothingElse() throws {
        let store = try openStore()
        let start = CommitCount.current
        _ = try store.count(itemClass: nil)
        XCTAssertEqual(CommitCount.current, start, "a read commits nothing")
        _ = try store.insert(makeRow(1, itemClass: 2, protection: 5, sync: false))
        XCTAssertEqual(CommitCount.current, start + 1, "a statement outside a transaction commits by itself")
        try store.transaction {
            _ = try store.insert(makeRow(2, itemClass: 2, protection: 5, sync: false))
            _ = try store.insert(makeRow(3, itemClass: 2, protection: 5, sync: false))
        }
        XCTAssertEqual(CommitCount.current, start + 2, "a transaction is one commit")
        struct Undo: Error {}
        XCTAssertThrowsError(
            try store.transaction {
                _ = try store.insert(makeRow(4, itemClass: 2, protection: 5, sync: false))
                throw Undo()
            })
        XCTAssertEqual(CommitCount.current, start + 2, "a rolled-back transaction commits nothing")
        XCTAssertEqual(try store.count(itemClass: nil), 3)
    }
}
