import Foundation
import LatchkeyKeybag
import LatchkeySecrets
import LatchkeyTestSupport
import LatchkeyTransport
import LatchkeyWire
import XCTest

@testable import Latchkey

/// SO_PEERCRED: the agent serves its own user, lets root only hand off keys, and refuses everyone else
/// before reading a byte (docs/PROTOCOL.md §1 "Peer check"). Needs root to act as other users.
final class PeerTests: AgentTestCase {
    /// uid/gid of `nobody` on Debian.
    private let nobody: uid_t = 65534

    private func requireRoot() throws {
        try XCTSkipUnless(getuid() == 0, "needs root to connect as another user")
    }

    /// Opens the agent's private directories to everyone, so that only the peer check stands between
    /// another user and the agent.
    /// Only directories inside this test's own temporary tree are touched.
    private func exposeSocket(_ socketPath: String) {
        let testRoot = (runtimeDirectory as NSString).deletingLastPathComponent
        var path = (socketPath as NSString).deletingLastPathComponent
        while path.hasPrefix(testRoot + "/") || path == testRoot {
            chmod(path, 0o755)
            path = (path as NSString).deletingLastPathComponent
        }
        chmod(socketPath, 0o777)
    }

    func testPeerOfAnotherUidIsRefusedBeforeAnyByte() throws {
        try requireRoot()
        try createKeychain()
        let socketPath = AgentEndpoint.current().socketPath
        exposeSocket(socketPath)

        // Everything the child needs is prepared before fork: it then only makes system calls.
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(socketPath.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let hello = [UInt8](Request.hello.encode())
        let frame: [UInt8] = [0, 0, 0, UInt8(hello.count)] + hello
        let uid = nobody

        let pid = fork()
        if pid == 0 {
            guard setgroups(0, nil) == 0, setgid(uid) == 0, setuid(uid) == 0, getuid() == uid else { _exit(3) }
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard connected == 0 else { _exit(2) }
            _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var byte: UInt8 = 0
            let received = recv(fd, &byte, 1, 0)
            _exit(received > 0 ? 1 : 0)  // 0: closed without a byte, as required
        }
        XCTAssertGreaterThan(pid, 0)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let code = (status >> 8) & 0xff
        XCTAssertEqual(
            code, 0, code == 1 ? "the agent answered another user" : "child failed before the test (\(code))")

        // The agent is unharmed and still serves its own user.
        XCTAssertNotNil(agentPID())
    }

    func testRootMayOnlyHandOffKeys() throws {
        try requireRoot()
        // An agent of `nobody`, in directories owned by nobody.
        let base = NSTemporaryDirectory() + "lk-peer-\(UUID().uuidString.prefix(8))"
        let runtime = base + "/run", data = base + "/data"
        for dir in [base, runtime, data] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            chown(dir, nobody, nobody)
            chmod(dir, dir == base ? 0o755 : 0o700)
        }
        defer { try? FileManager.default.removeItem(atPath: base) }
        let asNobody = [
            "setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups",
            "env", "HOME=\(base)", "XDG_RUNTIME_DIR=\(runtime)", "XDG_DATA_HOME=\(data)",
            "LATCHKEYD=\(Self.binDirectory)/latchkeyd", Self.binDirectory + "/latchkey",
        ]
        let created = try run(
            asNobody + ["init", "--password-stdin", "--argon2-memory", "64", "--argon2-time", "1"],
            input: "pw\n")
        XCTAssertEqual(created.status, 0, created.err)
        XCTAssertEqual(try run(asNobody + ["lock", "--all"]).status, 0)
        defer { _ = try? run(["pkill", "-u", "\(nobody)", "-x", "latchkeyd"]) }

        // Root connects the way pam_latchkey does.
        let endpoint = AgentEndpoint(directory: runtime + "/latchkey")
        func ask(_ request: Request) throws -> Response {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                let bytes = Array(endpoint.socketPath.utf8)
                raw.copyBytes(from: bytes)
                raw[bytes.count] = 0
            }
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            XCTAssertEqual(rc, 0, "connect: \(String(cString: strerror(errno)))")
            try FrameIO.writeFrame(request.encode(), to: fd, deadline: .now + .seconds(5))
            return try Response.decode(
                FrameIO.readFrame(from: fd, maxLength: Wire.maxResponseFrame, deadline: .now + .seconds(5)))
        }

