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
            for filter in [RowFilter(itemClass: 1, allOfHashes: allOf),
                           RowFilter(itemClass: 1, protections: [1, 2], synchronizable: nil, allOfHashes: allOf, limit: 1),
                           RowFilter(itemClass: 1, persistentRef: blob(1, 1), allOfHashes: allOf)] {
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
                        XCTAssertTrue(details.first?.hasPrefix("SEARCH i USING INDEX sqlite_autoindex_items_1") == true,
                                      text)
                    }
                    // Items rows are fetched by rowid, never scanned.
                    XCTAssertTrue(details.contains { $0.hasPrefix("SEARCH i USING") }, text)
                }
            }
        }
        // Sanity-check the pattern on a known-bad query, so the assertions above mean something.
        XCTAssertTrue(try plan(store, sql: "SELECT id FROM items WHERE secret = x'00'").contains { $0.hasPrefix("SCAN") })
    }

    /// Prints (does not assert) insert and lookup timings at 1,000 and 20,000 rows
    /// (LATCHKEY_STORE_BENCH_ROWS overrides the larger size, e.g. 100000).
    ///
    /// Figures are the best of several rounds (lookups) or the median (inserts), so a busy machine
    /// skews them less.
    func testTimingsAt1kAnd20k() throws {
        let largeSize = ProcessInfo.processInfo.environment["LATCHKEY_STORE_BENCH_ROWS"].flatMap(Int.init) ?? 20_000
        let store = try openStore()
        func row(_ n: Int) -> NewRow {
            // Like an inet item: account (unique), server (100 items each), class-wide attribute.
            makeRow(n, protection: n % 7 + 1, hashes: [hash(0x20, n), hash(0x21, n % 200), hash(0x22, 0)])
        }
        func insertBulk(_ range: Range<Int>) throws {
            try store.transaction { for n in range { _ = try store.insert(row(n)) } }
        }
        func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
        /// Best per-iteration average over `rounds` rounds, in µs.
        func bestOf(_ rounds: Int, _ iterations: Int, _ body: (Int) throws -> Void) rethrows -> Double {
            var best = Double.infinity
            for round in 0..<rounds {
                let start = now()
                for i in 0..<iterations { try body(round * iterations + i) }
                best = min(best, Double(now() - start) / 1_000 / Double(iterations))
            }
            return best
        }
        /// Median single-call duration in µs.
        func median(_ iterations: Int, _ body: () throws -> Void) rethrows -> Double {
            var samples: [Double] = []
            for _ in 0..<iterations {
                let start = now()
                try body()
                samples.append(Double(now() - start) / 1_000)
            }
            return samples.sorted()[iterations / 2]
        }
        func measure(at size: Int) throws -> String {
            var found = 0
            let two = try bestOf(5, 400) { i in
                let n = (i * 7919) % size
                found += try store.rows(matching: RowFilter(itemClass: 1, protections: [1, 2, 3, 4, 5, 6, 7],
                                                            allOfHashes: [hash(0x20, n), hash(0x21, n % 200)])).count
            }
            let three = try bestOf(5, 400) { i in
                let n = (i * 7919) % size
                found += try store.headers(matching: RowFilter(
                    itemClass: 1, allOfHashes: [hash(0x20, n), hash(0x21, n % 200), hash(0x22, 0)])).count
            }
            let byRef = try bestOf(5, 400) { i in
                found += try store.row(persistentRef: blob(0x01, (i * 7919) % size)) == nil ? 0 : 1
            }
            XCTAssertEqual(found, 3 * 5 * 400)
            // Each autocommit insert is its own durable transaction: with synchronous=FULL its cost
            // is the WAL fsync; NORMAL (no fsync at commit) shows what durability costs.
            var next = 10_000_000 + size
            let insertFull = try median(60) { _ = try store.insert(row(next)); next += 1 }
            try store.connection.execute("PRAGMA synchronous = NORMAL")
            let insertNormal = try median(60) { _ = try store.insert(row(next)); next += 1 }
            try store.connection.execute("PRAGMA synchronous = FULL")
            let ids = try store.headers(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x22, 0)])).map(\.id)
            _ = try store.delete(ids: Array(ids.suffix(120)))
            return String(format: "%6d rows: lookup 2 hashes %.1f µs, 3 hashes (headers) %.1f µs, by persistref %.1f µs; "
                          + "insert FULL %.0f µs, NORMAL %.0f µs", size, two, three, byRef, insertFull, insertNormal)
        }

        try insertBulk(0..<1_000)
        let small = try measure(at: 1_000)
        let bulkStart = now()
        try insertBulk(1_000..<largeSize)
        let bulk = Double(now() - bulkStart) / 1_000 / Double(largeSize - 1_000)
        let large = try measure(at: largeSize)
        store.close()
        let openStart = now()
        let reopened = try openStore()
        let open = Double(now() - openStart) / 1_000_000
        reopened.close()
        print("[latchkey-store timing] \(small)")
        print("[latchkey-store timing] \(large)")
        print(String(format: "[latchkey-store timing] bulk insert in one transaction: %.1f µs/row; "
                     + "open (quick_check) at %d rows: %.1f ms", bulk, largeSize, open))
    }
}
