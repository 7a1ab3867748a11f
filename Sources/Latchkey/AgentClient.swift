import LatchkeyModel
import LatchkeySystem
import LatchkeyTransport
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#endif

/// The library's connection to the user's agent: one persistent connection per process, opened on first
/// use, and the agent started on demand when nothing listens. Never holds a key: it only carries
/// requests and responses.
final class AgentClient: Sendable {
    static let shared = AgentClient()

    /// How long a client waits for an agent it started to signal readiness (it fails at once if the
    /// agent exits first, or cannot be executed at all).
    static let startTimeoutMilliseconds: Int32 = 5_000
    /// How often a client waiting for another agent to listen tries the socket again.
    static let socketRetryMicroseconds: UInt32 = 20_000
    /// How many agents one connect may start: the first, and more only when the one holding the socket's
    /// lock turned out to be exiting (`connectOrStart`).
    static let maximumStarts = 4
    /// How long a client waits for the answer to a request before giving up (errSecNotAvailable).
    /// Unlock and create run Argon2id in the agent, so this is generous; a hung agent still cannot
    /// hang the caller forever.
    static let responseTimeout: Duration = .seconds(30)
    /// How long a client waits for a request that may show the user a check (an item or key with
    /// `kSecAttrAccessControl`, docs/ACCESS-CONTROL.md): as long as the agent's longest check (a few
    /// questions of up to 300 s each, behind others), as Apple's calls wait while the system asks.
    static let userCheckResponseTimeout: Duration = .seconds(1800)

    /// Whether `opcode`'s answer may wait for the user (`userCheckResponseTimeout`).
    static func mayWaitForTheUser(_ opcode: Opcode) -> Bool {
        switch opcode {
        // generateKey: on a token, making a key may ask for its PIN.
        case .add, .copyMatching, .update, .keyOperation, .evaluateContext, .generateKey: true
        default: false
        }
    }

    /// How long a client waits for a backup or the last step of a restore, which read or write every item
    /// (100,000 items take seconds, not minutes, but a loaded machine is slower): bounded all the same.
    static let bulkResponseTimeout: Duration = .seconds(600)

    /// Whether `opcode` reads or writes the whole keychain (`bulkResponseTimeout`).
    static func isBulk(_ opcode: Opcode) -> Bool {
        opcode == .backup || opcode == .restore
    }

    /// The persistent connection's socket, or -1. Held for a whole request, so that requests from several
    /// threads take turns on the one connection and each reply reaches the thread that asked.
    fileprivate let connection = Locked<Int32>(-1)

    /// Sends one request and returns the agent's response. Any failure to reach the agent is a
    /// response with errSecNotAvailable and a message saying why.
    func send(_ request: Request) -> Response {
        connection.withLock { fd in exchange(request, on: &fd) }
    }

    /// `send` to an agent that runs already: none is started for it (errSecNotAvailable when nothing
    /// listens). For what only concerns the agent's own state, such as ending an `LAContext` it holds:
    /// a new agent holds none.
    func sendToRunningAgent(_ request: Request) -> Response {
        connection.withLock { fd in exchange(request, on: &fd, mayStart: false) }
    }

    /// How many times a request the agent never read is sent again on a new connection. The agent
    /// closes idle connections (after an idle timeout, or the oldest when it is full), so a request can
    /// meet a connection closed a moment before; twice covers one closed while the next was opened.
    static let maximumResends = 2

