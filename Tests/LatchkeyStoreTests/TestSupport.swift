import CSQLite
import Foundation
import XCTest

@testable import LatchkeyStore

/// A fresh directory under the system temp dir, removed when the test case finishes.
class StoreTestCase: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("latchkey-store-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    func dbPath(_ name: String = "keychain.db") -> String {
        directory.appendingPathComponent(name).path
    }

    func openStore(_ name: String = "keychain.db") throws -> Store {
        try Store(path: dbPath(name))
    }

    func bytes(of path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// Asserts that opening `path` throws `expected` and leaves the file byte-identical.
    func assertRefusedUntouched(
        _ path: String, expected: (StoreError) -> Bool,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let before = try bytes(of: path)
        XCTAssertThrowsError(try Store(path: path), file: file, line: line) { error in
            guard let error = error as? StoreError else {
                return XCTFail("not a StoreError: \(error)", file: file, line: line)
            }
            XCTAssertTrue(expected(error), "unexpected error: \(error)", file: file, line: line)
            XCTAssertTrue(
                error.description.contains(path), "error does not name the file: \(error)",
                file: file, line: line)
        }
        XCTAssertEqual(try bytes(of: path), before, "file changed", file: file, line: line)
    }
}

/// Deterministic test bytes. High bytes (0x80...) so they never form printable runs in the file.
func blob(_ tag: UInt8, _ n: Int, length: Int = 16) -> [UInt8] {
    var bytes = [UInt8](repeating: 0x80 | tag, count: length)
    var value = n
    for i in 0..<min(8, length) {
        bytes[length - 1 - i] = 0x80 | UInt8(value & 0x7F)
        value >>= 7
    }
    return bytes
}

/// An index hash for attribute number `attribute` with value `value`.
func hash(_ attribute: UInt8, _ value: Int) -> [UInt8] { blob(attribute, value, length: 20) }

func makeRow(
    _ n: Int, itemClass: Int = 1, protection: Int = 1, sync: Bool = false,
    hashes: [[UInt8]]? = nil, secret: [UInt8]? = nil
) -> NewRow {
    NewRow(
        persistentRef: blob(0x01, n), itemClass: itemClass, protection: protection, synchronizable: sync,
        uniqueHash: blob(0x02, n, length: 32), wrappedKey: blob(0x03, n, length: 40),
        metadata: blob(0x04, n, length: 64), secret: secret ?? blob(0x05, n, length: 48),
        indexHashes: hashes ?? [hash(0x10, n), hash(0x11, n % 10)])
}

/// Direct libsqlite3 access for building fixtures and inspecting files behind the store's back.
final class RawDatabase {
    private var db: OpaquePointer?

    init(path: String) throws {
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK else {
            throw StoreError.sqlite(code: -1, message: "raw open failed", sql: nil)
        }
    }

    deinit { close() }

    func close() {
        sqlite3_close_v2(db)
        db = nil
    }

    func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw StoreError.sqlite(
                code: sqlite3_extended_errcode(db), message: String(cString: sqlite3_errmsg(db)),
                sql: sql)
        }
    }

    /// Every row, each column as text.
    func rows(_ sql: String) throws -> [[String]] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
            throw StoreError.sqlite(code: sqlite3_errcode(db), message: String(cString: sqlite3_errmsg(db)), sql: sql)
        }
        defer { sqlite3_finalize(statement) }
        var result: [[String]] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            result.append(
                (0..<sqlite3_column_count(statement)).map { column in
                    sqlite3_column_text(statement, column).map { String(cString: $0) } ?? ""
                })
        }
        return result
    }
}

/// Runs of at least `minimum` printable ASCII bytes, like strings(1).
func printableRuns(_ data: Data, minimum: Int = 6) -> Set<String> {
    var runs = Set<String>()
    var current: [UInt8] = []
    for byte in data {
        if byte >= 0x20 && byte < 0x7F {
            current.append(byte)
        } else {
            if current.count >= minimum { runs.insert(String(decoding: current, as: UTF8.self)) }
            current.removeAll(keepingCapacity: true)
        }
    }
    if current.count >= minimum { runs.insert(String(decoding: current, as: UTF8.self)) }
    return runs
}

/// Whether `data` contains `needle` anywhere.
func contains(_ data: Data, _ needle: [UInt8]) -> Bool {
    data.range(of: Data(needle)) != nil
}
