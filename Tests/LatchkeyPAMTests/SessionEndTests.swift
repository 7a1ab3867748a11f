import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Login sessions that end without pam_close_session, through real Linux-PAM and the real module: the
/// login process is killed with SIGKILL (the agent follows it by a pidfd), or logind removes the session
/// whose id pam_systemd put in XDG_SESSION_ID (here pam_env plays pam_systemd, on a private system bus
/// where this test owns org.freedesktop.login1). The end of the last session locks every password class.
final class SessionEndTests: PAMTestCase {
    var agentLog: String {
        (try? String(contentsOfFile: runtime + "/latchkey/agent.log", encoding: .utf8)) ?? ""
    }

    /// Login sessions the agent counts, from `latchkey status` (the line is left out at 0).
    func sessionCount() throws -> Int {
        let line = try cli(["status"]).out.split(separator: "\n").first { $0.hasPrefix("login sessions: ") }
        return line.flatMap { Int($0.dropFirst("login sessions: ".count)) } ?? 0
    }

    /// Two logins; the first login process is killed, then the second: the first death keeps the keys
    /// (a session still counts), the second locks every password class within a bounded time.
    func testKilledLoginProcessEndsItsSession() throws {
        try createKeychainWithItem()
        stopUserProcesses()  // the module starts the agent for the logins
        let service = try standardService()
        let first = try login(service, input: password + "\n")
        XCTAssertEqual(first.status, 0, first.err)
        let second = try login(service, input: password + "\n")
        XCTAssertEqual(second.status, 0, second.err)
        XCTAssertEqual(try sessionCount(), 2)
        XCTAssertEqual(try readItem(), "s3cret")

        first.kill()
        XCTAssertTrue(
            try Poll.until(within: 10) { try sessionCount() == 1 },
            "the killed login process's session still counts:\n\(agentLog)")
        XCTAssertEqual(try classState("ck"), "unlocked", "one of two sessions ending locked the keychain")
        XCTAssertEqual(try readItem(), "s3cret")

        second.kill()
        XCTAssertTrue(
            try Poll.until(within: 10) { try classState("ck") == "locked" },
            "the last login process was killed, and the keychain stays unlocked:\n\(agentLog)")
        for pdmn in ["ak", "ck", "aku", "cku", "akpu"] {
            XCTAssertEqual(try classState(pdmn), "locked", pdmn)
        }
        XCTAssertEqual(try classState("dk"), "unlocked")
        XCTAssertEqual(try sessionCount(), 0)
        XCTAssertNil(try readItem())
        XCTAssertTrue(
            agentLog.contains(
                "(pid \(second.pid)) of a session exited without closing it: it was the last login session"),
            agentLog)
    }

    /// The module sends the logind session id from the PAM environment; logind's SessionRemoved for it
    /// ends the session though its login process lives on, and a late close of it changes nothing.
    /// SessionRemoved from a client that does not own logind's name, or for another id, is ignored.
    func testLogindSessionRemovedEndsItsSession() throws {
        try createKeychainWithItem()
        stopUserProcesses()
        let bus = try PrivateBus(system: true, allowAnyUser: true)
        defer { bus.stop() }
        let logind = try BusConnection(.address(bus.address))
        defer { logind.close() }
        XCTAssertTrue(try logind.sync { try $0.requestName("org.freedesktop.login1") })
        // The agent the user runs, on this system bus (the module finds it running and starts none): the
        // module's own trusted copy, started by the CLI as the user.
        let started = try asUser([
            "/usr/bin/env", "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", "LATCHKEYD=\(agentPath)",
            Self.binDirectory + "/latchkey", "status",
        ])
        XCTAssertEqual(started.status, 0, started.err)
        let agent = try XCTUnwrap(userPIDs().first, "no agent runs")

        // pam_env stands in for pam_systemd: XDG_SESSION_ID in the PAM environment, before the module.
        let environment = base + "/pam_env.conf"
        try "XDG_SESSION_ID DEFAULT=c7\n".write(toFile: environment, atomically: true, encoding: .utf8)
        let service = try installService([
            "auth requisite pam_unix.so",
            moduleLine("auth"),
            "session required pam_unix.so",
            "session required pam_env.so readenv=0 conffile=\(environment)",
            moduleLine("session"),
        ])
        let session = try login(service, input: password + "\n")
        XCTAssertEqual(session.status, 0, session.err)
        XCTAssertEqual(try sessionCount(), 1)
        XCTAssertTrue(agentLog.contains("logind session c7"), agentLog)

        func removed(_ id: String, by connection: BusConnection) throws {
            try connection.sync { bus in
                try bus.emitSignal(
                    path: "/org/freedesktop/login1", interface: "org.freedesktop.login1.Manager",
                    member: "SessionRemoved", [.string(id), .objectPath("/org/freedesktop/login1/session/\(id)")])
            }
            try waitUntilHandled(by: agent, connection)
        }
        let spoofer = try BusConnection(.address(bus.address))
        defer { spoofer.close() }
        try removed("c7", by: spoofer)
        try removed("c8", by: logind)
        XCTAssertEqual(try sessionCount(), 1, "a spoofed SessionRemoved, or another session's, ended this one")
        XCTAssertEqual(try readItem(), "s3cret")

        try removed("c7", by: logind)
        XCTAssertTrue(
            try Poll.until(within: 10) { try classState("ck") == "locked" },
            "logind removed the session, and the keychain stays unlocked:\n\(agentLog)")
        XCTAssertEqual(try sessionCount(), 0)
        XCTAssertTrue(session.process.isRunning, "the session ended through logind, not through its process")
        XCTAssertEqual(session.close(), "close_session 0")
        XCTAssertTrue(agentLog.contains("a login session closed that had already ended"), agentLog)
    }

    /// Returns once the agent (pid `agent`) has handled every signal `connection` sent before: a Ping to
    /// each of its connections on the bus comes back only after them (one sender's messages arrive in
    /// order, and sd-bus answers in its loop).
    private func waitUntilHandled(by agent: pid_t, _ connection: BusConnection) throws {
        let pinged = try connection.pingConnections(ofProcess: agent)
        XCTAssertGreaterThan(pinged, 0, "the agent is not on the system bus:\n\(agentLog)")
    }
}
