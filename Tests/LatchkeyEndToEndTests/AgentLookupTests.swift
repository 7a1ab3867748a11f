import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Which agent a client starts when `LATCHKEYD` is not set, in an installation's layout: the Debian
/// package and `make install` put `latchkey` in `PREFIX/bin` and the agent in
/// `PREFIX/libexec/latchkey/` (where pam_latchkey trusts it), off PATH. The agent there wins over a
/// `latchkeyd` on PATH.
final class AgentLookupTests: AgentTestCase {
    func testAnInstalledLatchkeyStartsTheAgentInLibexec() throws {
        // Beside the build, so that the programs can be hard links (the same file system).
        let prefix = Self.binDirectory + "/lookup-prefix-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        let agent = prefix + "/libexec/latchkey/latchkeyd"
        let decoy = prefix + "/path/latchkeyd"
        try place(Self.binDirectory + "/latchkey", at: prefix + "/bin/latchkey")
        try place(Self.binDirectory + "/latchkeyd", at: agent)
        try place(Self.binDirectory + "/latchkeyd", at: decoy)

        let created = try TestProcess.run(
            "/usr/bin/env",
            [
                "-u", "LATCHKEYD", "PATH=\(prefix)/path:/usr/bin:/bin",
                "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent",
                prefix + "/bin/latchkey", "init", "--password-stdin", "--argon2-memory", "64", "--argon2-time", "1",
            ],
            input: "pw\n")
        XCTAssertEqual(created.status, 0, created.err)
        let pid = try XCTUnwrap(agentPID(), "no agent answers")
        XCTAssertEqual(try executable(of: pid), agent)
    }

    /// Another user may write in /tmp: a program run from `/tmp/x/` must not start what they left at
    /// `/tmp/libexec/latchkey/latchkeyd` (or `/tmp/x/latchkeyd`). Only files nobody else could have
    /// put there are candidates, as pam_latchkey requires of its agent.
    func testOnlyAnAgentNobodyElseCouldHavePlacedIsStarted() throws {
        let base = Self.binDirectory + "/lookup-trust-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: base) }
        let agent = base + "/libexec/latchkey/latchkeyd"
        try place(Self.binDirectory + "/latchkeyd", at: agent)
        chmod(agent, 0o755)
        XCTAssertEqual(AgentLauncher.trustedExecutable(agent), agent)

        let link = base + "/link-to-agent"
        XCTAssertEqual(symlink(agent, link), 0)
        XCTAssertEqual(AgentLauncher.trustedExecutable(link), agent, "checked and started as resolved")

        chmod(base + "/libexec", 0o777)
        XCTAssertNil(AgentLauncher.trustedExecutable(agent), "a directory anyone can change")
        chmod(base + "/libexec", 0o1777)
        XCTAssertEqual(AgentLauncher.trustedExecutable(agent), agent, "sticky, as /tmp")
        chmod(base + "/libexec", 0o755)

        let copy = base + "/libexec/latchkey/writable"
        try FileManager.default.copyItem(atPath: agent, toPath: copy)
        chmod(copy, 0o775)
        XCTAssertNil(AgentLauncher.trustedExecutable(copy), "a file its group can write")
        chmod(copy, 0o755)
        XCTAssertEqual(AgentLauncher.trustedExecutable(copy), copy)

        if geteuid() == 0 {
            XCTAssertEqual(chown(copy, 65534, 65534), 0)
            XCTAssertNil(AgentLauncher.trustedExecutable(copy), "another user's file")
            XCTAssertEqual(chown(base + "/libexec", 65534, 65534), 0)
            XCTAssertNil(AgentLauncher.trustedExecutable(agent), "in another user's directory")
        }
        XCTAssertNil(AgentLauncher.trustedExecutable(base + "/absent"))
    }

    /// A hard link of `source` at `path` (a copy where linking fails), its directories created.
    private func place(_ source: String, at path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if link(source, path) != 0 { try FileManager.default.copyItem(atPath: source, toPath: path) }
    }

    private func executable(of pid: pid_t) throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
    }
}
