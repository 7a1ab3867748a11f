import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Which agent owns which socket, and which keychain (issue 10, defect 1): an agent unlinks only the
/// socket it bound, one keychain directory is served by one agent, and no agent stays running without
/// its socket. Real `latchkeyd` processes throughout.
final class SocketOwnershipTests: AgentTestCase {
    private var socketPath: String { runtimeDirectory + "/latchkey/agent.sock" }

    override func tearDown() {
        super.tearDown()
        // Whatever this test left behind (a second agent, an agent whose socket was taken away) is not
        // reachable through hello: stop every agent of this test's keychain by its pid.
        for pid in agentsServingThisKeychain() {
            kill(pid, SIGTERM)
            waitForExit(pid)
        }
    }

    /// The reproduction: an agent lives on through a logout and login (its $XDG_RUNTIME_DIR
    /// removed and recreated), a command runs in the new session, and then the first agent is stopped.
    /// Afterwards exactly one agent serves the socket that clients use, and commands work.
    func testRecreatedRuntimeDirectoryLeavesOneAgentServing() throws {
        try createKeychain()
        let first = try XCTUnwrap(agentPID())
        AgentClient.shared.resetConnection()

        try FileManager.default.removeItem(atPath: runtimeDirectory)
        try FileManager.default.createDirectory(
            atPath: runtimeDirectory, withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])

        let during = try cli(["status"])
        XCTAssertEqual(during.status, 0, "a command in the new session: \(during.err)")
        let serving = agentsServingThisKeychain()
        XCTAssertLessThanOrEqual(serving.count, 1, "agents serving one keychain at once: \(serving)")

        kill(first, SIGTERM)
        waitForExit(first)

