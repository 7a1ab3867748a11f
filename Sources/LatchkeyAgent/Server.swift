import CLatchkeySystem
import LatchkeyCodec
import LatchkeyEngine
import LatchkeyModel
import LatchkeySystem
import LatchkeyTransport
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's socket server: one thread per connection, so a slow or stalled client holds only its own
/// thread; the engine's mutex is taken only for the short work of each request.
package final class AgentServer: @unchecked Sendable {
    /// Connections served at once; more are refused, so a runaway client cannot exhaust threads.
    package static let maximumConnections = 64
    /// A client that starts a frame must finish it within this time, or it is disconnected.
    package static let frameCompletionTimeout: Duration = .seconds(10)

    let service: AgentService
    let listener: Listener
    private let endpoint: AgentEndpoint
    private let connections = AtomicCounter()

    /// `locks` must be held for `endpoint` and `keychain` (`AgentLocks.take`).
    package init(
        endpoint: AgentEndpoint, locks: AgentLocks, keychain: Keychain,
        onItemRequest: @escaping @Sendable () -> Void = {},
        onUnlock: @escaping @Sendable () -> Void = {}
    ) throws {
        self.endpoint = endpoint
        self.listener = try Listener.open(endpoint: endpoint, locks: locks)
        self.service = AgentService(keychain: keychain, onItemRequest: onItemRequest, onUnlock: onUnlock)
    }

    /// The socket path clients connect to.
    package var socketPath: String { endpoint.socketPath }

    /// Accepts connections until the process ends.
    package func run() -> Never {
        while true {
            let fd = latchkey_accept_cloexec(listener.fd)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                AgentLog.error("accept: \(String(cString: strerror(errno)))")
                usleep(100_000)  // e.g. EMFILE: back off instead of spinning
                continue
            }
            // The peer is checked before a single byte is read from it: the user's own processes, and
            // root (pam_latchkey), which may only hand off keys (Opcode.permittedForRoot).
            guard let peer = PeerCredentials(fd: fd), peer.uid == getuid() || peer.uid == 0 else {
                AgentLog.warning("refused a connection from another user")
                close(fd)
                continue
            }
            guard connections.increment(below: AgentServer.maximumConnections) else {
                AgentLog.warning("refused a connection: \(AgentServer.maximumConnections) already open")
                close(fd)
                continue
            }
            let caller = Caller(uid: peer.uid, pid: peer.pid, executable: peer.executable)
            let started = startDetachedThread { [self] in
                serve(fd: fd, caller: caller)
                close(fd)
                connections.decrement()
            }
            if !started {
                close(fd)
                connections.decrement()
            }
        }
    }

    /// Removes the socket file if this process created it and the path still names it (on a clean
    /// exit). Async-signal-safe.
    package func removeSocketFile() {
        listener.removeSocketFile()
    }

    private func serve(fd: Int32, caller: Caller) {
        let agentUID = getuid()
        while true {
            var payload: [UInt8]
            do {
                payload = try readRequestFrame(fd: fd)
            } catch {
                if error != .closed { AgentLog.info("closing connection from pid \(caller.pid): \(error)") }
                return
            }
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
                if caller.uid != agentUID && !request.opcode.permittedForRoot {
                    response = Response(
                        status: SecStatus.authFailed, value: nil,
                        message: "uid \(caller.uid) may only hand off keys and open or close sessions")
                } else {
                    response = service.handle(request, caller: caller)
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
                return
            } catch .unknownOpcode(let opcode) {
                response = Response(status: SecStatus.unimplemented, value: nil, message: "unknown request \(opcode)")
            } catch {
                // A malformed request: answer errSecParam and drop the connection, whose framing can no
                // longer be trusted.
                let reply = Response(status: SecStatus.param, value: nil, message: "malformed request: \(error)")
                try? FrameIO.writeFrame(reply.encode(), to: fd, deadline: .now + AgentServer.frameCompletionTimeout)
                return
            }
            var encoded = response.encode()
            defer { encoded.wipeIfNeeded() }
            do {
                try FrameIO.writeFrame(encoded, to: fd, deadline: .now + AgentServer.frameCompletionTimeout)
            } catch {
                return
            }
        }
    }

    /// Waits as long as needed for a request to start, then gives the client a bounded time to finish it.
    private func readRequestFrame(fd: Int32) throws(WireError) -> [UInt8] {
        var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&pollFD, 1, -1) < 0 {
            if errno != EINTR { throw .io(errno: errno) }
        }
        return try FrameIO.readFrame(
            from: fd, maxLength: Wire.maxRequestFrame,
            deadline: .now + AgentServer.frameCompletionTimeout)
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
