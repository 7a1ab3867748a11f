import Foundation
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Root hands the key only to the real agent (pam/peer.c): a process of the user that holds the agent
/// socket, or the trusted agent started with LD_PRELOAD, still gets its session registered but never
/// the master key; the same agent started cleanly (by the module, or by the CLI even from a shell
/// with loader variables) gets it.
final class PAMAgentIdentityTests: PAMTestCase {
    var socketDirectory: String { runtime + "/latchkey" }

    /// An impostor of the user's: python3 on the agent socket, answering every request with success
    /// and recording its opcode. The login works; the impostor hears of the session, never the key.
    func testImpostorOnTheSocketGetsNoKey() throws {
        try createKeychainWithItem()
        stopUserProcesses()
        let record = runtime + "/impostor-requests"
        let script = """
            import os, socket, sys
            directory, record = sys.argv[1], sys.argv[2]
            os.makedirs(directory, 0o700, exist_ok=True)
            path = directory + "/agent.sock"
            if os.path.lexists(path):
                os.unlink(path)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            listener.listen(8)
            if os.fork():
                os._exit(0)
            os.setsid()
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            # Nothing of the test's (its output pipes, Foundation's own descriptors) stays open here.
            os.closerange(3, listener.fileno())
            os.closerange(listener.fileno() + 1, 65536)
            def read(connection, n):
                data = b""
                while len(data) < n:
                    more = connection.recv(n - len(data))
                    if not more:
                        raise EOFError
                    data += more
                return data
            while True:
                connection, _ = listener.accept()
                try:
                    while True:
                        payload = read(connection, int.from_bytes(read(connection, 4), "big"))
                        with open(record, "a") as f:
                            f.write("%02x\\n" % payload[1])
                        connection.sendall(bytes([0, 0, 0, 6, 1, 0, 0, 0, 0, 0]))
                except Exception:
                    pass
                connection.close()
            """
        let impostor = try asUser(["/usr/bin/python3", "-c", script, socketDirectory, record])
        XCTAssertEqual(impostor.status, 0, impostor.err)
        let service = try standardService()

        let login = try pamtester(service, ["authenticate", "open_session"], input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        let opcodes = (try? String(contentsOfFile: record, encoding: .utf8))?.split(separator: "\n") ?? []
        XCTAssertTrue(opcodes.contains("31"), "the module did not talk to the impostor at all: \(opcodes)")
        XCTAssertFalse(opcodes.contains("30"), "the impostor was handed the key: \(opcodes)")
    }

    /// The trusted latchkeyd, started by a process of the user with a harmless library preloaded,
    /// serves the keychain but gets no key at a login: the keychain stays locked.
    func testAgentStartedWithLDPreloadGetsNoKey() throws {
        try createKeychainWithItem()
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        stopUserProcesses()
        let library = try emptyLibrary()
        // (Its output elsewhere: the daemon would keep this test's pipes open, and `run` wait for it.)
        let start = try asUser([
            "/usr/bin/env", "LD_PRELOAD=" + library, "/bin/sh", "-c",
            "exec \"$0\" --daemon </dev/null >/dev/null 2>&1", agentPath,
        ])
        XCTAssertEqual(start.status, 0, start.err)
        // --daemon returns before the socket listens; the CLI would start an agent of its own meanwhile.
        XCTAssertTrue(Poll.until(within: 10) { fileInfo(socketDirectory + "/agent.sock") != nil })
        XCTAssertEqual(agentsWithEnvironment("LD_PRELOAD=").count, 1, "precondition: the preloaded agent serves")
        XCTAssertNil(try readItem(), "precondition: the item is locked")
        let service = try standardService()

        let login = try pamtester(service, ["authenticate", "open_session"], input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        XCTAssertNil(try readItem(), "the agent started with LD_PRELOAD was handed the key")
        XCTAssertEqual(try classState("ck"), "locked")
        XCTAssertEqual(agentsWithEnvironment("LD_PRELOAD=").count, 1, "the preloaded agent no longer serves")
    }

    /// The CLI run from a shell with loader variables starts the agent without them, so logins still
    /// unlock it.
    func testAgentTheCLIStartsFromAShellWithLoaderVariablesGetsTheKey() throws {
        try createKeychainWithItem()
        stopUserProcesses()
        let lock = try asUser([
            "/usr/bin/env", "LD_LIBRARY_PATH=/nonexistent", "SWIFT_BACKTRACE=enable=no",
            Self.binDirectory + "/latchkey", "lock", "--all",
        ])
        XCTAssertEqual(lock.status, 0, lock.err)
        XCTAssertEqual(agentsWithEnvironment("LD_LIBRARY_PATH=").count, 0, "the CLI passed LD_LIBRARY_PATH on")
        XCTAssertNil(try readItem(), "precondition: the item is locked")
        let service = try standardService()

        // A login process that stays: the agent ends the session of one that is gone (issue 10, part 2).
        let login = try login(service, input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        XCTAssertEqual(try readItem(), "s3cret", "the agent the CLI started did not get the key")
    }

    /// A shared object with nothing in it, root's, for LD_PRELOAD.
    func emptyLibrary() throws -> String {
        let source = base + "/empty.c"
        let library = base + "/empty.so"
        try "int latchkey_test_empty(void) { return 0; }\n".write(toFile: source, atomically: true, encoding: .utf8)
        let cc = try Self.run(["/usr/bin/cc", "-shared", "-fPIC", "-o", library, source])
        XCTAssertEqual(cc.status, 0, cc.err)
        return library
    }

    /// The user's latchkeyd processes whose initial environment has an entry starting with `prefix`.
    func agentsWithEnvironment(_ prefix: String) -> [pid_t] {
        userPIDs().filter { pid in
            guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"),
                exe.hasSuffix("/latchkeyd"),
                let environment = TestProcess.readProcFile("/proc/\(pid)/environ")
            else { return false }
            return environment.split(separator: "\0").contains { $0.hasPrefix(prefix) }
        }
    }
}
