import Foundation
import Glibc
import LatchkeyTransport
import XCTest

/// The socket directory rule of docs/PROTOCOL.md §1, with a temporary directory standing for /run/user:
/// `$XDG_RUNTIME_DIR/latchkey` when it is absolute; else `/run/user/UID/latchkey` when that directory is
/// the user's own, mode 0700, and not a symbolic link; else `/tmp/latchkey-UID`.
final class AgentEndpointTests: XCTestCase {
    private var root = ""
    private let uid = getuid()

    override func setUpWithError() throws {
        root = NSTemporaryDirectory() + "endpoint-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func directory(runtime: String?, uid: uid_t? = nil) -> String {
        AgentEndpoint.current(runtimeDirectory: runtime, uid: uid ?? self.uid, userRuntimeRoot: root).directory
    }

    private var fallback: String { "/tmp/latchkey-\(uid)" }

    func testAnAbsoluteXDGRuntimeDirComesFirst() {
        XCTAssertEqual(directory(runtime: "/somewhere"), "/somewhere/latchkey")
        XCTAssertEqual(mkdir(root + "/\(uid)", 0o700), 0)
        XCTAssertEqual(directory(runtime: "/somewhere"), "/somewhere/latchkey", "even with /run/user/UID")
    }

    func testThePrivateUserRuntimeDirectoryComesBeforeTmp() {
        XCTAssertEqual(directory(runtime: nil), fallback, "no /run/user/UID")
        XCTAssertEqual(mkdir(root + "/\(uid)", 0o700), 0)
        XCTAssertEqual(chmod(root + "/\(uid)", 0o700), 0)  // whatever the umask
        for runtime in [nil, "", "relative/dir"] {
            XCTAssertEqual(
                directory(runtime: runtime), root + "/\(uid)/latchkey", "XDG_RUNTIME_DIR=\(runtime ?? "unset")")
        }
    }

    func testAUserRuntimeDirectoryThatIsNotPrivateIsPassedOver() throws {
        let path = root + "/\(uid)"
        XCTAssertEqual(mkdir(path, 0o700), 0)
        for mode: mode_t in [0o755, 0o750, 0o701, 0o1700, 0o500] {
            XCTAssertEqual(chmod(path, mode), 0)
            XCTAssertEqual(directory(runtime: nil), fallback, "mode \(String(mode, radix: 8))")
        }
        XCTAssertEqual(chmod(path, 0o700), 0)
        XCTAssertEqual(directory(runtime: nil, uid: uid &+ 1), "/tmp/latchkey-\(uid &+ 1)", "another user's")
        XCTAssertEqual(directory(runtime: nil), path + "/latchkey")

        // A symbolic link to a private directory of the user's, and a file that is not a directory.
        try FileManager.default.removeItem(atPath: path)
        XCTAssertEqual(mkdir(root + "/real", 0o700), 0)
        XCTAssertEqual(symlink(root + "/real", path), 0)
        XCTAssertEqual(directory(runtime: nil), fallback, "a symbolic link")
        try FileManager.default.removeItem(atPath: path)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data()))
        XCTAssertEqual(chmod(path, 0o700), 0)
        XCTAssertEqual(directory(runtime: nil), fallback, "a regular file")
    }
}
