import Foundation
import LatchkeyApplications
import XCTest

@testable import LatchkeyAgent

#if canImport(Glibc)
    import Glibc
#endif

/// Connect, then `exec`: the identity taken at `accept` carries only what the identified process
/// writes after it was identified (`IdentityStanding`), with real processes that run other programs.
final class IdentityStandingTests: XCTestCase {
    private var peers: PeerSocket!

    override func setUpWithError() throws {
        peers = try PeerSocket()
    }

    override func tearDown() {
        peers = nil
    }

    private func accept() throws -> (connection: Int32, peer: PeerCredentials) {
        let connection = try XCTUnwrap(peers.acceptNext(), "no connection")
        return (connection, try XCTUnwrap(PeerCredentials(fd: connection)))
    }

    /// Waits until `connection` has something to read (or is hung up); true when it has within 10 s.
    private func readable(_ connection: Int32) -> Bool {
        var ready = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
        return poll(&ready, 1, 10_000) > 0
    }

    /// Reads what waits on `connection` (the server reading a request).
    private func drain(_ connection: Int32) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(connection, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return count > 0 ? Array(buffer[0..<count]) : []
    }

    /// The process writes its request and then runs another program before the agent identifies it:
    /// the identity is that program's (the kernel cannot say otherwise), and so the request, written
    /// by the first program, carries none; nor does the next until one is written after the
    /// identification.
    func testARequestWrittenBeforeAnExecCarriesNoIdentity() throws {
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(b"written by python")
            os.set_inheritable(s.fileno(), True)
            os.execv("/usr/bin/sleep", ["sleep", "60"])
            """
        let client = try ScriptedClient(python: script, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (connection, peer) = try accept()
        defer { close(connection) }
        XCTAssertTrue(ScriptedClient.waitUntil(client.pid, runs: "/usr/bin/sleep"))
        var (identity, standing) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(identity.executable?.path, "/usr/bin/sleep", "what the process runs when it is identified")
        XCTAssertEqual(standing, .unconfirmed)

        standing.beforeReading(connection: connection, identified: identity)
        let carried = standing.identity(for: identity)
        XCTAssertEqual(String(decoding: drain(connection), as: UTF8.self), "written by python")
        standing.afterReading(connection: connection)
        XCTAssertNil(carried.executable, "sleep's identity carried python's request")
        XCTAssertNil(carried.flatpakID)
        XCTAssertNil(carried.snapName)
        XCTAssertEqual(carried.pid, peer.pid)
        guard case .unconfirmed = carried.doubts.first else { return XCTFail("\(carried.doubts)") }
        // Read to the end: what comes next is written after the identification.
        XCTAssertEqual(standing, .awaitingWriter)
    }

    /// The case: a process connects, is identified, and then runs another program that writes
    /// on the connection it inherited: the request carries the identity taken at `accept` (the
    /// first program's), not the second's.
    func testAProcessThatExecsAfterConnectingKeepsItsIdentity() throws {
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            print("connected", flush=True)
            sys.stdin.readline()
            os.set_inheritable(s.fileno(), True)
            os.execv("/bin/sh", ["sh", "-c", "printf 'written by sh' >&%d; exec sleep 60" % s.fileno()])
            """
        let client = try ScriptedClient(python: script, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (connection, peer) = try accept()
        defer { close(connection) }
        client.expect("connected")
        var (identity, standing) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(identity.executable?.path, CallerIdentificationTests.python)
        XCTAssertEqual(standing, .awaitingWriter)

        client.send()
        XCTAssertTrue(readable(connection))
        XCTAssertNotEqual(ScriptedClient.executable(of: client.pid), CallerIdentificationTests.python, "it ran sh")
        standing.beforeReading(connection: connection, identified: identity)
        XCTAssertEqual(standing, .confirmed)
        XCTAssertEqual(String(decoding: drain(connection), as: UTF8.self), "written by sh")
        standing.afterReading(connection: connection)
        XCTAssertEqual(standing.identity(for: identity), identity, "the identity taken at accept")
        XCTAssertEqual(standing.identity(for: identity).executable?.path, CallerIdentificationTests.python)
    }

    /// The impostor's way around the above: connect, leave the connection to a child, and run the
    /// program whose identity it wants, then let the child write. The writer is not the process that
    /// was identified, so the connection carries no identity, for good.
    func testAConnectionHandedToAnotherProcessCarriesNoIdentity() throws {
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            if os.fork() == 0:
                sys.stdin.readline()
                s.sendall(b"written by the child")
                sys.stdin.readline()
                s.sendall(b"and again")
                sys.stdin.readline()
                os._exit(0)
            os.execv("/usr/bin/sleep", ["sleep", "60"])
            """
        let client = try ScriptedClient(python: script, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (connection, peer) = try accept()
        defer { close(connection) }
        XCTAssertTrue(ScriptedClient.waitUntil(client.pid, runs: "/usr/bin/sleep"))
        var (identity, standing) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(identity.executable?.path, "/usr/bin/sleep")
        XCTAssertEqual(identity.doubts, [])
        XCTAssertEqual(standing, .awaitingWriter)

        for expected in ["written by the child", "and again"] {
            client.send()
            XCTAssertTrue(readable(connection))
            standing.beforeReading(connection: connection, identified: identity)
            XCTAssertEqual(standing, .refused)
            XCTAssertEqual(String(decoding: drain(connection), as: UTF8.self), expected)
            standing.afterReading(connection: connection)
            let carried = standing.identity(for: identity)
            XCTAssertNil(carried.executable, "sleep's identity carried the child's request")
            guard case .unconfirmed = carried.doubts.first else { return XCTFail("\(carried.doubts)") }
        }
    }

    /// The identified process exits and its pid is given to another process that holds the connection
    /// (the attacker's way: fork until the pid comes back; here root sets `ns_last_pid` so the next fork
    /// gets it at once). The writer's pid is the identified one, but it is not the identified process:
    /// no identity. Root only (`ns_last_pid`).
    func testAReusedPidDoesNotCarryTheIdentity() throws {
        guard access("/proc/sys/kernel/ns_last_pid", W_OK) == 0 else {
            throw XCTSkip("ns_last_pid is not writable (root in the initial pid namespace needed)")
        }
        let script = """
            import os, socket, sys, time
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            identified = os.getpid()
            if os.fork() == 0:
                # The holder: out of the client's process group, so that it outlives the identified process.
                os.setsid()
                while os.path.exists("/proc/%d" % identified):
                    time.sleep(0.005)
                for attempt in range(50):
                    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                        f.write(str(identified - 1))
                    child = os.fork()
                    if child == 0:
                        if os.getpid() != identified:
                            os._exit(3)
                        print("reused %d" % os.getpid(), flush=True)
                        s.sendall(b"written by a reused pid")
                        time.sleep(60)
                        os._exit(0)
                    if child == identified:
                        os._exit(0)
                    os.waitpid(child, 0)
                os._exit(1)
            print("connected", flush=True)
            sys.stdin.readline()
            """
        let client = try ScriptedClient(python: script, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (connection, peer) = try accept()
        defer { close(connection) }
        client.expect("connected")
        var (identity, standing) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(identity.executable?.path, CallerIdentificationTests.python)
        XCTAssertNotNil(identity.started)
        XCTAssertEqual(standing, .awaitingWriter)

        client.killAndReap()
        let reused = try XCTUnwrap(client.line(), "the holder could not get the pid back")
        XCTAssertEqual(reused, "reused \(peer.pid)")
        defer { kill(peer.pid, SIGKILL) }
        XCTAssertTrue(readable(connection))
        standing.beforeReading(connection: connection, identified: identity)
        XCTAssertEqual(standing, .refused, "another process with the identified pid wrote")
        XCTAssertEqual(String(decoding: drain(connection), as: UTF8.self), "written by a reused pid")
        XCTAssertNil(standing.identity(for: identity).executable)
    }

    /// A process identified with another start time than the one that runs under its pid now is not
    /// that process (the check the test above relies on, without a reused pid).
    func testAnotherStartTimeIsAnotherProcess() throws {
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            print("connected", flush=True)
            sys.stdin.readline()
            s.sendall(b"request")
            sys.stdin.readline()
            """
        let client = try ScriptedClient(python: script, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (connection, peer) = try accept()
        defer { close(connection) }
        client.expect("connected")
        var (identity, standing) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        let started = try XCTUnwrap(identity.started)
        XCTAssertTrue(ProcessInspection.isRunning(pid: peer.pid, started: started))
        XCTAssertFalse(ProcessInspection.isRunning(pid: peer.pid, started: started + 1))
        identity.started = started + 1
        client.send()
        XCTAssertTrue(readable(connection))
        standing.beforeReading(connection: connection, identified: identity)
        XCTAssertEqual(standing, .refused)
    }

    /// A library client's way: `hello` written at once (perhaps before the agent identified it), its
    /// answer awaited, then the real request: the first carries nothing, the second the identity.
    func testARoundTripFirstConfirmsTheNextRequest() throws {
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            s.sendall(b"hello")
            s.recv(16)
            s.sendall(b"request")
            sys.stdin.readline()
            """
        let client = try ScriptedClient(python: script, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (connection, peer) = try accept()
        defer { close(connection) }
        XCTAssertTrue(readable(connection))
        var (identity, standing) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(standing, .unconfirmed, "hello waited when it was identified")
        standing.beforeReading(connection: connection, identified: identity)
        XCTAssertNil(standing.identity(for: identity).executable)
        XCTAssertEqual(String(decoding: drain(connection), as: UTF8.self), "hello")
        standing.afterReading(connection: connection)
        XCTAssertEqual(standing, .awaitingWriter)
        XCTAssertEqual(send(connection, "answer", 6, Int32(MSG_NOSIGNAL)), 6)

        XCTAssertTrue(readable(connection))
        standing.beforeReading(connection: connection, identified: identity)
        XCTAssertEqual(standing, .confirmed)
        XCTAssertEqual(String(decoding: drain(connection), as: UTF8.self), "request")
        XCTAssertEqual(standing.identity(for: identity), identity)
        XCTAssertEqual(identity.executable?.path, CallerIdentificationTests.python)
    }
}
