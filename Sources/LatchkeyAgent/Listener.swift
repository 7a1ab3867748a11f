import CLatchkeySystem
import LatchkeySystem
import LatchkeyTransport
import LatchkeyWire
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Why the agent could not start listening.
package struct ListenerError: Error, CustomStringConvertible {
    package var description: String
    /// True when another agent already serves this user (not a failure of the caller's request).
    package var alreadyRunning = false
}

/// The listening socket: inherited from systemd socket activation (`LISTEN_FDS`), or bound in the
/// endpoint directory while holding the agent lock so that two agents never race for one socket.
struct Listener {
    let fd: Int32
    /// The lock file descriptor, held for the life of the process (nil under socket activation).
    let lockFD: Int32?
    /// Whether we bound the socket file ourselves (and so may remove it on exit).
    let ownsSocketFile: Bool

    static func open(endpoint: AgentEndpoint) throws -> Listener {
        if let fd = inheritedSocket() {
            return Listener(fd: fd, lockFD: nil, ownsSocketFile: false)
        }
        if let problem = endpoint.prepareDirectory(create: true) {
            throw ListenerError(description: problem)
        }
        // A regular file of our own, never through a link and never blocking on a FIFO planted there.
        let lockFD: Int32
        do {
            lockFD = try FileDescriptor.openRegularFile(
                FilePath(endpoint.lockPath), .readWrite, options: [.create], permissions: [.ownerReadWrite],
                owner: getuid()
            ).rawValue
        } catch {
            throw ListenerError(description: "the agent lock file: \(error)")
        }
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
            close(lockFD)
            throw ListenerError(
                description: "another latchkeyd already serves \(endpoint.socketPath)", alreadyRunning: true)
        }
        // We hold the lock, so any socket file left behind is stale (a crashed agent): replace it.
        unlink(endpoint.socketPath)
        let socket: FileDescriptor
        do {
            socket = try LocalSocket.makeStream()
        } catch {
            throw ListenerError(description: "socket: \(error)")
        }
        do {
            try LocalSocket.listen(socket, at: endpoint.socketPath, backlog: 64)
        } catch {
            try? socket.close()
            if error == .fileNameTooLong {
                throw ListenerError(description: "socket path too long: \(endpoint.socketPath)")
            }
            throw ListenerError(description: "cannot listen on \(endpoint.socketPath): \(error)")
        }
        chmod(endpoint.socketPath, 0o600)
        return Listener(fd: socket.rawValue, lockFD: lockFD, ownsSocketFile: true)
    }

    /// The socket passed by systemd (`LISTEN_PID` is ours and `LISTEN_FDS` ≥ 1: fd 3).
    private static func inheritedSocket() -> Int32? {
        guard let pid = Environment.value("LISTEN_PID"), pid == String(getpid()),
            let count = Environment.value("LISTEN_FDS"), let n = Int(count), n >= 1
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        let fd: Int32 = 3
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }
}

/// The credentials of a connected peer, from `SO_PEERCRED` (set by the kernel at connect time).
struct PeerCredentials {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32

    init?(fd: Int32) {
        var pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0
        guard latchkey_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// The peer's executable, for the caller identity (best effort: the process may be gone already).
    var executable: String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
