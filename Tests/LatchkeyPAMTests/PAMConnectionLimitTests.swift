import Foundation
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// pam_latchkey's hand-off against an agent crowded by the user's own connections: a thousand that
/// never send, and more stalled requests than the agent serves at once. Root's connection has slots the
/// user's connections cannot take, so the login still unlocks the keychain (issue 10, defect 2).
final class PAMConnectionLimitTests: PAMTestCase {
    func testHandOffGetsThroughIdleAndBusyConnectionsOfTheUser() throws {
        try createKeychainWithItem()
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        XCTAssertNil(try readItem(), "precondition: the item is locked")
        let service = try standardService()

        let holder = try holdConnections(idle: 1000, stalled: 80)
        defer { holder.release() }
        // Every request slot of the user is taken (the stalled requests hold theirs for 10 s): the user's
        // own CLI is told the agent is busy, and the login comes after it, well inside those 10 s.
        let crowded = try cli(["status"])
        XCTAssertEqual(crowded.status, 1, crowded.out)
        XCTAssertTrue(crowded.err.contains("latchkeyd is busy"), crowded.err)
        // A login process that stays: the agent ends the session of one that is gone (issue 10, part 2).
        let login = try login(service, input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        holder.release()

        XCTAssertEqual(try readItem(), "s3cret", "the hand-off did not reach the agent")
    }

    struct HolderFailure: Error, CustomStringConvertible { var description: String }

    /// A child process of the user holding connections to the agent until `release`.
    struct Holder {
        let pid: pid_t

        func release() {
            guard kill(pid, SIGKILL) == 0 else { return }
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Forks a child that becomes the user, connects `idle` sockets that never send and `stalled` ones
    /// that send one byte of a frame and nothing more, says so on a pipe, and then waits to be killed.
    func holdConnections(idle: Int, stalled: Int) throws -> Holder {
        // Everything the child needs is prepared before fork: it then only makes system calls.
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((runtime + "/latchkey/agent.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        var ready: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&ready), 0)
        _ = fcntl(ready[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ready[1], F_SETFD, FD_CLOEXEC)
        var files = rlimit(rlim_cur: 4096, rlim_max: 4096)
        let (uid, gid) = (self.uid, self.gid)

        let pid = fork()
        if pid == 0 {
            close(ready[0])
            guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &files) == 0, setgroups(0, nil) == 0, setgid(gid) == 0,
                setuid(uid) == 0
            else { _exit(3) }
            for index in 0..<(idle + stalled) {
                let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
                guard connected == 0 else { _exit(2) }
                if index >= idle {
                    var byte: UInt8 = 0
                    guard send(fd, &byte, 1, Int32(MSG_NOSIGNAL)) == 1 else { _exit(4) }
                }
            }
            var byte: UInt8 = 1
            _ = write(ready[1], &byte, 1)
            while true { pause() }
        }
        close(ready[1])
        defer { close(ready[0]) }
        XCTAssertGreaterThan(pid, 0)
        let holder = Holder(pid: pid)
        var pfd = pollfd(fd: ready[0], events: Int16(POLLIN), revents: 0)
        var byte: UInt8 = 0
        guard poll(&pfd, 1, 60_000) > 0, read(ready[0], &byte, 1) == 1 else {
            var status: Int32 = 0
            let exited = waitpid(pid, &status, WNOHANG) == pid
            holder.release()
            throw HolderFailure(
                description: exited
                    ? "the connection holder failed (exit \((status >> 8) & 0xff))"
                    : "the connection holder did not connect within 60 s")
        }
        return holder
    }
}
