import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A listening Unix socket in a temporary directory, and child processes (a few lines of Python) that
/// connect to it: the agent's view of a login process on the other end of a connection.
final class PeerSocket {
    let directory: String
    let listener: Int32
    private var children: [pid_t] = []
    private var descriptors: [Int32] = []  // connections and the children's input pipes

    init() throws {
        directory = NSTemporaryDirectory() + "lk-peer-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((directory + "/s.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard listener >= 0, bound == 0, listen(listener, 8) == 0 else {
            throw NSError(domain: "PeerSocket", code: Int(errno))
        }
    }

    deinit {
        for child in children {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        for descriptor in descriptors { close(descriptor) }
        close(listener)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Spawns a process that connects and then waits on its standard input (`stays`), or exits at once;
    /// returns its pid (unreaped until `reap`) and the accepted connection.
    func connectingChild(stays: Bool) throws -> (pid: pid_t, connection: Int32) {
        let script =
            "import socket, sys\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.connect(sys.argv[1])\n"
            + (stays ? "sys.stdin.read()\n" : "")
        var pid: pid_t = 0
        let arguments = ["/usr/bin/python3", "-I", "-c", script, directory + "/s.sock"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        // Standard input is a pipe whose write end we never write: the child waits until it is killed.
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        descriptors.append(fds[1])
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        let spawned = posix_spawn(&pid, "/usr/bin/python3", &actions, nil, argv, environ)
        posix_spawn_file_actions_destroy(&actions)
        close(fds[0])
        guard spawned == 0 else { throw NSError(domain: "PeerSocket", code: Int(spawned)) }
        children.append(pid)
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { throw NSError(domain: "PeerSocket", code: Int(errno)) }
        _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
        descriptors.append(connection)
        return (pid, connection)
    }

    /// Kills `pid` with SIGKILL (it stays a zombie until `reap`).
    func kill9(_ pid: pid_t) {
        kill(pid, SIGKILL)
    }

    /// Waits until `pid` has exited, leaving it a zombie (not reaped).
    func waitUntilZombie(_ pid: pid_t) {
        var info = siginfo_t()
        waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT)
    }

    /// Reaps `pid`.
    func reap(_ pid: pid_t) {
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        children.removeAll { $0 == pid }
    }

    /// Checks `condition` every 10 ms until it holds or `seconds` pass (LatchkeyTestSupport's Poll, which
    /// this target does not depend on); returns whether it held.
    static func within(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            if ContinuousClock.now >= end { return false }
            usleep(10_000)
        }
        return true
    }

    /// The pid a pidfd names (`Pid:` in /proc/self/fdinfo), or nil.
    static func pid(ofPidfd descriptor: Int32) -> pid_t? {
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/fdinfo/\(descriptor)") else { return nil }
        defer { try? handle.close() }
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix("Pid:") }
            .flatMap { pid_t($0.dropFirst(4).trimmingCharacters(in: .whitespaces)) }
    }
}
