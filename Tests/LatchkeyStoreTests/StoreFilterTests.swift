import XCTest

@testable import LatchkeyStore

final class StoreFilterTests: StoreTestCase {
    private var store: Store!
    /// Row n (1...12): protection n % 3 + 1, synchronizable when n is even, class 1 except n = 12
    /// (class 2); hashes: "a" = n (unique), "b" = n % 2, "c" = n % 3.
    private var ids: [Int: Int64] = [:]

    override func setUpWithError() throws {
        try super.setUpWithError()
        store = try openStore()
        for n in 1...12 {
            ids[n] = try store.insert(
                makeRow(
                    n, itemClass: n == 12 ? 2 : 1, protection: n % 3 + 1, sync: n % 2 == 0,
                    hashes: [hash(0xA, n), hash(0xB, n % 2), hash(0xC, n % 3)]))
        }
    }

    override func tearDownWithError() throws {
        store.close()
        try super.tearDownWithError()
    }

    private func matching(_ filter: RowFilter) throws -> [Int] {
        let rows = try store.rows(matching: filter)
        let headers = try store.headers(matching: filter)
        XCTAssertEqual(headers.map(\.id), rows.map(\.id), "headers select the same rows")
        XCTAssertEqual(headers.map(\.protection), rows.map(\.protection))
        return rows.map { row in ids.first { $0.value == row.id }!.key }
    }

