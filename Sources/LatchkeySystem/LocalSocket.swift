import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Unix-domain stream sockets on a filesystem path: the agent's listening socket and the library's
/// connection to it. (swift-system has no socket API yet, so these wrap the calls themselves; the frame
/// I/O on a connected socket stays in LatchkeyTransport.)
package enum LocalSocket {
    /// A new, unconnected stream socket, close-on-exec.
    package static func makeStream() throws(Errno) -> FileDescriptor {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .current }
        return FileDescriptor(rawValue: fd)
    }

    /// Binds `socket` to `path` and listens with `backlog`. ENAMETOOLONG when `path` does not fit in a
    /// `sockaddr_un`.
    package static func listen(_ socket: FileDescriptor, at path: String, backlog: Int32) throws(Errno) {
        try withAddress(path) { address, length throws(Errno) in
            guard bind(socket.rawValue, address, length) == 0 else { throw .current }
        }
        guard Glibc.listen(socket.rawValue, backlog) == 0 else { throw .current }
    }

    /// A new stream socket connected to `path`; nothing is left open when it throws. ENAMETOOLONG when
    /// `path` does not fit in a `sockaddr_un`.
    ///
    /// With a `timeout`, a connect that waits (the listener's backlog is full: it is stopped, or does not
    /// accept) gives up after that long with EAGAIN, instead of blocking until someone accepts. Linux
    /// bounds a Unix-socket connect by the socket's send timeout (`SO_SNDTIMEO`), which is set for the
    /// connect and cleared again afterwards; a timeout of zero or less fails at once with EAGAIN.
    package static func connect(to path: String, timeout: Duration? = nil) throws(Errno) -> FileDescriptor {
        let fd = try makeStream()
        let deadline = timeout.map { ContinuousClock.now + $0 }
        do {
            if let timeout { try setSendTimeout(fd, timeout) }
            try withAddress(path) { address, length throws(Errno) in
                while Glibc.connect(fd.rawValue, address, length) != 0 {
                    // Interrupted by a signal: a Unix socket is then still unconnected, so connecting again is
                    // safe, within what is left of the timeout.
                    guard errno == EINTR else { throw .current }
                    if let deadline { try setSendTimeout(fd, ContinuousClock.now.duration(to: deadline)) }
                }
            }
            if timeout != nil { try setSendTimeout(fd, nil) }
        } catch {
            try? fd.close()
            throw error
        }
        return fd
    }

    /// Connects `socket` (made by `makeStream`, perhaps non-blocking) to `path`, once: a non-blocking
    /// socket whose listener's backlog is full fails with EAGAIN.
    package static func connect(_ socket: FileDescriptor, to path: String) throws(Errno) {
        try withAddress(path) { address, length throws(Errno) in
            guard Glibc.connect(socket.rawValue, address, length) == 0 else { throw .current }
        }
    }

    /// Sets `SO_SNDTIMEO` on `socket` to `timeout` (rounded up to a microsecond: zero would mean "never"),
    /// or clears it (nil). A timeout of zero or less throws EAGAIN, as a connect that timed out would.
    private static func setSendTimeout(_ socket: FileDescriptor, _ timeout: Duration?) throws(Errno) {
        var value = timeval(tv_sec: 0, tv_usec: 0)
        if let timeout {
            guard timeout > .zero else { throw .resourceTemporarilyUnavailable }
            let (seconds, attoseconds) = timeout.components
            let microseconds = (attoseconds + 999_999_999_999) / 1_000_000_000_000
            value = timeval(
                tv_sec: Int(seconds) + Int(microseconds / 1_000_000), tv_usec: Int(microseconds % 1_000_000))
            if value.tv_sec == 0 && value.tv_usec == 0 { value.tv_usec = 1 }
        }
        guard setsockopt(socket.rawValue, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size)) == 0
        else { throw .current }
    }

    /// Runs `body` with the `sockaddr_un` for `path` and its length.
    private static func withAddress<R>(
        _ path: String,
        _ body: (UnsafePointer<sockaddr>, socklen_t) throws(Errno) -> R
    ) throws(Errno) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        // The path and its terminating NUL must fit.
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .fileNameTooLong }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return try withUnsafePointer(to: &address) { pointer throws(Errno) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw throws(Errno) in
                try body(raw, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }
}
