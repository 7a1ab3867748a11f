import CLatchkeySystem
import LatchkeyApplications
import LatchkeyDBus

#if canImport(Glibc)
    import Glibc
#endif

/// Who a Secret Service client is (issue 12, docs/IDENTITY.md "Secret Service callers"): the process
/// behind its bus connection, as the bus daemon recorded it when the client connected
/// (`GetConnectionCredentials`), read the way the agent reads a socket client (`ProcessInspection`).
///
/// One identity per unique name, taken at the name's first call and kept: the bus never gives a unique
/// name to a second connection, so the cache cannot lend one client's identity to another, and a
/// client that runs another program later keeps the identity it had (as a socket client does). The
/// cache holds `capacity` names, the oldest dropped first; a client dropped and seen again is
/// identified again.
///
/// Confined to the bus connection's loop thread, like the Secret Service objects that ask.
package final class BusCallers {
    /// Names remembered at most (a few hundred bytes each).
    package static let capacity = 512

    private let vantage: Vantage
    private var known: [String: CallerIdentity] = [:]
    /// `known`'s names, oldest first.
    private var order: [String] = []

    package init(vantage: Vantage = .agent) {
        self.vantage = vantage
    }

    /// The identity of the client `sender` (a unique name), from the cache or the bus; nil when the bus
    /// daemon gives no credentials for it (then nothing is kept, and the next call asks again).
    package func identity(of sender: String, on bus: Bus) -> CallerIdentity? {
        if let identity = known[sender] { return identity }
        guard let identity = Self.identify(sender, on: bus, vantage: vantage) else { return nil }
        if order.count == Self.capacity { known[order.removeFirst()] = nil }
        known[sender] = identity
        order.append(sender)
        return identity
    }

    /// Drops what is known of `name` (it left the bus; the bus never gives its name to another connection).
    package func forget(_ name: String) {
        guard known.removeValue(forKey: name) != nil else { return }
        order.removeAll { $0 == name }
    }

    /// Identifies `sender` afresh; nil when the bus daemon gives no usable credentials.
    ///
    /// With `ProcessFD` the pidfd is the connecting process's own, and the reads are confirmed through
    /// it. With only `ProcessID` (dbus-daemon before 1.16), the pid is opened now (`pidfd_open`) and
    /// must belong to a process of the same uid that started before the call reached the agent; the
    /// reads are confirmed through that pidfd. The window that remains: if the client's process
    /// exited after handing its connection to another process, and its pid was taken by another
    /// program of the user before the call was sent, that program is who the agent sees. A client
    /// controls when it calls, so this is open to a same-user process that arranges it; the daemon's
    /// `ProcessFD` closes it.
    package static func identify(_ sender: String, on bus: Bus, vantage: Vantage = .agent) -> CallerIdentity? {
        let arrival = ProcessInspection.ticksSinceBoot()
        guard let credentials = try? bus.connectionCredentials(of: sender), let uid = credentials.uid,
            let rawPID = credentials.pid
        else { return nil }
        guard rawPID > 0, rawPID <= UInt32(Int32.max) else {
            return CallerIdentity(uid: uid, pid: 0, doubts: [.unreadable("the bus knows no process for \(sender)")])
        }
        let pid = Int32(rawPID)
        // Root and other users reach the session bus too; only the user's own programs are identified.
        guard uid == getuid() else {
            return CallerIdentity(uid: uid, pid: pid, doubts: [.unreadable("not the user's process")])
        }
        if let pidfd = credentials.processFD {
            return ProcessInspection.identify(pid: pid, pidfd: pidfd, uid: uid, vantage: vantage)
        }
        let pidfd = latchkey_pidfd_open(pid)
        guard pidfd >= 0 else {
            return CallerIdentity(
                uid: uid, pid: pid,
                doubts: [.unreadable("cannot follow pid \(pid): \(String(cString: strerror(errno)))")])
        }
        defer { close(pidfd) }
        return ProcessInspection.identify(pid: pid, pidfd: pidfd, uid: uid, vantage: vantage, startedBy: arrival)
    }
}
