import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel

/// `org.freedesktop.Secret.Collection` at /org/freedesktop/secrets/collection/ID and /aliases/NAME.
///
/// A value lives for one call and keeps what it looked up (the collection's id, the service's
/// state, the lock state), so `GetAll` asks the engine once for each.
final class CollectionObject: SecretServiceObject {
    let service: SecretService
    let bus: Bus
    let name: ObjectPath.CollectionName
    private var resolvedID: String?
    private var resolvedState: SecretServiceState?
    private var resolvedLock: SecretServiceLockState?

    init(service: SecretService, bus: Bus, name: ObjectPath.CollectionName) {
        self.service = service
        self.bus = bus
        self.name = name
    }

    static let interfaces = [
        BusInterface<CollectionObject>(
            SS.Interface.collection,
            methods: [
                BusMethod("Delete", out: [("prompt", "o")]) { try $0.delete($1) },
                BusMethod(
                    "SearchItems", in: [("attributes", "a{ss}")], out: [("results", "ao")],
                    limits: Arguments.attributeLimits
                ) { try $0.searchItems($1) },
                // The secret's bytes are zeroed in the message as they are read, and in what was read from
                // it once the item is stored.
                BusMethod(
                    "CreateItem", in: [("properties", "a{sv}"), ("secret", "(oayays)"), ("replace", "b")],
                    out: [("item", "o"), ("prompt", "o")], limits: Arguments.attributeLimits,
                    options: .wipesByteArrays
                ) { try $0.createItem($1) },
            ],
            properties: [
                // Without the index key the members cannot be told apart (docs/SECRET-SERVICE.md §4).
                BusProperty("Items", "ao") { object in
                    object.service.itemsProperty(ofCollection: try object.id(), searchable: object.lock().searchable)
                },
                BusProperty(
                    "Label", "s", get: { .string(try $0.collection()?.label ?? "") }, set: { try $0.setLabel($1) }),
                BusProperty("Locked", "b") { .boolean($0.lock().collectionsLocked) },
                BusProperty("Created", "t") { .uint64(try $0.collection()?.created ?? 0) },
                BusProperty("Modified", "t") { .uint64(try $0.collection()?.modified ?? 0) },
            ],
            signals: [
                BusSignal("ItemCreated", [("item", "o")]),
                BusSignal("ItemDeleted", [("item", "o")]),
                BusSignal("ItemChanged", [("item", "o")]),
            ])
    ]

    /// The collection's id; NoSuchObject when the path names none.
    func id() throws -> String {
        if let resolvedID { return resolvedID }
        let id = try service.collectionID(name)
        resolvedID = id
        return id
    }

    private func state() throws -> SecretServiceState {
        if let resolvedState { return resolvedState }
        let state = try service.currentState()
        resolvedState = state
        return state
    }

    private func collection() throws -> SecretServiceCollection? {
        try state().collection(try id())
    }

    private func lock() -> SecretServiceLockState {
        if let resolvedLock { return resolvedLock }
        let lock = engine.lockState()
        resolvedLock = lock
        return lock
    }

    func checkExists() throws { _ = try id() }

    func childNodes() throws -> [String] {
        let id = try id()
        return (try? service.items(in: id))?.prefix(10_000).map { ObjectPath.hex($0.id) } ?? []
    }

    func delete(_ call: BusMethodCall) throws {
        let id = try id()
        guard id != SessionCollection.id else {
            throw BusError(name: SS.ErrorName.notSupported, message: "the session collection cannot be deleted")
        }
        let state = try service.currentState()
        let paths = service.paths(ofCollection: id, state)
        let deleted = try engine.deleteCollection(id)
        service.log.info("Secret Service: deleted the collection '\(id)' and its \(deleted.count) items")
        for item in deleted {
            for path in paths {
                service.emit(
                    bus, path, SS.Interface.collection, "ItemDeleted", [.objectPath(ObjectPath.itemPath(id, item))])
            }
        }
        service.emit(
            bus, SS.root, SS.Interface.service, "CollectionDeleted", [.objectPath(ObjectPath.collectionPath(id))])
        service.collectionsChanged(bus)
        try call.reply([.objectPath(SS.noObject)])
    }

    func searchItems(_ call: BusMethodCall) throws {
        let id = try id()
        let query = try Arguments.attributes(call.arguments[0])
        let found: [SecretServiceItemInfo]
        do {
            found = try service.search(query, in: id)
        } catch let error as SecError where error.status == SecStatus.interactionNotAllowed {
            // Never unlocked: the search itself, as one locked item (PendingSearches).
            guard let pending = service.pendingSearchPath(query, in: id, caller: call.sender) else { throw error }
            try call.reply([Arguments.objectPathList([pending])])
            return
        }
        try call.reply([Arguments.objectPathList(found.map { ObjectPath.itemPath($0.collection, $0.id) })])
    }

    func createItem(_ call: BusMethodCall) throws {
        let id = try id()
        let properties = try Arguments.properties(call.arguments[0])
        let label = try properties[SS.Property.itemLabel].map(Arguments.label) ?? ""
        let attributes = try properties[SS.Property.itemAttributes].map(Arguments.attributes) ?? SecretAttributes()
        let replace = try call.boolean(2)
        let secret = try sessions.decode(call.arguments[1], caller: call.sender)
        defer { secret.wipe() }
        let before = Keychain.commitStamp
        let (item, created) = try service.createItem(
            in: id, label: label, attributes: attributes, secret: secret,
            replace: replace)
        let after = Keychain.commitStamp
        try call.reply([.objectPath(ObjectPath.itemPath(id, item)), .objectPath(SS.noObject)])
        if created {
            service.itemSignal(bus, "ItemCreated", collection: id, item: item, commits: (before, after))
        } else {
            service.itemSignal(bus, "ItemChanged", collection: id, item: item, properties: ["Label", "Modified"])
        }
    }

    func setLabel(_ value: BusValue) throws {
        let id = try id()
        if id == SessionCollection.id {
            try service.sessionCollection.setLabel(try Arguments.label(value), engine)
        } else {
            try engine.setLabel(try Arguments.label(value), ofCollection: id)
        }
        // gnome-keyring's order: CollectionChanged, then the new values on every path.
        service.emit(
            bus, SS.root, SS.Interface.service, "CollectionChanged", [.objectPath(ObjectPath.collectionPath(id))])
        service.collectionPropertiesChanged(bus, id, ["Label", "Modified"])
    }
}
