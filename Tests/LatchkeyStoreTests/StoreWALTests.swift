import Foundation
import XCTest

@testable import LatchkeyStore

/// A damaged write-ahead log is refused before SQLite opens it (issue 10, defect 4): SQLite itself stops
/// reading a WAL at the first frame that does not check out and overwrites the rest at the next write, so
/// the committed transactions from there on would be lost without a word. What a crash or normal work
/// leaves in a WAL (a torn last frame, frames of an older generation, frames of a rolled-back
/// transaction) still opens. Every case is a real SQLite file written by the store.
final class StoreWALTests: StoreTestCase {
    /// The files as a `kill -9` of the agent would leave them: the database and its WAL, copied while the
    /// store is open (every commit is written to the WAL before it returns), without the -shm index.
    private func crashImage(of path: String, name: String = "image.db") throws -> String {
        let image = dbPath(name)
        try FileManager.default.copyItem(atPath: path, toPath: image)
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: image + "-wal")
        return image
    }

    /// A store with `count` rows, each added in its own transaction (so the WAL holds `count` commits),
    /// and its crash image.
    private func imageWithRows(_ count: Int) throws -> (image: String, store: Store) {
        let store = try openStore()
        for n in 0..<count { _ = try store.insert(makeRow(n)) }
        return (try crashImage(of: dbPath()), store)
    }

    private func rowCount(_ path: String) throws -> Int {
        let store = try Store(path: path)
        defer { store.close() }
        return try store.count(itemClass: nil)
    }

    /// Asserts that opening `image` is refused naming its WAL, and that neither file changed.
    private func assertRefused(_ image: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let database = try bytes(of: image), wal = try bytes(of: image + "-wal")
        XCTAssertThrowsError(try Store(path: image), file: file, line: line) { error in
            guard case .damagedWAL(let path, _)? = error as? StoreError else {
                return XCTFail("not refused as a damaged WAL: \(error)", file: file, line: line)
            }
            XCTAssertEqual(path, image + "-wal", file: file, line: line)
            XCTAssertTrue(String(describing: error).contains(image + "-wal"), "\(error)", file: file, line: line)
        }
        XCTAssertEqual(try bytes(of: image), database, "the database changed", file: file, line: line)
        XCTAssertEqual(try bytes(of: image + "-wal"), wal, "the WAL changed", file: file, line: line)
    }

    func testAnIntactCrashImageOpensWithEveryRow() throws {
        let (image, store) = try imageWithRows(20)
        defer { store.close() }
        XCTAssertGreaterThan(try WALFile(path: image + "-wal").frames.count, 20, "the rows are in the WAL")
        XCTAssertEqual(try rowCount(image), 20)
    }

    func testAWALOfRandomBytesIsRefusedAndLeftAlone() throws {
        let (image, store) = try imageWithRows(20)
        defer { store.close() }
        let size = try bytes(of: image + "-wal").count
        var generator = SystemRandomNumberGenerator()
        try Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
            .write(to: URL(fileURLWithPath: image + "-wal"))
        try assertRefused(image)
    }

    /// A symbolic link or a FIFO in the WAL's place is refused, never followed or waited on.
    func testAWALThatIsNotARegularFileIsRefused() throws {
        let (image, store) = try imageWithRows(3)
        defer { store.close() }
        let wal = image + "-wal"
        try FileManager.default.moveItem(atPath: wal, toPath: image + "-elsewhere")
        try FileManager.default.createSymbolicLink(atPath: wal, withDestinationPath: image + "-elsewhere")
        XCTAssertThrowsError(try Store(path: image)) { XCTAssertTrue("\($0)".contains("symbolic link"), "\($0)") }
        unlink(wal)
        XCTAssertEqual(mkfifo(wal, 0o600), 0)
        XCTAssertThrowsError(try Store(path: image)) { XCTAssertTrue("\($0)".contains("not a regular file"), "\($0)") }
    }

    /// One frame in the middle of a WAL of twenty commits: its page, its salt or its checksum damaged.
    /// SQLite would open the database as of the commit before it and drop the rest.
    func testOneDamagedFrameInTheMiddleIsRefused() throws {
        let (image, store) = try imageWithRows(20)
        defer { store.close() }
        let original = try bytes(of: image + "-wal")
        let wal = try WALFile(path: image + "-wal")
        let middle = wal.frames[wal.frames.count / 2]
        for (what, offset) in [
            ("page", middle.offset + 24 + 100), ("salt", middle.offset + 9), ("checksum", middle.offset + 17),
            ("header", 12),  // the checkpoint sequence, under the header's checksum: every frame is lost
        ] {
            let damagedImage = try crashImage(of: dbPath(), name: "\(what).db")
            var damaged = original
            damaged[offset] ^= 0x01
            try damaged.write(to: URL(fileURLWithPath: damagedImage + "-wal"))
            if what != "header" {
                XCTAssertEqual(try WALFile(path: damagedImage + "-wal").validFrames, wal.frames.count / 2, what)
            }
            try assertRefused(damagedImage)
        }
    }

    /// A break inside the last transaction is what a crash leaves while SQLite rewrites the checksums of
    /// a transaction that overwrote its own frames (it writes the commit frame first): that transaction
    /// never returned, so the WAL opens without it. (Damage there looks the same and cannot be told apart.)
    func testABreakInsideTheLastTransactionOpens() throws {
        let (image, store) = try imageWithRows(20)
        defer { store.close() }
        var damaged = try bytes(of: image + "-wal")
        let frames = try WALFile(path: image + "-wal").frames
        let commits = frames.indices.filter { frames[$0].commit }
        let (previous, last) = (commits[commits.count - 2], commits[commits.count - 1])
        XCTAssertGreaterThan(last - previous, 1, "the last transaction has more than its commit frame")
        damaged[frames[previous + 1].offset + 24 + 100] ^= 0x01
        try damaged.write(to: URL(fileURLWithPath: image + "-wal"))
        XCTAssertEqual(try rowCount(image), 19)
    }

    /// A crash in the middle of writing a frame leaves it short at the end of the file: that transaction
    /// never returned, and SQLite rightly drops it.
    func testATornLastFrameOpens() throws {
        let (image, store) = try imageWithRows(20)
        defer { store.close() }
        let original = try bytes(of: image + "-wal")
        let last = try XCTUnwrap(WALFile(path: image + "-wal").frames.last)
        try original.prefix(last.offset + 24 + 100).write(to: URL(fileURLWithPath: image + "-wal"))
        XCTAssertEqual(try rowCount(image), 19)
        // The header alone (the crash came before the first frame): nothing to lose either.
        let headerOnly = try crashImage(of: dbPath(), name: "header-only.db")
        try original.prefix(32).write(to: URL(fileURLWithPath: headerOnly + "-wal"))
        XCTAssertEqual(try rowCount(headerOnly), 0)
    }

    /// After a checkpoint SQLite starts the WAL again from its first frame with new salts and leaves the
    /// older frames behind the new ones; a crash can also leave a new frame header over an old page.
    func testFramesOfAnOlderGenerationOpen() throws {
        let store = try openStore()
        defer { store.close() }
        for n in 0..<20 { _ = try store.insert(makeRow(n)) }
        try store.connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
        _ = try store.insert(makeRow(100))  // restarts the WAL: new salts, written over the first frames
        let image = try crashImage(of: dbPath())
        let wal = try WALFile(path: image + "-wal")
        XCTAssertGreaterThan(wal.frames.count, wal.validFrames + 10, "older frames remain behind the new ones")
        XCTAssertEqual(wal.frames[wal.validFrames...].filter(\.currentSalts).count, 0)
        XCTAssertEqual(try rowCount(image), 21)

        // A crash between writing a frame's header and its page, over an older frame: the header of the
        // frame before it (a commit) with another page number.
        let tornImage = try crashImage(of: dbPath(), name: "torn.db")
        var torn = wal.bytes
        let next = wal.frames[wal.validFrames].offset
        torn.replaceSubrange(next..<(next + 24), with: torn[(next - wal.frameSize)..<(next - wal.frameSize + 24)])
        torn[next + 3] ^= 0x01
        try Data(torn).write(to: URL(fileURLWithPath: tornImage + "-wal"))
        let tornWAL = try WALFile(path: tornImage + "-wal")
        XCTAssertTrue(tornWAL.frames[wal.validFrames].currentSalts && tornWAL.frames[wal.validFrames].commit)
        XCTAssertEqual(tornWAL.validFrames, wal.validFrames)
        XCTAssertEqual(try rowCount(tornImage), 21)
    }

    /// A transaction too large for the page cache writes its pages to the WAL before it commits; when it
    /// rolls back, a later, smaller commit overwrites only some of them. The rest stay behind the valid
    /// frames with the current salts, but none of them is a commit.
    func testFramesOfARolledBackTransactionOpen() throws {
        let store = try openStore()
        defer { store.close() }
        for n in 0..<5 { _ = try store.insert(makeRow(n)) }
        try store.connection.execute("PRAGMA cache_size = 10")
        struct Abandon: Error {}
        XCTAssertThrowsError(
            try store.transaction {
                for n in 1000..<1300 { _ = try store.insert(makeRow(n, secret: Array(repeating: 0xAB, count: 3000))) }
                throw Abandon()
            })
        _ = try store.insert(makeRow(5))
        let image = try crashImage(of: dbPath())
        let wal = try WALFile(path: image + "-wal")
        let behind = wal.frames[wal.validFrames...]
        XCTAssertGreaterThan(behind.filter(\.currentSalts).count, 10, "the rolled-back pages are still there")
        XCTAssertEqual(behind.filter { $0.currentSalts && $0.commit }.count, 0)
        XCTAssertEqual(try rowCount(image), 6)
    }
}

