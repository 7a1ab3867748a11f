import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// What the library trusts before it sends a byte, and how long it waits to connect: the socket must be
/// in the user's own private directory (opened without following a symbolic link), served by a process
/// of the user (SO_PEERCRED), and a connect that the agent never accepts ends within the start time.
final class ClientConnectionTests: AgentTestCase {
    private var impostors: [Process] = []

    override func tearDown() {
        for impostor in impostors where impostor.isRunning {
            kill(impostor.processIdentifier, SIGKILL)
            impostor.waitUntilExit()
        }
        super.tearDown()
    }

    /// `$XDG_RUNTIME_DIR/latchkey` is a symbolic link to a directory of the user's where another program
    /// of the user listens (in /tmp, another user could swap such a link between a check and the
    /// connect). The library does not follow it: the listener receives nothing.
    func testASymbolicLinkInPlaceOfTheSocketDirectoryIsNotFollowed() throws {
        let elsewhere = runtimeDirectory + "/elsewhere"
        try FileManager.default.createDirectory(
            atPath: elsewhere, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        XCTAssertEqual(symlink(elsewhere, runtimeDirectory + "/latchkey"), 0)
        let impostor = try startImpostor(socketPath: elsewhere + "/agent.sock", becoming: nil)

        let result = try cliWithin(30, ["status"])
        let received = impostorReport(impostor)
        XCTAssertEqual(received, "no connection", "the library followed the link and connected: \(received)")
        XCTAssertEqual(result.status, 1, result.err)
        XCTAssertTrue(result.err.contains("(-25291)"), result.err)
    }

    /// A socket file owned by the user, in the user's private directory, but listened on by a process of
    /// another user (bound by root, which then became `nobody` before listen(2), so SO_PEERCRED names
    /// nobody). The library checks the peer after connecting and sends nothing: the listener receives
    /// no byte and the call fails saying why.
    func testASocketServedByAnotherUserGetsNoRequest() throws {
        try XCTSkipUnless(getuid() == 0, "needs root to listen as another user on a socket the user owns")
        let directory = runtimeDirectory + "/latchkey"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let impostor = try startImpostor(socketPath: directory + "/agent.sock", becoming: 65534)

        let result = try cliWithin(30, ["status"])
        let received = impostorReport(impostor)
        XCTAssertTrue(
            received == "no connection" || received == "0 bytes",
            "a process of another user received the request: \(received)")
        XCTAssertEqual(result.status, 1, result.err)
        XCTAssertTrue(result.err.contains("uid 65534"), result.err)
    }

    /// A stopped agent whose listen backlog is full (its 64 places and one more taken by connections it
    /// never accepts): connect(2) would block until someone accepts. The CLI gives up within its start
    /// time and says what it found.
    func testAStoppedAgentWithAFullBacklogFailsWithinTheStartTime() throws {
        try createKeychain()
        let pid = try XCTUnwrap(agentPID())
        AgentClient.shared.resetConnection()
        XCTAssertEqual(kill(pid, SIGSTOP), 0)
        var pending: [Int32] = []
        defer {
            kill(pid, SIGCONT)
            for fd in pending { close(fd) }
        }
        // Non-blocking connects until the kernel says the queue is full (EAGAIN).
        while pending.count < 512 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            let connected = Self.connect(fd, to: runtimeDirectory + "/latchkey/agent.sock")
            if connected != 0 {
                let error = errno
                close(fd)
                XCTAssertEqual(error, EAGAIN, String(cString: strerror(error)))
                break
            }
            pending.append(fd)
        }
        XCTAssertGreaterThanOrEqual(pending.count, 64, "the backlog never filled")

        let result = try cliWithin(30, ["status"])
        XCTAssertEqual(
            result.status, 1, "status \(result.status) (9 or 137: still blocked after 30 s, and killed): \(result.err)")
        XCTAssertTrue(result.err.contains("accepts no connections"), result.err)
    }

    // MARK: Helpers

    /// A Python listener on `socketPath`, as root that becomes `uid` after bind(2) and before listen(2)
    /// when given. It waits up to 20 s for one connection and reads what comes within 2 s of it; then it
    /// reports "no connection" or "N bytes" on standard output.
    private func startImpostor(socketPath: String, becoming uid: uid_t?) throws -> (Process, Pipe) {
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(sys.argv[1])
            if len(sys.argv) > 2:
                uid = int(sys.argv[2])
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            s.listen(4)
            print("listening", flush=True)
            s.settimeout(20)
            try:
                c, _ = s.accept()
            except socket.timeout:
                print("no connection", flush=True)
                sys.exit(0)
            c.settimeout(2)
            got = b""
            try:
                while True:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            except socket.timeout:
                pass
            print("%d bytes" % len(got), flush=True)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-I", "-c", script, socketPath] + (uid.map { [String($0)] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        impostors.append(process)
        XCTAssertEqual(Self.line(from: output), "listening")
        return (process, output)
    }

    /// What the impostor reported. The CLI has finished, so an impostor that was never connected to
    /// is told to give up at once (SIGTERM), and reports nothing.
    private func impostorReport(_ impostor: (Process, Pipe)) -> String {
        let (process, output) = impostor
        // A connection, if one came, was closed by the CLI when it exited, so the impostor has read all
        // of it and reports at once: wait a bounded time, then take it that none came.
        let done = Poll.until(within: 3, every: 0.05) { !process.isRunning }
        if !done { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        let line = Self.line(from: output)
        return done ? line : "no connection"
    }

    private static func line(from pipe: Pipe) -> String {
        var line = Data()
        while true {
            let byte = pipe.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line += byte
        }
        return String(decoding: line, as: UTF8.self)
    }

    private static func connect(_ fd: Int32, to path: String) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    /// The CLI under a deadline: `timeout` kills it (exit 137) rather than let a stuck connect hang the test.
    private func cliWithin(_ seconds: Int, _ arguments: [String]) throws -> TestProcess.Output {
        try TestProcess.run(
            "/usr/bin/timeout", ["-s", "KILL", String(seconds), Self.binDirectory + "/latchkey"] + arguments)
    }
}
