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
    /// True when that agent holds this socket path's lock: it listens there, or is about to (it may still
    /// be opening the keychain), so a client that started us should wait for the socket rather than fail.
    package var socketTakenByAnother = false
}

/// The listening socket: inherited from systemd socket activation (`LISTEN_FDS`), or bound in the
/// endpoint directory while holding both `AgentLocks`, so that two agents never race for one socket and
/// never serve one keychain.
struct Listener {
    let fd: Int32
    /// The socket file, as it was right after `bind` (or, inherited, when the agent started); nil
    /// when the inherited socket has no file.
    let socketFile: SocketFile?
    /// Whether we bound the socket file ourselves (and so may remove it on exit).
    let ownsSocketFile: Bool

    /// Whether systemd passed us the listening socket (`LISTEN_PID` is ours and `LISTEN_FDS` ≥ 1): then
    /// the agent takes no socket lock and never binds, unlinks or replaces a socket file.
    static var isInherited: Bool {
        guard let pid = Environment.value("LISTEN_PID"), pid == String(getpid()),
            let count = Environment.value("LISTEN_FDS"), let n = Int(count)
        else { return false }
        return n >= 1
    }

    /// Opens the listening socket. `locks` must have been taken with this endpoint (or with none, when
    /// the socket is inherited): holding them is what makes a socket file found at the path stale.
    static func open(endpoint: AgentEndpoint, locks: AgentLocks) throws -> Listener {
        if let fd = inheritedSocket() {
            return Listener(fd: fd, socketFile: SocketFile(listening: fd), ownsSocketFile: false)
        }
        guard locks.socketLockFD != nil else {
            throw ListenerError(description: "internal error: no lock is held for \(endpoint.socketPath)")
        }
        // We hold the locks, so a socket file left behind is normally stale (a crashed agent): replace it,
        // but only once a connect says nobody listens. A live socket there is not ours to remove: systemd's
        // under socket activation (the activated agent takes no socket lock), or an agent that does not
        // take the lock; removing it would cut its clients off while it runs on.
        if let listener = liveListener(at: endpoint.socketPath) {
            throw ListenerError(
                description: "\(endpoint.socketPath): something listens on it already (\(listener)); not replacing it",
                alreadyRunning: true)
        }
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
        // Known by device and inode from now on: the path may name another agent's socket later.
        guard let file = SocketFile(path: endpoint.socketPath) else {
            try? socket.close()
            throw ListenerError(description: "\(endpoint.socketPath) was replaced right after it was bound")
        }
        chmod(endpoint.socketPath, 0o600)
        return Listener(fd: socket.rawValue, socketFile: file, ownsSocketFile: true)
    }

    /// What listens on `path`, or nil when nothing does (nothing there, or a file nobody listens on: a
    /// non-blocking connect is refused or finds no file). Any other answer counts as live, on the safe side:
    /// a connection that is accepted or queued, a full backlog (EAGAIN), or an error that says nothing.
    private static func liveListener(at path: String) -> String? {
        guard let probe = try? LocalSocket.makeStream() else { return "cannot make a socket to probe it" }
        defer { try? probe.close() }
        _ = fcntl(probe.rawValue, F_SETFL, fcntl(probe.rawValue, F_GETFL) | O_NONBLOCK)
        do {
            try LocalSocket.connect(probe, to: path)
        } catch {
            switch error {
            case .connectionRefused, .noSuchFileOrDirectory: return nil
            case .resourceTemporarilyUnavailable: return "its queue of new connections is full"
            default: return "connect: \(error)"
            }
        }
        guard let peer = PeerCredentials(fd: probe.rawValue) else { return "a process that accepts connections" }
        return "pid \(peer.pid), uid \(peer.uid)"
    }

    /// Removes the socket file if we bound it and the path still names it (a clean exit).
    /// Async-signal-safe.
    func removeSocketFile() {
        if ownsSocketFile { socketFile?.removeIfOurs() }
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