/// An independent reading of a WAL file (https://www.sqlite.org/fileformat2.html#walformat), for the
/// tests to find and damage frames and to check what their fixtures contain.
struct WALFile {
    struct Frame {
        var offset: Int
        var commit: Bool
        var currentSalts: Bool
    }

    let bytes: [UInt8]
    let frameSize: Int
    /// Every whole frame in the file, valid or not.
    var frames: [Frame] = []
    /// How many frames from the first one SQLite accepts (salts and cumulative checksums check out).
    var validFrames = 0

    init(path: String) throws {
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func be(_ at: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(data[at + $1]) } }
        func le(_ at: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(data[at + 3 - $1]) } }
        // The magic's last bit says in which byte order the checksums read the file's 32-bit words.
        let word = be(0) & 1 == 1 ? be : le
        func checksum(_ range: Range<Int>, _ seed: (UInt32, UInt32)) -> (UInt32, UInt32) {
            var (s0, s1) = seed
            for at in stride(from: range.lowerBound, to: range.upperBound, by: 8) {
                s0 = s0 &+ word(at) &+ s1
                s1 = s1 &+ word(at + 4) &+ s0
            }
            return (s0, s1)
        }
        let frameSize = 24 + Int(be(8))
        var frames: [Frame] = []
        var validFrames = 0
        var running = (be(24), be(28))
        var valid = true
        var offset = 32
        while offset + frameSize <= data.count {
            let currentSalts = data[(offset + 8)..<(offset + 16)] == data[16..<24]
            frames.append(Frame(offset: offset, commit: be(offset + 4) != 0, currentSalts: currentSalts))
            let sum = checksum((offset + 24)..<(offset + frameSize), checksum(offset..<(offset + 8), running))
            valid = valid && currentSalts && sum == (be(offset + 16), be(offset + 20))
            if valid {
                validFrames += 1
                running = sum
            }
            offset += frameSize
        }
        (bytes, self.frameSize, self.frames, self.validFrames) = (data, frameSize, frames, validFrames)
    }
}
