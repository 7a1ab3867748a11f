import Foundation
import XCTest

@testable import LatchkeyStore

final class StorePerformanceTests: StoreTestCase {
    private func plan(_ store: Store, sql: String) throws -> [String] {
        // Column 3 of EXPLAIN QUERY PLAN is the detail text.
        try store.connection.withStatement("EXPLAIN QUERY PLAN " + sql) { statement in
            var details: [String] = []
            while try statement.step() { details.append(statement.text(at: 3) ?? "") }
            return details
        }
    }

    /// Hash lookups must walk the item_index primary key and fetch items by rowid: no scan of
    /// items (or of the class via the (class, uniq) index) and no sort.
    func testHashLookupsUseTheIndex() throws {
        let store = try openStore()
        let hashes = [[hash(1, 1)], [hash(1, 1), hash(2, 2)], [hash(1, 1), hash(2, 2), hash(3, 3)]]
        for allOf in hashes {
            for filter in [
                RowFilter(itemClass: 1, allOfHashes: allOf),
                RowFilter(itemClass: 1, protections: [1, 2], synchronizable: nil, allOfHashes: allOf, limit: 1),
                RowFilter(itemClass: 1, persistentRef: blob(1, 1), allOfHashes: allOf),
                // Restricted to access groups: probes of the primary key, never a different walk.
                RowFilter(itemClass: 1, allOfHashes: allOf, anyOfHashes: [hash(9, 1), hash(9, 2)]),
                RowFilter(itemClass: 1, persistentRef: blob(1, 1), allOfHashes: allOf, anyOfHashes: [hash(9, 1)]),
            ] {
                for columns in [QueryShape.Columns.full, .header] {
                    let details = try plan(store, sql: store.selectSQL(columns, filter))
                    let text = details.joined(separator: " | ")
                    XCTAssertFalse(details.contains { $0.hasPrefix("SCAN") }, text)
                    XCTAssertFalse(text.contains("TEMP B-TREE"), text)
                    XCTAssertFalse(text.contains("sqlite_autoindex_items_2"), "no class-wide walk: \(text)")
                    if filter.persistentRef == nil {
                        // Leads with the (hash, item) primary key of the first hash...
                        XCTAssertTrue(details.first?.hasPrefix("SEARCH h0 USING PRIMARY KEY (hash=?)") == true, text)
                    } else {
                        // ...or with the unique persistref index, at most one row.
                        XCTAssertTrue(
                            details.first?.hasPrefix("SEARCH i USING INDEX sqlite_autoindex_items_1") == true,
                            text)
                    }
                    // Items rows are fetched by rowid, never scanned.
                    XCTAssertTrue(details.contains { $0.hasPrefix("SEARCH i USING") }, text)
                }
            }
        }
        // Sanity-check the pattern on a known-bad query, so the assertions above mean something.
        XCTAssertTrue(
            try plan(store, sql: "SELECT id FROM items WHERE secret = x'00'").contains { $0.hasPrefix("SCAN") })
    }

    /// The lookups whose plans are checked above find exactly the row they name, among rows shaped like
    /// internet passwords (a unique account, a server shared by 100 rows, a class-wide attribute). Their
    /// timings are measured by Benchmarks/ (latchkey-store-bench, `scripts/bench-store`), not here.
    func testHashLookupsFindTheRowTheyName() throws {
        let store = try openStore()
        func row(_ n: Int) -> NewRow {
            makeRow(n, protection: n % 7 + 1, hashes: [hash(0x20, n), hash(0x21, n % 200), hash(0x22, 0)])
        }
        try store.transaction { for n in 0..<1_000 { _ = try store.insert(row(n)) } }
        for i in 0..<200 {
            let n = (i * 7919) % 1_000
            let two = try store.rows(
                matching: RowFilter(
                    itemClass: 1, protections: [1, 2, 3, 4, 5, 6, 7],
                    allOfHashes: [hash(0x20, n), hash(0x21, n % 200)]))
            XCTAssertEqual(two.map(\.persistentRef), [blob(0x01, n)], "row \(n) by two hashes")
            let three = try store.headers(
                matching: RowFilter(
                    itemClass: 1, allOfHashes: [hash(0x20, n), hash(0x21, n % 200), hash(0x22, 0)]))
            XCTAssertEqual(three.map(\.persistentRef), [blob(0x01, n)], "row \(n) by three hashes")
            XCTAssertEqual(try store.row(persistentRef: blob(0x01, n))?.uniqueHash, blob(0x02, n, length: 32))
        }
        XCTAssertEqual(try store.headers(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x22, 0)])).count, 1_000)
    }
}
