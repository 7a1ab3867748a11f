import Foundation
import LatchkeySystem
import SystemPackage
import XCTest

/// The file helpers refuse symbolic links and non-regular files where the code they replaced did
/// (O_NOFOLLOW on open, lstat for identity and existence), and report what failed with its Errno and path.
final class FileTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "latchkey-system-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    private func write(_ text: String, to name: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path(name)))
    }

    private func assertFileError(
        _ expected: FileError, file: StaticString = #filePath, line: UInt = #line,
        _ body: () throws -> Void
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) {
            XCTAssertEqual($0 as? FileError, expected, file: file, line: line)
        }
    }

    // MARK: Reading

    func testReadsARegularFileUpToTheLimit() throws {
        try write("0123456789", to: "ten")
        XCTAssertEqual(try Files.read(FilePath(path("ten")), upTo: 100), Array("0123456789".utf8))
        XCTAssertEqual(try Files.read(FilePath(path("ten")), upTo: 4), Array("0123".utf8))
        XCTAssertEqual(try Files.read(FilePath(path("ten")), upTo: 0), [])
        // More than one internal chunk.
        let large = String(repeating: "x", count: 10_000)
        try write(large, to: "large")
        XCTAssertEqual(try Files.read(FilePath(path("large")), upTo: 20_000).count, 10_000)
        XCTAssertEqual(try Files.read(FilePath(path("large")), upTo: 5_000).count, 5_000)
    }

    func testRefusesASymbolicLinkWithELOOP() throws {
        try write("secret", to: "target")
        try FileManager.default.createSymbolicLink(atPath: path("link"), withDestinationPath: path("target"))
        assertFileError(FileError(FilePath(path("link")), .system(.tooManySymbolicLinkLevels))) {
            _ = try Files.read(FilePath(path("link")), upTo: 100)
        }
        XCTAssertNil(Files.firstLine(of: FilePath(path("link"))))
    }

    func testRefusesADirectoryAndAFIFOWithoutBlocking() throws {
        assertFileError(FileError(FilePath(directory), .notRegularFile)) {
            _ = try Files.read(FilePath(directory), upTo: 100)
        }
        XCTAssertEqual(mkfifo(path("fifo"), 0o600), 0)
        // Nobody writes to the FIFO: a blocking open would hang here.
        assertFileError(FileError(FilePath(path("fifo")), .notRegularFile)) {
            _ = try Files.read(FilePath(path("fifo")), upTo: 100)
        }
    }

    func testReportsAMissingFileWithItsErrnoAndPath() {
        let missing = FilePath(path("missing"))
        assertFileError(FileError(missing, .system(.noSuchFileOrDirectory))) {
            _ = try Files.read(missing, upTo: 100)
        }
        let error = FileError(missing, .system(.noSuchFileOrDirectory))
        XCTAssertEqual(error.errno, .noSuchFileOrDirectory)
        XCTAssertEqual(error.description, "\(missing): \(Errno.noSuchFileOrDirectory)")
        XCTAssertNil(FileError(missing, .notRegularFile).errno)
    }

    func testChecksTheOwner() throws {
        try write("mine", to: "mine")
        XCTAssertEqual(try Files.read(FilePath(path("mine")), upTo: 10, owner: getuid()), Array("mine".utf8))
        assertFileError(FileError(FilePath(path("mine")), .wrongOwner(uid: getuid()))) {
            _ = try Files.read(FilePath(path("mine")), upTo: 10, owner: getuid() &+ 1)
        }
    }

    func testOpenRegularFileCreatesWithTheGivenModeAndRefusesALinkForWriting() throws {
        let created = FilePath(path("created"))
        let fd = try FileDescriptor.openRegularFile(
            created, .writeOnly, options: [.create, .append],
            permissions: [.ownerReadWrite], owner: geteuid())
        _ = try fd.writeAll(Array("line\n".utf8))
        try fd.close()
        XCTAssertEqual(try Files.read(created, upTo: 100), Array("line\n".utf8))
        XCTAssertEqual(try created.stat().permissions, [.ownerReadWrite])

        try write("victim", to: "victim")
        try FileManager.default.createSymbolicLink(atPath: path("planted"), withDestinationPath: path("victim"))
        assertFileError(FileError(FilePath(path("planted")), .system(.tooManySymbolicLinkLevels))) {
            _ = try FileDescriptor.openRegularFile(FilePath(path("planted")), .writeOnly, options: [.append])
        }
        XCTAssertEqual(try String(contentsOfFile: path("victim"), encoding: .utf8), "victim")
    }

    func testFirstLine() throws {
        try write("first\nsecond\n", to: "lines")
        XCTAssertEqual(Files.firstLine(of: FilePath(path("lines"))), "first")
        try write("no newline", to: "single")
        XCTAssertEqual(Files.firstLine(of: FilePath(path("single"))), "no newline")
        try write("\nafter an empty line", to: "leading")
        XCTAssertEqual(Files.firstLine(of: FilePath(path("leading"))), "")
        try write("", to: "empty")
        XCTAssertNil(Files.firstLine(of: FilePath(path("empty"))))
        XCTAssertNil(Files.firstLine(of: FilePath(path("missing"))))
        try write(String(repeating: "a", count: 600) + "\n", to: "long")
        XCTAssertEqual(Files.firstLine(of: FilePath(path("long")))?.count, 512)
    }

    // MARK: Names

    func testExistsCountsADanglingLinkAndNothingElse() throws {
        XCTAssertFalse(Files.exists(FilePath(path("nothing"))))
        try FileManager.default.createSymbolicLink(atPath: path("dangling"), withDestinationPath: path("nothing"))
        XCTAssertTrue(Files.exists(FilePath(path("dangling"))))
        XCTAssertTrue(Files.exists(FilePath(directory)))
    }

    func testCreateDirectoriesMakesPrivateParentsAndReportsTheFailingComponent() throws {
        let nested = FilePath(path("a/b/c"))
        try Files.createDirectories(nested)
        for prefix in ["a", "a/b", "a/b/c"] {
            let info = try FilePath(path(prefix)).stat()
            XCTAssertEqual(info.type, .directory)
            XCTAssertEqual(info.permissions.rawValue & 0o077, 0, "\(prefix) is open to others")
        }
        try Files.createDirectories(nested)  // existing: nothing to do

        try write("in the way", to: "file")
        assertFileError(FileError(FilePath(path("file/sub")), .system(.notDirectory))) {
            try Files.createDirectories(FilePath(path("file/sub/deeper")))
        }
    }

    func testFileIdentityDescribesTheLinkNotItsTarget() throws {
        try write("one", to: "file")
        let first = try XCTUnwrap(FileIdentity(path: FilePath(path("file"))))
        XCTAssertEqual(FileIdentity(path: FilePath(path("file"))), first)
        XCTAssertNil(FileIdentity(path: FilePath(path("missing"))))

        try FileManager.default.createSymbolicLink(atPath: path("link"), withDestinationPath: path("file"))
        XCTAssertNotEqual(FileIdentity(path: FilePath(path("link"))), first)

        // An atomic replacement is a new inode.
        try Files.replace(
            FilePath(path("file")), with: Array("two".utf8), through: FilePath(path("file.tmp")),
            durable: false)
        XCTAssertNotEqual(FileIdentity(path: FilePath(path("file"))), first)
    }

    // MARK: Replacing

    func testReplaceWritesAPrivateFileAndLeavesNoTemporary() throws {
        try write("old", to: "keybag")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path("keybag"))
        try Files.replace(
            FilePath(path("keybag")), with: Array("new".utf8), through: FilePath(path("keybag.tmp")),
            durable: true)
        XCTAssertEqual(try String(contentsOfFile: path("keybag"), encoding: .utf8), "new")
        XCTAssertEqual(try FilePath(path("keybag")).stat().permissions, [.ownerReadWrite])
        XCTAssertFalse(Files.exists(FilePath(path("keybag.tmp"))))
        // Creating works too.
        try Files.replace(
            FilePath(path("fresh")), with: [1, 2, 3], through: FilePath(path("fresh.tmp")), durable: false)
        XCTAssertEqual(try Files.read(FilePath(path("fresh")), upTo: 10), [1, 2, 3])
    }

    func testReplaceNeverWritesThroughALinkAtTheTemporaryPath() throws {
        try write("old", to: "keybag")
        try write("victim", to: "victim")
        try FileManager.default.createSymbolicLink(atPath: path("keybag.tmp"), withDestinationPath: path("victim"))
        assertFileError(FileError(FilePath(path("keybag.tmp")), .system(.fileExists))) {
            try Files.replace(
                FilePath(path("keybag")), with: Array("new".utf8), through: FilePath(path("keybag.tmp")),
                durable: true)
        }
        XCTAssertEqual(try String(contentsOfFile: path("victim"), encoding: .utf8), "victim")
        XCTAssertEqual(try String(contentsOfFile: path("keybag"), encoding: .utf8), "old")
    }

    func testReplaceRemovesTheTemporaryWhenTheHookThrows() throws {
        struct Crash: Error {}
        try write("old", to: "keybag")
        var seen: FilePath?
        XCTAssertThrowsError(
            try Files.replace(
                FilePath(path("keybag")), with: Array("new".utf8),
                through: FilePath(path("keybag.tmp")), durable: true
            ) { temporary in
                seen = temporary
                XCTAssertEqual(try Files.read(temporary, upTo: 10), Array("new".utf8))
                throw Crash()
            }
        ) { XCTAssertTrue($0 is Crash) }
        XCTAssertEqual(seen, FilePath(path("keybag.tmp")))
        XCTAssertFalse(Files.exists(FilePath(path("keybag.tmp"))))
        XCTAssertEqual(try String(contentsOfFile: path("keybag"), encoding: .utf8), "old")
    }

    func testReplaceInAMissingDirectoryNamesTheTemporaryFile() {
        assertFileError(FileError(FilePath(path("missing/keybag.tmp")), .system(.noSuchFileOrDirectory))) {
            try Files.replace(
                FilePath(path("missing/keybag")), with: [0], through: FilePath(path("missing/keybag.tmp")),
                durable: true)
        }
    }
}
