import Foundation
import LatchkeySecrets
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The agent as users run it: started on demand, lock states, several clients, crashes.
final class AgentTests: AgentTestCase {
    private func add(_ account: String, _ pdmn: CFString = kSecAttrAccessibleWhenUnlocked) -> OSStatus {
        Self.add(account, pdmn)
    }

    private func read(_ account: String) -> (OSStatus, String?) {
        Self.read(account)
    }

    private static func add(_ account: String, _ pdmn: CFString = kSecAttrAccessibleWhenUnlocked) -> OSStatus {
        SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "svc", kSecAttrAccount: account,
                kSecAttrAccessible: pdmn, kSecValueData: Data("pw-\(account)".utf8),
            ] as NSDictionary, nil)
    }

    private static func read(_ account: String) -> (OSStatus, String?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "svc",
                kSecAttrAccount: account, kSecReturnData: true,
            ] as NSDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    func testAgentStartsOnDemandAndPrivateDirectory() throws {
        XCTAssertNotNil(agentPID())
        XCTAssertEqual(add("a"), errSecNoDefaultKeychain, "no keychain yet")
        try createKeychain()
        XCTAssertEqual(add("a"), errSecSuccess)
        XCTAssertEqual(read("a").1, "pw-a")
        var st = stat()
        XCTAssertEqual(lstat(runtimeDirectory + "/latchkey", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
        XCTAssertEqual(lstat(runtimeDirectory + "/latchkey/agent.sock", &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFSOCK)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dataDirectory + "/latchkey/keychain.db"))
    }

    /// Started by systemd socket activation (as contrib/systemd/latchkeyd.socket does), the agent's
    /// environment is the user manager's, which any session-bus client can change
    /// (UpdateActivationEnvironment): it must not take its lock timing, log cap or prompter from there,
    /// nor look for the prompter on that PATH.
    func testSocketActivatedAgentIgnoresTheSharedEnvironment() throws {
        let activator = "/usr/bin/systemd-socket-activate"
        try XCTSkipUnless(
            FileManager.default.isExecutableFile(atPath: activator), "systemd-socket-activate is not installed")
        let directory = runtimeDirectory + "/latchkey"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let log = runtimeDirectory + "/activator.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: activator)
        process.arguments = [
            "--listen=\(directory)/agent.sock",
            // The activator passes on only what --setenv names: without this the agent would lock (and
            // create) the keychain directory of the user running the tests.
            "--setenv=XDG_DATA_HOME=\(dataDirectory)",
            "--setenv=LATCHKEY_LOCK_GRACE=86400", "--setenv=LATCHKEY_IDLE_LOCK=0",
            "--setenv=LATCHKEY_PROMPTER=/tmp/not-a-prompter", "--setenv=PATH=/tmp/evil:/usr/bin",
            Self.binDirectory + "/latchkeyd", "--no-desktop", "--no-secret-service",
        ]
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
        defer {
            stopAgent()
            process.terminate()
            process.waitUntilExit()
        }
        // Wait until the activator listens, then the first connection starts the agent.
        XCTAssertTrue(Poll.until(within: 10) { FileManager.default.fileExists(atPath: directory + "/agent.sock") })
        XCTAssertNotNil(agentPID(), (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        let text = try String(contentsOfFile: log, encoding: .utf8)
        for name in ["LATCHKEY_LOCK_GRACE", "LATCHKEY_IDLE_LOCK", "LATCHKEY_PROMPTER"] {
            XCTAssertTrue(text.contains("ignoring \(name): started by systemd socket activation"), text)
        }
        XCTAssertTrue(
            text.contains(
                "ignoring PATH=/tmp/evil:/usr/bin: started by systemd socket activation; "
                    + "programs are looked for in /usr/local/bin:/usr/bin:/bin"), text)
    }

    func testLockStatesThroughTheLibrary() throws {
        try createKeychain()
        XCTAssertEqual(add("wu", kSecAttrAccessibleWhenUnlocked), errSecSuccess)
        XCTAssertEqual(add("afu", kSecAttrAccessibleAfterFirstUnlock), errSecSuccess)
        try KeychainControl.lock(all: false)
        XCTAssertEqual(read("wu").0, errSecInteractionNotAllowed)
        XCTAssertEqual(read("afu").1, "pw-afu", "AfterFirstUnlock items stay usable after lock")
        XCTAssertEqual(add("wu2"), errSecInteractionNotAllowed)
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "wu"] as NSDictionary,
                [kSecAttrLabel: "x"] as NSDictionary), errSecInteractionNotAllowed)
        let status = try KeychainControl.status()
        XCTAssertEqual(status.classes.first { $0.pdmn == "ak" }?.unlocked, false)
        XCTAssertEqual(status.classes.first { $0.pdmn == "ck" }?.unlocked, true)
        XCTAssertThrowsError(try KeychainControl.unlock(password: SecretBytes(copying: Array("wrong".utf8)))) { error in
            XCTAssertEqual((error as? KeychainControl.Failure)?.status, errSecAuthFailed)
        }
        try KeychainControl.unlock(password: SecretBytes(copying: Array("pw".utf8)))
        XCTAssertEqual(read("wu").1, "pw-wu")
        try KeychainControl.lock(all: true)
        XCTAssertEqual(read("afu").0, errSecInteractionNotAllowed)
        XCTAssertEqual(
            SecItemDelete(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked]
                    as NSDictionary),
            errSecSuccess, "delete works while locked")
    }

    func testUnreachableAgentFailsFastWithNotAvailable() throws {
        setenv("LATCHKEYD", "/nonexistent/latchkeyd", 1)
        AgentClient.shared.resetConnection()
        let start = ContinuousClock.now
        XCTAssertEqual(read("a").0, errSecNotAvailable)
        // At once, not after the 5 s start timeout (the bound is loose so that a loaded machine passes).
        XCTAssertLessThan(start.duration(to: .now), .seconds(2))
        XCTAssertEqual(add("a"), errSecNotAvailable)
    }

    func testAStalledClientDoesNotBlockOthers() throws {
        try createKeychain()
        XCTAssertEqual(add("a"), errSecSuccess)
        // A client that sends half a frame header and then nothing.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((runtimeDirectory + "/latchkey/agent.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(connected, 0)
        var partial: [UInt8] = [0, 0]
        XCTAssertEqual(send(fd, &partial, 2, 0), 2)
        defer { close(fd) }
        let start = ContinuousClock.now
        XCTAssertEqual(read("a").1, "pw-a")
        // Answered while the stalled connection still waits out its frame deadline (10 s).
        XCTAssertLessThan(start.duration(to: .now), .seconds(5))
        // An oversized frame is refused before anything is allocated; the agent stays up.
        var huge: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF]
        XCTAssertEqual(send(fd, &huge, 4, 0) >= 0, true)
        XCTAssertEqual(read("a").1, "pw-a")
    }

    func testConcurrentClients() throws {
        try createKeychain()
        final class Failures: @unchecked Sendable {
            private let lock = NSLock()
            private(set) var count = 0
            func record() {
                lock.lock()
                count += 1
                lock.unlock()
            }
        }
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for i in 0..<25 {
                let account = "w\(worker)-\(i)"
                let ok = AgentTests.add(account) == errSecSuccess && AgentTests.read(account).1 == "pw-\(account)"
                if !ok { failures.record() }
            }
        }
        XCTAssertEqual(failures.count, 0)
    }

    /// Kill the agent with SIGKILL in the middle of a stream of adds: every add that returned success is
    /// there after the restart, and the store opens cleanly.
    func testCrashDuringAddsLosesNothingThatSucceeded() throws {
        try createKeychain()
        let pid = try XCTUnwrap(agentPID())
        var succeeded: [String] = []
        var failed = false
        let killer = DispatchQueue(label: "killer")
        killer.asyncAfter(deadline: .now() + .milliseconds(300)) { kill(pid, SIGKILL) }
        // Adds until one fails because the agent died: however fast this machine's disk is, the kill
        // lands mid-stream (the stream stops after 60 s only if the kill never took effect).
        let end = Date().addingTimeInterval(60)
        var i = 0
        while !failed, Date() < end {
            let account = "crash-\(i)"
            i += 1
            if add(account, kSecAttrAccessibleAfterFirstUnlock) == errSecSuccess {
                succeeded.append(account)
            } else {
                failed = true  // the agent died mid-stream
            }
        }
        waitForExit(pid)
        XCTAssertGreaterThan(succeeded.count, 0)
        XCTAssertTrue(failed, "the agent should have been killed mid-stream")
        // The failed add may have started a new agent already (then hello reaches it). Otherwise let the
        // killed agent's socket go first: a call that connects while the dying process still holds it
        // is reset (ECONNRESET, -25291), and the next call must start a new agent instead.
        AgentClient.shared.resetConnection()
        if agentPID() == nil {
            waitUntilNothingListens()
            AgentClient.shared.resetConnection()
        }
        // The next call starts a new agent, which comes up locked: unlock, then check every success.
        AgentClient.shared.resetConnection()
        try KeychainControl.unlock(password: SecretBytes(copying: Array("pw".utf8)))
        XCTAssertNil(try KeychainControl.status().problem)
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitAll,
                    kSecReturnAttributes: true,
                ] as NSDictionary, &result), errSecSuccess)
        let present = Set(((result as? [[String: Any]]) ?? []).compactMap { $0[kSecAttrAccount as String] as? String })
        for account in succeeded { XCTAssertTrue(present.contains(account), "\(account) lost") }
    }
}
