import LatchkeyModel
import LatchkeyTransport
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#endif

/// The connections no thread is serving, kept by the accept thread alone (so only it ever closes an
/// idle connection, and no descriptor is closed under a thread that still uses it): the idle ones it
/// watches, the ones whose request has arrived and waits for a slot, and the counts of each class.
final class ConnectionPoller {
    private let limits: ConnectionLimits
    private let mailbox: Mailbox
    private let demand: SlotDemand
    /// Starts a thread serving a connection; false when no thread could be started.
    private let startWorker: (Connection) -> Bool
    /// Idle connections, in the order they were parked.
    private var parked: [Connection] = []
    /// Connections with a request arriving and no free slot, first come first served, each with when it
    /// began to wait.
    private var waiting: [(connection: Connection, since: ContinuousClock.Instant)] = []
    private var open = PerPeer()
    private var serving = PerPeer()
    private var demanding = PerPeer()
    private var pollFDs: [pollfd] = []
    /// Closings to make room and refusals, logged at most once a minute each: a flood of connections
    /// must not flood the log.
    private var evictions = ThrottledReport()
    private var refusals = ThrottledReport()

    init(
        limits: ConnectionLimits, mailbox: Mailbox, demand: SlotDemand,
        startWorker: @escaping (Connection) -> Bool
    ) {
        self.limits = limits
        self.mailbox = mailbox
        self.demand = demand
        self.startWorker = startWorker
    }

