import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Notices when the agent's socket file no longer names the socket it listens on, so that no agent
/// stays running behind a socket that clients cannot reach.
///
/// What the agent then does is the caller's choice; `latchkeyd` exits (see `AgentMain`). An agent
/// could instead bind again, but the usual cause is a logout that removed `$XDG_RUNTIME_DIR`: the
/// agent's session bus, its logind session and its environment ended with it, and an agent started by
/// the next session gets that session's. gpg-agent does the same when its socket is removed.
///
/// inotify reports the change at once: on the socket's directory, a name created, removed or renamed
/// in it, or the directory itself removed, renamed or unmounted; on the directory above it, that one
/// removed or renamed. Each wake-up costs one `lstat` of the socket path (an event in the directory
/// may concern another file). In case inotify is unavailable or misses a change (a directory further
/// up renamed), the path is looked at every `recheckMilliseconds` as well.
enum SocketWatch {
    /// The fallback check's period, as gpg-agent's own check of its socket.
    static let recheckMilliseconds: Int32 = 60_000

    /// Starts a thread that watches `file` and calls `onLost` once, when `file.state()` is `.gone`.
    /// Returns false when the thread cannot be started.
    static func start(_ file: SocketFile, onLost: @escaping @Sendable () -> Void) -> Bool {
        startDetachedThread { watch(file, onLost: onLost) }
    }

    private static func watch(_ file: SocketFile, onLost: @Sendable () -> Void) {
        let inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        defer { if inotify >= 0 { close(inotify) } }
        if inotify >= 0 {
            let inDirectory = UInt32(IN_CREATE) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM) | UInt32(IN_MOVED_TO)
            let itself = UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_ONLYDIR)
            _ = inotify_add_watch(inotify, file.directory, inDirectory | itself)
            _ = inotify_add_watch(inotify, parent(of: file.directory), itself)
        }
        var events = [UInt8](repeating: 0, count: 4096)
        while true {
            // Looked at after the watches are in place, so a change right before them is seen too.
            if file.state() == .gone {
                onLost()
                return
            }
            var pollFD = pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)
            _ = poll(&pollFD, inotify >= 0 ? 1 : 0, recheckMilliseconds)
            // Only that something happened matters: drain the queue (non-blocking) and look again.
            if inotify >= 0 {
                while read(inotify, &events, events.count) > 0 {}
            }
        }
    }

    private static func parent(of directory: String) -> String {
        guard let slash = directory.lastIndex(of: "/"), slash != directory.startIndex else { return "/" }
        return String(directory[..<slash])
    }
}
