import CLatchkeySystem
import LatchkeySystem
import LatchkeyTransport
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The library's connect to the agent's socket, checked before a byte is sent (docs/PROTOCOL.md §1
/// "Client checks"): the socket directory is opened without following a symbolic link and checked
/// through that descriptor (a directory owned by the user), `agent.sock` in it must be a socket owned
/// by the user, the connect goes through `/proc/self/fd/N/agent.sock` of the same descriptor, so
/// nothing can be swapped between the checks and the connect; and the process that listens must be the
/// user's (`SO_PEERCRED`). In `/tmp/latchkey-UID`, another user could otherwise swap a symbolic link
/// between an `lstat` of the path and the connect, and receive the requests (passwords included).
///
/// The connect itself is bounded: a listener that never accepts (a stopped agent with a full backlog)
/// makes it give up at `deadline` rather than block forever.
enum AgentSocket {
    /// How an attempt to connect ended.
    enum Outcome {
        /// Connected to a process of the user.
        case connected(Int32)
        /// No agent listens: no directory, no socket file, or a socket file nobody listens on (an agent
        /// that crashed). Starting one is the remedy.
        case nothingListens
        /// Something is there that must not be used, or that does not accept connections: starting an
        /// agent would not help. The reason is for the caller's error message.
        case refused(String)
    }

    /// Connects to `endpoint`'s socket, giving up at `deadline`.
    static func connect(_ endpoint: AgentEndpoint, deadline: ContinuousClock.Instant) -> Outcome {
        let uid = getuid()
        let directory = open(endpoint.directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)
        guard directory >= 0 else {
            let error = errno
            switch error {
            case ENOENT: return .nothingListens
            case ELOOP, ENOTDIR:
                return .refused("\(endpoint.directory) is not a directory (a symbolic link, or another file)")
            default:
                return .refused("cannot open \(endpoint.directory): \(String(cString: strerror(error)))")
            }
        }
        defer { close(directory) }
        var info = stat()
        guard fstat(directory, &info) == 0 else {
            return .refused("cannot examine \(endpoint.directory): \(String(cString: strerror(errno)))")
        }
        // Group or other permission bits are not refused: the agent removes them when it starts, and
        // neither they nor anything another user could put in the directory gets past the owner check
        // of the socket file and the peer check below.
        guard info.st_uid == uid else {
            return .refused("\(endpoint.directory) is owned by uid \(info.st_uid), not by uid \(uid)")
        }
        guard fstatat(directory, "agent.sock", &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            let error = errno
            return error == ENOENT
                ? .nothingListens
                : .refused("cannot examine \(endpoint.socketPath): \(String(cString: strerror(error)))")
        }
        // Anything else in its place (a file, a link) is not an agent: an agent started now replaces it.
        guard info.st_mode & S_IFMT == S_IFSOCK else { return .nothingListens }
        guard info.st_uid == uid else {
            return .refused("\(endpoint.socketPath) is owned by uid \(info.st_uid), not by uid \(uid)")
        }
        // Through the descriptor: the directory checked is the one connected to. Without /proc, the
        // path (the peer check still applies).
        let path = access("/proc/self/fd", X_OK) == 0 ? "/proc/self/fd/\(directory)/agent.sock" : endpoint.socketPath
        let fd: Int32
        do {
            fd = try LocalSocket.connect(to: path, timeout: ContinuousClock.now.duration(to: deadline)).rawValue
        } catch {
            switch error {
            case .connectionRefused, .noSuchFileOrDirectory:
                return .nothingListens
            case .resourceTemporarilyUnavailable:
                return .refused(
                    "\(endpoint.socketPath) accepts no connections: the agent's queue of new connections stayed "
                        + "full (is latchkeyd stopped, or overloaded? see \(endpoint.logPath))")
            default:
                return .refused("cannot connect to \(endpoint.socketPath): \(error)")
            }
        }
        var pid: Int32 = 0, peerUID: UInt32 = 0, peerGID: UInt32 = 0
        guard latchkey_peer_credentials(fd, &pid, &peerUID, &peerGID) == 0 else {
            let error = errno
            close(fd)
            return .refused("cannot check who listens on \(endpoint.socketPath): \(String(cString: strerror(error)))")
        }
        guard peerUID == uid else {
            close(fd)
            return .refused(
                "\(endpoint.socketPath) is served by uid \(peerUID) (pid \(pid)), not by uid \(uid): nothing was sent")
        }
        return .connected(fd)
    }
}
