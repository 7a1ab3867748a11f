import LatchkeyEngine
import LatchkeyModel

/// Item operations by collection id, for the D-Bus objects: the in-memory `session` collection's are
/// `SessionCollection`'s, every other collection's are the keychain's (`SecretServiceKeychain`). Errors
/// are the engine's `SecError`s (and LimitsExceeded for a full session collection), mapped to D-Bus
/// errors where every call's are (`SecretService.dispatch`). Loop thread only.
extension SecretService {
    /// Every item of a collection, in order.
    func items(in collection: String) throws -> [SecretServiceItemInfo] {
        try search(SecretAttributes(), in: collection)
    }

    /// Items whose attributes include every pair of `query`, in one collection or (nil) in all: the
    /// keychain's first, then the session collection's. A stored collection that the session collection
    /// hides (`currentState`) is not searched.
    func search(_ query: SecretAttributes, in collection: String? = nil) throws -> [SecretServiceItemInfo] {
        var found: [SecretServiceItemInfo] = []
        if collection != SessionCollection.id {
            found = try engine.search(query, in: collection).filter { $0.collection != SessionCollection.id }
        }
        if collection == nil || collection == SessionCollection.id, !sessionCollection.items.isEmpty {
            try query.validate()
            let locked = engine.lockState().collectionsLocked
            found += sessionCollection.search(query, for: engine.caller).map {
                SecretServiceItemInfo(id: $0, collection: SessionCollection.id, locked: locked)
            }
        }
        return found
    }

    /// An item's label, attributes and dates; errSecInteractionNotAllowed while it is locked.
    func item(_ id: [UInt8], in collection: String) throws(SecError) -> SecretServiceItem {
        guard collection == SessionCollection.id else { return try engine.item(id, in: collection) }
        guard let item = sessionCollection.item(id, for: engine.caller) else { throw .notFound }
        guard !engine.lockState().collectionsLocked else { throw .locked }
        return SecretServiceItem(
            id: id, collection: collection, label: item.label, attributes: item.attributes,
            contentType: item.contentType, created: item.created, modified: item.modified)
    }

    /// An item's secret; errSecInteractionNotAllowed while it is locked.
    func secret(_ id: [UInt8], in collection: String) throws -> SecretServiceSecret {
        guard collection == SessionCollection.id else { return try engine.secret(id, in: collection) }
        return try sessionCollection.secret(id, engine)
    }

    /// `CreateItem` (docs/SECRET-SERVICE.md §3, §4a); returns the item's id and whether it is new.
    func createItem(
        in collection: String, label: String, attributes: SecretAttributes, secret: SecretServiceSecret,
        replace: Bool
    ) throws -> (id: [UInt8], created: Bool) {
        guard collection == SessionCollection.id else {
            return try engine.createItem(
                in: collection, label: label, attributes: attributes, secret: secret, replace: replace)
        }
        return try sessionCollection.create(
            label: label, attributes: attributes, secret: secret, replace: replace, engine)
    }

    /// Changes an item's label, attributes and/or secret; errSecInteractionNotAllowed while it is locked.
    func updateItem(
        _ id: [UInt8], in collection: String, label: String? = nil, attributes: SecretAttributes? = nil,
        secret: SecretServiceSecret? = nil
    ) throws {
        guard collection == SessionCollection.id else {
            return try engine.updateItem(id, in: collection, label: label, attributes: attributes, secret: secret)
        }
        try sessionCollection.update(id, label: label, attributes: attributes, secret: secret, engine)
    }

    /// Deletes an item, locked or not.
    func deleteItem(_ id: [UInt8], in collection: String) throws {
        guard collection == SessionCollection.id else { return try engine.deleteItem(id, in: collection) }
        try sessionCollection.delete(id, for: engine.caller)
    }
}
