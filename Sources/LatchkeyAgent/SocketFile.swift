#if canImport(Glibc)
    import Glibc
#endif

/// The socket file an agent listens on, known by the device and inode it had right after `bind`: the
/// path alone says nothing, because another agent may since have bound a new socket there (a logout
/// removed `$XDG_RUNTIME_DIR`, a login recreated it, and a client started an agent in it).
///
/// An agent removes the file at exit only while the path still names that device and inode, and
/// `SocketWatch` stops the agent once it does not. The agent never renames its socket, so the pair
/// stays valid for the agent's life. A filesystem may give a freed inode number to a new file, but
/// only after this socket was removed, which the watch notices first (and tmpfs, where
/// `$XDG_RUNTIME_DIR` lives, hands out inode numbers in increasing order).
struct SocketFile: Sendable {
    /// What the path names now.
    enum State: Equatable {
        /// Still the socket this agent listens on.
        case ours
        /// Nothing, or another file (another agent's socket, anything else).
        case gone
        /// `lstat` failed for another reason than a missing file or directory: no conclusion.
        case unknown
    }

    let path: String
    /// `path` as a NUL-terminated C string, made once: `removeIfOurs` runs in a signal handler, where
    /// nothing may be allocated.
    private let cPath: [CChar]
    let device: UInt64
    let inode: UInt64

    /// The socket now at `path` (`lstat`: never through a symbolic link), or nil when `path` does not
    /// name a socket.
    init?(path: String) {
        self.path = path
        cPath = Array(path.utf8CString)
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// The file of the listening socket `fd` (one inherited from systemd): the path it is bound to, if
    /// it is an absolute path that names a socket now. Abstract and unnamed sockets have no file.
    init?(listening fd: Int32) {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        let pathLength = min(Int(length) - MemoryLayout<sa_family_t>.size, capacity)
        guard pathLength > 1 else { return nil }
        let bytes = withUnsafeBytes(of: &address.sun_path) { raw in
            Array(raw.prefix(pathLength).prefix { $0 != 0 })
        }
        guard bytes.first == UInt8(ascii: "/") else { return nil }
        self.init(path: String(decoding: bytes, as: UTF8.self))
    }

    /// The directory that holds the socket file.
    var directory: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Whether `path` still names this socket. Async-signal-safe.
    func state() -> State {
        var info = stat()
        let result = cPath.withUnsafeBufferPointer { lstat($0.baseAddress!, &info) }
        if result != 0 {
            return errno == ENOENT || errno == ENOTDIR ? .gone : .unknown
        }
        let same =
            info.st_mode & S_IFMT == S_IFSOCK && UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
        return same ? .ours : .gone
    }

    /// Unlinks `path` if it still names this socket. Async-signal-safe (the signal handler calls it).
    ///
    /// Between the check and the unlink another agent could, in principle, put its socket there. It
    /// cannot be one serving this keychain: an agent binds only while holding the keychain lock, which
    /// this agent holds until it has exited. It could only be an agent of another keychain, and it binds
    /// only while holding the socket lock of this directory, which this agent holds too; so it takes a
    /// process that deletes that lock file, and then a window of two system calls.
    func removeIfOurs() {
        guard state() == .ours else { return }
        _ = cPath.withUnsafeBufferPointer { unlink($0.baseAddress!) }
    }
}