    func testClassAndSynchronizable() throws {
        XCTAssertEqual(try matching(RowFilter(itemClass: 1)), [1, 3, 5, 7, 9, 11], "default: not synchronizable")
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, synchronizable: true)), [2, 4, 6, 8, 10])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, synchronizable: nil)), Array(1...11))
        XCTAssertEqual(try matching(RowFilter(itemClass: 2, synchronizable: nil)), [12])
        XCTAssertEqual(try matching(RowFilter(itemClass: 3, synchronizable: nil)), [])
    }

    func testProtections() throws {
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, protections: [1], synchronizable: nil)), [3, 6, 9])
        XCTAssertEqual(
            try matching(RowFilter(itemClass: 1, protections: [2, 3], synchronizable: nil)),
            [1, 2, 4, 5, 7, 8, 10, 11])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, protections: [2, 3])), [1, 5, 7, 11])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, protections: [], synchronizable: nil)), [])
    }

    func testPersistentRef() throws {
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, persistentRef: blob(0x01, 5))), [5])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, persistentRef: blob(0x01, 4))), [], "synchronizable")
        XCTAssertEqual(try matching(RowFilter(itemClass: 2, persistentRef: blob(0x01, 5))), [], "other class")
        XCTAssertEqual(
            try matching(RowFilter(itemClass: 1, persistentRef: blob(0x01, 5), allOfHashes: [hash(0xB, 1)])),
            [5])
        XCTAssertEqual(
            try matching(RowFilter(itemClass: 1, persistentRef: blob(0x01, 5), allOfHashes: [hash(0xB, 0)])),
            [])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, protections: [3], persistentRef: blob(0x01, 5))), [5])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, protections: [1], persistentRef: blob(0x01, 5))), [])
    }

    func testAllOfHashesIsAnIntersection() throws {
        let any = RowFilter(itemClass: 1, synchronizable: nil)
        func with(_ hashes: [[UInt8]], _ base: RowFilter? = nil) -> RowFilter {
            var filter = base ?? any
            filter.allOfHashes = hashes
            return filter
        }
        XCTAssertEqual(try matching(with([hash(0xA, 7)])), [7])
        XCTAssertEqual(try matching(with([hash(0xB, 0)])), [2, 4, 6, 8, 10], "12 is class 2")
        XCTAssertEqual(try matching(with([hash(0xB, 0), hash(0xC, 0)])), [6])
        XCTAssertEqual(try matching(with([hash(0xC, 0), hash(0xB, 0)])), [6], "order does not change the result")
        XCTAssertEqual(try matching(with([hash(0xB, 1), hash(0xC, 1), hash(0xA, 7)])), [7])
        XCTAssertEqual(try matching(with([hash(0xB, 1), hash(0xC, 1), hash(0xA, 4)])), [])
        XCTAssertEqual(try matching(with([hash(0xB, 1), hash(0xD, 1)])), [], "unknown hash")
        XCTAssertEqual(try matching(with([hash(0xB, 1)], RowFilter(itemClass: 1, protections: [2]))), [1, 7])
        XCTAssertEqual(try matching(with([hash(0xB, 0)], RowFilter(itemClass: 2, synchronizable: true))), [12])
    }

    /// `anyOfHashes` (the engine's access groups): the row carries at least one of them, on top of the
    /// rest of the filter; an empty list matches nothing, nil adds no condition.
    func testAnyOfHashesIsAUnionOnTopOfTheRest() throws {
        func with(_ anyOf: [[UInt8]]?, _ base: RowFilter = RowFilter(itemClass: 1, synchronizable: nil)) -> RowFilter {
            var filter = base
            filter.anyOfHashes = anyOf
            return filter
        }
        XCTAssertEqual(try matching(with(nil)), Array(1...11))
        XCTAssertEqual(try matching(with([])), [], "no group: nothing")
        XCTAssertEqual(try matching(with([hash(0xC, 0)])), [3, 6, 9])
        XCTAssertEqual(try matching(with([hash(0xC, 0), hash(0xA, 1)])), [1, 3, 6, 9])
        XCTAssertEqual(try matching(with([hash(0xC, 0), hash(0xC, 0)])), [3, 6, 9], "duplicates ignored")
        XCTAssertEqual(try matching(with([hash(0xD, 1)])), [], "unknown hash")
        XCTAssertEqual(
            try matching(with([hash(0xC, 0), hash(0xC, 1)], RowFilter(itemClass: 1, allOfHashes: [hash(0xB, 1)]))),
            [1, 3, 7, 9], "with allOfHashes: odd rows, not synchronizable, c = 0 or 1")
        XCTAssertEqual(
            try matching(with([hash(0xC, 2)], RowFilter(itemClass: 1, persistentRef: blob(0x01, 5)))), [5])
        XCTAssertEqual(
            try matching(with([hash(0xC, 0)], RowFilter(itemClass: 1, persistentRef: blob(0x01, 5)))), [],
            "the row by its reference, but not in the groups")
        XCTAssertEqual(
            try matching(with([hash(0xC, 0), hash(0xC, 2)], RowFilter(itemClass: 1, synchronizable: nil, limit: 2))),
            [2, 3], "the limit counts rows that pass")
    }

    func testLimit() throws {
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, synchronizable: nil, limit: 3)), [1, 2, 3])
        XCTAssertEqual(
            try matching(RowFilter(itemClass: 1, synchronizable: nil, allOfHashes: [hash(0xB, 1)], limit: 2)),
            [1, 3])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, synchronizable: nil, limit: 100)).count, 11)
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, synchronizable: nil, limit: 0)), [])
        XCTAssertEqual(try matching(RowFilter(itemClass: 1, synchronizable: nil, limit: -1)), [])
    }

    func testManyShapesAndRepeatedLookupsStayCorrect() throws {
        // More than 128 distinct shapes (the statement cache bound), each run twice: exercises cache
        // hits, misses and eviction. Every shape selects row 5 (protection 3, hashes a5 b1 c2).
        let hashSets = [
            [hash(0xA, 5)], [hash(0xB, 1), hash(0xA, 5)], [hash(0xA, 5), hash(0xC, 2)],
            [hash(0xC, 2), hash(0xB, 1), hash(0xA, 5)],
        ]
        for _ in 0..<2 {
            for protectionCount in 1...7 {
                for hashes in hashSets {
                    for limit in [nil, 1] as [Int?] {
                        for persistentRef in [nil, blob(0x01, 5)] {
                            let filter = RowFilter(
                                itemClass: 1, protections: Array(repeating: 3, count: protectionCount),
                                persistentRef: persistentRef, allOfHashes: hashes, limit: limit)
                            XCTAssertEqual(try matching(filter), [5])
                        }
                    }
                }
            }
        }
    }
}
