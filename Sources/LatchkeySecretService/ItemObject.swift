import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel

/// `org.freedesktop.Secret.Item` at /org/freedesktop/secrets/collection/ID/REF (and under an alias).
///
/// A value lives for one call and keeps what it looked up (the item's record, its properties), so
/// `GetAll` opens the item once.
final class ItemObject: SecretServiceObject {
    let service: SecretService
    let bus: Bus
    let collection: ObjectPath.CollectionName
    let id: [UInt8]
    /// A search made before the keychain could be searched (`PendingSearches`): a locked item that
    /// names no item yet.
    let pending: Bool
    private var resolvedInfo: SecretServiceItemInfo?
    private var resolvedProperties: Properties?

    init(service: SecretService, bus: Bus, collection: ObjectPath.CollectionName, id: [UInt8], pending: Bool = false) {
        self.service = service
        self.bus = bus
        self.collection = collection
        self.id = id
        self.pending = pending
    }

    static let interfaces = [
        BusInterface<ItemObject>(
            SS.Interface.item,
            methods: [
                BusMethod("Delete", out: [("Prompt", "o")]) { try $0.delete($1) },
                // The hot path: the engine checks membership and lock state itself, in one pass.
                BusMethod(
                    "GetSecret", in: [("session", "o")], out: [("secret", "(oayays)")], options: .checksObjectItself
                ) {
                    try $0.getSecret($1)
                },
                // The secret's bytes are zeroed in the message as they are read, and in what was read from
                // it once the item is stored.
                BusMethod("SetSecret", in: [("secret", "(oayays)")], options: .wipesByteArrays) {
                    try $0.setSecret($1)
                },
            ],
            properties: [
                BusProperty("Locked", "b") { .boolean(try $0.properties().locked) },
                BusProperty(
                    "Attributes", "a{ss}", get: { Arguments.attributesValue(try $0.properties().attributes) },
                    set: { try $0.setAttributes($1) }),
                BusProperty("Label", "s", get: { .string(try $0.properties().label) }, set: { try $0.setLabel($1) }),
                BusProperty("Created", "t") { .uint64(try $0.properties().created) },
                BusProperty("Modified", "t") { .uint64(try $0.properties().modified) },
            ])
    ]

    /// What the properties say. A locked item's label and attributes are sealed under a key that is
    /// not held: they read as empty, and `Locked` says why (docs/SECRET-SERVICE.md §4).
    struct Properties {
        var locked: Bool
        var attributes: SecretAttributes
        var label: String
        var created: UInt64
        var modified: UInt64

        static let ofLockedItem = Properties(
            locked: true, attributes: SecretAttributes(), label: "", created: 0, modified: 0)
    }

    /// The item's record; NoSuchObject when the path names no item, IsLocked when that cannot be told.
    func info() throws -> SecretServiceItemInfo {
        if let resolvedInfo { return resolvedInfo }
        if pending { return SecretServiceItemInfo(id: id, collection: SecretServiceKeychain.login, locked: true) }
        let info = try service.itemInfo(collection, id)
        resolvedInfo = info
        return info
    }

    func checkExists() throws { _ = try info() }

    /// A pending search can be read (as a locked item) and unlocked, nothing else until the keychain
    /// can be searched.
    private func requireItem() throws {
        if pending { throw SecretServiceErrors.isLocked("the keychain is locked; unlock it to evaluate the search") }
    }

    /// Membership cannot be checked without the index key (after `lock --all`): the item then reads
    /// as a locked one.
    func prepareToReadProperties() throws {
        do {
            _ = try info()
        } catch let error as BusError where error.name == SS.ErrorName.isLocked {
            resolvedProperties = .ofLockedItem
        }
    }

    func childNodes() throws -> [String] {
        _ = try info()
        return []
    }

    private func properties() throws -> Properties {
        if let resolvedProperties { return resolvedProperties }
        let properties = try readProperties()
        resolvedProperties = properties
        return properties
    }

    private func readProperties() throws -> Properties {
        let info = try info()
        guard !info.locked || info.awaitsUserCheck else { return .ofLockedItem }
        let read = { () throws(SecError) -> SecretServiceItem in try self.service.item(self.id, in: info.collection) }
        switch Result(catching: read) {
        case .success(let item):
            return Properties(
                locked: info.locked, attributes: item.attributes, label: item.label, created: item.created,
                modified: item.modified)
        case .failure(let error):
            // Locked between the two calls: as any locked item.
            if error.status == SecStatus.interactionNotAllowed { return .ofLockedItem }
            throw error
        }
    }

    func getSecret(_ call: BusMethodCall) throws {
        try requireItem()
        let sessionPath = try call.objectPath(0)
        let session = try sessions.session(sessionPath, caller: call.sender)
        let secret = try service.secret(id, in: try service.collectionID(collection))
        defer { secret.wipe() }
        let encoded = try sessions.encode(secret, sessionPath: sessionPath, session: session)
        defer { encoded.wipeByteArrays() }
        try call.reply([encoded])
    }

    func delete(_ call: BusMethodCall) throws {
        try requireItem()
        let info = try info()
        let before = Keychain.commitStamp
        try service.deleteItem(id, in: info.collection)
        let after = Keychain.commitStamp
        try call.reply([.objectPath(SS.noObject)])
        service.itemSignal(bus, "ItemDeleted", collection: info.collection, item: id, commits: (before, after))
    }

    func setSecret(_ call: BusMethodCall) throws {
        try requireItem()
        let info = try info()
        let secret = try sessions.decode(call.arguments[0], caller: call.sender)
        defer { secret.wipe() }
        try service.updateItem(id, in: info.collection, secret: secret)
        try call.reply()
        service.itemSignal(bus, "ItemChanged", collection: info.collection, item: id, properties: ["Modified"])
    }

    func setLabel(_ value: BusValue) throws {
        try requireItem()
        let info = try info()
        try service.updateItem(id, in: info.collection, label: try Arguments.label(value))
        service.itemSignal(
            bus, "ItemChanged", collection: info.collection, item: id, properties: ["Label", "Modified"])
    }

    func setAttributes(_ value: BusValue) throws {
        try requireItem()
        let info = try info()
        let attributes = try Arguments.attributes(value)
        try service.updateItem(id, in: info.collection, attributes: attributes)
        service.itemSignal(
            bus, "ItemChanged", collection: info.collection, item: id, properties: ["Attributes", "Modified"])
    }
}
