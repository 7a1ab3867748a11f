import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// Writes a portal secret to the descriptor the caller passed (`RetrieveSecret`'s `h`) without ever
/// waiting for it: the write runs on the bus loop thread, which a descriptor that does not drain
/// would otherwise stall for every client.
///
/// Only a pipe (or FIFO) or a socket is accepted: libsecret passes the write end of a fresh pipe
/// (`g_unix_open_pipe`), ashpd (oo7) one end of a socket pair. Both are empty when they arrive, so 64
/// bytes always fit at once; a descriptor that cannot take them at once is refused, not waited for.
/// A regular file is refused although gnome-keyring would write to it: a write to a file on a FUSE
/// or network file system can block in the kernel however the descriptor is flagged, and no client
/// passes one. The descriptor comes from the sandboxed application through xdg-desktop-portal, which
/// passes it on unchecked (`src/secret.c`), so it may be anything the application holds.
enum PortalSecretDelivery {
    /// Why the secret was not delivered.
    enum Failure: Error, Equatable, CustomStringConvertible {
        /// Not a pipe, FIFO or socket, or not open for writing: the caller's mistake (InvalidArgs).
        case unsuitable(String)
        /// It could not take the secret at once (full, or no reader), or the write failed.
        case notDelivered(String)

        var description: String {
            switch self {
            case .unsuitable(let why), .notDelivered(let why): why
            }
        }
    }

    /// What kind of descriptor `fd` is, or why it is refused; checked before the secret is derived.
    enum Kind: Equatable {
        case pipe
        case socket
    }

    static func check(_ fd: Int32) throws(Failure) -> Kind {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unsuitable("cannot stat the descriptor (errno \(errno))") }
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0 else { throw .unsuitable("cannot read the descriptor's flags (errno \(errno))") }
        switch info.st_mode & S_IFMT {
        case S_IFIFO:
            let mode = flags & O_ACCMODE
            guard mode == O_WRONLY || mode == O_RDWR else { throw .unsuitable("the pipe is not open for writing") }
            return .pipe
        case S_IFSOCK:
            return .socket
        default:
            throw .unsuitable("not a pipe or a socket")
        }
    }

    /// Writes `secret` to `fd` (of `kind`) in full, or fails without waiting.
    static func write(_ secret: SecretBytes, to fd: Int32, kind: Kind) throws(Failure) {
        switch kind {
        case .socket:
            // Per call, so the flags of the description the application shares are left alone.
            try writeAll(secret) { send(fd, $0, $1, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
        case .pipe:
            // A pipe has no per-call flag: O_NONBLOCK is set on the open description (shared with
            // whoever else holds it, as oo7's portal does with `set_nonblocking`) and put back after.
            // A write to a pipe without a reader is EPIPE here; the agent ignores SIGPIPE (Hardening).
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
                throw .notDelivered("cannot make the pipe non-blocking (errno \(errno))")
            }
            defer { if flags & O_NONBLOCK == 0 { _ = fcntl(fd, F_SETFL, flags) } }
            try writeAll(secret) { Glibc.write(fd, $0, $1) }
        }
    }

    /// Calls `writeSome` until every byte is written; any error, EAGAIN included, ends it. A pipe takes
    /// up to PIPE_BUF bytes whole or not at all; a stream socket may take part, and then the rest.
    private static func writeAll(
        _ secret: SecretBytes, _ writeSome: (UnsafeRawPointer, Int) -> Int
    ) throws(Failure) {
        let failure: Failure? = secret.withUnsafeBytes { buffer -> Failure? in
            guard let base = buffer.baseAddress else { return nil }
            var written = 0
            while written < buffer.count {
                let count = writeSome(base + written, buffer.count - written)
                if count > 0 {
                    written += count
                } else if count < 0 && errno == EINTR {
                    continue
                } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    return .notDelivered("the descriptor cannot take the secret now (\(written) bytes written)")
                } else {
                    return .notDelivered("writing failed after \(written) bytes (errno \(count < 0 ? errno : 0))")
                }
            }
            return nil
        }
        if let failure { throw failure }
    }
}
