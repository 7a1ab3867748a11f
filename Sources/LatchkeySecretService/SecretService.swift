import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The freedesktop.org Secret Service on a D-Bus connection, backed by the keychain engine
/// (docs/SECRET-SERVICE.md).
///
/// Threading: every handler runs on the connection's loop thread, and the mutable state below
/// (sessions, prompts, the last lock state seen) is touched only there. The engine's lock-state
/// observer runs on whichever thread locked or unlocked and only queues work on the loop; one thread
/// per running prompt runs the prompter and the unlock (Argon2id, never on the loop) and queues its
/// result on the loop.
package final class SecretService: @unchecked Sendable {
    /// Why the service could not start.
    package enum StartError: Error, Sendable, CustomStringConvertible {
        /// No bus to connect to.
        case busUnavailable(String)
        /// Another program owns `org.freedesktop.secrets`; the text names it.
        case nameTaken(String)
        case failed(String)

        package var description: String {
            switch self {
            case .busUnavailable(let text), .nameTaken(let text), .failed(let text): text
            }
        }
    }

    let keychain: Keychain
    /// What each client may reach (the agent's `CallerPolicy`).
    let policy: any BusClientPolicy
    let prompter: PinentryPrompter
    let log: Logger
    let connection: BusConnection

    // Loop thread only.
    var sessions = SessionRegistry()
    var prompts = PromptRegistry()
    var lastLockState: SecretServiceLockState?
    /// Keychain collections' `Items` as broadcast in signals, by collection id (`broadcastItems`).
    var knownItems: [String: BroadcastItems] = [:]
    /// The in-memory `session` collection.
    let sessionCollection: SessionCollection
    var pendingSearches = PendingSearches()
    /// Who each client is, by unique name.
    let busCallers = BusCallers()
    /// The caller of the call being served (`serving`); nil between calls.
    private var requestCaller: Caller?
    /// The unique name of the client whose call is being served; nil between calls.
    private var requestSender: String?
    /// The items each client unlocked by passing their user check (docs/SECRET-SERVICE.md §4c).
    let userChecks = UserCheckGrants()
    /// The item paths each client unlocked that way, for the signals when they lock again.
    var grantedPaths: [String: Set<String>] = [:]
    /// The keychain's lock count when the lock state was last looked at (`endUserChecksAfterLock`).
    var seenLockCount: UInt64 = 0
    /// The caller each client was last served as, reused for `decisionLifetime` (by unique name).
    private var decidedCallers: [String: (caller: Caller, until: ContinuousClock.Instant)] = [:]
    /// How long a client's caller is reused: the agent looks at the application files no more often.
    static let decisionLifetime: Duration = .seconds(1)

    /// Connects to `endpoint`, serves the objects and claims `org.freedesktop.secrets` (without
    /// replacing or queueing behind an owner). `onDisconnect` runs once if the bus goes away later.
    /// The service logs to `log`, never a secret.
    package static func start(
        on endpoint: BusEndpoint, keychain: Keychain, prompter: PinentryPrompter,
        log: Logger, policy: any BusClientPolicy = UnlistedBusClients(),
        onDisconnect: (@Sendable () -> Void)? = nil
    ) throws(StartError) -> SecretService {
        let connection: BusConnection
        do {
            connection = try BusConnection(endpoint) { error in
                log.warning("Secret Service: \(endpoint) disconnected (\(error.message)); no longer serving it")
                keychain.observeItemChanges(nil)
                keychain.observeLockState(nil)
                onDisconnect?()
            }
        } catch {
            throw .busUnavailable("\(endpoint) is not available (\(error.message))")
        }
        let sessionCollection: SessionCollection
        do {
            sessionCollection = try SessionCollection()
        } catch {
            connection.close()
            throw .failed("cannot make the session collection: \(error)")
        }
        let service = SecretService(
            connection: connection, keychain: keychain, prompter: prompter, log: log, policy: policy,
            sessionCollection: sessionCollection)
        do {
            try connection.sync { bus in
                try bus.addFallback(prefix: SS.root) { [service] call in
                    try service.serving(call.sender, bus) { try service.dispatch(call, bus) }
                }
                // xdg-desktop-portal's Secret backend, beside the service as gnome-keyring has it.
                try service.servePortal(bus)
                try bus.addMatch(
                    Bus.signalRule(
                        sender: SS.daemon, path: SS.daemonPath, interface: SS.daemon,
                        member: "NameOwnerChanged")
                ) { [service] message in
                    service.nameOwnerChanged(message)
                }
                service.lastLockState = service.engine.lockState()
                service.seenLockCount = service.keychain.lockCount()
            }
        } catch {
            connection.close()
            throw .failed("cannot serve the Secret Service objects: \(error)")
        }
        let claimed: Result<Void, StartError> =
            (try? connection.sync { bus -> Result<Void, StartError> in
                do {
                    try bus.requestName(SS.busName)
                    return .success(())
                } catch {
                    return .failure(.nameTaken(Self.describeOwner(of: SS.busName, on: bus, error: error)))
                }
            }) ?? .failure(.failed("the bus connection closed"))
        if case .failure(let error) = claimed {
            connection.close()
            throw error
        }
        service.startLockObserver()
        // SecItem changes of generic passwords are Secret Service changes too: announce them on the loop.
        keychain.observeItemChanges { [weak service] change in
            guard let service else { return }
            service.connection.perform { bus in service.secItemChanged(change, bus) }
        }
        return service
    }

    init(
        connection: BusConnection, keychain: Keychain, prompter: PinentryPrompter,
        log: Logger, policy: any BusClientPolicy, sessionCollection: SessionCollection
    ) {
        self.connection = connection
        self.keychain = keychain
        self.policy = policy
        self.prompter = prompter
        self.log = log
        self.sessionCollection = sessionCollection
    }

    /// Stops serving and leaves the bus.
    package func stop() {
        keychain.observeItemChanges(nil)
        keychain.observeLockState(nil)
        connection.close()
    }

    /// Whether the connection is still up.
    package var isRunning: Bool { connection.isOpen }

    /// This connection's unique name.
    package var uniqueName: String { connection.uniqueName }

    // MARK: - Who is calling

    /// The engine as the client of the call being served may use it (its access groups, from `policy`);
    /// between calls (lock-state changes, signals about SecItem changes), as an unlisted program.
    var engine: SecretServiceKeychain {
        SecretServiceKeychain(
            keychain: keychain, caller: requestCaller ?? policy.caller(ofBusClient: nil),
            userChecks: requestSender.map { UserCheckGrants.Client(userChecks, name: $0) })
    }

    /// Runs `body` as a call of `sender` (a unique name): `engine` is then that client's. Every call is
    /// served inside one, and so is what a prompt does when it completes (for the client that made it).
    func serving<T>(_ sender: String?, _ bus: Bus, _ body: () throws -> T) rethrows -> T {
        let outer = (requestCaller, requestSender)
        requestCaller = caller(of: sender, bus)
        requestSender = sender
        defer { (requestCaller, requestSender) = outer }
        return try body()
    }

    /// The caller `sender` is served as: made by `policy` from its identity, and reused for
    /// `decisionLifetime` (asking the policy on every call cost a few microseconds each).
    private func caller(of sender: String?, _ bus: Bus, now: ContinuousClock.Instant = .now) -> Caller {
        guard let sender else { return policy.caller(ofBusClient: nil) }
        if let decided = decidedCallers[sender], now < decided.until { return decided.caller }
        let caller = policy.caller(ofBusClient: busCallers.identity(of: sender, on: bus))
        if decidedCallers.count >= BusCallers.capacity { decidedCallers.removeAll() }
        decidedCallers[sender] = (caller, now + Self.decisionLifetime)
        return caller
    }

    // MARK: - Dispatch

    /// Serves a method call to a path under /org/freedesktop/secrets: the object the path names
    /// answers it from its tables (`BusObject.dispatch`), and engine errors become Secret Service
    /// errors here, in one place.
    func dispatch(_ call: BusMessage, _ bus: Bus) throws -> Bus.Dispatch {
        guard call.kind == .methodCall, let path = call.path else { return .notHandled }
        guard let object = ObjectPath(path) else {
            // The nodes between the service and its objects, for tools that walk the tree.
            let nodes = [SS.collectionPrefix, SS.aliasPrefix, SS.sessionPrefix, SS.promptPrefix]
            let interface = call.interface
            if nodes.contains(path), call.member == "Introspect",
                interface == nil || interface == SS.Interface.introspectable
            {
                try call.reply([.string(BusIntrospection.document())])
                return .handled
            }
            // Any other path under the root names no object of this service (an item path in another
            // service's form, a prompt that is not a number, ...): NoSuchObject, as for a well-formed
            // path that names nothing, whatever the member. Left to sd-bus it was UnknownMethod,
            // UnknownProperty or UnknownInterface, which clients do not read as "not there".
            throw SecretServiceErrors.noSuchObject("no such object")
        }
        do {
            switch object {
            case .service:
                try ServiceObject(service: self, bus: bus).dispatch(call)
            case .collection(let name):
                try CollectionObject(service: self, bus: bus, name: name).dispatch(call)
            case .item(let name, let id):
                switch try pendingTarget(id, caller: call.sender ?? "") {
                case nil:
                    try ItemObject(service: self, bus: bus, collection: name, id: id).dispatch(call)
                case .locked?:
                    try ItemObject(service: self, bus: bus, collection: name, id: id, pending: true).dispatch(call)
                case .item(let match)?:
                    try ItemObject(service: self, bus: bus, collection: .id(match.collection), id: match.id)
                        .dispatch(call)
                case .nothing?:
                    throw SecretServiceErrors.noSuchObject("no such item")
                }
            case .session(let n):
                try SessionObject(service: self, bus: bus, n: n, caller: call.sender ?? "").dispatch(call)
            case .prompt(let n):
                try PromptObject(service: self, bus: bus, n: n, caller: call.sender ?? "").dispatch(call)
            }
            return .handled
        } catch {
            throw SecretServiceErrors.map(error)
        }
    }

    // MARK: - Resolving paths

    /// The collections and aliases as clients see them: the stored ones (while they cannot be read,
    /// before the first unlock, `login` alone), the in-memory `session` collection after `login`, and
    /// the built-in aliases `login` and `session`, which name those two whatever is stored. A stored
    /// collection whose id is `session` (made before the in-memory one existed) is not shown: its items
    /// stay in the keychain, where SecItem finds them (docs/SECRET-SERVICE.md §4a).
    func currentState() throws -> SecretServiceState {
        var state: SecretServiceState
        switch Result(catching: { () throws(SecError) -> SecretServiceState in try engine.state() }) {
        case .success(let stored): state = stored
        case .failure(let error):
            guard error.status == SecStatus.interactionNotAllowed else { throw error }
            state = .initial
        }
        state.collections.removeAll { $0.id == SessionCollection.id }
        state.collections.insert(sessionCollection.collection, at: min(1, state.collections.count))
        for (alias, id) in Self.builtInAliases { state.aliases[alias] = id }
        return state
    }

    /// Aliases that always name the same collection, as gnome-keyring's do; `SetAlias` cannot move them.
    static let builtInAliases = [
        SecretServiceKeychain.login: SecretServiceKeychain.login, SessionCollection.id: SessionCollection.id,
    ]

    /// The id of the collection a path names; NoSuchObject when there is none.
    func collectionID(_ name: ObjectPath.CollectionName) throws -> String {
        // Always there.
        if name == .id(SecretServiceKeychain.login) { return SecretServiceKeychain.login }
        if name == .id(SessionCollection.id) { return SessionCollection.id }
        let state = try currentState()
        switch name {
        case .id(let id):
            guard state.collection(id) != nil else { throw SecretServiceErrors.noSuchObject("no collection '\(id)'") }
            return id
        case .alias(let alias):
            guard let id = state.aliases[alias], state.collection(id) != nil else {
                throw SecretServiceErrors.noSuchObject("no collection has the alias '\(alias)'")
            }
            return id
        }
    }

    /// An item a path names; NoSuchObject when there is none.
    func itemInfo(_ name: ObjectPath.CollectionName, _ id: [UInt8]) throws -> SecretServiceItemInfo {
        let collection = try collectionID(name)
        if collection == SessionCollection.id {
            guard sessionCollection.item(id, for: engine.caller) != nil else {
                throw SecretServiceErrors.noSuchObject("no such item")
            }
            return SecretServiceItemInfo(id: id, collection: collection, locked: engine.lockState().collectionsLocked)
        }
        switch Result(catching: { () throws(SecError) -> SecretServiceItemInfo? in
            try engine.info(item: id, in: collection)
        }) {
        case .success(let info?): return info
        case .success(nil): throw SecretServiceErrors.noSuchObject("no such item")
        case .failure(let error):
            // Membership cannot be checked without the index key (after `lock --all`).
            if error.status == SecStatus.interactionNotAllowed { throw SecretServiceErrors.isLocked() }
            throw error
        }
    }

    /// Every path a collection is known by: its own and its aliases'.
    func paths(ofCollection id: String, _ state: SecretServiceState) -> [String] {
        [ObjectPath.collectionPath(id)]
            + state.aliases.filter { $0.value == id }.keys.sorted().map(ObjectPath.aliasPath)
    }

    /// `Locked` changes are announced when the engine reports a change of the keys it holds (lock,
    /// unlock, login hand-off, screen lock), on the loop thread.
    private func startLockObserver() {
        keychain.observeLockState { [weak self] in
            guard let service = self else { return }
            _ = service.connection.perform { bus in
                service.checkLockState(bus)
                service.endUserChecksAfterLock(bus)
            }
        }
    }

    // MARK: - Clients

    /// A connection left the bus: its sessions close and its prompts are dismissed.
    func nameOwnerChanged(_ message: BusMessage) {
        guard message.sender == SS.daemon, let arguments = try? message.arguments(), arguments.count == 3,
            let name = arguments[0].string, name.hasPrefix(":"), arguments[2].string == ""
        else { return }
        sessions.closeAll(owner: name)
        prompts.removeAll(owner: name)
        pendingSearches.removeAll(owner: name)
        busCallers.forget(name)
        decidedCallers[name] = nil
        userChecks.forget(client: name)
        grantedPaths[name] = nil
    }

    /// "pid 812 (gnome-keyring-d, /usr/bin/gnome-keyring-daemon)" for the owner of `name`, as far as
    /// the bus and /proc tell.
    static func describeOwner(of name: String, on bus: Bus, error: any Error) -> String {
        guard
            let reply = try? bus.call(
                destination: SS.daemon, path: SS.daemonPath, interface: SS.daemon,
                member: "GetConnectionUnixProcessID", [.string(name)], timeout: .seconds(2)),
            let pid = try? reply.arguments().first?.uint32
        else {
            return "\(name) is already owned on the bus (\(error)); its owner is unknown"
        }
        return "\(name) is owned by \(describeProcess(pid_t(pid)))"
    }

    static func describeProcess(_ pid: pid_t) -> String {
        let comm = readSmallFile("/proc/\(pid)/comm")?.split(separator: "\n").first.map(String.init) ?? "?"
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        let exe =
            count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "exe unknown"
        return "pid \(pid) (\(comm), \(exe))"
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(fd, &buffer, buffer.count)
        return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil
    }

    /// The caller's process, for the prompt's description.
    func describeCaller(_ sender: String, _ bus: Bus) -> String {
        guard
            let reply = try? bus.call(
                destination: SS.daemon, path: SS.daemonPath, interface: SS.daemon,
                member: "GetConnectionUnixProcessID", [.string(sender)], timeout: .seconds(1)),
            let pid = try? reply.arguments().first?.uint32
        else { return "an application" }
        return Self.describeProcess(pid_t(pid))
    }
}
