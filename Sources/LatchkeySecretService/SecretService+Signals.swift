import LatchkeyDBus
import LatchkeyEngine

/// The service's signals (docs/SECRET-SERVICE.md §4, §6): item and collection changes, SecItem changes
/// of generic passwords, and lock changes. Loop thread only.
extension SecretService {
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
            guard
                let collection = state.collections.first(where: {
                    $0.id != SessionCollection.id && (try? engine.info(item: id, in: $0.id)) != nil
                })
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

    /// Announces a change of the keychain's lock state on every collection and, when the collections'
    /// `Locked` changed, on every item, as gnome-keyring does: `PropertiesChanged` with the item's
    /// `Locked`, so that clients' cached item proxies (libsecret's `SecretItem`) follow, and
    /// `ItemChanged` on its collection's own path (docs/SECRET-SERVICE.md §4).
    func checkLockState(_ bus: Bus) {
        // Broadcast: every item every client may see, whoever's call changed the lock state.
        asEveryone { announceLockState(bus) }
    }

    private func announceLockState(_ bus: Bus) {
        let now = engine.lockState()
        guard now != lastLockState else { return }
        let collectionsChanged = now.collectionsLocked != lastLockState?.collectionsLocked
        lastLockState = now
        let state = (try? currentState()) ?? .initial
        for collection in state.collections {
            for path in paths(ofCollection: collection.id, state) {
                propertiesChanged(
                    bus, path, SS.Interface.collection, changed: [("Locked", .boolean(now.collectionsLocked))],
                    invalidated: ["Items"])
            }
            emit(
                bus, SS.root, SS.Interface.service, "CollectionChanged",
                [.objectPath(ObjectPath.collectionPath(collection.id))])
        }
        guard collectionsChanged else { return }
        for collection in state.collections {
            let collectionPath = ObjectPath.collectionPath(collection.id)
            for item in (try? items(in: collection.id)) ?? [] {
                let path = ObjectPath.itemPath(collection.id, item.id)
                propertiesChanged(bus, path, SS.Interface.item, changed: [("Locked", .boolean(item.locked))])
                emit(bus, collectionPath, SS.Interface.collection, "ItemChanged", [.objectPath(path)])
            }
        }
    }
}