    /// `send` with the connection held.
    ///
    /// A request is sent again only when the agent provably never read it: the send failed because the
    /// agent had closed the connection (EPIPE, or ECONNRESET), or the reply was a reset (ECONNRESET). On
    /// a Unix stream socket a reset means the agent closed with bytes of ours still unread, and it acts
    /// on a request only once it has read all of it, so the request never ran. A plain EOF instead of a
    /// reply means the agent read everything and then vanished (it crashed or was killed while carrying
    /// the request out): that is reported and never resent, since an add sent twice would succeed once
    /// and then fail with errSecDuplicateItem. The agent closes a connection of its own accord only
    /// between requests, before reading a byte of the next (docs/PROTOCOL.md §1).
    private func exchange(_ request: Request, on fd: inout Int32, mayStart: Bool = true) -> Response {
        var payload = request.encode()
        defer { payload.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
        // The agent drops a connection whose frame exceeds its cap; fail here with a clear status instead.
        guard payload.count <= Wire.maxRequestFrame else {
            return Response(
                status: SecStatus.param, value: nil,
                message: "request of \(payload.count) bytes exceeds the \(Wire.maxRequestFrame)-byte limit")
        }
        var resends = 0
        while true {
            if fd < 0 {
                if let failure = mayStart ? connectOrStart(&fd) : connectToRunningAgent(&fd) { return failure }
                // The agent identifies a caller when it accepts the connection, and a request written
                // before that carries no application identity (docs/PROTOCOL.md §1, "Who is calling"):
                // one round trip first, so that every request of ours is written after it. The request
                // itself is not sent yet, so whatever happens here, it never ran.
                switch attempt(AgentClient.hello, on: fd) {
                case .answered(let response) where response.status == SecStatus.success:
                    break
                case .answered(let response):  // "busy", say
                    disconnect(&fd)
                    return response
                case .unread where resends < AgentClient.maximumResends:
                    disconnect(&fd)
                    resends += 1
                    continue
                case .unread(let why), .failed(let why):
                    disconnect(&fd)
                    return unavailable(why)
                }
            }
            let timeout =
                AgentClient.mayWaitForTheUser(request.opcode)
                ? AgentClient.userCheckResponseTimeout
                : AgentClient.isBulk(request.opcode) ? AgentClient.bulkResponseTimeout : AgentClient.responseTimeout
            switch attempt(payload, on: fd, timeout: timeout) {
            case .answered(let response):
                return response
            case .unread where resends < AgentClient.maximumResends:
                disconnect(&fd)
                resends += 1
            case .unread(let why), .failed(let why):
                disconnect(&fd)
                return unavailable(why)
            }
        }
    }

    /// The request a new connection starts with (`exchange`).
    private static let hello = Request.hello.encode()

    private enum Attempt {
        /// The agent answered (any status).
        case answered(Response)
        /// The agent closed the connection without reading the whole request: it never ran.
        case unread(String)
        /// No answer, and the request may or may not have run.
        case failed(String)
    }

    /// Sends `payload` on `fd` and reads the reply, waiting at most `timeout` for it.
    private func attempt(
        _ payload: [UInt8], on fd: Int32, timeout: Duration = AgentClient.responseTimeout
    ) -> Attempt {
        do {
            try FrameIO.writeFrame(payload, to: fd, deadline: .now + AgentClient.responseTimeout)
        } catch {
            guard case .io(let code) = error, code == EPIPE || code == ECONNRESET else {
                return .failed("cannot send to the agent: \(error)")
            }
            // An agent that turned the connection away ("busy") answered before closing it: that answer,
            // already here, says more than the closed connection.
            if var reply = try? FrameIO.readFrame(from: fd, maxLength: Wire.maxResponseFrame, deadline: .now),
                let response = try? Response.decode(wiping: &reply)
            {
                return .answered(response)
            }
            return .unread("cannot send to the agent: \(error)")
        }
        do {
            var reply = try FrameIO.readFrame(
                from: fd, maxLength: Wire.maxResponseFrame,
                deadline: .now + timeout, awaitingReply: true)
            return .answered(try Response.decode(wiping: &reply))
        } catch .io(errno: ECONNRESET) {
            return .unread("the agent closed the connection without reading the request")
        } catch {
            return .failed("no answer from the agent: \(error)")
        }
    }

    fileprivate func disconnect(_ fd: inout Int32) {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    private func unavailable(_ message: String) -> Response {
        Response(status: SecStatus.notAvailable, value: nil, message: message)
    }

    /// Connects to an agent that listens already. Returns a failure response, or nil.
    private func connectToRunningAgent(_ fd: inout Int32) -> Response? {
        let endpoint = AgentEndpoint.current()
        let deadline = ContinuousClock.now + .milliseconds(AgentClient.startTimeoutMilliseconds)
        switch AgentSocket.connect(endpoint, deadline: deadline) {
        case .connected(let connected):
            fd = connected
            return nil
        case .refused(let why):
            return unavailable(why)
        case .nothingListens:
            return unavailable("no agent runs")
        }
    }

    /// Connects to the agent, starting it if nothing listens. Returns a failure response, or nil.
    ///
    /// Every connect is bounded by the start time (`AgentSocket`): an agent that does not accept (stopped,
    /// with a full backlog) is reported, not waited for forever, and no agent is started beside it.
    private func connectOrStart(_ fd: inout Int32) -> Response? {
        let endpoint = AgentEndpoint.current()
        let startTime = Duration.milliseconds(AgentClient.startTimeoutMilliseconds)
        switch AgentSocket.connect(endpoint, deadline: .now + startTime) {
        case .connected(let connected):
            fd = connected
            return nil
        case .refused(let why):
            return unavailable(why)
        case .nothingListens:
            break
        }
        // After a start, connect once; when another client's agent won the socket's lock (two started at
        // the same moment), that one may still be opening the keychain: wait for it within the start time.
        // The holder may also be an agent on its way out (stopped, its last threads still exiting), which
        // never listens: once the lock is free, start again (a few times at most).
        let deadline = ContinuousClock.now + startTime
        var starts = 0
        var waitForAnother = false
        func start() -> Response? {
            starts += 1
            let left = max(deadline - ContinuousClock.now, .milliseconds(1)).components
            let milliseconds = Int32(clamping: left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000)
            switch AgentLauncher.start(endpoint: endpoint, timeoutMilliseconds: milliseconds) {
            case .failure(let failure): return unavailable(failure.message)
            case .success(.listening): waitForAnother = false
            case .success(.anotherAgentListens): waitForAnother = true
            }
            return nil
        }
        if let failed = start() { return failed }
        while true {
            switch AgentSocket.connect(endpoint, deadline: deadline) {
            case .connected(let connected):
                fd = connected
                return nil
            case .refused(let why):
                return unavailable(why)
            case .nothingListens:
                break
            }
            guard waitForAnother else {
                return unavailable(
                    "the agent started but \(endpoint.socketPath) does not accept connections (see \(endpoint.logPath))"
                )
            }
            guard ContinuousClock.now < deadline else {
                return unavailable(
                    "another latchkeyd holds \(endpoint.lockPath) but did not listen on \(endpoint.socketPath) "
                        + "within \(AgentClient.startTimeoutMilliseconds) ms (see \(endpoint.logPath))")
            }
            if starts < AgentClient.maximumStarts, !endpoint.socketLockIsHeld() {
                if let failed = start() { return failed }
                continue
            }
            usleep(AgentClient.socketRetryMicroseconds)
        }
    }
}

extension AgentClient {
    /// Drops the persistent connection (tests switch between agents by changing the environment).
    func resetConnection() {
        connection.withLock { disconnect(&$0) }
    }
}

extension AgentClient {
    /// Whether the agent has closed the persistent connection (tests wait for the agent's idle timeout
    /// with it). Reads nothing.
    var isConnectionClosedByAgent: Bool {
        connection.withLock { fd in
            guard fd >= 0 else { return false }
            var pfd = pollfd(fd: fd, events: 0, revents: 0)
            return poll(&pfd, 1, 0) > 0 && pfd.revents & Int16(POLLHUP) != 0
        }
    }
}
