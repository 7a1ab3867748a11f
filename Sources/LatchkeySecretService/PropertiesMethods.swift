import LatchkeyDesktop
import LatchkeyEngine
import LatchkeyModel

/// `org.freedesktop.DBus.Properties` for every object (docs/SECRET-SERVICE.md §4, §6).
extension SecretService {
    func handleProperties(_ call: BusMessage, _ object: ObjectPath, _ bus: Bus) throws -> Bus.Dispatch {
        let member = call.member ?? ""
        switch member {
        case "Get":
            let arguments = try Arguments.read(call, "ss")
            let interface = try Arguments.string(arguments[0])
            let name = try Arguments.string(arguments[1])
            let all = try properties(of: object, interface: interface.isEmpty ? nil : interface)
            guard let value = all.first(where: { $0.0 == name })?.1 else {
                throw BusError(name: SS.ErrorName.invalidArgs, message: "no property \(interface).\(name) here")
            }
            try call.reply([.variant(value)])

        case "GetAll":
            let interface = try Arguments.string(try Arguments.read(call, "s")[0])
            let all = try properties(of: object, interface: interface.isEmpty ? nil : interface)
            try call.reply([.dictionary(keyType: "s", valueType: "v", all.map { (.string($0.0), .variant($0.1)) })])

        case "Set":
            let arguments = try Arguments.read(call, "ssv", limits: Arguments.attributeLimits)
            let interface = try Arguments.string(arguments[0])
            let name = try Arguments.string(arguments[1])
            guard case .variant(let value) = arguments[2] else { throw SecretServiceErrors.invalidArgs("value must be a variant") }
            try setProperty(object, interface: interface, name: name, value: value, bus)
            try call.reply()

        default:
            throw Self.unknownMethod(SS.Interface.properties, member)
        }
        return .handled
    }

    /// The properties of an object's interface (nil: its Secret Service interface), in spec order.
    private func properties(of object: ObjectPath, interface: String?) throws -> [(String, BusValue)] {
        switch object {
        case .service:
            guard Self.addressed(interface, SS.Interface.service) else { return [] }
            let state = try currentState()
            return [("Collections", Arguments.objectPathList(state.collections.map { ObjectPath.collectionPath($0.id) }))]

        case .collection(let name):
            let id = try collectionID(name)
            guard Self.addressed(interface, SS.Interface.collection) else { return [] }
            let state = try currentState()
            let collection = state.collection(id)
            let lock = engine.lockState()
            // Without the index key the members cannot be told apart (docs/SECRET-SERVICE.md §4).
            let items = lock.searchable ? ((try? engine.items(in: id)) ?? []) : []
            return [("Items", Arguments.objectPathList(items.map { ObjectPath.itemPath(id, $0.id) })),
                    ("Label", .string(collection?.label ?? "")),
                    ("Locked", .boolean(lock.collectionsLocked)),
                    ("Created", .uint64(collection?.created ?? 0)),
                    ("Modified", .uint64(collection?.modified ?? 0))]

        case .item(let name, let id):
            let info: SecretServiceItemInfo
            do {
                info = try itemInfo(name, id)
            } catch let error as BusError where error.name == SS.ErrorName.isLocked {
                guard Self.addressed(interface, SS.Interface.item) else { return [] }
                return Self.lockedItemProperties
            }
            guard Self.addressed(interface, SS.Interface.item) else { return [] }
            guard !info.locked else { return Self.lockedItemProperties }
            let item: SecretServiceItem
            switch Result(catching: { () throws(SecError) -> SecretServiceItem in try engine.item(id, in: info.collection) }) {
            case .success(let opened):
                item = opened
            case .failure(let error):
                // Locked between the two calls: as any locked item.
                if error.status == SecStatus.interactionNotAllowed { return Self.lockedItemProperties }
                throw error
            }
            return [("Locked", .boolean(false)), ("Attributes", Arguments.attributesValue(item.attributes)),
                    ("Label", .string(item.label)), ("Created", .uint64(item.created)),
                    ("Modified", .uint64(item.modified))]

        case .session, .prompt:
            return []  // no properties
        }
    }

    /// A locked item's label and attributes are sealed under a key that is not held: they read as
    /// empty, and `Locked` says why (docs/SECRET-SERVICE.md §4).
    static let lockedItemProperties: [(String, BusValue)] = [
        ("Locked", .boolean(true)), ("Attributes", Arguments.attributesValue(SecretAttributes())),
        ("Label", .string("")), ("Created", .uint64(0)), ("Modified", .uint64(0)),
    ]

    private func setProperty(_ object: ObjectPath, interface: String, name: String, value: BusValue, _ bus: Bus) throws {
        switch (object, name) {
        case (.collection(let collection), "Label") where Self.addressed(interface.isEmpty ? nil : interface, SS.Interface.collection):
            let id = try collectionID(collection)
            try engine.setLabel(try Arguments.label(value), ofCollection: id)
            let state = try currentState()
            for path in paths(ofCollection: id, state) {
                propertiesChanged(bus, path, SS.Interface.collection, changed: [("Label", value)])
            }
            emit(bus, SS.root, SS.Interface.service, "CollectionChanged", [.objectPath(ObjectPath.collectionPath(id))])

        case (.item(let collection, let id), "Label") where Self.addressed(interface.isEmpty ? nil : interface, SS.Interface.item):
            let info = try itemInfo(collection, id)
            try engine.updateItem(id, in: info.collection, label: try Arguments.label(value))
            propertiesChanged(bus, ObjectPath.itemPath(info.collection, id), SS.Interface.item, changed: [("Label", value)])
            itemSignal(bus, "ItemChanged", collection: info.collection, item: id)

        case (.item(let collection, let id), "Attributes") where Self.addressed(interface.isEmpty ? nil : interface, SS.Interface.item):
            let info = try itemInfo(collection, id)
            let attributes = try Arguments.attributes(value)
            try engine.updateItem(id, in: info.collection, attributes: attributes)
            propertiesChanged(bus, ObjectPath.itemPath(info.collection, id), SS.Interface.item,
                              changed: [("Attributes", Arguments.attributesValue(attributes))])
            itemSignal(bus, "ItemChanged", collection: info.collection, item: id)

        default:
            // Make unknown objects NoSuchObject, and known read-only properties PropertyReadOnly.
            switch object {
            case .collection(let collection): _ = try collectionID(collection)
            case .item(let collection, let id): _ = try itemInfo(collection, id)
            default: break
            }
            let known = try properties(of: object, interface: interface.isEmpty ? nil : interface).contains { $0.0 == name }
            throw BusError(name: known ? SS.ErrorName.propertyReadOnly : SS.ErrorName.invalidArgs,
                           message: known ? "\(name) is read-only" : "no writable property \(interface).\(name) here")
        }
    }
}
