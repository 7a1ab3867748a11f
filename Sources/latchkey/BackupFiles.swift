import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The backup file on disk. It holds only ciphertext, but it is every secret of the keychain under one
/// passphrase: it is written to a new file of mode 0600 in the target's directory and moved into place
/// once complete, never through a symbolic link, and never over an existing file unless asked.
enum BackupFiles {
    /// Writes `bytes` to `path`: a temporary file beside it (`mkstemp`: O_CREAT|O_EXCL, mode 0600),
    /// synced, then linked to `path` (which fails if anything is there, a symbolic link included) or, with
    /// `replace`, renamed over it (rename replaces a symbolic link itself, never its target).
    static func write(_ bytes: [UInt8], to path: String, replace: Bool) throws(InputFailure) {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        guard !name.isEmpty, name != ".", name != ".." else { throw InputFailure("\(path) is not a file name") }
        var template = Array(((directory.isEmpty ? "." : directory) + "/.\(name).XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw InputFailure("cannot create a file in \(directory.isEmpty ? "." : directory): \(errorText())")
        }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var kept = false
        defer {
            close(fd)
            if !kept { unlink(temporary) }
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw InputFailure("cannot write \(temporary): \(errorText())") }
            offset += n
        }
        guard fsync(fd) == 0 else { throw InputFailure("cannot write \(temporary): \(errorText())") }
        if replace {
            guard rename(temporary, path) == 0 else {
                throw InputFailure("cannot move the backup to \(path): \(errorText())")
            }
        } else {
            guard link(temporary, path) == 0 else {
                let exists = errno == EEXIST
                throw InputFailure(
                    exists ? "\(path) exists; remove it or give --force" : "cannot create \(path): \(errorText())")
            }
            unlink(temporary)
        }
        kept = true
    }

    /// Reads a backup file, refusing one larger than `limit` before reading it all (and anything that is
    /// not a regular file: a FIFO could make the command wait forever).
    static func read(_ path: String, limit: Int) throws(InputFailure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw InputFailure("cannot open \(path): \(errorText())") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw InputFailure("cannot read \(path): \(errorText())") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw InputFailure("\(path) is not a regular file") }
        guard Int(info.st_size) <= limit else {
            throw InputFailure("\(path) is larger than any backup (\(limit) bytes at most)")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw InputFailure("cannot read \(path): \(errorText())") }
            if n == 0 { break }
            count += n
        }
        // A file that shrank while it was read is read as it ends: its last chunk then fails as truncated.
        return Array(bytes[0..<count])
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
