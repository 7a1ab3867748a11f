import Foundation
import LatchkeySystem
import SystemPackage
import XCTest

final class LocalSocketTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "ls-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testListenAcceptAndConnectCarryBytes() throws {
        let path = directory + "/s.sock"
        let listener = try LocalSocket.makeStream()
        defer { try? listener.close() }
        try LocalSocket.listen(listener, at: path, backlog: 4)
        XCTAssertEqual(try FilePath(path).stat(followTargetSymlink: false).type, .socket)

        let client = try LocalSocket.connect(to: path)
        defer { try? client.close() }
        let accepted = accept(listener.rawValue, nil, nil)
        XCTAssertGreaterThanOrEqual(accepted, 0)
        let server = FileDescriptor(rawValue: accepted)
        defer { try? server.close() }
        _ = try client.writeAll(Array("ping".utf8))
        var buffer = [UInt8](repeating: 0, count: 4)
        let count = try buffer.withUnsafeMutableBytes { try server.read(into: $0) }
        XCTAssertEqual(Array(buffer[0..<count]), Array("ping".utf8))
    }

    func testReportsErrnoForAMissingSocketAndATooLongPath() throws {
        XCTAssertThrowsError(try LocalSocket.connect(to: directory + "/missing.sock")) {
            XCTAssertEqual($0 as? Errno, .noSuchFileOrDirectory)
        }
        let long = directory + "/" + String(repeating: "x", count: 200)
        XCTAssertThrowsError(try LocalSocket.connect(to: long)) { XCTAssertEqual($0 as? Errno, .fileNameTooLong) }
        let listener = try LocalSocket.makeStream()
        defer { try? listener.close() }
        XCTAssertThrowsError(try LocalSocket.listen(listener, at: long, backlog: 1)) {
            XCTAssertEqual($0 as? Errno, .fileNameTooLong)
        }
        // A regular file is not a socket to connect to.
        XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/plain", contents: Data()))
        XCTAssertThrowsError(try LocalSocket.connect(to: directory + "/plain")) {
            XCTAssertEqual($0 as? Errno, .connectionRefused)
        }
    }
}
