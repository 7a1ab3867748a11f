import Foundation
import LatchkeyApplications
import XCTest

@testable import LatchkeyAgent

#if canImport(Glibc)
    import Glibc
#endif

/// Who is calling (issue 12 §1): real client processes connect to a real socket, and the agent's
/// identification reads them as it does at `accept`.
final class CallerIdentificationTests: XCTestCase {
    static let python = "/usr/bin/python3.11"
    /// Connects, says so, and waits for a line.
    static let connectAndWait = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
        print("connected", flush=True)
        sys.stdin.readline()
        """

    private var peers: PeerSocket!

    override func setUpWithError() throws {
        peers = try PeerSocket()
    }

    override func tearDown() {
        peers = nil
    }

    /// Starts `client`, accepts its connection and identifies it as the agent does.
    private func identify(
        _ client: ScriptedClient, file: StaticString = #filePath, line: UInt = #line
    ) throws -> (identity: CallerIdentity, standing: IdentityStanding, connection: Int32) {
        let connection = try XCTUnwrap(peers.acceptNext(), "no connection", file: file, line: line)
        let peer = try XCTUnwrap(PeerCredentials(fd: connection), file: file, line: line)
        let (identity, standing) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(identity.uid, getuid(), file: file, line: line)
        return (identity, standing, connection)
    }

    private func fileKey(_ path: String) throws -> (UInt64, UInt64) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw NSError(domain: "stat", code: Int(errno)) }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    func testAPlainProgramIsItsExecutableWithoutDoubts() throws {
        let client = try ScriptedClient(python: Self.connectAndWait, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (identity, standing, connection) = try identify(client)
        defer { close(connection) }
        client.expect("connected")
        XCTAssertEqual(identity.pid, client.pid)
        XCTAssertEqual(identity.executable?.path, Self.python)
        let (device, inode) = try fileKey(Self.python)
        XCTAssertEqual(identity.executable?.device, device)
        XCTAssertEqual(identity.executable?.inode, inode)
        XCTAssertEqual(identity.doubts, [])
        XCTAssertNil(identity.flatpakID)
        XCTAssertNil(identity.snapName)
        // It wrote nothing: its first request decides.
        XCTAssertEqual(standing, .awaitingWriter)
    }

    /// Every variable of the list counts, wherever it stands in the environment (after 10 KiB of
    /// others, across the reads); names that merely contain one do not.
    func testLoaderVariablesCostTheIdentity() throws {
        let library = try XCTUnwrap(Self.loadedLibrary("libc.so.6"), "libc is not mapped in the test process")
        let padding = "PADDING=" + String(repeating: "x", count: 10_000)
        let cases: [(environment: [String], expected: String?)] = [
            (["LD_PRELOAD=\(library)"], "LD_PRELOAD"),
            ([padding, "LD_LIBRARY_PATH=/nonexistent"], "LD_LIBRARY_PATH"),
            (["LD_AUDIT=\(library)", padding], "LD_AUDIT"),
            ([padding, padding, "SWIFT_BACKTRACE=enable=yes"], "SWIFT_BACKTRACE"),
            (["GCONV_PATH=/nonexistent"], "GCONV_PATH"),
            (["OPENSSL_CONF=/nonexistent"], "OPENSSL_CONF"),
            (["XLD_PRELOAD=\(library)", "NOTE=LD_PRELOAD=x", "LD_PRELOADED=1", padding], nil),
        ]
        for (environment, expected) in cases {
            let client = try ScriptedClient(
                python: Self.connectAndWait, [peers.path], environment: ["PATH=/usr/bin:/bin"] + environment)
            defer { withExtendedLifetime(client) {} }
            let (identity, _, connection) = try identify(client)
            defer { close(connection) }
            client.expect("connected")
            XCTAssertEqual(identity.executable?.path, Self.python)
            XCTAssertEqual(identity.doubts, expected.map { [.loaderVariable($0)] } ?? [], "\(expected ?? "none")")
        }
    }

    /// An environment past the cap is not read through: the caller gets no identity rather than an
    /// unread variable at its end.
    func testAnEnvironmentPastTheCapIsUnreadable() throws {
        let large = (0..<3).map { "LARGE\($0)=" + String(repeating: "y", count: 100_000) }
        let client = try ScriptedClient(
            python: Self.connectAndWait, [peers.path], environment: ["PATH=/usr/bin:/bin"] + large)
        defer { withExtendedLifetime(client) {} }
        let (identity, _, connection) = try identify(client)
        defer { close(connection) }
        client.expect("connected")
        XCTAssertEqual(identity.doubts.count, 1)
        guard case .unreadable = identity.doubts.first else { return XCTFail("\(identity.doubts)") }
    }

    /// A process that its parent traces (PTRACE_TRACEME) connects: its tracer is named.
    func testATracedCallerIsDoubted() throws {
        let script = """
            import ctypes, os, socket, sys
            child = os.fork()
            if child == 0:
                if ctypes.CDLL(None, use_errno=True).ptrace(0, 0, None, None) != 0:
                    print("ptrace failed", flush=True)
                    os._exit(1)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sys.argv[1])
                print("connected", flush=True)
                sys.stdin.readline()
                os._exit(0)
            os.waitpid(child, 0)
            """
        let client = try ScriptedClient(python: script, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let (identity, _, connection) = try identify(client)
        defer { close(connection) }
        client.expect("connected")
        XCTAssertNotEqual(identity.pid, client.pid, "the forked child connects")
        XCTAssertEqual(identity.doubts, [.traced(by: client.pid)])
        XCTAssertEqual(identity.executable?.path, Self.python)
    }

    /// A copy of an executable that is removed, or replaced by another file at its path, after the
    /// process started: the path no longer says what runs.
    func testADeletedOrReplacedExecutableIsDoubted() throws {
        let copy = peers.directory + "/python-copy"
        XCTAssertEqual(try TestFiles.copy(Self.python, to: copy), true)
        let client = try ScriptedClient(copy, ["python3", "-I", "-c", Self.connectAndWait, peers.path])
        defer { withExtendedLifetime(client) {} }
        let connection = try XCTUnwrap(peers.acceptNext())
        defer { close(connection) }
        client.expect("connected")
        let peer = try XCTUnwrap(PeerCredentials(fd: connection))
        let (before, _) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(before.executable?.path, copy)
        XCTAssertEqual(before.doubts, [])

        // Replaced: another file (a new inode) at the same path.
        XCTAssertEqual(try TestFiles.copy(Self.python, to: copy + ".new"), true)
        XCTAssertEqual(rename(copy + ".new", copy), 0)
        let (replaced, _) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(replaced.executable?.path, copy + " (deleted)")
        XCTAssertEqual(replaced.executable?.inode, before.executable?.inode, "the file that runs, not the path's")
        XCTAssertEqual(replaced.doubts, [.replacedExecutable])

        // Removed.
        XCTAssertEqual(unlink(copy), 0)
        let (deleted, _) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        XCTAssertEqual(deleted.doubts, [.replacedExecutable])
    }

    /// A bus client known by its pid alone: a process that started after the call reached the agent
    /// cannot have made it (its pid was reused), and names nothing.
    func testAProcessThatStartedAfterTheCallIsNotTheCaller() throws {
        let client = try ScriptedClient(python: Self.connectAndWait, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let connection = try XCTUnwrap(peers.acceptNext())
        defer { close(connection) }
        client.expect("connected")
        guard case .running(let process) = PeerProcess.of(connection: connection, pid: client.pid) else {
            return XCTFail("the client is not followed")
        }
        let now = ProcessInspection.identify(
            pid: client.pid, pidfd: process.descriptor, uid: getuid(), startedBy: ProcessInspection.ticksSinceBoot())
        XCTAssertEqual(now.doubts, [])
        XCTAssertEqual(now.executable?.path, Self.python)
        let before = ProcessInspection.identify(pid: client.pid, pidfd: process.descriptor, uid: getuid(), startedBy: 0)
        XCTAssertNil(before.executable)
        guard case .unreadable = before.doubts.first else { return XCTFail("\(before.doubts)") }
        // Nor is a process of another uid the one the bus named.
        let otherUser = ProcessInspection.identify(pid: client.pid, pidfd: process.descriptor, uid: getuid() &+ 1)
        XCTAssertNil(otherUser.executable)
    }

    /// A process that exits while it is read names nothing, whatever its pid names afterwards.
    func testAProcessThatHasExitedNamesNothing() throws {
        let client = try ScriptedClient(python: Self.connectAndWait, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let connection = try XCTUnwrap(peers.acceptNext())
        defer { close(connection) }
        client.expect("connected")
        guard case .running(let process) = PeerProcess.of(connection: connection, pid: client.pid) else {
            return XCTFail("the client is not followed")
        }
        kill(client.pid, SIGKILL)
        XCTAssertTrue(PeerSocket.within(5) { process.hasExited })
        let identity = ProcessInspection.identify(pid: client.pid, pidfd: process.descriptor, uid: getuid())
        XCTAssertNil(identity.executable)
        guard case .unreadable = identity.doubts.last else { return XCTFail("\(identity.doubts)") }
    }

    /// The reason for the pidfd: the caller exits, its pid goes to another program, and the agent reads
    /// /proc/PID. The reads describe the newcomer, and only the caller's pidfd, which says it exited,
    /// keeps them from becoming the caller's identity. (Forks until the pid comes round again: a few
    /// seconds with Linux's default pid_max; skipped when another process takes it first.)
    func testAReusedPidLendsNoIdentity() throws {
        let client = try ScriptedClient(python: Self.connectAndWait, [peers.path])
        let connection = try XCTUnwrap(peers.acceptNext())
        defer { close(connection) }
        client.expect("connected")
        guard case .running(let process) = PeerProcess.of(connection: connection, pid: client.pid) else {
            return XCTFail("the client is not followed")
        }
        let target = client.pid
        client.killAndReap()

        let cycler = """
            import os, sys
            target = int(sys.argv[1])
            limit = int(open("/proc/sys/kernel/pid_max").read()) * 2
            for _ in range(limit):
                pid = os.fork()
                if pid == 0:
                    if os.getpid() == target:
                        os.execv("/usr/bin/sleep", ["sleep", "60"])
                    os._exit(0)
                if pid == target:
                    print("reused", flush=True)
                    sys.stdin.readline()
                    sys.exit(0)
                os.waitpid(pid, 0)
            print("not reused", flush=True)
            """
        let reuser = try ScriptedClient(python: cycler, ["\(target)"])
        defer { withExtendedLifetime(reuser) {} }
        guard reuser.line(within: 120) == "reused" else { throw XCTSkip("pid \(target) was not given out again") }
        XCTAssertTrue(ScriptedClient.waitUntil(target, runs: "/usr/bin/sleep"), "the newcomer runs another program")

        let identity = ProcessInspection.identify(pid: target, pidfd: process.descriptor, uid: getuid())
        XCTAssertNil(identity.executable, "the newcomer's executable became the caller's")
        guard case .unreadable = identity.doubts.last else { return XCTFail("\(identity.doubts)") }
    }

    /// What identification costs the accept thread per connection, printed for the record (no timed
    /// assertion: the machine may be loaded). The whole of it: SO_PASSCRED, the pidfd, the reads
    /// through /proc and the confirmation.
    func testIdentificationCostIsPrinted() throws {
        let client = try ScriptedClient(python: Self.connectAndWait, [peers.path])
        defer { withExtendedLifetime(client) {} }
        let connection = try XCTUnwrap(peers.acceptNext())
        defer { close(connection) }
        client.expect("connected")
        let peer = try XCTUnwrap(PeerCredentials(fd: connection))
        var samples: [Duration] = []
        for _ in 0..<500 {
            let start = ContinuousClock.now
            let (identity, _) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
            samples.append(ContinuousClock.now - start)
            XCTAssertEqual(identity.doubts, [])
        }
        samples.sort()
        func microseconds(_ duration: Duration) -> Double {
            Double(duration.components.attoseconds) / 1e12 + Double(duration.components.seconds) * 1e6
        }
        let mean = samples.map(microseconds).reduce(0, +) / Double(samples.count)
        print(
            String(
                format: "identification per connection: p50 %.1f µs, p90 %.1f µs, mean %.1f µs (%d runs)",
                microseconds(samples[samples.count / 2]), microseconds(samples[samples.count * 9 / 10]), mean,
                samples.count))
    }

    /// The library in the test process: the path of a mapped file whose name ends in `name`.
    static func loadedLibrary(_ name: String) -> String? {
        // Read to the end: /proc files say they are empty (st_size 0), which String(contentsOfFile:) trusts.
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/maps") else { return nil }
        defer { try? handle.close() }
        let maps = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        return maps.split(separator: "\n").lazy.compactMap { line -> String? in
            guard let slash = line.firstIndex(of: "/") else { return nil }
            let path = String(line[slash...])
            return path.hasSuffix("/" + name) ? path : nil
        }.first
    }
}

/// Files the tests make.
enum TestFiles {
    /// Copies `source` to `destination` (mode 0755); true when done.
    static func copy(_ source: String, to destination: String) throws -> Bool {
        let data = try Data(contentsOf: URL(fileURLWithPath: source))
        guard FileManager.default.createFile(atPath: destination, contents: data) else { return false }
        return chmod(destination, 0o755) == 0
    }
}
