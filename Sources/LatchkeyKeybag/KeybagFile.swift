#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LatchkeyCrypto

extension Keybag {
    /// Largest file `load` reads. Far above any version-1 keybag (580 bytes); stops a wrong path
    /// (a disk image, /dev/zero) from being read into memory.
    static let maximumFileSize = 1 << 20

    /// Reads and validates the keybag at `path` without modifying it. Refuses to follow a symbolic
    /// link in the last component (`O_NOFOLLOW`), so a planted link cannot redirect the agent.
    public static func load(path: String) throws -> Keybag {
        // O_NONBLOCK: a FIFO planted in place of the keybag must not block the agent (it is then
        // refused as not a regular file).
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { throw KeybagError.notFound(path: path) }
            throw KeybagError.io(path: path, errno: code)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw KeybagError.io(path: path, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw KeybagError.notAKeybag(path: path) }

        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= maximumFileSize {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw KeybagError.io(path: path, errno: errno)
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return try parse(bytes, path: path)
    }

    /// Atomically replaces (or creates) the keybag at `path`; the parent directory must exist.
    ///
    /// Writes `path.tmp-<16 hex>` with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600, fsyncs it, renames
    /// it over `path`, then fsyncs the directory so the rename itself is durable. Until the rename
    /// the old file is untouched; after it the new file is complete. A crash therefore leaves either
    /// the old or the new keybag at `path`, plus at worst a stray temporary file that `load` never
    /// looks at.
    public func write(to path: String) throws {
        try write(to: path, beforeRename: nil)
    }

    /// `write(to:)` with a hook run after the temporary file is durable and before the rename, so
    /// tests can observe the crash window. If the hook throws, the temporary file is removed.
    func write(to path: String, beforeRename: ((_ temporaryPath: String) throws -> Void)?) throws {
        let suffix = try SecureRandom.bytes(8).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let temporary = path + ".tmp-" + suffix
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeybagError.io(path: temporary, errno: errno) }
        var descriptor: Int32? = fd
        do {
            // The umask can only narrow 0600, but set it exactly so the file is never unreadable
            // to its owner either.
            guard fchmod(fd, 0o600) == 0 else { throw KeybagError.io(path: temporary, errno: errno) }
            try writeAll(serialized(), to: fd, path: temporary)
            guard fsync(fd) == 0 else { throw KeybagError.io(path: temporary, errno: errno) }
            descriptor = nil
            guard close(fd) == 0 else { throw KeybagError.io(path: temporary, errno: errno) }
            try beforeRename?(temporary)
            guard rename(temporary, path) == 0 else { throw KeybagError.io(path: path, errno: errno) }
        } catch {
            if let descriptor { close(descriptor) }
            unlink(temporary)
            throw error
        }
        try Keybag.syncDirectory(containing: path)
    }

    /// fsyncs the directory holding `path`, making a completed rename survive power loss. The new
    /// keybag is already in place when this runs, so a failure is reported but not undone.
    /// Filesystems that cannot sync directories (EINVAL) are accepted as they are.
    private static func syncDirectory(containing path: String) throws {
        let directory: String
        if let slash = path.lastIndex(of: "/") {
            directory = slash == path.startIndex ? "/" : String(path[..<slash])
        } else {
            directory = "."
        }
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw KeybagError.io(path: directory, errno: errno) }
        defer { close(fd) }
        if fsync(fd) != 0, errno != EINVAL { throw KeybagError.io(path: directory, errno: errno) }
    }
}

/// Writes every byte, retrying short writes and EINTR. At file scope because inside `Keybag` the
/// name `write` would resolve to the instance method.
private func writeAll(_ bytes: [UInt8], to fd: Int32, path: String) throws {
    var offset = 0
    while offset < bytes.count {
        let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if count < 0 {
            if errno == EINTR { continue }
            throw KeybagError.io(path: path, errno: errno)
        }
        offset += count
    }
}