        var info = stat()
        XCTAssertEqual(lstat(socketPath, &info), 0, "the socket clients use is gone")
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFSOCK)
        let after = try cli(["status"])
        XCTAssertEqual(after.status, 0, "a command after the first agent stopped: \(after.err)")
        let remaining = agentsServingThisKeychain()
        XCTAssertEqual(remaining.count, 1, "agents left: \(remaining)")
        XCTAssertFalse(remaining.contains(first))
    }

    /// A second agent for the same keychain, in another runtime directory (another socket path), does
    /// not serve: it exits without binding a socket, and the first one goes on serving.
    func testASecondAgentForTheSameKeychainDoesNotServe() throws {
        try createKeychain()
        let first = try XCTUnwrap(agentPID())
        let otherRuntime = runtimeDirectory + "-other"
        try FileManager.default.createDirectory(
            atPath: otherRuntime, withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: otherRuntime) }

        let (exited, log) = try runSecondAgent(runtimeDirectory: otherRuntime)
        XCTAssertTrue(exited, "the second agent kept running: \(log)")
        XCTAssertTrue(log.contains("already serves the keychain"), log)
        var info = stat()
        XCTAssertNotEqual(lstat(otherRuntime + "/latchkey/agent.sock", &info), 0, "the second agent bound a socket")
        XCTAssertEqual(agentPID(), first, "the first agent no longer answers")
    }

    /// Under systemd socket activation the agent holds the keychain lock too, and leaves the socket
    /// file, which is systemd's, where it is when it stops.
    func testASocketActivatedAgentHoldsTheKeychainLock() throws {
        let activator = "/usr/bin/systemd-socket-activate"
        try XCTSkipUnless(
            FileManager.default.isExecutableFile(atPath: activator), "systemd-socket-activate is not installed")
        try FileManager.default.createDirectory(
            atPath: runtimeDirectory + "/latchkey", withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: activator)
        process.arguments = [
            "--listen=\(socketPath)", "--setenv=XDG_DATA_HOME=\(dataDirectory)",
            Self.binDirectory + "/latchkeyd", "--no-desktop", "--no-secret-service",
        ]
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        XCTAssertTrue(Poll.until(within: 10) { FileManager.default.fileExists(atPath: socketPath) })
        let first = try XCTUnwrap(agentPID())
        var before = stat()
        XCTAssertEqual(lstat(socketPath, &before), 0)

        let otherRuntime = runtimeDirectory + "-other"
        try FileManager.default.createDirectory(
            atPath: otherRuntime, withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: otherRuntime) }
        let (exited, log) = try runSecondAgent(runtimeDirectory: otherRuntime)
        XCTAssertTrue(exited, "a second agent ran beside the socket-activated one: \(log)")
        XCTAssertTrue(log.contains("already serves the keychain"), log)

        AgentClient.shared.resetConnection()
        kill(first, SIGTERM)
        waitForExit(first)
        var after = stat()
        XCTAssertEqual(lstat(socketPath, &after), 0, "the agent removed systemd's socket")
        XCTAssertEqual(after.st_ino, before.st_ino)
    }

    /// An agent whose socket path was taken over by another socket leaves that socket alone when it
    /// stops, and does not stay running behind a socket nobody reaches.
    func testAnAgentNeverUnlinksASocketItDidNotBind() throws {
        let first = try XCTUnwrap(agentPID())
        AgentClient.shared.resetConnection()
        // Another listener, bound aside and renamed over the agent's socket (atomically).
        let aside = runtimeDirectory + "/latchkey/other.sock"
        let other = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(other) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(aside.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(other, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(other, 4), 0)
        var before = stat()
        XCTAssertEqual(lstat(aside, &before), 0)
        XCTAssertEqual(rename(aside, socketPath), 0)

        XCTAssertTrue(
            Poll.until(within: 10) { !agentsServingThisKeychain().contains(first) },
            "the agent stayed running after its socket was replaced")
        kill(first, SIGTERM)
        waitForExit(first)
        var after = stat()
        XCTAssertEqual(lstat(socketPath, &after), 0, "the agent removed a socket it did not bind")
        XCTAssertEqual(after.st_ino, before.st_ino)
        XCTAssertEqual(after.st_dev, before.st_dev)
    }

    /// An agent whose socket file is removed exits, and the next client starts one that serves again.
    func testAnAgentWhoseSocketIsRemovedExits() throws {
        try createKeychain()
        let first = try XCTUnwrap(agentPID())
        AgentClient.shared.resetConnection()
        XCTAssertEqual(unlink(socketPath), 0)
        XCTAssertTrue(
            Poll.until(within: 10) { !agentsServingThisKeychain().contains(first) },
            "the agent stayed running without a socket")
        let after = try cli(["status"])
        XCTAssertEqual(after.status, 0, after.err)
        XCTAssertEqual(agentsServingThisKeychain().count, 1)
    }

    /// A client that finds the socket's lock held by an agent on its way out (stopped, its last threads
    /// still exiting: nobody will listen) starts an agent once the lock is free, instead of waiting out
    /// its 5 s for a socket that never comes and reporting -25291. The stress-passwd script found it: a
    /// command right after `kill -TERM` failed. Here the test process holds the lock for half a second.
    func testAClientStartsAnAgentOnceAnExitingHolderReleasesTheSocketLock() throws {
        try createKeychain()
        let first = try XCTUnwrap(agentPID())
        AgentClient.shared.resetConnection()
        kill(first, SIGTERM)
        waitForExit(first)

        let lock = open(runtimeDirectory + "/latchkey/agent.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(lock, 0)
        // The stopped agent may hold it a moment more itself (its last threads exiting): the very case.
        XCTAssertTrue(Poll.until(within: 10) { flock(lock, LOCK_EX | LOCK_NB) == 0 }, "the stopped agent kept its lock")
        let release = Thread {
            usleep(500_000)
            close(lock)
        }
        release.start()

        let after = try cli(["status"])
        XCTAssertEqual(after.status, 0, "a command while the lock's holder exits: \(after.err)")
        XCTAssertEqual(agentsServingThisKeychain().count, 1)
    }

    /// Runs `latchkeyd` in the foreground for this test's keychain with another runtime directory,
    /// and waits (at most 20 s) for it to exit; returns whether it did, and what it logged.
    ///
    /// posix_spawn and waitpid rather than Foundation's Process: with another Process running (the
    /// socket activator), Foundation's reaper blocks in waitpid on that one and never sees this exit.
    private func runSecondAgent(runtimeDirectory other: String) throws -> (exited: Bool, log: String) {
        let logPath = other + "/second-agent.log"
        let executable = Self.binDirectory + "/latchkeyd"
        let arguments = [executable, "--no-desktop", "--no-secret-service"]
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = other
        let entries = environment.map { "\($0.key)=\($0.value)" }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var pid = pid_t()
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = entries.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        XCTAssertEqual(spawned, 0, "posix_spawn: \(String(cString: strerror(spawned)))")
        guard spawned == 0 else { return (false, "") }
        var status: Int32 = 0
        let exited = Poll.until(within: 20, every: 0.05) { waitpid(pid, &status, WNOHANG) == pid }
        if !exited {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        return (exited, (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")
    }

    /// The live `latchkeyd` processes (not zombies) started for this test's keychain: the built agent
    /// executable, with this test's XDG_DATA_HOME in its environment.
    private func agentsServingThisKeychain() -> [pid_t] {
        // /proc/PID/exe names the file with symbolic links resolved (.build/debug is one).
        let executable = URL(fileURLWithPath: Self.binDirectory + "/latchkeyd").resolvingSymlinksInPath().path
        let marker = "XDG_DATA_HOME=\(dataDirectory)"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(pid_t.init).filter { pid in
            guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"),
                exe == executable,
                let environ = TestProcess.readProcFile("/proc/\(pid)/environ"),
                environ.split(separator: "\0").contains(where: { $0 == marker }),
                let stat = TestProcess.readProcFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")"),
                stat.index(close, offsetBy: 2) < stat.endIndex
            else { return false }
            return stat[stat.index(close, offsetBy: 2)] != "Z"
        }
    }
}
