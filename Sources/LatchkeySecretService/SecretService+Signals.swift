import LatchkeyDBus
import LatchkeyEngine

/// The service's signals (docs/SECRET-SERVICE.md §6, "Signals"): item and collection changes, SecItem
/// changes of generic passwords, and lock changes, in gnome-keyring's sequence, with
/// `PropertiesChanged` carrying the new values. libsecret reads only `changed_properties`, and
/// GDBusProxy drops an invalidated property from its cache: an `Items` left out of the cache made
/// libsecret's next `ItemCreated` handler crash its program (Seahorse). Loop thread only.
///
/// Signals are broadcast, so every value in them is computed as an unlisted program sees it (the
/// group `default`, what `engine` is between calls), never as the client whose call caused them:
/// another group's items are never listed or described in a signal (docs/SECRET-SERVICE.md §4b).
extension SecretService {
    func emit(
        _ bus: Bus, _ path: String, _ interface: String, _ member: String, _ arguments: [BusValue],
        destination: String? = nil
    ) {
        do {
            try bus.emitSignal(path: path, interface: interface, member: member, arguments, destination: destination)
        } catch {
            log.warning("Secret Service: cannot emit \(member): \(error)")
        }
    }

    func propertiesChanged(
        _ bus: Bus, _ path: String, _ interface: String, changed: [(String, BusValue)] = [],
        invalidated: [String] = [], destination: String? = nil
    ) {
        emit(
            bus, path, SS.Interface.properties, "PropertiesChanged",
            [
                .string(interface),
                .dictionary(keyType: "s", valueType: "v", changed.map { (.string($0.0), .variant($0.1)) }),
                .strings(invalidated),
            ], destination: destination)
    }

    /// Runs `body` as an unlisted program, whoever's call is being served: what broadcast signals
    /// may carry.
    func asBroadcast<T>(_ bus: Bus, _ body: () throws -> T) rethrows -> T {
        try serving(nil, bus, body)
    }

    /// The `Items` property of collection `id` as `engine`'s caller reads it. Without the keys that
    /// tell the members apart (before the first unlock) it is empty (docs/SECRET-SERVICE.md §4).
    func itemsProperty(ofCollection id: String, searchable: Bool) -> BusValue {
        let items = searchable ? ((try? items(in: id)) ?? []) : []
        return Arguments.objectPathList(items.map { ObjectPath.itemPath(id, $0.id) })
    }

    /// A keychain collection's `Items` as an unlisted program reads them (what `collectionValues`
    /// broadcasts), remembered while no commit happened since and the lock state is the same: every
    /// ItemCreated and ItemDeleted carries the whole list, and listing a large collection for each one
    /// made CreateItem cost time in proportion to the collection's size (14.5 ms at 3,000 items,
    /// README). The in-memory `session` collection is listed every time (it is small and not stored).
    func broadcastItems(ofCollection id: String, _ lock: SecretServiceLockState) -> BusValue {
        guard lock.searchable, id != SessionCollection.id else {
            return itemsProperty(ofCollection: id, searchable: lock.searchable)
        }
        let stamp = Keychain.commitStamp
        if let known = knownItems[id], known.stamp == stamp, known.lock == lock {
            return Arguments.objectPathList(known.paths)
        }
        let items = (try? items(in: id)) ?? []
        let paths = items.map { ObjectPath.itemPath(id, $0.id) }
        // Remembered only if nothing committed and nothing locked while listing: then the list is the
        // database's at `stamp`.
        if Keychain.commitStamp == stamp, engine.lockState() == lock {
            knownItems[id] = BroadcastItems(stamp: stamp, lock: lock, paths: paths)
        } else {
            knownItems[id] = nil
        }
        return Arguments.objectPathList(paths)
    }

