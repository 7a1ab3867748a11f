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
