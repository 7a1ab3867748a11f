import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The agent's descriptors: it raises its soft limit before it sizes its connection cap, so the cap
/// comes from the limit it really has; and a login session whose login process it cannot follow for
/// want of a descriptor makes room by closing an idle connection, rather than count a session that
/// nothing ends but its close.
final class DescriptorBudgetTests: AgentTestCase {
    private var socketPath: String { runtimeDirectory + "/latchkey/agent.sock" }

    /// Started with the usual soft limit of 1,024 open files (and a higher hard limit), the agent keeps
    /// its full 1,024 connections: 1,000 silent ones are all kept. It used to size the cap from the
    /// limit it was started with (960 connections) and raise the limit only afterwards.
    func testTheConnectionCapComesFromTheRaisedLimit() throws {
        var current = rlimit()
        getrlimit(RLIMIT_NOFILE_VALUE, &current)
        try XCTSkipUnless(current.rlim_max >= 8192, "the hard limit of open files is below 8192")
        let low = try DescriptorLimit(soft: 1024)
        try createKeychain()
        low.restore()
        let high = try DescriptorLimit(soft: 4096)
        defer { high.restore() }
        AgentClient.shared.resetConnection()

        let silent = RawConnections(count: 1000, to: socketPath)
        defer { silent.closeAll() }
        XCTAssertEqual(silent.fds.count, 1000)
        // The agent accepts in order: once a later connection is answered, all 1,000 were admitted.
        let status = try cli(["status"])
        XCTAssertEqual(status.status, 0, status.err)
        let closed = silent.fds.filter(RawConnections.isClosedByPeer)
        XCTAssertEqual(closed.count, 0, "the agent closed \(closed.count) of 1,000 idle connections to make room")
    }

    /// An agent out of descriptors (a hard limit of 128, its connection cap filled with idle ones) still
    /// follows the login process of every session opened: each needs a pidfd, and the agent closes an
    /// idle connection to make room for it. Killing the login process then ends every session and locks.
    /// Sessions are root's (pam_latchkey): the opener runs as root, and so must the agent's user.
    func testSessionsAreFollowedWhenDescriptorsRunOut() throws {
        try XCTSkipUnless(getuid() == 0, "only root opens login sessions")
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=\(runtimeDirectory)/no-system-bus", 1)
        defer { unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
        setenv("LATCHKEYD", try AgentProcesses.starter(descriptorLimit: 128, in: runtimeDirectory), 1)
        try createKeychain()
        AgentClient.shared.resetConnection()
        // As many idle connections as the agent keeps (128 less its reserve of 64).
        let silent = RawConnections(count: 64, to: socketPath)
        defer { silent.closeAll() }

        let sessions = 60
        let opener = Process()
        opener.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        opener.arguments = ["-I", "-c", Self.openerScript, socketPath, String(sessions)]
        let input = Pipe(), output = Pipe()
        opener.standardInput = input
        opener.standardOutput = output
        try opener.run()
        defer {
            if opener.isRunning {
                kill(opener.processIdentifier, SIGKILL)
                opener.waitUntilExit()
            }
        }
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line += byte
        }
        XCTAssertEqual(
            String(decoding: line, as: UTF8.self), Array(repeating: "0", count: sessions).joined(separator: " "))
        XCTAssertEqual(try sessionCount(), sessions)

        kill(opener.processIdentifier, SIGKILL)
        opener.waitUntilExit()
        XCTAssertTrue(
            try Poll.until(within: 20, every: 0.1) { try sessionCount() == 0 },
            "sessions still counted after their login process was killed: \((try? sessionCount()) ?? -1)")
        let unfollowed = agentLog().split(separator: "\n").filter { $0.contains("cannot follow the login process") }
        XCTAssertEqual(unfollowed, [], "sessions whose login process the agent does not follow")
    }

    /// Opens `argv[2]` sessions one after the other, each on a connection of its own that it closes once
    /// answered, prints the statuses on one line and waits until its input ends: the sessions' login
    /// process is this one.
    private static let openerScript = """
        import os, socket, sys
        path, count = sys.argv[1], int(sys.argv[2])
        statuses = []
        for n in range(count):
            payload = bytes([1, 0x31]) + os.urandom(16)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.sendall(len(payload).to_bytes(4, "big") + payload)
            length = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
            reply = s.recv(length, socket.MSG_WAITALL) if length else b""
            s.close()
            statuses.append(str(int.from_bytes(reply[1:5], "big", signed=True)) if len(reply) >= 5 else "none")
        print(" ".join(statuses), flush=True)
        sys.stdin.read()
        """

    /// Login sessions the agent counts, from `latchkey status` (the line is left out at 0).
    private func sessionCount() throws -> Int {
        let result = try cli(["status"])
        XCTAssertEqual(result.status, 0, result.err)
        let line = result.out.split(separator: "\n").first { $0.hasPrefix("login sessions: ") }
        return line.flatMap { Int($0.dropFirst("login sessions: ".count)) } ?? 0
    }

    private func agentLog() -> String {
        (try? String(contentsOfFile: runtimeDirectory + "/latchkey/agent.log", encoding: .utf8)) ?? ""
    }
}