    /// Brings a remembered `Items` up to date after a call of this service created or deleted `item`:
    /// when the list was the database's just before the call (`commits.before`) and exactly one
    /// commit happened during it (the call's own), the call's item is the only difference. Otherwise
    /// the list is forgotten and made anew when next needed.
    func noteOwnChange(
        _ bus: Bus, collection: String, item: [UInt8], created: Bool, _ commits: (before: UInt64, after: UInt64)
    ) {
        guard var known = knownItems[collection] else { return }
        knownItems[collection] = nil
        guard known.stamp == commits.before, commits.after == commits.before + 1,
            engine.lockState() == known.lock
        else { return }
        let path = ObjectPath.itemPath(collection, item)
        if created {
            // A new row is the last in row order. It is listed only if an unlisted program sees it
            // (the item of an application's own group is not).
            let visible = asBroadcast(bus) { (try? engine.info(item: item, in: collection)) != nil }
            if visible, !known.paths.contains(path) { known.paths.append(path) }
        } else {
            known.paths.removeAll { $0 == path }
        }
        known.stamp = commits.after
        knownItems[collection] = known
    }

    /// The service's `Collections` property.
    func collectionsProperty() -> BusValue {
        let state = (try? currentState()) ?? .initial
        return Arguments.objectPathList(state.collections.map { ObjectPath.collectionPath($0.id) })
    }

    /// `PropertiesChanged` of `Collections` on the service, with its new value.
    func collectionsChanged(_ bus: Bus) {
        propertiesChanged(bus, SS.root, SS.Interface.service, changed: [("Collections", collectionsProperty())])
    }

    /// The new values of a collection's properties `names` (`Items`, `Label`, `Locked`, `Created`,
    /// `Modified`), as an unlisted program reads them.
    func collectionValues(
        _ bus: Bus, _ id: String, _ names: [String], _ state: SecretServiceState
    ) -> [(String, BusValue)] {
        asBroadcast(bus) {
            let lock = engine.lockState()
            let collection = state.collection(id)
            return names.compactMap { name -> (String, BusValue)? in
                switch name {
                case "Items": (name, broadcastItems(ofCollection: id, lock))
                case "Label": (name, .string(collection?.label ?? ""))
                case "Locked": (name, .boolean(lock.collectionsLocked))
                case "Created": (name, .uint64(collection?.created ?? 0))
                case "Modified": (name, .uint64(collection?.modified ?? 0))
                default: nil
                }
            }
        }
    }

    /// `PropertiesChanged` of collection `id`'s properties `names` on `paths` (by default every path
    /// it is known by: its own and its aliases').
    func collectionPropertiesChanged(_ bus: Bus, _ id: String, _ names: [String], paths: [String]? = nil) {
        let state = (try? currentState()) ?? .initial
        let changed = collectionValues(bus, id, names, state)
        for path in paths ?? self.paths(ofCollection: id, state) {
            propertiesChanged(bus, path, SS.Interface.collection, changed: changed)
        }
    }

    /// ItemCreated/ItemDeleted/ItemChanged on every path of the collection. A new or deleted item
    /// changes the collection's `Items`, announced with its new value on those paths; a changed item
    /// announces the new values of its own `properties` on its path (items are only ever handed out
    /// under their collection's own path). `commits` are `Keychain.commitStamp` just before and just
    /// after the call that created or deleted the item, when this signal follows one
    /// (`BroadcastItems`).
    func itemSignal(
        _ bus: Bus, _ member: String, collection: String, item: [UInt8], properties: [String] = [],
        commits: (before: UInt64, after: UInt64)? = nil
    ) {
        if let commits, member != "ItemChanged" {
            noteOwnChange(bus, collection: collection, item: item, created: member == "ItemCreated", commits)
        }
        let state = (try? currentState()) ?? .initial
        let paths = paths(ofCollection: collection, state)
        let path = ObjectPath.itemPath(collection, item)
        for collectionPath in paths {
            emit(bus, collectionPath, SS.Interface.collection, member, [.objectPath(path)])
        }
        if member == "ItemChanged" {
            itemPropertiesChanged(bus, collection: collection, item: item, properties)
        } else {
            let changed = collectionValues(bus, collection, ["Items"], state)
            for collectionPath in paths {
                propertiesChanged(bus, collectionPath, SS.Interface.collection, changed: changed)
            }
        }
    }

