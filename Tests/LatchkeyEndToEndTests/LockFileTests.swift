import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The files an agent takes over at start: its lock files and a socket file found at its path. A lock
/// is held on the file the path names (not one replaced meanwhile), a socket that something listens on
/// is never removed, and a lock file that is another name of some other file is never written.
final class LockFileTests: AgentTestCase {
    private var socketPath: String { runtimeDirectory + "/latchkey/agent.sock" }
    private var keychainDirectory: String { dataDirectory + "/latchkey" }
    private var started: [pid_t] = []

    override func tearDown() {
        for pid in started where kill(pid, 0) == 0 {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        super.tearDown()
    }

    /// An agent waiting for the keychain lock holds a descriptor of the lock file; the file is replaced
    /// (renamed over) by one whose lock is held, and then the old file's lock is let go. The agent must
    /// not serve with the lock of a file that is no longer the keychain's lock file: it checks, after
    /// the lock is granted, that the path still names the file it locked, and waits on the new one.
    func testAReplacedKeychainLockFileIsNotTakenOnItsOldFile() throws {
        try makeDirectory(keychainDirectory)
        let lockPath = keychainDirectory + "/agent.lock"
        let oldFile = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(oldFile, 0)
        var oldOpen = true
        defer { if oldOpen { close(oldFile) } }
        XCTAssertEqual(flock(oldFile, LOCK_EX | LOCK_NB), 0)

        let logPath = runtimeDirectory + "/waiting-agent.log"
        let pid = try AgentProcesses.spawn(environment: [:], logPath: logPath)
        started.append(pid)
        XCTAssertTrue(
            Poll.until(within: 10) { Self.descriptors(of: pid).contains(lockPath) },
            "the agent never opened \(lockPath)")

        let replacementPath = keychainDirectory + "/agent.lock.new"
        let newFile = open(replacementPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(newFile, 0)
        defer { close(newFile) }
        XCTAssertEqual(flock(newFile, LOCK_EX | LOCK_NB), 0)
        XCTAssertEqual(rename(replacementPath, lockPath), 0)
        close(oldFile)
        oldOpen = false

        var status: Int32 = 0
        var exited = false
        XCTAssertTrue(
            Poll.until(within: 20, every: 0.05) {
                exited = waitpid(pid, &status, WNOHANG) == pid
                return exited || Self.isSocket(socketPath)
            }, "the agent neither served nor exited")
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        XCTAssertTrue(exited, "the agent serves with the lock of a file that is no longer the lock file:\n\(log)")
        XCTAssertFalse(Self.isSocket(socketPath), log)
        XCTAssertTrue(log.contains("already serves the keychain"), log)
    }

    /// Something listens on the socket path (another agent, or systemd's socket for socket activation)
    /// while no agent holds the socket lock: an agent started there removes nothing and does not start.
    /// A socket nobody listens on (an agent that crashed) is still replaced.
    func testALiveSocketAtThePathIsNeverReplaced() throws {
        try makeDirectory(runtimeDirectory + "/latchkey")
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var listening = true
        defer { if listening { close(listener) } }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(socketPath.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(listener, 4), 0)
        var before = stat()
        XCTAssertEqual(lstat(socketPath, &before), 0)

        let logPath = runtimeDirectory + "/second-agent.log"
        let pid = try AgentProcesses.spawn(environment: [:], logPath: logPath)
        started.append(pid)
        var status: Int32 = 0
        var exited = false
        XCTAssertTrue(
            Poll.until(within: 20, every: 0.05) {
                exited = waitpid(pid, &status, WNOHANG) == pid
                var now = stat()
                return exited || lstat(socketPath, &now) != 0 || now.st_ino != before.st_ino
            }, "the agent neither started nor exited")
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        XCTAssertTrue(exited, "the agent runs after it replaced a live socket:\n\(log)")
        var after = stat()
        XCTAssertEqual(lstat(socketPath, &after), 0, "the live socket was removed")
        XCTAssertEqual(after.st_ino, before.st_ino, "the live socket was replaced")
        XCTAssertTrue(log.contains("something listens on it already"), log)
        // Still ours: a new connection reaches this listener.
        let client = RawConnections.connect(socketPath)
        XCTAssertGreaterThanOrEqual(client, 0)
        if client >= 0 { close(client) }

        // Nobody listens any more: the leftover file is stale, and an agent started now replaces it (its
        // inode number may well be the old one's, freed a moment before).
        close(listener)
        listening = false
        let result = try cli(["status"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertNotNil(agentPID(), "no agent serves the socket")
    }

    /// The keychain lock file is a hard link to another file of the user's: the agent locks it but does
    /// not truncate it or write its pid into it.
    func testAHardLinkedKeychainLockFileIsNotWritten() throws {
        try makeDirectory(keychainDirectory)
        let precious = dataDirectory + "/precious"
        try Data("keep me\n".utf8).write(to: URL(fileURLWithPath: precious))
        XCTAssertEqual(link(precious, keychainDirectory + "/agent.lock"), 0)

        try createKeychain()
        XCTAssertNotNil(agentPID())
        XCTAssertEqual(try String(contentsOfFile: precious, encoding: .utf8), "keep me\n")
    }

    // MARK: Helpers

    private func makeDirectory(_ path: String) throws {
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// The paths of the files `pid` has open.
    private static func descriptors(of pid: pid_t) -> [String] {
        let directory = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0) }
    }

    private static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK
    }
}
