import LatchkeySystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent's log lines go: one file descriptor, one `write(2)` per line.
///
/// When that descriptor is the agent's own log file (agent.log in the runtime directory, opened by the
/// client that started the agent), ``bound(path:limit:)`` caps it: once the file passes the limit it is
/// renamed to `agent.log.1`, replacing the previous one, and a fresh `agent.log` is put on the same
/// descriptor with `dup2`, so at most about twice the limit is kept. A pipe, a socket (the journal) or a
/// terminal is never touched.
package final class LogOutput: Sendable {
    /// Standard error, where the agent has always logged.
    package static let standardError = LogOutput(descriptor: 2)

    /// agent.log is renamed aside once it passes 1 MiB, unless `--log-limit` or `LATCHKEY_LOG_LIMIT` says
    /// otherwise.
    package static let defaultLimit = 1 << 20

    /// The descriptor written to.
    package let descriptor: Int32
    /// The cap, if any. Held around the size check and the rotation only: writes never wait for it,
    /// and a line written while another thread rotates lands whole in either file.
    private let rotation = Locked<Rotation?>(nil)

    /// An output on `descriptor`, uncapped until ``bound(path:limit:)``.
    package init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Writes `line` (which ends in a newline), then rotates if that filled the file.
    package func write(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            // One write per line: lines from threads never interleave.
            _ = Glibc.write(descriptor, bytes.baseAddress, bytes.count)
        }
        rotateIfFull()
    }

    /// Caps the file at `path` at about `limit` bytes, if it is the very file the descriptor writes to
    /// (same device and inode; `lstat`, so a symlink at `path` does not count). `path` must be in a
    /// directory only this user can write (the agent's checked 0700 runtime directory): rotation creates
    /// files there. Returns whether the cap is now in force; a limit of 0 means no cap.
    @discardableResult
    package func bound(path: String, limit: Int) -> Bool {
        var open = stat()
        var named = stat()
        guard limit > 0,
            fstat(descriptor, &open) == 0, open.st_mode & S_IFMT == S_IFREG,
            lstat(path, &named) == 0, named.st_dev == open.st_dev, named.st_ino == open.st_ino
        else { return false }
        rotation.withLock { $0 = Rotation(path: path, limit: limit) }
        rotateIfFull()  // a log an earlier agent left over the limit is rotated at once
        return true
    }

    private func rotateIfFull() {
        let failure: String? = rotation.withLock { state in
            guard let current = state else { return nil }
            var info = stat()
            guard fstat(descriptor, &info) == 0, Int(info.st_size) >= current.limit else { return nil }
            guard let problem = current.rotate(onto: descriptor) else { return nil }
            // Say so once and write on, uncapped, to the file we have: a log that keeps working is worth
            // more than its size, and trying again on every line would repeat the failure.
            state = nil
            return "cannot rotate \(current.path): \(problem); the log is no longer capped"
        }
        if let failure { write(LogLine.now(.warning, failure)) }
    }
}

/// A cap on one log file.
private struct Rotation: Sendable {
    let path: String
    let limit: Int

    /// Renames the full file to `path.1` and puts a new, empty `path` on `descriptor`; returns why not.
    func rotate(onto descriptor: Int32) -> String? {
        // rename(2) moves names, never what a symlink points to: a link planted at either name is moved
        // or replaced, not followed. ENOENT: the file was removed; a fresh one is made below.
        if rename(path, path + ".1") != 0 && errno != ENOENT { return "rename: " + lastError() }
        // Never through a symlink; a FIFO found there cannot block the open (it is refused, and O_NONBLOCK
        // is cleared below before the file becomes standard error).
        let file: FileDescriptor
        do {
            file = try FileDescriptor.openRegularFile(
                FilePath(path), .writeOnly, options: [.create, .append],
                permissions: [.ownerReadWrite], owner: geteuid())
        } catch {
            if case .system(let errno) = error.reason { return "open: \(errno)" }
            return "\(path) is not a regular file of this user"
        }
        defer { try? file.close() }
        guard fcntl(file.rawValue, F_SETFL, O_APPEND) == 0 else { return "fcntl: " + lastError() }
        guard dup2(file.rawValue, descriptor) >= 0 else { return "dup2: " + lastError() }  // dup2 clears FD_CLOEXEC
        return nil
    }

    private func lastError() -> String { String(cString: strerror(errno)) }
}
