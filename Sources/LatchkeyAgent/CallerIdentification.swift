import CLatchkeySystem
import LatchkeyApplications

#if canImport(Glibc)
    import Glibc
#endif

/// Who is at the other end of an accepted connection (issue 12, docs/IDENTITY.md): the process the kernel
/// names, read once at `accept`, and how far the requests that come on the connection are that
/// process's (`IdentityStanding`).
///
/// The kernel says which process connected (`SO_PEERCRED`, and a pidfd: `SO_PEERPIDFD`, else
/// `pidfd_open` while the connection is open), not which program it ran then: a process can connect,
/// write a request and `exec` another program before the agent looks at it, and that program's identity
/// must not carry the request. So the identity taken at `accept` binds only the requests the identified
/// process writes after the agent identified it: `IdentityStanding` follows that through the
/// connection's receive queue (`SIOCINQ`) and the writer of each byte (`SCM_CREDENTIALS`).
enum CallerIdentification {
    /// The identity of the peer of `connection` (accepted, not yet read from), which `SO_PEERCRED` says
    /// is `pid` running as `uid`, and the standing of the requests to come. Turns `SO_PASSCRED` on for
    /// the connection (the standing needs the writers' pids).
    static func identify(connection: Int32, pid: Int32, uid: UInt32) -> (CallerIdentity, IdentityStanding) {
        guard latchkey_socket_pass_credentials(connection) == 0 else {
            return (unidentified(uid: uid, pid: pid, "cannot follow the writers of its connection"), .refused)
        }
        let identity: CallerIdentity
        switch PeerProcess.of(connection: connection, pid: pid) {
        case .running(let process):
            identity = ProcessInspection.identify(pid: pid, pidfd: process.descriptor, uid: uid)
        case .gone:
            identity = unidentified(uid: uid, pid: pid, "it exited before it was identified")
        case .unknown(let reason):
            identity = unidentified(uid: uid, pid: pid, reason)
        }
        // After the identity, never before: whatever is already queued may have been written before the
        // process ran what was just read.
        return (identity, latchkey_socket_unread(connection) == 0 ? .awaitingWriter : .unconfirmed)
    }

    /// An identity that names no application, for `why`.
    static func unidentified(uid: UInt32, pid: Int32, _ why: String) -> CallerIdentity {
        CallerIdentity(uid: uid, pid: pid, doubts: [.unreadable(why)])
    }
}

/// How far the requests on a connection are the identified process's (`CallerIdentification`).
///
/// Bytes that waited in the connection when the caller was identified may have been written before
/// an `exec`, by another program in the same process: they get no identity. Once the receive queue is
/// seen empty after the identification, every later byte was written after it; the first request
/// then decides: written by the identified process itself, it binds the connection to the identity
/// for good; written by another process that holds the connection (handed over, or inherited by a
/// child before the `exec`), it binds it to no identity for good. The identified program only writes
/// on connections it opened itself, so a connection it did not open never gets its identity.
///
/// The library sends `hello` first on a new connection and waits for the answer
/// (docs/PROTOCOL.md §1), so that its first item request is always written after the agent has
/// identified it.
enum IdentityStanding: Sendable, Equatable {
    /// Bytes were waiting when the caller was identified: requests get no identity until the queue is
    /// seen empty (`afterReading`).
    case unconfirmed
    /// Nothing was waiting since the identification: the next request's writer decides
    /// (`beforeReading`).
    case awaitingWriter
    /// The first request written after the identification came from the identified process.
    case confirmed
    /// It came from another process, or the writers cannot be told: no identity on this connection.
    case refused

    /// Before reading a request that has started to arrive on `connection`: settles `awaitingWriter`
    /// by the writer of its first byte. The writer's pid must be the `identified` process's, and that
    /// process must still be running now: if it is, it was running when the byte was written, so no other
    /// process had its pid then. (If it exited, its pid may have been given to another process, which
    /// could hold the connection: a pid is only a number.)
    mutating func beforeReading(connection: Int32, identified: CallerIdentity) {
        guard self == .awaitingWriter else { return }
        var writer: Int32 = 0
        switch latchkey_socket_next_writer(connection, &writer) {
        case 1:
            self =
                writer == identified.pid && ProcessInspection.isRunning(pid: writer, started: identified.started)
                ? .confirmed : .refused
        // End of file: no request comes, and reading says so.
        case 0: break
        // Nothing waits yet (a spurious wake-up): the next request decides.
        case _ where errno == EAGAIN || errno == EINTR: break
        default: self = .refused
        }
    }

    /// After reading a whole request from `connection`: when nothing more waits, the next request is
    /// written after the identification.
    mutating func afterReading(connection: Int32) {
        if self == .unconfirmed && latchkey_socket_unread(connection) == 0 { self = .awaitingWriter }
    }

    /// The identity that a request read in this standing carries: `identity` once confirmed, else one
    /// that names no application (`Doubt.unconfirmed`).
    func identity(for request: CallerIdentity) -> CallerIdentity {
        switch self {
        case .confirmed:
            return request
        case .unconfirmed, .awaitingWriter:
            return CallerIdentity(
                uid: request.uid, pid: request.pid,
                doubts: [
                    .unconfirmed(
                        "written before the agent identified the process, which may have run another program since")
                ])
        case .refused:
            return CallerIdentity(
                uid: request.uid, pid: request.pid,
                doubts: [
                    .unconfirmed("the connection's first request came from another process than the one that connected")
                ])
        }
    }
}
