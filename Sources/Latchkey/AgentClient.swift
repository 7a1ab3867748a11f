import LatchkeyModel
import LatchkeySystem
import LatchkeyTransport
import LatchkeyWire
import SystemPackage

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
    /// How long a client waits for the answer to a request before giving up (errSecNotAvailable).
    /// Unlock and create run Argon2id in the agent, so this is generous; a hung agent still cannot
    /// hang the caller forever.
    static let responseTimeout: Duration = .seconds(30)

    /// The persistent connection's socket, or -1. Held for a whole request, so that requests from several
    /// threads take turns on the one connection and each reply reaches the thread that asked.
    fileprivate let connection = Locked<Int32>(-1)

    /// Sends one request and returns the agent's response. Any failure to reach the agent is a
    /// response with errSecNotAvailable and a message saying why.
    func send(_ request: Request) -> Response {
        connection.withLock { fd in exchange(request, on: &fd) }
    }

    /// `send` with the connection held.
    private func exchange(_ request: Request, on fd: inout Int32) -> Response {
        var payload = request.encode()
        defer { payload.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
        // The agent drops a connection whose frame exceeds its cap; fail here with a clear status instead.
        guard payload.count <= Wire.maxRequestFrame else {
            return Response(
                status: SecStatus.param, value: nil,
                message: "request of \(payload.count) bytes exceeds the \(Wire.maxRequestFrame)-byte limit")
        }
        let reused = fd >= 0
        if !reused {
            if let failure = connectOrStart(&fd) { return failure }
        }
        do {
            try FrameIO.writeFrame(payload, to: fd, deadline: .now + AgentClient.responseTimeout)
        } catch {
            // A persistent connection the agent has since closed (it restarted): nothing was delivered,
            // so connecting again and resending is safe.
            disconnect(&fd)
            guard reused else { return unavailable("cannot send to the agent: \(error)") }
            if let failure = connectOrStart(&fd) { return failure }
            do {
                try FrameIO.writeFrame(payload, to: fd, deadline: .now + AgentClient.responseTimeout)
            } catch {
                disconnect(&fd)
                return unavailable("cannot send to the agent: \(error)")
            }
        }
        do {
            var reply = try FrameIO.readFrame(
                from: fd, maxLength: Wire.maxResponseFrame,
                deadline: .now + AgentClient.responseTimeout, awaitingReply: true)
            return try Response.decode(wiping: &reply)
        } catch {
            // The request may or may not have been carried out: report, never resend.
            disconnect(&fd)
            return unavailable("no answer from the agent: \(error)")
        }
    }

    fileprivate func disconnect(_ fd: inout Int32) {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    private func unavailable(_ message: String) -> Response {
        Response(status: SecStatus.notAvailable, value: nil, message: message)
    }

    /// Connects to the agent, starting it if nothing listens. Returns a failure response, or nil.
    private func connectOrStart(_ fd: inout Int32) -> Response? {
        let endpoint = AgentEndpoint.current()
        if let connected = connect(endpoint.socketPath) {
            fd = connected
            return nil
        }
        if let failure = AgentLauncher.start(
            endpoint: endpoint, timeoutMilliseconds: AgentClient.startTimeoutMilliseconds)
        {
            return unavailable(failure)
        }
        guard let connected = connect(endpoint.socketPath) else {
            return unavailable("the agent started but \(endpoint.socketPath) does not accept connections")
        }
        fd = connected
        return nil
    }

    /// A connected socket, or nil when nothing listens (missing socket, refused, or not ours).
    private func connect(_ path: String) -> Int32? {
        // Only a socket owned by us in a directory owned by us is trusted with our secrets; lstat, so a
        // symbolic link planted in its place is refused.
        guard let info = try? FilePath(path).stat(followTargetSymlink: false), info.type == .socket,
            info.userID.rawValue == getuid()
        else { return nil }
        return try? LocalSocket.connect(to: path).rawValue
    }
}

extension AgentClient {
    /// Drops the persistent connection (tests switch between agents by changing the environment).
    func resetConnection() {
        connection.withLock { disconnect(&$0) }
    }
}