    /// Waits until the listener or an idle connection is readable, a thread lets go of a connection, or
    /// a deadline passes; then settles every connection's state. Returns whether `listener` is readable.
    func waitForEvents(listener: Int32) -> Bool {
        pollFDs.removeAll(keepingCapacity: true)
        pollFDs.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0))
        pollFDs.append(pollfd(fd: mailbox.wake.fd, events: Int16(POLLIN), revents: 0))
        for connection in parked { pollFDs.append(pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&pollFDs, nfds_t(pollFDs.count), timeoutUntilNextDeadline())
        if ready < 0 && errno != EINTR {
            AgentLog.error("poll: \(String(cString: strerror(errno)))")
            usleep(100_000)  // cannot happen with valid descriptors; never spin
        }
        let now = ContinuousClock.now
        if ready > 0 {
            var stillIdle: [Connection] = []
            stillIdle.reserveCapacity(parked.count)
            for (index, connection) in parked.enumerated() {
                if pollFDs[index + 2].revents == 0 {
                    stillIdle.append(connection)
                } else if Self.hasHungUp(connection.fd) {
                    // A client that exited: closed here, without a thread.
                    close(connection.fd)
                    open[connection.peer] -= 1
                } else {
                    waiting.append((connection, now))
                }
            }
            parked = stillIdle
        }
        for end in mailbox.take() {
            switch end {
            case .parked(let connection):
                serving[connection.peer] -= 1
                parked.append(connection)
            case .closed(let peer):
                serving[peer] -= 1
                open[peer] -= 1
            }
        }
        mailbox.room.answer { evictForDescriptor() }
        expire(now: now)
        dispatch()
        return ready > 0 && pollFDs[0].revents != 0
    }

    /// Takes a newly accepted connection. It gets a thread only once its first request arrives (most
    /// often it is there already: clients send as soon as they connect), so sockets that never send cost
    /// no thread at all. At the cap of its class the oldest idle connection of that class is closed to
    /// make room; when none is idle the new one is answered "busy".
    func admit(_ connection: Connection) {
        let peer = connection.peer
        if open[peer] >= limits.connections(peer) {
            guard let oldest = oldestParked(peer) else {
                refuse(connection, "latchkeyd is busy: \(open[peer]) connections are open and none is idle; try again")
                return
            }
            let victim = parked.remove(at: oldest)
            close(victim.fd)
            open[peer] -= 1
            evictions.note(
                "closed idle connections to make room for new ones (the limit is \(limits.connections(peer)))")
        }
        open[peer] += 1
        var pending = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
        if poll(&pending, 1, 0) > 0 {
            waiting.append((connection, .now))
            dispatch()
        } else {
            parked.append(connection)
        }
    }

    /// The process is out of descriptors (accept failed with EMFILE or ENFILE, or a serving thread asked
    /// through `DescriptorRoom`): closes the oldest idle connection, the user's first, and returns whether
    /// there was one.
    func evictForDescriptor() -> Bool {
        guard let oldest = oldestParked(.user) ?? oldestParked(.root) else { return false }
        let victim = parked.remove(at: oldest)
        close(victim.fd)
        open[victim.peer] -= 1
        evictions.note("closed idle connections to make room for new ones (out of file descriptors)")
        return true
    }

    // MARK: Internals

    /// Closes idle connections past the idle timeout, and answers "busy" to requests that waited for a
    /// slot too long.
    private func expire(now: ContinuousClock.Instant) {
        parked.removeAll { connection in
            guard connection.idleSince.duration(to: now) >= limits.idleTimeout else { return false }
            close(connection.fd)
            open[connection.peer] -= 1
            return true
        }
        waiting.removeAll { entry in
            guard entry.since.duration(to: now) >= ConnectionLimits.slotWait else { return false }
            let slots = limits.requestSlots(entry.connection.peer)
            refuse(
                entry.connection,
                "latchkeyd is busy: all \(slots) request slots stayed in use for "
                    + "\(ConnectionLimits.slotWait.components.seconds) s; try again")
            open[entry.connection.peer] -= 1
            return true
        }
    }

    /// Gives free slots to waiting requests, first come first served within each class, and asks the
    /// threads lingering on quiet connections for their slots while requests still wait.
    private func dispatch() {
        waiting.removeAll { entry in
            let peer = entry.connection.peer
            guard serving[peer] < limits.requestSlots(peer) else { return false }
            guard startWorker(entry.connection) else {
                refuse(entry.connection, "latchkeyd is busy: it cannot start a thread for the request; try again")
                open[peer] -= 1
                return true
            }
            serving[peer] += 1
            return true
        }
        for peer in [PeerClass.user, .root] {
            let wanted = waiting.contains { $0.connection.peer == peer }
            if wanted && demanding[peer] == 0 {
                demand[peer].notify()
                demanding[peer] = 1
            } else if !wanted && demanding[peer] != 0 {
                demand[peer].drain()
                demanding[peer] = 0
            }
        }
    }

    /// Answers a connection with errSecNotAvailable and `message` without reading anything from it, and
    /// closes it. Every such message starts with "latchkeyd is busy" (docs/PROTOCOL.md §5), which the
    /// CLI tells from an agent it could not reach. The answer is sent without waiting (a peer that does
    /// not read cannot hold the accept thread); whatever the peer sent stays unread, so its client knows
    /// the request never ran.
    private func refuse(_ connection: Connection, _ message: String) {
        refusals.note("refused requests: \(message)")
        let reply = Response(status: SecStatus.notAvailable, value: nil, message: message)
        try? FrameIO.writeFrame(reply.encode(), to: connection.fd, deadline: .now)
        close(connection.fd)
    }

    /// Whether the client closed its end (EOF, or a reset) rather than sent a request.
    private static func hasHungUp(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }

    private func oldestParked(_ peer: PeerClass) -> Int? {
        var oldest: Int?
        for (index, connection) in parked.enumerated() where connection.peer == peer {
            if oldest.map({ connection.idleSince < parked[$0].idleSince }) ?? true { oldest = index }
        }
        return oldest
    }

    /// Milliseconds until the next idle timeout or slot wait ends, for poll(2); -1 when none is pending.
    private func timeoutUntilNextDeadline() -> Int32 {
        var next: ContinuousClock.Instant?
        for connection in parked {
            let end = connection.idleSince + limits.idleTimeout
            if next.map({ end < $0 }) ?? true { next = end }
        }
        if let first = waiting.first {
            let end = first.since + ConnectionLimits.slotWait
            if next.map({ end < $0 }) ?? true { next = end }
        }
        guard let next else { return -1 }
        let remaining = ContinuousClock.now.duration(to: next)
        guard remaining > .zero else { return 0 }
        let (seconds, attoseconds) = remaining.components
        // Rounded up, so poll never wakes just before a deadline and spins.
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}

/// A warning logged at most once a minute, with how many times it happened since the last one.
private struct ThrottledReport {
    private var count = 0
    private var lastReport: ContinuousClock.Instant?

    mutating func note(_ message: String) {
        count += 1
        let now = ContinuousClock.now
        if let lastReport, lastReport.duration(to: now) < .seconds(60) { return }
        AgentLog.warning(count == 1 ? message : "\(message) (\(count) times since the last such warning)")
        count = 0
        lastReport = now
    }
}
