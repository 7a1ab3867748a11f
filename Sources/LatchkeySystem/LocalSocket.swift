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
    package static func connect(to path: String) throws(Errno) -> FileDescriptor {
        let fd = try makeStream()
        do {
            try withAddress(path) { address, length throws(Errno) in
                guard Glibc.connect(fd.rawValue, address, length) == 0 else { throw .current }
            }
        } catch {
            try? fd.close()
            throw error
        }
        return fd
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
