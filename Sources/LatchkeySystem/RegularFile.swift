import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

extension FileDescriptor {
    /// Opens `path` as a regular file: never through a symbolic link in its last component
    /// (`O_NOFOLLOW`, which fails with ELOOP), never blocking on a FIFO planted there (`O_NONBLOCK`; the
    /// FIFO is then refused), close-on-exec; and checks that what it opened is a regular file, owned by
    /// `owner` when given. Checking the open descriptor (`fstat`), not the name, leaves no window in which
    /// the file could be swapped.
    ///
    /// `O_NONBLOCK` stays set on the descriptor; it changes nothing for a regular file.
    ///
    /// - Parameters:
    ///   - options: added to `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC` (`.create`, `.append`, …).
    ///   - permissions: the mode of a file that `.create` makes.
    package static func openRegularFile(
        _ path: FilePath, _ mode: AccessMode, options: OpenOptions = [],
        permissions: FilePermissions? = nil,
        owner: UInt32? = nil
    ) throws(FileError) -> FileDescriptor {
        let fd: FileDescriptor
        do {
            fd = try systemCall {
                try FileDescriptor.open(
                    path, mode, options: options.union([.noFollow, .nonBlocking, .closeOnExec]),
                    permissions: permissions)
            }
        } catch {
            throw FileError(path, .system(error))
        }
        let info: Stat
        do {
            info = try fd.stat()
        } catch {
            try? fd.close()
            throw FileError(path, .system(error))
        }
        guard info.type == .regular else {
            try? fd.close()
            throw FileError(path, .notRegularFile)
        }
        if let owner, info.userID.rawValue != owner {
            try? fd.close()
            throw FileError(path, .wrongOwner(uid: info.userID.rawValue))
        }
        return fd
    }

    /// Reads until end of file or until `limit` bytes are in, whichever comes first. The buffer grows as
    /// data arrives, so a wrong path (a disk image, /dev/zero behind a name) costs at most `limit` bytes;
    /// pass one more than the largest size you accept to tell "too large" from "exactly full".
    package func readAll(upTo limit: Int) throws(Errno) -> [UInt8] {
        precondition(limit >= 0, "negative read limit")
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: Swift.min(4096, Swift.max(limit, 1)))
        while bytes.count < limit {
            let wanted = Swift.min(chunk.count, limit - bytes.count)
            let count = try systemCall {
                try chunk.withUnsafeMutableBytes {
                    try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<wanted]))
                }
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }
}

/// Small files the agent, the keybag and the Secret Service read and replace.
package enum Files {
    /// The content of the regular file at `path` (see `FileDescriptor.openRegularFile`), at most `limit`
    /// bytes of it.
    package static func read(_ path: FilePath, upTo limit: Int, owner: UInt32? = nil) throws(FileError) -> [UInt8] {
        let fd = try FileDescriptor.openRegularFile(path, .readOnly, owner: owner)
        defer { try? fd.close() }
        do {
            return try fd.readAll(upTo: limit)
        } catch {
            throw FileError(path, .system(error))
        }
    }

    /// The first line of the small text file at `path` (at most `limit` bytes read), without its newline;
    /// nil when the file is missing, empty, not a regular file, or a symbolic link. A file that starts
    /// with a newline gives "".
    package static func firstLine(of path: FilePath, limit: Int = 512) -> String? {
        guard let bytes = try? read(path, upTo: limit), !bytes.isEmpty else { return nil }
        let line = bytes.split(separator: 10, maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        return String(decoding: line, as: UTF8.self)
    }

    /// Whether anything is at `path`, a dangling symbolic link included (`lstat`).
    package static func exists(_ path: FilePath) -> Bool {
        (try? path.stat(followTargetSymlink: false)) != nil
    }

    /// Creates `path` and any missing parents with mode 0700 (before the umask); directories that
    /// exist are left as they are.
    package static func createDirectories(_ path: FilePath) throws(FileError) {
        var prefix: FilePath = path.isAbsolute ? "/" : "."
        for component in path.components {
            prefix.append(component)
            if mkdir(prefix.string, 0o700) != 0, Glibc.errno != EEXIST {
                throw FileError(prefix, .system(.current))
            }
        }
    }
}

/// Enough of `lstat` to tell that a file was replaced: an atomic rename gives a new inode, an in-place
/// write a new size or modification time. A symbolic link at the path is described, not followed.
package struct FileIdentity: Equatable, Sendable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    package var modifiedSeconds: Int
    package var modifiedNanoseconds: Int

    /// The identity of what is at `path` now, or nil when nothing is.
    package init?(path: FilePath) {
        guard let info = try? path.stat(followTargetSymlink: false) else { return nil }
        device = UInt64(info.deviceID.rawValue)
        inode = UInt64(info.inode.rawValue)
        size = info.size
        modifiedSeconds = info.st_mtim.tv_sec
        modifiedNanoseconds = info.st_mtim.tv_nsec
    }
}
