import LatchkeyApplications
import LatchkeyEngine
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// An accepted connection whose peer passed the check.
struct Connection: Sendable {
    let fd: Int32
    /// The peer as `SO_PEERCRED` named it (uid and pid); what a request may reach is `CallerPolicy`'s.
    let caller: Caller
    let peer: PeerClass
    /// Who connected, as the kernel and /proc said at `accept` (`CallerIdentification`); a request
    /// carries it only as far as `standing` allows (`standing.identity(for: identity)`).
    let identity: CallerIdentity
    /// How far the requests on the connection are the identified process's; moves on as they come.
    var standing: IdentityStanding
    /// What the connection proved with the keychain password (`authorizeGroups`).
    var authorization = GroupAuthorization()
    /// A restore's file arriving on this connection (`restore`), after its keychain password.
    var restoreUpload: RestoreUpload?
    /// The caller `CallerPolicy` last made of this connection's requests, reused while nothing it was
    /// made from has changed (`CallerPolicy.caller(for:)`).
    var decided: DecidedCaller?
    /// When its last request ended, or when it was accepted: where its idle time starts.
    var idleSince: ContinuousClock.Instant
}

/// What a serving thread reports when it lets go of its connection.
enum WorkerEnd: Sendable {
    /// No request came for `ConnectionLimits.linger`, or a waiting request wanted the slot: the accept
    /// thread watches it again.
    case parked(Connection)
    /// Closed: by the client, after an error, or after a malformed request.
    case closed(PeerClass)
}

/// A non-blocking pipe that only wakes a poll(2): `notify` makes `fd` readable until `drain`.
final class WakePipe: Sendable {
    /// The read end, to poll.
    let fd: Int32
    private let writeFD: Int32

    /// Made before the agent starts any thread that could fork (Glibc offers Swift no pipe2), so no
    /// child inherits the pipe between pipe() and FD_CLOEXEC.
    init() throws(ListenerError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw ListenerError(description: "pipe: \(String(cString: strerror(errno)))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        fd = fds[0]
        writeFD = fds[1]
    }

    func notify() {
        // A full pipe (EAGAIN) is readable already.
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }

    func drain() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(fd, &buffer, buffer.count) > 0 {}
    }
}

/// Carries serving threads' ends to the accept thread and wakes it.
final class Mailbox: Sendable {
    private let ends = Locked<[WorkerEnd]>([])
    let wake: WakePipe
    /// Serving threads' requests for a free descriptor, answered by the accept thread.
    let room = DescriptorRoom()

    init() throws(ListenerError) {
        wake = try WakePipe()
    }

    func post(_ end: WorkerEnd) {
        ends.withLock { $0.append(end) }
        wake.notify()
    }

    /// Everything posted so far. Drains the pipe first, so an end posted meanwhile leaves a byte that
    /// wakes the next poll: no end waits for an unrelated event.
    func take() -> [WorkerEnd] {
        wake.drain()
        return ends.withLock { ends in
            defer { ends.removeAll() }
            return ends
        }
    }
}

/// Readable while requests of a class wait for a slot. A thread lingering on a quiet connection of that
/// class watches it and gives its connection back at once, so a slot is never held by an idle
/// connection while a request waits: "busy" means that many requests are really in progress.
final class SlotDemand: Sendable {
    private let user: WakePipe
    private let root: WakePipe

    init() throws(ListenerError) {
        user = try WakePipe()
        root = try WakePipe()
    }

    subscript(peer: PeerClass) -> WakePipe { peer == .user ? user : root }
}
