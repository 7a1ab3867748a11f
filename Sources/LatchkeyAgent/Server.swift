import CLatchkeySystem
import LatchkeyApplications
import LatchkeyCodec
import LatchkeyEngine
import LatchkeyModel
import LatchkeySystem
import LatchkeyTransport
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's socket server. The accept thread watches every idle connection with one poll(2)
/// (`ConnectionPoller`); a thread serves a connection only while its requests come, so a slow or stalled
/// client holds only its own thread, idle connections hold none, and the engine's mutex is taken only
/// for the short work of each request. Limits and their reasons: `ConnectionLimits`.
package final class AgentServer: @unchecked Sendable {
    /// A client that starts a frame must finish it within this time, or it is disconnected.
    package static let frameCompletionTimeout: Duration = .seconds(10)
    /// Connections accepted in a row before the accept thread looks at the rest again.
    static let acceptBurst = 32

    let service: AgentService
    /// Who may reach what: identities to access groups (`CallerPolicy`).
    let policy: CallerPolicy
    let listener: Listener
    private let endpoint: AgentEndpoint
    private let limits: ConnectionLimits
    private let mailbox: Mailbox
    private let demand: SlotDemand

    /// `locks` must be held for `endpoint` and `keychain` (`AgentLocks.take`).
    package init(
        endpoint: AgentEndpoint, locks: AgentLocks, keychain: Keychain,
        onItemRequest: @escaping @Sendable () -> Void = {},
        onUnlock: @escaping @Sendable () -> Void = {}, presence: UserPresence? = nil
    ) throws {
        self.endpoint = endpoint
        self.policy = CallerPolicy(presence: presence)
        self.limits = ConnectionLimits.current()
        self.mailbox = try Mailbox()
        self.demand = try SlotDemand()
        self.listener = try Listener.open(endpoint: endpoint, locks: locks)
        self.service = AgentService(
            keychain: keychain, onItemRequest: onItemRequest, onUnlock: onUnlock, presence: presence)
    }

    /// The socket path clients connect to.
    package var socketPath: String { endpoint.socketPath }

    /// Accepts connections and watches the idle ones until the process ends.
    package func run() -> Never {
        let poller = ConnectionPoller(limits: limits, mailbox: mailbox, demand: demand) { [self] connection in
            startDetachedThread { [self] in mailbox.post(serve(connection)) }
        }
        while true {
            guard poller.waitForEvents(listener: listener.fd) else { continue }
            // Several queued connections per wake-up, so a burst does not cost a poll over every idle
            // connection each; but a bounded number, so a client that connects without pause cannot keep
            // the requests already waiting from being dispatched.
            var pending = pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)
            var accepted = 0
            repeat {
                acceptOne(into: poller)
                accepted += 1
            } while accepted < AgentServer.acceptBurst && poll(&pending, 1, 0) > 0
        }
    }

    private func acceptOne(into poller: ConnectionPoller) {
        let fd = latchkey_accept_cloexec(listener.fd)
        if fd < 0 {
            let error = errno
            if error == EINTR || error == ECONNABORTED { return }
            // Out of descriptors: an idle connection makes room; with none, back off instead of spinning.
            if (error == EMFILE || error == ENFILE) && poller.evictForDescriptor() { return }
            AgentLog.error("accept: \(String(cString: strerror(error)))")
            usleep(100_000)
            return
        }
        // The peer is checked before a single byte is read from it: the user's own processes, and
        // root (pam_latchkey), which may only hand off keys (Opcode.permittedForRoot).
        guard let peer = PeerCredentials(fd: fd), peer.uid == getuid() || peer.uid == 0 else {
            AgentLog.warning("refused a connection from another user")
            close(fd)
            return
        }
        // The user's own processes are identified (root, pam_latchkey, only hands off keys, and a
        // process of another uid is not the agent's to read).
        let (identity, standing) =
            peer.uid == getuid()
            ? CallerIdentification.identify(connection: fd, pid: peer.pid, uid: peer.uid)
            : (CallerIdentification.unidentified(uid: peer.uid, pid: peer.pid, "not the user's process"), .refused)
        // Who the peer is, for logs and the uid checks; what it may reach is decided per request (`CallerPolicy`).
        let caller = Caller(
            uid: peer.uid, pid: peer.pid, executable: identity.executable?.path ?? peer.executable, accessGroups: [])
        poller.admit(
            Connection(
                fd: fd, caller: caller, peer: peer.uid == getuid() ? .user : .root, identity: identity,
                standing: standing, idleSince: .now))
    }

    /// Removes the socket file if this process created it and the path still names it (on a clean
    /// exit). Async-signal-safe.
    package func removeSocketFile() {
        listener.removeSocketFile()
    }

    /// Serves requests on `connection` until it closes, or until it has been quiet for
    /// `ConnectionLimits.linger` and goes back to the accept thread.
    private func serve(_ connection: Connection) -> WorkerEnd {
        var idle = connection
        while true {
            switch awaitRequest(fd: connection.fd, demand: demand[connection.peer].fd) {
            case .quiet:
                return .parked(idle)
            case .starting:
                if !serveRequest(&idle) {
                    close(connection.fd)
                    return .closed(connection.peer)
                }
                idle.idleSince = .now
            }
        }
    }

    /// Serves one request: reads it (the client has `frameCompletionTimeout` to send it whole), answers
    /// it, and returns whether the connection stays open. The connection's `standing` moves on with what
    /// the request's bytes say (`IdentityStanding`); the request carries the connection's identity as far
    /// as `standing.identity(for:)` says, and `CallerPolicy` makes the caller it is decided as.
    private func serveRequest(_ connection: inout Connection) -> Bool {
        let fd = connection.fd
        let caller = connection.caller
        var payload: [UInt8]
        connection.standing.beforeReading(connection: fd, identified: connection.identity)
        do {
            payload = try FrameIO.readFrame(
                from: fd, maxLength: Wire.maxRequestFrame, deadline: .now + AgentServer.frameCompletionTimeout)
        } catch {
            if error != .closed { AgentLog.info("closing connection from pid \(caller.pid): \(error)") }
            return false
        }
        connection.standing.afterReading(connection: fd)
        var response = Response(status: SecStatus.internalComponent, value: nil, message: nil)
        var decoded: Request?
        defer {
            // Item secrets in the request and the response: zero them once the reply is out.
            decoded?.wipeItemData()
            response.value?.wipeDataInPlace()
        }
        do {
            let request = try Request.decode(wiping: &payload)
            decoded = request
            if caller.uid != getuid() && !request.opcode.permittedForRoot {
                response = Response(
                    status: SecStatus.authFailed, value: nil,
                    message: "uid \(caller.uid) may only hand off keys and open or close sessions")
            } else if caller.uid != 0 && request.opcode.requiresRoot {
                response = Response(
                    status: SecStatus.authFailed, value: nil,
                    message: "only root (pam_latchkey, in the login process) may open or close login sessions")
            } else {
                let decided = policy.caller(for: &connection)
                // Contexts belong to the process the connection's identity vouches for (docs/IDENTITY.md):
                // none for a connection whose requests may come from another process.
                let process =
                    connection.standing == .confirmed
                    ? connection.identity.started.map { ContextOwner(pid: connection.identity.pid, started: $0) } : nil
                response = service.handle(
                    request, caller: decided, authorization: &connection.authorization,
                    upload: &connection.restoreUpload,
                    process: process,
                    clientGone: { Self.hasHungUp(fd) }
                ) {
                    PeerProcess.of(connection: fd, pid: caller.pid) { mailbox.room.request(wake: mailbox.wake) }
                }
            }
            if let value = response.value,
                (try? ValueCodec.validate(value)) == nil
                    || response.encodedSize > Wire.maxResponseFrame
            {
                // Too many or too large results for one reply: say so rather than send what the
                // client would have to reject.
                response = Response(
                    status: SecStatus.dataTooLarge, value: nil,
                    message: "the result is too large for one reply; narrow the query or set kSecMatchLimit")
            }
        } catch .unsupportedVersion(let version) {
            let reply = Response(
                status: SecStatus.unimplemented, value: nil,
                message: "unsupported protocol version \(version)")
            try? FrameIO.writeFrame(reply.encode(), to: fd, deadline: .now + AgentServer.frameCompletionTimeout)
            return false
        } catch .unknownOpcode(let opcode) {
            response = Response(status: SecStatus.unimplemented, value: nil, message: "unknown request \(opcode)")
        } catch {
            // A malformed request: answer errSecParam and drop the connection, whose framing can no
            // longer be trusted.
            let reply = Response(status: SecStatus.param, value: nil, message: "malformed request: \(error)")
            try? FrameIO.writeFrame(reply.encode(), to: fd, deadline: .now + AgentServer.frameCompletionTimeout)
            return false
        }
        var encoded = response.encode()
        defer { encoded.wipeIfNeeded() }
        do {
            try FrameIO.writeFrame(encoded, to: fd, deadline: .now + AgentServer.frameCompletionTimeout)
        } catch {
            return false
        }
        return true
    }

    private enum Awaited { case starting, quiet }

    /// Whether the client closed its end of the connection while its request is being answered (a user
    /// check waits): poll(2) reports POLLHUP once the peer's socket is closed whole. A half-close
    /// (shutdown of its writing side only) is not taken as gone, since that client may still read the answer.
    static func hasHungUp(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: 0, revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0
    }

    /// Waits up to `ConnectionLimits.linger` for the next request to start (or for the client to close,
    /// which reading then finds); quiet at once when `demand` says a request waits for this slot.
    private func awaitRequest(fd: Int32, demand: Int32) -> Awaited {
        let end = ContinuousClock.now + ConnectionLimits.linger
        // On the stack: this runs after every request.
        return withUnsafeTemporaryAllocation(of: pollfd.self, capacity: 2) { pollFDs in
            pollFDs[0] = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            pollFDs[1] = pollfd(fd: demand, events: Int16(POLLIN), revents: 0)
            while true {
                let remaining = ContinuousClock.now.duration(to: end)
                guard remaining > .zero else { return .quiet }
                let (seconds, attoseconds) = remaining.components
                let milliseconds = Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
                let ready = poll(pollFDs.baseAddress, 2, milliseconds)
                if ready > 0 { return pollFDs[0].revents != 0 ? .starting : .quiet }
                // A poll that fails for another reason than a signal: reading will report it.
                if ready < 0 && errno != EINTR { return .starting }
            }
        }
    }
}

private extension Array where Element == UInt8 {
    /// Responses may carry secrets (`kSecReturnData`): wipe the encoded bytes once sent.
    mutating func wipeIfNeeded() {
        withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { explicit_bzero(base, raw.count) }
        }
    }
}
