// latchkey-store-bench: the item store alone (LatchkeyStore on SQLite, no agent, no crypto), at 1,000 rows
// and at a larger size (--rows, default 20,000):
//   - lookups by two hashes (full rows), by three hashes (headers only) and by persistent reference,
//     best per-lookup average of 5 rounds of 400 at keys spread over the table;
//   - autocommit inserts, median of 60, with synchronous=FULL (as the keychain runs: one WAL fsync each)
//     and NORMAL (no fsync at commit), which shows what durability costs;
//   - bulk insert in one transaction, per row, and opening the store (quick_check) at the larger size.
// Rows are shaped like internet passwords: a unique account hash, a server hash shared by 100 rows, a
// class-wide hash. Run it in release (scripts/bench-store) on a quiet machine; --dir chooses the file
// system, which decides what an fsync costs. The unit tests (StorePerformanceTests) check the same lookups'
// query plans and results, never their time.

import Foundation
import LatchkeyStore

#if canImport(Glibc)
    import Glibc
#endif

let usage = """
    usage: latchkey-store-bench [--rows N] [--dir DIR]

      --rows N    the larger size (default 20000, minimum 1001); 1,000 rows are always measured first
      --dir DIR   where to create the temporary database (default $TMPDIR or /tmp)

    """

func fail(_ message: String, code: Int32 = 64) -> Never {
    FileHandle.standardError.write(Data("latchkey-store-bench: \(message)\n".utf8))
    exit(code)
}

/// A measurement that cannot be trusted.
struct BenchError: Error, CustomStringConvertible {
    var description: String
}

var largeSize = 20_000
var baseDirectory = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
var index = 1
let arguments = CommandLine.arguments
while index < arguments.count {
    switch arguments[index] {
    case "--rows" where index + 1 < arguments.count:
        index += 1
        guard let n = Int(arguments[index].replacingOccurrences(of: "_", with: "")), n > 1_000 else {
            fail("--rows needs a number above 1000")
        }
        largeSize = n
    case "--dir" where index + 1 < arguments.count:
        index += 1
        baseDirectory = arguments[index]
    case "--help", "-h":
        print(usage, terminator: "")
        exit(0)
    default:
        fail("unknown option '\(arguments[index])'\n\(usage)")
    }
    index += 1
}

// MARK: - Rows

/// Deterministic bytes: high bytes (0x80...), the tag, then `n` in 7-bit groups at the end.
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

/// Like an internet password: account (unique), server (100 items each), a class-wide attribute.
func row(_ n: Int) -> NewRow {
    NewRow(
        persistentRef: blob(0x01, n), itemClass: 1, protection: n % 7 + 1, synchronizable: false,
        uniqueHash: blob(0x02, n, length: 32), wrappedKey: blob(0x03, n, length: 40),
        metadata: blob(0x04, n, length: 64), secret: blob(0x05, n, length: 48),
        indexHashes: [hash(0x20, n), hash(0x21, n % 200), hash(0x22, 0)])
}

// MARK: - Timing

/// Monotonic time in nanoseconds.
func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Best per-iteration average over `rounds` rounds, in µs (a busy machine skews the best round least).
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

func measure(_ store: Store, at size: Int) throws -> String {
    var found = 0
    let two = try bestOf(5, 400) { i in
        let n = (i * 7919) % size
        found += try store.rows(
            matching: RowFilter(
                itemClass: 1, protections: [1, 2, 3, 4, 5, 6, 7],
                allOfHashes: [hash(0x20, n), hash(0x21, n % 200)])
        ).count
    }
    let three = try bestOf(5, 400) { i in
        let n = (i * 7919) % size
        found += try store.headers(
            matching: RowFilter(
                itemClass: 1, allOfHashes: [hash(0x20, n), hash(0x21, n % 200), hash(0x22, 0)])
        ).count
    }
    let byRef = try bestOf(5, 400) { i in
        found += try store.row(persistentRef: blob(0x01, (i * 7919) % size)) == nil ? 0 : 1
    }
    // Every lookup names one row: a figure for lookups that found nothing would mean nothing.
    guard found == 3 * 5 * 400 else { throw BenchError(description: "lookups found \(found) rows, not \(3 * 5 * 400)") }
    // Each autocommit insert is its own durable transaction: with synchronous=FULL its cost is the WAL
    // fsync; NORMAL (no fsync at commit) shows what durability costs.
    var next = 10_000_000 + size
    let insertFull = try median(60) {
        _ = try store.insert(row(next))
        next += 1
    }
    try store.setDurableCommits(false)
    let insertNormal = try median(60) {
        _ = try store.insert(row(next))
        next += 1
    }
    try store.setDurableCommits(true)
    // Back to `size` rows for the next measurement.
    let ids = try store.headers(matching: RowFilter(itemClass: 1, allOfHashes: [hash(0x22, 0)])).map(\.id)
    _ = try store.delete(ids: Array(ids.suffix(120)))
    return String(
        format: "%6d rows: lookup 2 hashes %.1f µs, 3 hashes (headers) %.1f µs, by persistref %.1f µs; "
            + "insert FULL %.0f µs, NORMAL %.0f µs", size, two, three, byRef, insertFull, insertNormal)
}

// MARK: - Run

/// Fills the store at `path` to 1,000 rows and measures, fills on to `largeSize` and measures, reopens.
func run(path: String, largeSize: Int) throws {
    let store = try Store(path: path)
    try store.transaction { for n in 0..<1_000 { _ = try store.insert(row(n)) } }
    let small = try measure(store, at: 1_000)
    let bulkStart = now()
    try store.transaction { for n in 1_000..<largeSize { _ = try store.insert(row(n)) } }
    let bulk = Double(now() - bulkStart) / 1_000 / Double(largeSize - 1_000)
    let large = try measure(store, at: largeSize)
    store.close()
    let openStart = now()
    let reopened = try Store(path: path)
    let open = Double(now() - openStart) / 1_000_000
    reopened.close()
    print(small)
    print(large)
    print(
        String(
            format: "bulk insert in one transaction: %.1f µs/row; open (quick_check) at %d rows: %.1f ms",
            bulk, largeSize, open))
}

let loadAverage =
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
    .split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
let directory = baseDirectory + "/latchkey-store-bench-\(getpid())"
do {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    print("latchkey-store-bench: \(directory); load before: \(loadAverage)")
    try run(path: directory + "/keychain.db", largeSize: largeSize)
    try? FileManager.default.removeItem(atPath: directory)
} catch {
    try? FileManager.default.removeItem(atPath: directory)
    fail("\(error)", code: 1)
}
