import Foundation
import LatchkeyTestSupport
import XCTest

/// The Secret Service clients' own test suites (secretstorage's, keyring's) against the agent, through
/// `scripts/test-secret-service-suites`, which gives each suite its own agent, bus and directories.
/// Skips, saying why, when the suites cannot be prepared (no PyPI the first time; they are cached in
/// .build-suites afterwards).
final class ClientSuitesTests: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func testClientsOwnSuitesPass() throws {
        let script = Self.repository + "/scripts/test-secret-service-suites"
        let prepared = try TestProcess.run(script, ["--prepare"])
        guard prepared.status == 0 else {
            throw XCTSkip("the client suites cannot be prepared: \(prepared.err)")
        }
        let run = try TestProcess.run(script, ["--bin", TestProcess.binDirectory])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        // One line per suite, each with no failure; a suite that ran nothing counts as failed.
        let listed = try TestProcess.run(script, ["--list"]).out.split(separator: "\n").map(String.init)
        XCTAssertEqual(listed.count, 5)
        for suite in listed {
            let line = run.out.split(separator: "\n").first { $0.hasPrefix(suite + " ") }
            XCTAssertNotNil(line, "\(suite) reported nothing:\n\(run.out)")
            XCTAssertTrue(line?.contains(" 0 failed") ?? false, String(line ?? ""))
        }
    }
}
