import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Login sessions that end without a close: the process that opened one is killed (a crashed sshd or
/// display manager never sends sessionClose), or logind removes the session it belongs to. Either way
/// the session stops counting, and the end of the last one locks every password class. The openers
/// are real processes speaking the protocol (a few lines of Python), the agent the real one; the PAM
/// module's side is in LatchkeyPAMTests. Only root opens and closes sessions (docs/PROTOCOL.md §4a), so
/// these tests run as root, where the agent's user is root too.
final class SessionLivenessTests: AgentTestCase {
    private var systemBus: PrivateBus?
    private var openers: [Process] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        try XCTSkipUnless(getuid() == 0, "only root opens login sessions; run as root")
        // No logind unless a test brings one: point the system bus at nothing (logged once, ignored).
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=\(runtimeDirectory)/no-system-bus", 1)
        setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=\(runtimeDirectory)/no-session-bus", 1)
    }

    override func tearDown() {
        for opener in openers where opener.isRunning {
            kill(opener.processIdentifier, SIGKILL)
            opener.waitUntilExit()
        }
        super.tearDown()
        systemBus?.stop()
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS")
        unsetenv("DBUS_SESSION_BUS_ADDRESS")
    }

    // MARK: Helpers

    /// Connects to the agent, sends `payload` (a request payload, without the length), prints the
    /// response's status and then waits until its input ends; it holds the connection all along.
    private static let openerScript = """
        import socket, sys
        path, payload = sys.argv[1], bytes.fromhex(sys.argv[2])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(len(payload).to_bytes(4, "big") + payload)
        head = b""
        while len(head) < 9:
            chunk = s.recv(9 - len(head))
            if not chunk:
                break
            head += chunk
        print(int.from_bytes(head[5:9], "big", signed=True) if len(head) == 9 else "no answer", flush=True)
        sys.stdin.read()
        """

    /// Starts a process that opens a session with `payload` and stays; returns it and the agent's status.
    private func opener(_ payload: [UInt8]) throws -> (process: Process, status: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            "-I", "-c", Self.openerScript, runtimeDirectory + "/latchkey/agent.sock",
            payload.map { String(format: "%02x", $0) }.joined(),
        ]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        openers.append(process)
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line += byte
        }
        return (process, String(decoding: line, as: UTF8.self))
    }

    /// sessionOpen (0x31): version 1, the opcode, a 16-byte token.
    private func sessionOpen(_ token: UInt8) -> [UInt8] {
        [0x01, 0x31] + [UInt8](repeating: token, count: 16)
    }

    /// sessionOpenWithDetails (0x33): the token, then the dictionary {"logind": id} (docs/PROTOCOL.md).
    private func sessionOpen(_ token: UInt8, logindSession id: String) -> [UInt8] {
        let idBytes = Array(id.utf8)
        return [0x01, 0x33] + [UInt8](repeating: token, count: 16)
            + [0x08, 0, 0, 0, 1] + [0, 0, 0, 6] + Array("logind".utf8)
            + [0x01, 0, 0, 0, UInt8(idBytes.count)] + idBytes
    }

    private func status() throws -> String {
        let result = try cli(["status"])
        XCTAssertEqual(result.status, 0, result.err)
        return result.out
    }

    /// Login sessions the agent counts, from `latchkey status` (the line is left out at 0).
    private func sessionCount() throws -> Int {
        let line = try status().split(separator: "\n").first { $0.hasPrefix("login sessions: ") }
        return line.flatMap { Int($0.dropFirst("login sessions: ".count)) } ?? 0
    }

    private func isLocked(_ pdmn: String) throws -> Bool {
        try status().range(of: #"\s\#(pdmn)\s+locked"#, options: .regularExpression) != nil
    }

    private func agentLog() -> String {
        (try? String(contentsOfFile: runtimeDirectory + "/latchkey/agent.log", encoding: .utf8)) ?? ""
    }

    private func kill9(_ process: Process) {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    // MARK: Tests

    /// Two processes open sessions; killing one keeps the keys (the other still counts), killing the
    /// last locks every password class within a bounded time, as the close of the last session does.
    func testKilledOpenersEndTheirSessionsAndTheLastLocks() throws {
        try createKeychain()
        let first = try opener(sessionOpen(1))
        let second = try opener(sessionOpen(2))
        XCTAssertEqual(first.status, "0")
        XCTAssertEqual(second.status, "0")
        XCTAssertEqual(try sessionCount(), 2)

        kill9(first.process)
        XCTAssertTrue(
            try Poll.until(within: 10) { try sessionCount() == 1 },
            "the session of a killed process still counts:\n\((try? status()) ?? "")")
        XCTAssertFalse(try isLocked("ck"), "one of two sessions ending locked the keychain")

        kill9(second.process)
        XCTAssertTrue(
            try Poll.until(within: 10) { try isLocked("ck") },
            "the last session's process was killed, and the keychain stays unlocked:\n\((try? status()) ?? "")")
        XCTAssertEqual(try sessionCount(), 0)
        XCTAssertTrue(try isLocked("ak"))
        XCTAssertFalse(try isLocked("dk"), "the Always classes have no password and stay")
        XCTAssertTrue(
            agentLog().contains(
                "exited without closing it: it was the last login session: locked all password classes"),
            agentLog())
    }

    /// A process that sends sessionOpen and exits at once never leaves a session behind, and a session
    /// that is closed properly is not ended a second time when its process exits.
    func testOpenersThatExitLeaveNoSession() throws {
        try createKeychain()
        let staying = try opener(sessionOpen(3))
        XCTAssertEqual(staying.status, "0")
        // Exits as soon as its request is sent (no wait for the answer).
        let quick = Process()
        quick.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        let hex = sessionOpen(4).map { String(format: "%02x", $0) }.joined()
        quick.arguments = [
            "-I", "-c",
            """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            payload = bytes.fromhex(sys.argv[2])
            s.sendall(len(payload).to_bytes(4, "big") + payload)
            """,
            runtimeDirectory + "/latchkey/agent.sock", hex,
        ]
        try quick.run()
        quick.waitUntilExit()
        XCTAssertTrue(try Poll.until(within: 10) { try sessionCount() == 1 }, (try? status()) ?? "")
        XCTAssertFalse(try isLocked("ck"))
        kill9(staying.process)
        XCTAssertTrue(try Poll.until(within: 10) { try isLocked("ck") }, (try? status()) ?? "")
    }

    /// logind's SessionRemoved ends the sessions opened in that logind session, though their process
    /// lives on; a SessionRemoved from anyone but logind's owner, or for another session, changes nothing.
    func testLogindSessionRemovedEndsItsSessions() throws {
        let bus = try PrivateBus(system: true)
        systemBus = bus
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.address, 1)
        let logind = try BusConnection(.address(bus.address))
        defer { logind.close() }
        XCTAssertTrue(try logind.sync { try $0.requestName("org.freedesktop.login1") })
        try createKeychain()  // starts the agent, which watches this bus

        let login = try opener(sessionOpen(5, logindSession: "c7"))
        XCTAssertEqual(login.status, "0", "sessionOpenWithDetails refused")
        XCTAssertEqual(try sessionCount(), 1)
        XCTAssertTrue(agentLog().contains("logind session c7"), agentLog())
        func removed(_ id: String, by connection: BusConnection) throws {
            try connection.sync { bus in
                try bus.emitSignal(
                    path: "/org/freedesktop/login1", interface: "org.freedesktop.login1.Manager",
                    member: "SessionRemoved", [.string(id), .objectPath("/org/freedesktop/login1/session/\(id)")])
            }
            try waitUntilAgentHandled(connection)
        }

        let spoofer = try BusConnection(.address(bus.address))
        defer { spoofer.close() }
        try removed("c7", by: spoofer)
        XCTAssertEqual(try sessionCount(), 1, "a SessionRemoved from a client that does not own logind's name")
        try removed("c8", by: logind)
        XCTAssertEqual(try sessionCount(), 1, "another logind session's removal ended this one")
        XCTAssertFalse(try isLocked("ck"))

        try removed("c7", by: logind)
        XCTAssertTrue(
            try Poll.until(within: 10) { try isLocked("ck") },
            "logind removed the last session, and the keychain stays unlocked:\n\((try? status()) ?? "")")
        XCTAssertEqual(try sessionCount(), 0)
        XCTAssertTrue(login.process.isRunning, "the session ended through logind, not through its process")
        XCTAssertTrue(agentLog().contains("logind removed session c7"), agentLog())
    }
}
