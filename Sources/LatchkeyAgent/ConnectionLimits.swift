import CLatchkeySystem
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Whom a connection serves, for the limits: the agent's own user, or root handing off keys
/// (pam_latchkey). Root has connections and request slots of its own, so no number of the user's
/// connections, idle or busy, can keep a login from handing over its key; its own small caps keep a root
/// process from exhausting the agent's threads in turn.
enum PeerClass: Sendable {
    case user, root
}

/// A pair of counters, one per peer class.
struct PerPeer: Sendable {
    private var user = 0, root = 0

    subscript(peer: PeerClass) -> Int {
        get { peer == .user ? user : root }
        set {
            if peer == .user { user = newValue } else { root = newValue }
        }
    }
}

/// How many connections the agent keeps and serves at once, and for how long (docs/PROTOCOL.md §1
/// "Connections").
///
/// Idle connections (between requests) hold no thread: the accept thread watches them all with one
/// poll(2), so they cost a descriptor each and are bounded by the descriptors the agent may open. A
/// thread serves a connection only while requests come (a "request slot"), and gives it back to the
/// accept thread after `linger` without one. So the programs that made one keychain call and live on,
/// or sockets that never send, cannot take the slots that new requests need; past the connection cap
/// the oldest idle connection is closed to make room, and the library reconnects without its caller
/// noticing.
struct ConnectionLimits: Sendable {
    /// Requests of the user served at once (one thread each). More wait up to `slotWait` for a slot.
    static let userRequestSlots = 64
    /// Root's (pam_latchkey's) requests served at once, apart from the user's.
    static let rootRequestSlots = 8
    /// Root's connections open at once; past it the oldest idle one is closed, or the new one refused.
    static let rootConnections = 16
    /// The most user connections kept open, whatever the descriptor limit: past a thousand idle ones,
    /// closing the oldest is cheaper for everyone than watching more.
    static let maximumUserConnections = 1024
    /// Descriptors left for everything but the user's connections: the store, the log, the lock, the
    /// buses, prompters, root's connections.
    static let reservedDescriptors = 64
    /// How long a thread waits for the next request on its connection before giving it back to the
    /// accept thread. Long enough that a busy client keeps its thread (no hand-over between back-to-back
    /// requests), short enough that idle connections soon hold none.
    static let linger: Duration = .seconds(1)
    /// How long a request that has arrived may wait for a free slot before it is answered "busy".
    static let slotWait: Duration = .seconds(3)
    /// How long a connection may stay idle before the agent closes it (`LATCHKEY_CONNECTION_IDLE`).
    static let defaultIdleTimeout: Duration = .seconds(60)
    /// The accepted range of `LATCHKEY_CONNECTION_IDLE`, in seconds: never 0 (a connection closed at
    /// once would make every request reconnect), never so long that idle descriptors pile up for hours.
    static let idleTimeoutRange: ClosedRange<Double> = 1...3600

    /// The open files the agent asks for at start: a pidfd for each login session it may follow
    /// (`SessionTracker.maximumSessions`), the user's and root's connections at their caps, and the
    /// reserve for its own files.
    static let descriptorsWanted =
        SessionTracker.maximumSessions + maximumUserConnections + rootConnections + reservedDescriptors

    /// Raises the soft RLIMIT_NOFILE towards `descriptorsWanted`, never above the hard limit (a soft
    /// limit of 1,024 is common, hard limits are usually far higher). Called once, early in `AgentMain`,
    /// before `current()` sizes the connection cap from the limit: so the cap comes from the limit the
    /// agent really has. Returns a warning when the hard limit leaves less than wanted.
    static func raiseDescriptorLimit() -> String? {
        let limit = latchkey_raise_descriptor_limit(UInt64(descriptorsWanted))
        guard limit >= 0 else {
            return "cannot raise the open-file limit: \(String(cString: strerror(errno)))"
        }
        guard limit < descriptorsWanted else { return nil }
        return "the open-file limit is \(limit) (hard limit), below the \(descriptorsWanted) the agent wants: room for "
            + "\(userConnections(descriptorLimit: rlim_t(limit))) of the user's connections, and idle ones are "
            + "closed when a login session needs a descriptor"
    }

    /// Idle time after which a connection is closed.
    var idleTimeout: Duration
    /// The user's connections kept open at once.
    var userConnections: Int

    /// The limits for this process: the idle timeout from `LATCHKEY_CONNECTION_IDLE` (tests shorten it;
    /// a value out of range is ignored with a warning), the connection cap from RLIMIT_NOFILE.
    static func current() -> ConnectionLimits {
        var idleTimeout = defaultIdleTimeout
        if let value = Environment.value("LATCHKEY_CONNECTION_IDLE") {
            if let seconds = Double(value), idleTimeoutRange.contains(seconds) {
                idleTimeout = .milliseconds(Int64(seconds * 1000))
            } else {
                AgentLog.warning(
                    "ignoring LATCHKEY_CONNECTION_IDLE=\(value): not a number of seconds from 1 to 3600")
            }
        }
        var files = rlimit()
        let soft = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &files) == 0 ? files.rlim_cur : 1024
        return ConnectionLimits(idleTimeout: idleTimeout, userConnections: userConnections(descriptorLimit: soft))
    }

    /// The user's connection cap under a soft RLIMIT_NOFILE of `limit`: what the reserve leaves, at most
    /// `maximumUserConnections`, and never fewer than the request slots.
    static func userConnections(descriptorLimit limit: rlim_t) -> Int {
        let available =
            limit > rlim_t(maximumUserConnections + reservedDescriptors)
            ? maximumUserConnections : Int(limit) - reservedDescriptors
        return max(available, userRequestSlots)
    }

    func requestSlots(_ peer: PeerClass) -> Int {
        peer == .user ? Self.userRequestSlots : Self.rootRequestSlots
    }

    func connections(_ peer: PeerClass) -> Int {
        peer == .user ? userConnections : Self.rootConnections
    }
}
