import CLatchkeySystem
import LatchkeySecrets
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Hands a portal secret to the descriptor the caller passed (`RetrieveSecret`'s `h`) without the
/// agent ever writing to it: a write can block in the kernel whatever the descriptor's flags (a pipe
/// whose lock another process holds in `splice`, a socket whose transmit lock a blocked sender holds),
/// and a thread blocked there cannot be interrupted, not even by SIGKILL: on the bus loop it stalled
/// every client, and in any thread of the agent it would keep the agent (and its lock on the keychain)
/// from ever exiting. So a process of its own, `/bin/cat` with nothing but a pipe from the agent and the
/// caller's descriptor, copies the secret; the agent waits for it on another thread for
/// `deadline`, then gives up and kills it (it dies when the kernel lets it), and answers the call then.
///
/// Only a pipe (or FIFO) or a socket is accepted: libsecret passes the write end of a fresh pipe
/// (`g_unix_open_pipe`), ashpd (oo7) one end of a socket pair. A regular file is refused although
/// gnome-keyring would write to it: no client passes one. The descriptor comes from the sandboxed
/// application through xdg-desktop-portal, which passes it on unchecked (`src/secret.c`), so it may be
/// anything the application holds.
enum PortalSecretDelivery {
    /// Why the secret was not delivered.
    enum Failure: Error, Equatable, CustomStringConvertible {
        /// Not a pipe, FIFO or socket, or not open for writing: the caller's mistake (InvalidArgs).
        case unsuitable(String)
        /// It was not delivered in time, or the copy failed, or too many copies are still running.
        case notDelivered(String)

        var description: String {
            switch self {
            case .unsuitable(let why), .notDelivered(let why): why
            }
        }
    }

    /// The program that copies: every Debian system has it (coreutils is essential), root-owned.
    static let copier = "/bin/cat"
    /// How long a copy may take: 64 bytes into an empty pipe or socket take microseconds.
    static let deadline: Duration = .seconds(1)
    /// Copies running at once, stuck ones included (a stuck one counts until it dies): past this, a
    /// request is answered at once with failure, so a caller that passes descriptors that never take
    /// the secret costs the agent at most this many processes.
    static let maximumRunning = 4
    private static let running = Locked(0)

    /// Refuses a descriptor that is not a pipe (or FIFO) open for writing, or a socket; checked before
    /// the secret is derived.
    static func check(_ fd: Int32) throws(Failure) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unsuitable("cannot stat the descriptor (errno \(errno))") }
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0 else { throw .unsuitable("cannot read the descriptor's flags (errno \(errno))") }
        switch info.st_mode & S_IFMT {
        case S_IFIFO:
            let mode = flags & O_ACCMODE
            guard mode == O_WRONLY || mode == O_RDWR else { throw .unsuitable("the pipe is not open for writing") }
            return
        case S_IFSOCK:
            return
        default:
            throw .unsuitable("not a pipe or a socket")
        }
    }

    /// Starts copying `secret` to `fd` (a checked descriptor, which the copy duplicates), and calls
    /// `done` once, on another thread, with nil when it was delivered in full within `deadline`, or
    /// why not. Returns false, calling nothing, when `maximumRunning` copies are running.
    static func deliver(
        _ secret: SecretBytes, to fd: Int32, done: @escaping @Sendable (Failure?) -> Void
    ) -> Bool {
        let admitted = running.withLock { count -> Bool in
            guard count < maximumRunning else { return false }
            count += 1
            return true
        }
        guard admitted else { return false }
        var pipeEnds: [Int32] = [-1, -1]
        guard latchkey_pipe_cloexec(&pipeEnds) == 0 else {
            running.withLock { $0 -= 1 }
            done(.notDelivered("cannot make a pipe (errno \(errno))"))
            return true
        }
        let pid = latchkey_spawn_copier(copier, pipeEnds[0], fd)
        close(pipeEnds[0])
        guard pid > 0 else {
            close(pipeEnds[1])
            running.withLock { $0 -= 1 }
            done(.notDelivered("cannot start \(copier) (errno \(errno))"))
            return true
        }
        // Into the agent's own empty pipe: 64 bytes fit whole (PIPE_BUF), so this never waits.
        let written = secret.withUnsafeBytes { Glibc.write(pipeEnds[1], $0.baseAddress, $0.count) }
        close(pipeEnds[1])
        let pidfd = latchkey_pidfd_open(pid)
        let complete = written == secret.count
        let started = startDetachedThread {
            let (outcome, reaped) = wait(for: pid, pidfd: pidfd, written: complete)
            done(outcome)
            // A killed copy is reaped only now: stuck in the kernel, it dies when the kernel lets it,
            // and counts against `maximumRunning` until then. (Never a second waitpid for a reaped
            // pid: it may be another child's by then.)
            if !reaped {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            }
            if pidfd >= 0 { close(pidfd) }
            running.withLock { $0 -= 1 }
        }
        if !started {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            if pidfd >= 0 { close(pidfd) }
            running.withLock { $0 -= 1 }
            done(.notDelivered("cannot start a thread to wait for the copy"))
        }
        return true
    }

    /// Waits up to `deadline` for the copy `pid` to end, and reaps it; kills it when it has not ended
    /// (not reaped then). The failure is nil when it copied everything (exit status 0, and the agent's
    /// write was whole).
    private static func wait(for pid: Int32, pidfd: Int32, written: Bool) -> (Failure?, reaped: Bool) {
        var exited = false
        if pidfd >= 0 {
            var ready = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(deadline.components.seconds * 1000)
            var result: Int32
            repeat { result = poll(&ready, 1, milliseconds) } while result < 0 && errno == EINTR
            exited = result > 0
        }
        guard exited else {
            kill(pid, SIGKILL)
            return (.notDelivered("the descriptor did not take the secret within \(deadline)"), false)
        }
        var status: Int32 = 0
        // It has exited: this returns at once.
        var reaped: Int32
        repeat { reaped = waitpid(pid, &status, 0) } while reaped < 0 && errno == EINTR
        guard reaped == pid, status & 0x7f == 0, (status >> 8) & 0xff == 0, written else {
            return (.notDelivered("the copy failed (status \(status))"), reaped == pid)
        }
        return (nil, true)
    }
}
