#if canImport(Glibc)
    import Glibc
#endif

/// A device and inode: what names one file (or one namespace, in `/proc/PID/ns`) whatever its path.
package struct FileKey: Sendable, Equatable, Hashable {
    package var device: UInt64
    package var inode: UInt64

    package init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    init(_ info: stat) {
        self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }
}

/// One descriptor of `/proc/PID`, opened once, through which everything about the process is read.
///
/// A `/proc/PID` directory stays tied to the process it was opened for: once that process is gone,
/// reads through the descriptor fail (ESRCH) even when the pid names another process by then. Whoever
/// holds a pidfd for the process can therefore confirm afterwards that it was alive all along, and with
/// it that every read described it (`ProcessInspection`).
///
/// Every read is bounded by a cap named where it is used, so a process cannot make the agent allocate
/// or read in proportion to what it controls (its environment, its file names).
struct ProcessDirectory: ~Copyable {
    let fd: Int32

    /// Opens `/proc/<pid>`, or returns nil with `errno` set.
    init?(pid: Int32) {
        guard pid > 0 else {
            errno = ESRCH
            return nil
        }
        let fd = open("/proc/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
    }

    /// `/proc/self`, for the agent's own namespaces and root.
    init?(selfProcess: ()) {
        let fd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
    }

    deinit { close(fd) }

    /// What the entry `name` leads to (`exe`, `root`, `ns/user`), the magic link followed.
    func key(of name: String) -> FileKey? {
        var info = stat()
        guard fstatat(fd, name, &info, 0) == 0 else { return nil }
        return FileKey(info)
    }

    /// `stat` of what the entry `name` leads to.
    func status(of name: String) -> stat? {
        var info = stat()
        guard fstatat(fd, name, &info, 0) == 0 else { return nil }
        return info
    }

    /// The target of the link `name` (`exe`) as the kernel writes it, at most `cap` bytes; nil when it
    /// cannot be read or is longer (a truncated path would name another file).
    func linkTarget(_ name: String, cap: Int) -> [UInt8]? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: cap + 1) { buffer -> [UInt8]? in
            let count = readlinkat(fd, name, buffer.baseAddress!, cap + 1)
            guard count > 0, count <= cap else { return nil }
            return UnsafeRawBufferPointer(start: buffer.baseAddress!, count: count).map { $0 }
        }
    }

    /// Opens the entry `name` for reading: no symbolic link followed in its last component, never
    /// blocking (a FIFO is refused by the caller's type check), close-on-exec. -1 with `errno`.
    func openEntry(_ name: String) -> Int32 {
        openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    }

    /// The first `cap` bytes of the entry `name` at most, and whether the file ended within them
    /// (false: it is longer). nil when it cannot be opened or read. For the small files of `/proc/PID`
    /// (`status`, `stat`, `attr/current`), read into a buffer of `cap` bytes on the stack.
    func read(_ name: String, cap: Int) -> (bytes: [UInt8], complete: Bool)? {
        let file = openEntry(name)
        guard file >= 0 else { return nil }
        defer { close(file) }
        return Self.read(file, cap: cap)
    }

    /// Reads `file` to its end or to `cap` bytes (see `read(_:cap:)`).
    static func read(_ file: Int32, cap: Int) -> (bytes: [UInt8], complete: Bool)? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: cap + 1) { buffer -> ([UInt8], Bool)? in
            var have = 0
            while have <= cap {
                let count = Glibc.read(file, buffer.baseAddress! + have, cap + 1 - have)
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { return nil }
                if count == 0 { return (Array(buffer[0..<have]), true) }
                have += count
            }
            return (Array(buffer[0..<cap]), false)
        }
    }
}
