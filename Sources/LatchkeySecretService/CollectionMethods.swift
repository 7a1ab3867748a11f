import LatchkeyDesktop
import LatchkeyEngine
import LatchkeyModel

/// `org.freedesktop.Secret.Collection` at /org/freedesktop/secrets/collection/ID and /aliases/NAME.
extension SecretService {
    func handleCollection(_ call: BusMessage, _ name: ObjectPath.CollectionName, _ member: String, _ interface: String?,
                          _ bus: Bus) throws -> Bus.Dispatch {
        let id = try collectionID(name)
        guard Self.addressed(interface, SS.Interface.collection) else { throw Self.unknownMethod(interface, member) }
        switch member {
        case "Delete":
            _ = try Arguments.read(call, "")
            let state = try currentState()
            let paths = paths(ofCollection: id, state)
            let deleted = try engine.deleteCollection(id)
            log.info("Secret Service: deleted the collection '\(id)' and its \(deleted.count) items")
            for item in deleted {
                for path in paths { emit(bus, path, SS.Interface.collection, "ItemDeleted", [.objectPath(ObjectPath.itemPath(id, item))]) }
            }
            emit(bus, SS.root, SS.Interface.service, "CollectionDeleted", [.objectPath(ObjectPath.collectionPath(id))])
            propertiesChanged(bus, SS.root, SS.Interface.service, invalidated: ["Collections"])
            try call.reply([.objectPath(SS.noObject)])

        case "SearchItems":
            let arguments = try Arguments.read(call, "a{ss}", limits: Arguments.attributeLimits)
            let found = try engine.search(try Arguments.attributes(arguments[0]), in: id)
            try call.reply([Arguments.objectPathList(found.map { ObjectPath.itemPath($0.collection, $0.id) })])

        case "CreateItem":
            // The secret's bytes are zeroed in the message as they are read, and in what was read
            // from it once the item is stored.
            let arguments = try Arguments.read(call, "a{sv}(oayays)b", limits: Arguments.attributeLimits,
                                               wipingByteArrays: true)
            defer { for argument in arguments { argument.wipeByteArrays() } }
            let properties = try Arguments.properties(arguments[0])
            let label = try properties[SS.Property.itemLabel].map(Arguments.label) ?? ""
            let attributes = try properties[SS.Property.itemAttributes].map(Arguments.attributes) ?? SecretAttributes()
            let replace = try Arguments.bool(arguments[2])
            let secret = try sessions.decode(arguments[1], caller: call.sender ?? "")
            defer { secret.wipe() }
            let (item, created) = try engine.createItem(in: id, label: label, attributes: attributes, secret: secret,
                                                       replace: replace)
            try call.reply([.objectPath(ObjectPath.itemPath(id, item)), .objectPath(SS.noObject)])
            itemSignal(bus, created ? "ItemCreated" : "ItemChanged", collection: id, item: item)

        default:
            throw Self.unknownMethod(interface, member)
        }
        return .handled
    }

    func handleItem(_ call: BusMessage, _ name: ObjectPath.CollectionName, _ id: [UInt8], _ member: String,
                    _ interface: String?, _ bus: Bus) throws -> Bus.Dispatch {
        guard Self.addressed(interface, SS.Interface.item) else { throw Self.unknownMethod(interface, member) }
        if member == "GetSecret" {
            // The hot path: the engine checks membership and lock state itself, in one pass.
            let sessionPath = try Arguments.objectPath(try Arguments.read(call, "o")[0])
            let session = try sessions.session(sessionPath, caller: call.sender ?? "")
            let secret = try engine.secret(id, in: try collectionID(name))
            defer { secret.wipe() }
            let encoded = try sessions.encode(secret, sessionPath: sessionPath, session: session)
            defer { encoded.wipeByteArrays() }
            try call.reply([encoded])
            return .handled
        }
        let info = try itemInfo(name, id)
        switch member {
        case "Delete":
            _ = try Arguments.read(call, "")
            try engine.deleteItem(id, in: info.collection)
            try call.reply([.objectPath(SS.noObject)])
            itemSignal(bus, "ItemDeleted", collection: info.collection, item: id)

        case "SetSecret":
            let arguments = try Arguments.read(call, "(oayays)", wipingByteArrays: true)
            defer { for argument in arguments { argument.wipeByteArrays() } }
            let secret = try sessions.decode(arguments[0], caller: call.sender ?? "")
            defer { secret.wipe() }
            try engine.updateItem(id, in: info.collection, secret: secret)
            try call.reply()
            itemSignal(bus, "ItemChanged", collection: info.collection, item: id)

        default:
            throw Self.unknownMethod(interface, member)
        }
        return .handled
    }
}