    /// `PropertiesChanged` of an item's `Label`, `Attributes`, `Modified` or `Locked` with their new
    /// values, read as an unlisted program: nothing when it cannot read the item (another group's,
    /// or locked), since a broadcast would show that item's label and attributes to every client.
    func itemPropertiesChanged(_ bus: Bus, collection: String, item id: [UInt8], _ names: [String]) {
        guard !names.isEmpty else { return }
        let changed: [(String, BusValue)]? = asBroadcast(bus) {
            guard let item = try? item(id, in: collection) else { return nil }
            return names.compactMap { name -> (String, BusValue)? in
                switch name {
                case "Label": (name, .string(item.label))
                case "Attributes": (name, Arguments.attributesValue(item.attributes))
                case "Modified": (name, .uint64(item.modified))
                case "Locked": (name, .boolean(false))
                default: nil
                }
            }
        }
        guard let changed, !changed.isEmpty else { return }
        propertiesChanged(bus, ObjectPath.itemPath(collection, id), SS.Interface.item, changed: changed)
    }

    /// A generic password changed through SecItem: ItemCreated/ItemChanged in its collection, or
    /// ItemDeleted in `login` (a deleted item's collection can no longer be told; docs/SECRET-SERVICE.md §6).
    /// Between calls `engine` is an unlisted program's, so only items of `default` are found.
    func secItemChanged(_ change: KeychainItemChange, _ bus: Bus) {
        switch change {
        case .added(let id), .changed(let id):
            let state = (try? currentState()) ?? .initial
            guard
                let collection = asBroadcast(
                    bus,
                    {
                        state.collections.first(where: {
                            $0.id != SessionCollection.id && (try? engine.info(item: id, in: $0.id)) != nil
                        })
                    })
            else {
                return
            }
            if case .added = change {
                itemSignal(bus, "ItemCreated", collection: collection.id, item: id)
            } else {
                itemSignal(
                    bus, "ItemChanged", collection: collection.id, item: id,
                    properties: ["Label", "Attributes", "Modified"])
            }
        case .deleted(let id):
            itemSignal(bus, "ItemDeleted", collection: SecretServiceKeychain.login, item: id)
        }
    }

    /// Announces a change of the keychain's lock state, whatever made it (a call, the socket, a screen
    /// lock), in gnome-keyring's order for each collection: when the collections' `Locked` changed,
    /// `ItemChanged` for each of its items on its own path, then `CollectionChanged`, then each item's
    /// `Locked` and the collection's `Locked` (and `Items`, when the index key came or went, since
    /// `Items` is empty without it) with their new values on every path of the collection
    /// (docs/SECRET-SERVICE.md §4).
    func checkLockState(_ bus: Bus) {
        asBroadcast(bus) {
            let now = engine.lockState()
            guard now != lastLockState else { return }
            let collectionsChanged = now.collectionsLocked != lastLockState?.collectionsLocked
            let searchableChanged = now.searchable != lastLockState?.searchable
            lastLockState = now
            let state = (try? currentState()) ?? .initial
            for collection in state.collections {
                let collectionPath = ObjectPath.collectionPath(collection.id)
                let items = collectionsChanged ? ((try? items(in: collection.id)) ?? []) : []
                for item in items {
                    let path = ObjectPath.itemPath(collection.id, item.id)
                    emit(bus, collectionPath, SS.Interface.collection, "ItemChanged", [.objectPath(path)])
                }
                emit(bus, SS.root, SS.Interface.service, "CollectionChanged", [.objectPath(collectionPath)])
                for item in items {
                    propertiesChanged(
                        bus, ObjectPath.itemPath(collection.id, item.id), SS.Interface.item,
                        changed: [("Locked", .boolean(item.locked))])
                }
                collectionPropertiesChanged(bus, collection.id, searchableChanged ? ["Locked", "Items"] : ["Locked"])
            }
        }
    }
}
