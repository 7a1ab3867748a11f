import Foundation
import LatchkeySecrets
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Runs each end-to-end test against a fresh agent in temporary XDG directories: the library starts the
/// real `latchkeyd` on demand, exactly as it does for users.
class AgentTestCase: XCTestCase {
    var runtimeDirectory = ""
    var dataDirectory = ""

    /// Where `swift build` put the executables (the test bundle sits beside them).
    static var binDirectory: String { TestProcess.binDirectory }

    override func setUpWithError() throws {
        let base = NSTemporaryDirectory() + "lk-e2e-\(UUID().uuidString.prefix(8))"
        runtimeDirectory = base + "/run"
        dataDirectory = base + "/data"
        try FileManager.default.createDirectory(
            atPath: runtimeDirectory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        setenv("XDG_RUNTIME_DIR", runtimeDirectory, 1)
        setenv("XDG_DATA_HOME", dataDirectory, 1)
        setenv("LATCHKEYD", Self.binDirectory + "/latchkeyd", 1)
        AgentClient.shared.resetConnection()
    }

    override func tearDown() {
        stopAgent()
        AgentClient.shared.resetConnection()
    }

    /// Creates the keychain with cheap Argon2id parameters (tests only) and password "pw".
    func createKeychain() throws {
        try KeychainControl.create(
            password: SecretBytes(copying: Array("pw".utf8)),
            options: .init(timeCost: 1, memoryKiB: 8192, parallelism: 1, allowWeak: true))
    }

    /// The agent's pid, from its lock file holder (the pid reported by `hello`).
    func agentPID() -> pid_t? {
        let response = AgentClient.shared.send(.hello)
        guard case .dictionary(let d)? = response.value, case .int(let pid)? = d["pid"] else { return nil }
        return pid_t(pid)
    }

    func stopAgent() {
        if let pid = agentPID() {
            kill(pid, SIGTERM)
            waitForExit(pid)
        }
    }

    /// Waits until `pid` is gone or a zombie (the daemonised agent is reparented, and PID 1 in a
    /// container may never reap it).
    func waitForExit(_ pid: pid_t) {
        TestProcess.waitForExit(pid)
    }

    /// Waits until nothing listens on the agent socket any more (a killed agent's socket is gone with
    /// it), so that the next call starts a new agent instead of reaching the dying one.
    func waitUntilNothingListens() {
        let path = Array((runtimeDirectory + "/latchkey/agent.sock").utf8)
        for _ in 0..<500 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            close(fd)
            if connected != 0 { return }
            usleep(10_000)
        }
    }

    /// Runs the `latchkey` command with `input` on stdin; returns exit status, stdout and stderr.
    @discardableResult
    func cli(_ arguments: [String], input: String? = nil) throws -> (status: Int32, out: String, err: String) {
        let result = try TestProcess.run(Self.binDirectory + "/latchkey", arguments, input: input)
        return (result.status, result.out, result.err)
    }
}

/// Quinn's helper from "Calling Security Framework from Swift", as the seed's dumpGenericPasswords()
/// uses it: runs a SecItem call and throws its status.
func secCall<Result>(_ body: (_ resultPtr: UnsafeMutablePointer<Result?>) -> OSStatus) throws -> Result {
    var result: Result? = nil
    let err = body(&result)
    guard err == errSecSuccess else {
        throw NSError(domain: NSOSStatusErrorDomain, code: Int(err), userInfo: nil)
    }
    return result!
}
