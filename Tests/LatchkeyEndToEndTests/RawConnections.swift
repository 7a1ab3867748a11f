import Foundation
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Sockets connected straight to the agent, as a misbehaving program would hold them: silent (they never
/// send), or stalled in the middle of a request (one byte of a frame header, then nothing).
final class RawConnections {
    private(set) var fds: [Int32] = []

    /// Connects `count` sockets to `path`; with `stalled`, each sends the first byte of a frame header.
    /// Fails the test (and keeps what it opened) when a connect fails.
    init(count: Int, to path: String, stalled: Bool = false, file: StaticString = #filePath, line: UInt = #line) {
        fds.reserveCapacity(count)
        for _ in 0..<count {
            let fd = Self.connect(path)
            guard fd >= 0 else {
                XCTFail(
                    "connect \(fds.count + 1) of \(count): \(String(cString: strerror(errno)))", file: file, line: line)
                return
            }
            if stalled {
                var byte: UInt8 = 0
                _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL))
            }
            fds.append(fd)
        }
    }

    deinit { closeAll() }

    func closeAll() {
        for fd in fds { close(fd) }
        fds = []
    }

    /// Whether the agent has closed `fd` (EOF or reset), without waiting. A silent connection is never
    /// sent anything, so anything readable on it is the close.
    static func isClosedByPeer(_ fd: Int32) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// A blocking stream socket connected to `path`, or -1 with errno set.
    static func connect(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long")
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc != 0 {
            let saved = errno
            close(fd)
            errno = saved
            return -1
        }
        return fd
    }
}

/// This process's limit on open files: raised (and put back by `restore`) so a test can hold more than a
/// thousand sockets, or lowered before it starts an agent, which inherits it.
struct DescriptorLimit {
    private let saved: rlimit

    /// Sets the soft limit to `soft` (raising the hard limit too when allowed, as root); throws XCTSkip
    /// when the system does not allow that many.
    init(soft: rlim_t) throws {
        var current = rlimit()
        getrlimit(RLIMIT_NOFILE_VALUE, &current)
        saved = current
        var wanted = current
        wanted.rlim_cur = soft
        if wanted.rlim_max < soft { wanted.rlim_max = soft }
        if setrlimit(RLIMIT_NOFILE_VALUE, &wanted) != 0 {
            throw XCTSkip("cannot set RLIMIT_NOFILE to \(soft): \(String(cString: strerror(errno)))")
        }
    }

    func restore() {
        var old = saved
        var current = rlimit()
        getrlimit(RLIMIT_NOFILE_VALUE, &current)
        // Only the soft limit goes back when the hard one was raised (lowering the hard limit is for good).
        old.rlim_max = max(old.rlim_max, current.rlim_max)
        setrlimit(RLIMIT_NOFILE_VALUE, &old)
    }
}

/// Glibc imports RLIMIT_NOFILE as a case of `__rlimit_resource`; getrlimit and setrlimit take its raw value.
let RLIMIT_NOFILE_VALUE = Int32(RLIMIT_NOFILE.rawValue)

/// A process's thread count, from /proc/PID/status (nil when it is gone).
func threadCount(of pid: pid_t) -> Int? {
    guard let status = TestProcess.readProcFile("/proc/\(pid)/status") else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("Threads:") {
        return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces))
    }
    return nil
}