        XCTAssertEqual(try ask(.add(["class": .string("genp"), "acct": .string("x")])).status, errSecAuthFailed)
        XCTAssertEqual(try ask(.lock(all: true)).status, errSecAuthFailed)
        XCTAssertEqual(try ask(.unlock(password: SecretBytes(copying: Array("pw".utf8)))).status, errSecAuthFailed)
        XCTAssertEqual(try ask(.status).status, errSecAuthFailed, "root reads nothing, not even the status")
        XCTAssertEqual(try ask(.hello).status, 0)

        let keybag = try Keybag.load(path: data + "/latchkey/keybag")
        let wrong = try keybag.deriveMasterKey(password: SecretBytes(copying: Array("guess".utf8)))
        XCTAssertEqual(try ask(.keyHandoff(masterKey: wrong, deviceFactor: nil)).status, errSecAuthFailed)
        let master = try keybag.deriveMasterKey(password: SecretBytes(copying: Array("pw".utf8)))
        let factor = try keybag.deviceFactor(machineSecret: SecretBytes(count: 32), uid: nobody)
        XCTAssertEqual(try ask(.keyHandoff(masterKey: master, deviceFactor: factor)).status, 0)
        XCTAssertTrue(try Keybag.load(path: data + "/latchkey/keybag").isDeviceBound, "root's factor binds the keybag")
        let token = [UInt8](repeating: 1, count: 16)
        XCTAssertEqual(try ask(.sessionOpen(token: token)).status, 0)

