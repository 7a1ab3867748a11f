import LatchkeyDBus
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Watches logind on the system bus: `Lock`/`Unlock` and `LockedHint` of our uid's sessions,
/// `PrepareForSleep`, and `SessionRemoved` of any session (the agent ends the login sessions it knows
/// in it). Loop thread only; kept alive by the handlers it registers.
final class LogindWatch {
    static let name = "org.freedesktop.login1"
    static let managerPath = "/org/freedesktop/login1"
    static let managerInterface = "org.freedesktop.login1.Manager"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let sessionPathPrefix = "/org/freedesktop/login1/session"

    private let uid: uid_t
    private let emit: @Sendable (LockEvent) -> Void
    private let sessionRemoved: @Sendable (String) -> Void
    private let log: Logger
    private var owners: NameOwners!
    private weak var bus: Bus?
    /// Object paths of the sessions that belong to `uid`, as logind last listed them.
    private var sessions: Set<String> = []

    init(
        uid: uid_t, emit: @escaping @Sendable (LockEvent) -> Void,
        sessionRemoved: @escaping @Sendable (String) -> Void = { _ in }, log: Logger
    ) {
        self.uid = uid
        self.emit = emit
        self.sessionRemoved = sessionRemoved
        self.log = log
    }

    // Runs when the connection is freed (stop, or a lost bus): the handlers were the last owners.
    deinit { log.debug("stopped watching logind") }

    func start(on bus: Bus, ready: @escaping () -> Void) throws(BusError) {
        self.bus = bus
        // Weak: the watch owns `owners`, so a strong capture would be a cycle that outlives the bus.
        owners = NameOwners(names: [Self.name]) { [weak self] _, owner in self?.ownerChanged(owner) }

        // No sender= in the rules: the owner check below is the one that counts, and it is the one tested.
        try bus.addMatch(Bus.signalRule(interface: Self.sessionInterface)) { [self] message in
            sessionSignal(message)
        }
        try bus.addMatch(
            Bus.signalRule(
                pathNamespace: Self.sessionPathPrefix,
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                arg0: Self.sessionInterface)
        ) { [self] message in
            propertiesChanged(message)
        }
        try bus.addMatch(Bus.signalRule(path: Self.managerPath, interface: Self.managerInterface)) { [self] message in
            managerSignal(message)
        }
        try owners.start(on: bus) { [self] in
            guard owners.owner(of: Self.name) != nil else {
                log.info(
                    """
                    logind (\(Self.name)) is not on the system bus; session lock and sleep signals \
                    will be watched if it appears
                    """)
                return ready()
            }
            listSessions(then: ready)
        }
    }

    private func ownerChanged(_ owner: String?) {
        sessions = []
        if let owner {
            log.info("logind (\(Self.name)) is now \(owner); listing its sessions again")
            listSessions(then: {})
        } else {
            log.warning("logind (\(Self.name)) left the system bus; its signals are ignored until it returns")
        }
    }

    /// Replaces `sessions` with logind's current list; `then` runs when the answer (or an error) arrives.
    private func listSessions(then done: @escaping () -> Void) {
        do {
            try bus?.callAsync(
                destination: Self.name, path: Self.managerPath, interface: Self.managerInterface,
                member: "ListSessions"
            ) { [self] result in
                defer { done() }
                switch result {
                case .failure(let error):
                    log.warning("logind ListSessions failed: \(error)")
                case .success(let reply):
                    guard isFromOwner(reply, "the ListSessions reply") else { return }
                    guard let list = try? reply.arguments().first?.elements else {
                        return log.warning("logind ListSessions: unexpected reply signature \(reply.signature)")
                    }
                    // a(susso): id, uid, user name, seat, object path
                    sessions = Set(
                        list.compactMap { entry in
                            guard let fields = entry.fields, fields.count == 5, fields[1].uint32 == uid else {
                                return nil
                            }
                            return fields[4].string
                        })
                    log.debug("watching \(sessions.count) logind session(s) of uid \(uid)")
                }
            }
        } catch {
            log.warning("logind ListSessions failed: \(error)")
            done()
        }
    }

    private func sessionSignal(_ message: BusMessage) {
        guard let member = message.member, member == "Lock" || member == "Unlock",
            isFromOwner(message, "Session.\(member)"), isOurSession(message, "Session.\(member)")
        else { return }
        emit(member == "Lock" ? .locked(source: "login1.Lock") : .unlocked(source: "login1.Unlock"))
    }

    private func propertiesChanged(_ message: BusMessage) {
        guard isFromOwner(message, "PropertiesChanged"), isOurSession(message, "PropertiesChanged"),
            let arguments = try? message.arguments(), arguments.count == 3,
            let hint = arguments[1].stringKeyedEntries?["LockedHint"]?.variantValue?.bool
        else { return }
        emit(hint ? .locked(source: "login1.LockedHint") : .unlocked(source: "login1.LockedHint"))
    }

    private func managerSignal(_ message: BusMessage) {
        guard let member = message.member, ["PrepareForSleep", "SessionNew", "SessionRemoved"].contains(member),
            isFromOwner(message, "Manager.\(member)"), let arguments = try? message.arguments()
        else { return }
        switch member {
        case "PrepareForSleep":
            guard let starting = arguments.first?.bool else { return }
            emit(starting ? .preparingForSleep : .resumed)
        case "SessionNew":
            // The signal carries no uid: ask for the list again rather than one property per session.
            listSessions(then: {})
        default:  // SessionRemoved(s id, o path)
            guard arguments.count == 2, let id = arguments[0].string, let path = arguments[1].string else { return }
            sessions.remove(path)
            // Of any uid: logind's ids are unique, the agent ends only the login sessions it has under
            // this id, and the user's list here may not know a session that was just created.
            sessionRemoved(id)
        }
    }

    private func isFromOwner(_ message: BusMessage, _ what: String) -> Bool {
        let owner = owners.owner(of: Self.name)
        if let sender = message.sender, sender == owner { return true }
        log.debug(
            """
            ignored \(what) from \(message.sender ?? "an unknown sender"): \
            the owner of \(Self.name) is \(owner ?? "nobody")
            """)
        return false
    }

    private func isOurSession(_ message: BusMessage, _ what: String) -> Bool {
        if let path = message.path, sessions.contains(path) { return true }
        log.debug("ignored \(what) on \(message.path ?? "?"): not a session of uid \(uid)")
        return false
    }
}
