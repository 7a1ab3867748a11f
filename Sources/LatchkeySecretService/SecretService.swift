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

    let engine: SecretServiceKeychain
    let keychain: Keychain
    let prompter: PinentryPrompter
    let log: Logger
    let connection: BusConnection

    // Loop thread only.
    var sessions = SessionRegistry()
    var prompts = PromptRegistry()
    var lastLockState: SecretServiceLockState?

    /// Connects to `endpoint`, serves the objects and claims `org.freedesktop.secrets` (without
    /// replacing or queueing behind an owner). `onDisconnect` runs once if the bus goes away later.
    /// The service logs to `log`, never a secret.
    package static func start(
        on endpoint: BusEndpoint, keychain: Keychain, prompter: PinentryPrompter,
        log: Logger,
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
        let service = SecretService(connection: connection, keychain: keychain, prompter: prompter, log: log)
        do {
            try connection.sync { bus in
                try bus.addFallback(prefix: SS.root) { [service] call in try service.dispatch(call, bus) }
                try bus.addMatch(
                    Bus.signalRule(
                        sender: SS.daemon, path: SS.daemonPath, interface: SS.daemon,
                        member: "NameOwnerChanged")
                ) { [service] message in
                    service.nameOwnerChanged(message)
                }
                service.lastLockState = service.engine.lockState()
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
        log: Logger
    ) {
        self.connection = connection
        self.keychain = keychain
        self.engine = keychain.secretService
        self.prompter = prompter
        self.log = log
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
            return .notHandled
        }
        do {
            switch object {
            case .service:
                try ServiceObject(service: self, bus: bus).dispatch(call)
            case .collection(let name):
                try CollectionObject(service: self, bus: bus, name: name).dispatch(call)
            case .item(let name, let id):
                try ItemObject(service: self, bus: bus, collection: name, id: id).dispatch(call)
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

    /// The collections and aliases; while they cannot be read (after `lock --all`), `login` alone.
    func currentState() throws -> SecretServiceState {
        switch Result(catching: { () throws(SecError) -> SecretServiceState in try engine.state() }) {
        case .success(let state): return state
        case .failure(let error):
            if error.status == SecStatus.interactionNotAllowed { return .initial }
            throw error
        }
    }

    /// The id of the collection a path names; NoSuchObject when there is none.
    func collectionID(_ name: ObjectPath.CollectionName) throws -> String {
        if name == .id(SecretServiceKeychain.login) { return SecretServiceKeychain.login }  // always there
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

    // MARK: - Signals

    func emit(_ bus: Bus, _ path: String, _ interface: String, _ member: String, _ arguments: [BusValue]) {
        do {
            try bus.emitSignal(path: path, interface: interface, member: member, arguments)
        } catch {
            log.warning("Secret Service: cannot emit \(member): \(error)")
        }
    }

    func propertiesChanged(
        _ bus: Bus, _ path: String, _ interface: String, changed: [(String, BusValue)] = [],
        invalidated: [String] = []
    ) {
        emit(
            bus, path, SS.Interface.properties, "PropertiesChanged",
            [
                .string(interface),
                .dictionary(keyType: "s", valueType: "v", changed.map { (.string($0.0), .variant($0.1)) }),
                .strings(invalidated),
            ])
    }

    /// ItemCreated/ItemDeleted/ItemChanged on the collection's paths, and the Items property.
    func itemSignal(_ bus: Bus, _ member: String, collection: String, item: [UInt8]) {
        let state = (try? currentState()) ?? .initial
        for path in paths(ofCollection: collection, state) {
            emit(bus, path, SS.Interface.collection, member, [.objectPath(ObjectPath.itemPath(collection, item))])
            if member != "ItemChanged" { propertiesChanged(bus, path, SS.Interface.collection, invalidated: ["Items"]) }
        }
    }

    /// A generic password changed through SecItem: ItemCreated/ItemChanged in its collection, or
    /// ItemDeleted in `login` (a deleted item's collection can no longer be told; docs/SECRET-SERVICE.md §6).
    func secItemChanged(_ change: KeychainItemChange, _ bus: Bus) {
        switch change {
        case .added(let id), .changed(let id):
            let state = (try? currentState()) ?? .initial
            guard let collection = state.collections.first(where: { (try? engine.info(item: id, in: $0.id)) != nil })
            else {
                return
            }
            if case .added = change {
                itemSignal(bus, "ItemCreated", collection: collection.id, item: id)
            } else {
                itemSignal(bus, "ItemChanged", collection: collection.id, item: id)
            }
        case .deleted(let id):
            itemSignal(bus, "ItemDeleted", collection: SecretServiceKeychain.login, item: id)
        }
    }

    /// Announces a change of the keychain's lock state on every collection (docs/SECRET-SERVICE.md §4).
    func checkLockState(_ bus: Bus) {
        let now = engine.lockState()
        guard now != lastLockState else { return }
        lastLockState = now
        let state = (try? currentState()) ?? .initial
        for collection in state.collections {
            for path in paths(ofCollection: collection.id, state) {
                propertiesChanged(
                    bus, path, SS.Interface.collection, changed: [("Locked", .boolean(now.collectionsLocked))],
                    invalidated: ["Items"])
            }
        }
        emit(
            bus, SS.root, SS.Interface.service, "CollectionChanged",
            [.objectPath(ObjectPath.collectionPath(SecretServiceKeychain.login))])
    }

    /// `Locked` changes are announced when the engine reports a change of the keys it holds (lock,
    /// unlock, login hand-off, screen lock), on the loop thread.
    private func startLockObserver() {
        keychain.observeLockState { [weak self] in
            guard let service = self else { return }
            _ = service.connection.perform { bus in service.checkLockState(bus) }
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
