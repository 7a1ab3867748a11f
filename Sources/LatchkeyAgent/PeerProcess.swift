import CLatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// A process the agent follows through a pidfd, so that it learns when the process exits whatever its
/// pid becomes later. The descriptor is closed when the value goes away.
package final class ProcessHandle: Sendable {
    /// The pidfd (close-on-exec).
    let descriptor: Int32
    /// The process's pid when the handle was taken, for the log.
    let pid: Int32

    init(descriptor: Int32, pid: Int32) {
        self.descriptor = descriptor
        self.pid = pid
    }

    deinit { close(descriptor) }

    /// Whether the process has exited (a zombie counts: its login is over).
    var hasExited: Bool { latchkey_pidfd_exited(descriptor) == 1 }
}

/// What the agent knows of the process at the other end of a connection: the login process that runs
/// PAM (pam_latchkey), or whichever process of the user opened a session.
package enum PeerProcess {
    /// The peer, followed from now on.
    case running(ProcessHandle)
    /// The peer has exited already: whatever it announced is over.
    case gone
    /// The kernel cannot say (no pidfds before Linux 5.3, no descriptor left): `reason` says why.
    case unknown(reason: String)

    /// How the pidfd is taken: the kernel's own reference (`SO_PEERPIDFD`, Linux 6.5), or the
    /// `SO_PEERCRED` pid opened with `pidfd_open` and checked against the connection (the fallback).
    enum Method: Int32 {
        case kernelReference = 0
        case pidWhileConnected = 1
    }

    /// The peer of `connection`, a connected Unix socket whose peer has not been answered yet (a pam_latchkey
    /// module waits for its reply, so it still holds its end). Tries `SO_PEERPIDFD` first, then the fallback
    /// where the kernel does not know it; `methods` chooses others (tests).
    ///
    /// Out of descriptors (EMFILE, ENFILE), it calls `makeRoom` once, which closes an idle connection of
    /// the agent (`DescriptorRoom`), and tries again. Answering "busy" instead would be worse: the login
    /// would hand over its key all the same, and with no session counted nothing would lock at logout;
    /// if no room is made, the session counts until its close (`unknown`, logged).
    static func of(
        connection: Int32, pid: Int32, methods: [Method] = [.kernelReference, .pidWhileConnected],
        makeRoom: () -> Bool = { false }
    ) -> PeerProcess {
        var why = "no method to follow it"
        var madeRoom = false
        for method in methods {
            var descriptor = latchkey_peer_pidfd(connection, method.rawValue)
            if descriptor < 0, errno == EMFILE || errno == ENFILE, !madeRoom {
                madeRoom = true
                if makeRoom() { descriptor = latchkey_peer_pidfd(connection, method.rawValue) }
            }
            if descriptor >= 0 { return .running(ProcessHandle(descriptor: descriptor, pid: pid)) }
            let error = errno
            if error == ESRCH { return .gone }
            why = "\(method == .kernelReference ? "SO_PEERPIDFD" : "pidfd_open"): \(String(cString: strerror(error)))"
            // A kernel before 6.5 (ENOPROTOOPT), or no peer recorded for it (ENODATA): try the next method.
            guard method == .kernelReference, error == ENOPROTOOPT || error == ENODATA else {
                return .unknown(reason: why)
            }
        }
        return .unknown(reason: why)
    }
}