        let unlocked = try run(asNobody + ["status"])
        XCTAssertTrue(unlocked.out.contains("login sessions: 1"), unlocked.out)
        XCTAssertTrue(
            unlocked.out.range(of: #"WhenUnlocked\s+ak\s+unlocked"#, options: .regularExpression) != nil, unlocked.out)

        // The last session closing locks every password class.
        XCTAssertEqual(try ask(.sessionClose(token: token)).status, 0)
        let locked = try run(asNobody + ["status"])
        XCTAssertTrue(
            locked.out.range(of: #"AfterFirstUnlock\s+ck\s+locked"#, options: .regularExpression) != nil, locked.out)

        // An agent started after the login (restarted, then unlocked again) knows no session: the close
        // of one it never saw open still locks, rather than leave the keychain open after the logout.
        XCTAssertEqual(try ask(.keyHandoff(masterKey: master, deviceFactor: factor)).status, 0)
        let reopened = try run(asNobody + ["status"])
        XCTAssertFalse(reopened.out.contains("login sessions"), reopened.out)
        XCTAssertTrue(
            reopened.out.range(of: #"AfterFirstUnlock\s+ck\s+unlocked"#, options: .regularExpression) != nil,
            reopened.out)
        XCTAssertEqual(try ask(.sessionClose(token: [UInt8](repeating: 9, count: 16))).status, 0)
        let relocked = try run(asNobody + ["status"])
        XCTAssertTrue(
            relocked.out.range(of: #"AfterFirstUnlock\s+ck\s+locked"#, options: .regularExpression) != nil, relocked.out
        )
    }

    /// Login sessions are root's (pam_latchkey, docs/PROTOCOL.md §4a): a process of the agent's own user
    /// can neither open one (which would keep the keychain unlocked past the logout) nor close one, and
    /// gets errSecAuthFailed with a message; root's open and close work as before.
    func testOnlyRootOpensAndClosesSessions() throws {
        try requireRoot()
        let base = NSTemporaryDirectory() + "lk-peer-\(UUID().uuidString.prefix(8))"
        let runtime = base + "/run", data = base + "/data"
        for dir in [base, runtime, data] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            chown(dir, nobody, nobody)
            chmod(dir, dir == base ? 0o755 : 0o700)
        }
        defer { try? FileManager.default.removeItem(atPath: base) }
        let asNobody = [
            "setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups",
            "env", "HOME=\(base)", "XDG_RUNTIME_DIR=\(runtime)", "XDG_DATA_HOME=\(data)",
            "LATCHKEYD=\(Self.binDirectory)/latchkeyd",
        ]
        let created = try run(
            asNobody + [
                Self.binDirectory + "/latchkey", "init", "--password-stdin", "--argon2-memory", "64",
                "--argon2-time", "1",
            ],
            input: "pw\n")
        XCTAssertEqual(created.status, 0, created.err)
        defer { _ = try? run(["pkill", "-u", "\(nobody)", "-x", "latchkeyd"]) }
        let socketPath = runtime + "/latchkey/agent.sock"
        let token = [UInt8](repeating: 7, count: 16)
        let logind = [0x08, 0, 0, 0, 1, 0, 0, 0, 6] + Array("logind".utf8) + [0x01, 0, 0, 0, 2] + Array("c1".utf8)

        // The user's own process, on one connection: open, open with details, close.
        let requests: [[UInt8]] = [[0x01, 0x31] + token, [0x01, 0x33] + token + logind, [0x01, 0x32] + token]
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            out = []
            for hexpayload in sys.argv[2:]:
                payload = bytes.fromhex(hexpayload)
                s.sendall(len(payload).to_bytes(4, "big") + payload)
                length = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
                reply = s.recv(length, socket.MSG_WAITALL)
                out.append(str(int.from_bytes(reply[1:5], "big", signed=True)))
            print(" ".join(out))
            # The message of the last reply (no value precedes it in these replies).
            print(reply[8:].decode() if reply[5] == 2 else "")
            """
        let hex = requests.map { $0.map { String(format: "%02x", $0) }.joined() }
        let user = try run(asNobody + ["/usr/bin/python3", "-I", "-c", script, socketPath] + hex)
        XCTAssertEqual(user.status, 0, user.err)
        let lines = user.out.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.first, "-25293 -25293 -25293", "a process of the user opened or closed a session")
        XCTAssertTrue(lines.dropFirst().first?.contains("only root") == true, user.out)
        let afterUser = try run(asNobody + [Self.binDirectory + "/latchkey", "status"])
        XCTAssertFalse(afterUser.out.contains("login sessions"), afterUser.out)

        // Root (pam_latchkey) opens a session; the user's process cannot close it; root can.
        let rootFD = RawConnections.connect(socketPath)
        XCTAssertGreaterThanOrEqual(rootFD, 0)
        defer { close(rootFD) }
        func rootAsks(_ request: Request) throws -> Response {
            try FrameIO.writeFrame(request.encode(), to: rootFD, deadline: .now + .seconds(5))
            return try Response.decode(
                FrameIO.readFrame(from: rootFD, maxLength: Wire.maxResponseFrame, deadline: .now + .seconds(5)))
        }
        XCTAssertEqual(try rootAsks(.sessionOpen(token: token)).status, 0)
        let closing = try run(asNobody + ["/usr/bin/python3", "-I", "-c", script, socketPath, hex[2]])
        XCTAssertTrue(closing.out.hasPrefix("-25293\n"), closing.out + closing.err)
        let open = try run(asNobody + [Self.binDirectory + "/latchkey", "status"])
        XCTAssertTrue(open.out.contains("login sessions: 1"), open.out)
        XCTAssertEqual(try rootAsks(.sessionClose(token: token)).status, 0)
        let closed = try run(asNobody + [Self.binDirectory + "/latchkey", "status"])
        XCTAssertFalse(closed.out.contains("login sessions"), closed.out)
    }

    /// Runs a command through PATH; returns exit status, stdout and stderr.
    private func run(_ arguments: [String], input: String? = nil) throws -> (status: Int32, out: String, err: String) {
        let result = try TestProcess.run("/usr/bin/env", arguments, input: input)
        return (result.status, result.out, result.err)
    }
}
