import Foundation
import LatchkeyCrypto
import LatchkeyTestSupport
import XCTest

@testable import Latchkey
@testable import LatchkeyKeybag

/// Files the agent must refuse rather than use (issue 10, defects 3 and 4), through the real agent and the
/// `latchkey` command: a keybag whose Argon2id cost is beyond the limits, a damaged write-ahead log and a
/// database missing beside its keybag. Each is reported by path, in `latchkey status` and in the error of
/// the call that failed, and is never overwritten.
final class RefusedFilesTests: AgentTestCase {
    private var keychainDirectory: String { dataDirectory + "/latchkey" }
    private var keybagPath: String { keychainDirectory + "/keybag" }
    private var databasePath: String { keychainDirectory + "/keychain.db" }

    private func add(_ account: String) -> OSStatus {
        SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "svc", kSecAttrAccount: account,
                kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock, kSecValueData: Data("pw-\(account)".utf8),
            ] as NSDictionary, nil)
    }

    /// Rewrites the keybag with other Argon2id costs, intact otherwise (a valid checksum).
    private func rewriteKeybag(t: UInt32, m: UInt32, p: UInt32) throws {
        let keybag = try Keybag.load(path: keybagPath)
        try Keybag(
            id: keybag.id, parameters: Argon2Parameters(timeCost: t, memoryKiB: m, parallelism: p), salt: keybag.salt,
            verifier: keybag.verifier, alwaysSeed: keybag.alwaysSeed, wrappedKeys: keybag.wrappedKeys,
            deviceBound: keybag.isDeviceBound, origin: keybagPath
        ).write(to: keybagPath)
    }

    /// Stops the agent the way a crash does, so that its WAL is left as it was.
    private func killAgent() throws {
        let pid = try XCTUnwrap(agentPID())
        kill(pid, SIGKILL)
        waitForExit(pid)
        waitUntilNothingListens()
        AgentClient.shared.resetConnection()
    }

    /// `status` names `path` as the problem; reading, adding and unlocking fail with errSecInvalidKeychain
    /// naming it.
    private func assertRefusedNaming(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        var r = try cli(["status"])
        XCTAssertTrue(r.out.contains("problem:") && r.out.contains(path), r.out + r.err, file: file, line: line)
        r = try cli(["find-generic-password", "-s", "svc", "-a", "a1", "-w"])
        XCTAssertTrue(r.err.contains("(-25295)") && r.err.contains(path), r.err, file: file, line: line)
        r = try cli(["add-generic-password", "-s", "svc", "-a", "new", "--password-stdin"], input: "x\n")
        XCTAssertTrue(r.err.contains("(-25295)") && r.err.contains(path), r.err, file: file, line: line)
        r = try cli(["unlock", "--password-stdin"], input: "pw\n")
        XCTAssertTrue(r.err.contains("(-25295)") && r.err.contains(path), r.err, file: file, line: line)
    }

    func testAKeybagBeyondTheArgon2LimitsIsRefusedAtOnce() throws {
        try createKeychain()
        XCTAssertEqual(add("a1"), errSecSuccess)
        stopAgent()
        try rewriteKeybag(t: UInt32.max, m: 8192, p: 1)
        let keybag = try Data(contentsOf: URL(fileURLWithPath: keybagPath))

        let status = try cli(["status"])
        XCTAssertEqual(status.status, 0, status.err)
        XCTAssertTrue(
            status.out.contains("problem:") && status.out.contains("refused") && status.out.contains(keybagPath)
                && status.out.contains("t=4294967295"), status.out)
        // Unfixed, the agent derived for as long as the file asked (years) and this call gave up after
        // 30 s saying the agent could not be reached.
        let unlock = try cli(["unlock", "--password-stdin"], input: "pw\n")
        XCTAssertEqual(unlock.status, 1)
        XCTAssertTrue(unlock.err.contains("(-25295)") && unlock.err.contains(keybagPath), unlock.err)
        try assertRefusedNaming(keybagPath)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: keybagPath)), keybag, "left untouched")
    }

    /// Three `latchkey unlock` at once on a keybag whose derivation takes a while: the agent derives for
    /// one and tells the others it is busy, instead of starting a derivation (a thread at full speed) for
    /// each.
    func testConcurrentUnlocksDeriveOneAtATime() throws {
        try createKeychain()
        stopAgent()
        try rewriteKeybag(t: 8, m: 262_144, p: 1)
        // One agent for the three, started before them.
        XCTAssertEqual(try cli(["status"]).status, 0)
        let group = DispatchGroup()
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var outputs: [(status: Int32, err: String)] = []
        }
        let results = Results()
        let binary = Self.binDirectory + "/latchkey"
        for _ in 0..<3 {
            group.enter()
            Thread.detachNewThread {
                // A wrong password: the derivation is all the agent does for it.
                let r = try? TestProcess.run(binary, ["unlock", "--password-stdin"], input: "wrong\n")
                results.lock.withLock { results.outputs.append((r?.status ?? -1, r?.err ?? "did not run")) }
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        let outputs = results.lock.withLock { results.outputs }
        XCTAssertTrue(outputs.contains { $0.err.contains("(-25293)") }, "\(outputs)")
        XCTAssertTrue(
            outputs.contains { $0.err.contains("(-909)") && $0.err.contains("busy") },
            "none was refused as busy: \(outputs)")
        XCTAssertEqual(
            outputs.filter { !$0.err.contains("(-25293)") && !$0.err.contains("(-909)") }.count, 0, "\(outputs)")
    }

    func testAWALOfRandomBytesIsReportedAndNeverOverwritten() throws {
        try createKeychain()
        for n in 0..<20 { XCTAssertEqual(add("a\(n)"), errSecSuccess) }
        try killAgent()
        let wal = databasePath + "-wal"
        let size = try Data(contentsOf: URL(fileURLWithPath: wal)).count
        XCTAssertGreaterThan(size, 0, "the items are in the WAL")
        var generator = SystemRandomNumberGenerator()
        let random = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try random.write(to: URL(fileURLWithPath: wal))
        let database = try Data(contentsOf: URL(fileURLWithPath: databasePath))

        try assertRefusedNaming(wal)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: wal)), random, "the WAL was overwritten")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: databasePath)), database)
    }

    func testAWALWithOneDamagedFrameInTheMiddleIsReported() throws {
        try createKeychain()
        for n in 0..<20 { XCTAssertEqual(add("a\(n)"), errSecSuccess) }
        try killAgent()
        let wal = databasePath + "-wal"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: wal)))
        let frameSize = 24 + (8..<12).reduce(0) { $0 << 8 | Int(bytes[$1]) }
        let frames = (bytes.count - 32) / frameSize
        XCTAssertGreaterThan(frames, 20)
        bytes[32 + (frames / 2) * frameSize + 24 + 200] ^= 0x10
        try Data(bytes).write(to: URL(fileURLWithPath: wal))

        try assertRefusedNaming(wal)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: wal)), Data(bytes), "the WAL was overwritten")
    }

    /// And a crash in the middle of adds still reopens cleanly: a torn last frame is not damage.
    func testATornLastFrameIsNotDamage() throws {
        try createKeychain()
        for n in 0..<20 { XCTAssertEqual(add("a\(n)"), errSecSuccess) }
        try killAgent()
        let wal = databasePath + "-wal"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: wal))
        try bytes.prefix(bytes.count - 1000).write(to: URL(fileURLWithPath: wal))
        let r = try cli(["status"])
        XCTAssertFalse(r.out.contains("problem:"), r.out)
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "pw\n").status, 0)
        XCTAssertEqual(try cli(["find-generic-password", "-s", "svc", "-a", "a18", "-w"]).out, "pw-a18\n")
    }

    func testAMissingDatabaseIsReportedAndNotCreated() throws {
        try createKeychain()
        XCTAssertEqual(add("a1"), errSecSuccess)
        stopAgent()
        for suffix in ["", "-wal", "-shm"] { unlink(databasePath + suffix) }
        let keybag = try Data(contentsOf: URL(fileURLWithPath: keybagPath))

        try assertRefusedNaming(databasePath)
        let r = try cli(["init", "--password-stdin", "--argon2-memory", "64", "--argon2-time", "1"], input: "x\n")
        XCTAssertNotEqual(r.status, 0, "init replaced a keychain whose database is missing")
        XCTAssertFalse(FileManager.default.fileExists(atPath: databasePath), "a database was created")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: keybagPath)), keybag)
    }
}
