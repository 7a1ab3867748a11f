import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

extension Files {
    /// Replaces (or creates) the file at `path` with `bytes`, so that `path` holds either its old content
    /// or all of the new one, never a part.
    ///
    /// Writes `temporary` (created with `O_CREAT | O_EXCL | O_NOFOLLOW`, so nothing already there, a
    /// planted symbolic link included, is ever written through; mode exactly 0600 whatever the umask),
    /// closes it and renames it over `path`. If any step fails, `temporary` is removed and `path` is
    /// untouched. `temporary` must be in the same directory as `path`, with a name no reader looks at.
    ///
    /// - Parameters:
    ///   - durable: fsync the file before the rename and its directory after it, so that the new content
    ///     survives a power loss. A directory that cannot be synced (EINVAL) is accepted; any other failure
    ///     to sync it is thrown although the new file is already in place.
    ///   - beforeRename: run once the temporary file is complete, before the rename (tests look at the
    ///     crash window with it); if it throws, the temporary file is removed and its error rethrown.
    /// - Throws: `FileError`, naming the temporary file, `path` (the rename) or the directory; or what
    ///   `beforeRename` throws.
    package static func replace(
        _ path: FilePath, with bytes: [UInt8], through temporary: FilePath,
        durable: Bool, beforeRename: ((FilePath) throws -> Void)? = nil
    ) throws {
        let fd: FileDescriptor
        do {
            fd = try systemCall {
                try FileDescriptor.open(
                    temporary, .writeOnly, options: [.create, .exclusiveCreate, .noFollow, .closeOnExec],
                    permissions: [.ownerReadWrite])
            }
        } catch {
            throw FileError(temporary, .system(error))
        }
        var open: FileDescriptor? = fd
        do {
            // The umask can only narrow 0600, but set it exactly so the file is never unreadable to its
            // owner either.
            guard fchmod(fd.rawValue, 0o600) == 0 else { throw FileError(temporary, .system(.current)) }
            do {
                _ = try systemCall { try fd.writeAll(bytes) }
            } catch {
                throw FileError(temporary, .system(error))
            }
            if durable, fsync(fd.rawValue) != 0 { throw FileError(temporary, .system(.current)) }
            open = nil
            do {
                try systemCall { try fd.close() }
            } catch {
                throw FileError(temporary, .system(error))
            }
            try beforeRename?(temporary)
            guard rename(temporary.string, path.string) == 0 else { throw FileError(path, .system(.current)) }
        } catch {
            try? open?.close()
            unlink(temporary.string)
            throw error
        }
        if durable { try syncDirectory(containing: path) }
    }

    /// fsyncs the directory holding `path`, making a completed rename in it survive power loss.
    /// Filesystems that cannot sync directories (EINVAL) are accepted as they are.
    package static func syncDirectory(containing path: FilePath) throws(FileError) {
        var directory = path.removingLastComponent()
        if directory.isEmpty { directory = "." }
        let fd: FileDescriptor
        do {
            fd = try systemCall { try FileDescriptor.open(directory, .readOnly, options: [.directory, .closeOnExec]) }
        } catch {
            throw FileError(directory, .system(error))
        }
        defer { try? fd.close() }
        if fsync(fd.rawValue) != 0, Glibc.errno != EINVAL { throw FileError(directory, .system(.current)) }
    }
}
