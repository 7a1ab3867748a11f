import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Where a program without `XDG_RUNTIME_DIR` (cron, `su -`, `sudo -u`) finds the agent: in the user's
/// logind runtime directory `/run/user/UID` when it exists as the user's own private directory, so it
/// reaches the same agent as the desktop does, and one that goes away at logout; `/tmp/latchkey-UID`
/// only when there is none (docs/PROTOCOL.md §1). Runs `latchkey` as `nobody`, for whom the test makes
/// `/run/user/65534` (and removes it); needs root.
final class RuntimeFallbackTests: AgentTestCase {
    private let nobody: uid_t = 65534

    func testWithoutXDGRuntimeDirTheAgentListensInRunUser() throws {
        try XCTSkipUnless(getuid() == 0, "needs root to make /run/user/65534 and run as nobody")
        var info = stat()
        try XCTSkipUnless(lstat("/run/user", &info) == 0 && info.st_mode & S_IFMT == S_IFDIR, "no /run/user")
        let userRuntime = "/run/user/\(nobody)"
        try XCTSkipIf(lstat(userRuntime, &info) == 0, "\(userRuntime) exists already: not the test's to change")
        let fallback = "/tmp/latchkey-\(nobody)"
        let fallbackExisted = lstat(fallback, &info) == 0
        XCTAssertEqual(mkdir(userRuntime, 0o700), 0)
        chown(userRuntime, nobody, nobody)
        let base = NSTemporaryDirectory() + "lk-fallback-\(UUID().uuidString.prefix(8))"
        let data = base + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        chown(base, nobody, nobody)
        chown(data, nobody, nobody)
        chmod(data, 0o700)
        defer {
            // The agent of nobody that the test started, by the pid in its keychain lock file.
            if let record = try? String(contentsOfFile: data + "/latchkey/agent.lock", encoding: .utf8),
                let pid = record.split(separator: " ").first.flatMap({ pid_t($0) }), pid > 0
            {
                kill(pid, SIGTERM)
                waitForExit(pid)
            }
            try? FileManager.default.removeItem(atPath: userRuntime)
            try? FileManager.default.removeItem(atPath: base)
            if !fallbackExisted { try? FileManager.default.removeItem(atPath: fallback) }
        }
        let asNobody = [
            "setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups",
            "env", "-u", "XDG_RUNTIME_DIR", "HOME=\(base)", "XDG_DATA_HOME=\(data)",
            "LATCHKEYD=\(Self.binDirectory)/latchkeyd", "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent",
            "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent", Self.binDirectory + "/latchkey",
        ]
        let created = try TestProcess.run(
            "/usr/bin/env",
            asNobody + ["init", "--password-stdin", "--argon2-memory", "64", "--argon2-time", "1"], input: "pw\n")
        XCTAssertEqual(created.status, 0, created.err)

        XCTAssertEqual(lstat(userRuntime + "/latchkey/agent.sock", &info), 0, "no socket in \(userRuntime)/latchkey")
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFSOCK)
        XCTAssertNotEqual(lstat(fallback + "/agent.sock", &info), 0, "the agent listens in \(fallback)")
        let status = try TestProcess.run("/usr/bin/env", asNobody + ["status"])
        XCTAssertEqual(status.status, 0, status.err)
    }
}
