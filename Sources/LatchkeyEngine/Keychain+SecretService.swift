#if canImport(Glibc)
import Glibc
#endif
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

extension Keychain {
    /// The keychain's Secret Service operations (docs/SECRET-SERVICE.md).
    public var secretService: SecretServiceKeychain { SecretServiceKeychain(keychain: self) }
}

/// Secret Service operations on a keychain: Secret Service items are generic passwords stored by the
/// same engine (docs/SECRET-SERVICE.md). Every method takes the keychain's mutex; none knows D-Bus.
/// Errors are `SecError`s: errSecInteractionNotAllowed when a needed key is not held,
/// errSecItemNotFound for an unknown collection or item, errSecParam for input over a cap.
public struct SecretServiceKeychain: Sendable {
    /// The keychain's own collection.
    public static let login = SecretServiceData.login

    let keychain: Keychain

    /// HKDF label of the key that seals the service state (docs/SECRET-SERVICE.md §4).
    static let stateKeyInfo = Array("latchkey secret-service v1".utf8)
    static let stateAADLabel = Array("latchkey ss-state v1".utf8)
    static let stateName = "collections"

    // MARK: - Lock state

    public func lockState() -> SecretServiceLockState {
        (try? keychain.locked { () throws(SecError) -> SecretServiceLockState in
            SecretServiceLockState(collectionsLocked: !keychain.keys.isAvailable(.whenUnlocked),
                                   searchable: keychain.keys.indexKey != nil)
        }) ?? SecretServiceLockState(collectionsLocked: true, searchable: false)
    }

    // MARK: - Collections and aliases

    /// The collections and aliases. errSecInteractionNotAllowed when collections were created but the
    /// key that seals their list is not held.
    public func state() throws(SecError) -> SecretServiceState {
        try withStore(reading: true) { store in try loadState(store) }
    }

    /// Creates a collection labelled `label`, or, when `alias` already names a collection, returns
    /// that one (`created` false). A non-empty `alias` is set to the new collection.
    public func createCollection(label: String, alias: String) throws(SecError)
        -> (collection: SecretServiceCollection, created: Bool) {
        guard label.utf8.count <= SecretServiceLimits.maxStringBytes else { throw .param("label too long") }
        if !alias.isEmpty { try Self.validateIdentifier(alias, "alias") }
        return try withStore { store in
            var state = try loadState(store)
            if !alias.isEmpty, let id = state.aliases[alias], let existing = state.collection(id) {
                return (existing, false)
            }
            guard state.collections.count <= SecretServiceLimits.maxCollections else {
                throw SecError.param("at most \(SecretServiceLimits.maxCollections) collections")
            }
            let now = UInt64(max(0, Clock.now() + Clock.unixToReferenceDate))
            let collection = SecretServiceCollection(id: Self.newIdentifier(for: label, taken: state),
                                                     label: label, created: now, modified: now)
            state.collections.append(collection)
            if !alias.isEmpty { state.aliases[alias] = collection.id }
            try saveState(state, store)
            return (collection, true)
        }
    }

    /// Sets a collection's label.
    public func setLabel(_ label: String, ofCollection id: String) throws(SecError) {
        guard label.utf8.count <= SecretServiceLimits.maxStringBytes else { throw .param("label too long") }
        try withStore { store in
            var state = try loadState(store)
            guard let index = state.collections.firstIndex(where: { $0.id == id }) else { throw SecError.notFound }
            try requireUnlocked()
            state.collections[index].label = label
            state.collections[index].modified = UInt64(max(0, Clock.now() + Clock.unixToReferenceDate))
            try saveState(state, store)
        }
    }

    /// Points alias `name` at collection `id`, or removes it when `id` is nil.
    public func setAlias(_ name: String, to id: String?) throws(SecError) {
        try Self.validateIdentifier(name, "alias")
        try withStore { store in
            var state = try loadState(store)
            if let id {
                guard state.collection(id) != nil else { throw SecError.notFound }
                guard state.aliases[name] != nil || state.aliases.count < SecretServiceLimits.maxAliases else {
                    throw SecError.param("at most \(SecretServiceLimits.maxAliases) aliases")
                }
                state.aliases[name] = id
            } else {
                state.aliases[name] = nil
            }
            try saveState(state, store)
        }
    }

    /// Deletes a collection other than `login` with all its items, in one transaction; returns the
    /// ids of the deleted items.
    public func deleteCollection(_ id: String) throws(SecError) -> [[UInt8]] {
        guard id != Self.login else {
            throw SecError(SecStatus.unimplemented, "the login collection is the keychain and cannot be deleted")
        }
        return try withStore { store in
            var state = try loadState(store)
            guard state.collection(id) != nil else { throw SecError.notFound }
            let indexKey = try keychain.keys.requireIndexKey()
            let headers = try store.headers(matching: RowFilter(
                itemClass: Int(ItemClass.genericPassword.rawValue), synchronizable: nil,
                allOfHashes: [SecretServiceMapping.collectionHash(id, indexKey: indexKey)]))
            state.collections.removeAll { $0.id == id }
            state.aliases = state.aliases.filter { $0.value != id }
            try store.transaction {
                _ = try store.delete(ids: headers.map(\.id))
                try saveState(state, store)
            }
            return headers.map(\.persistentRef)
        }
    }

    // MARK: - Listing and searching

    /// Every item of a collection, in row order.
    public func items(in collection: String) throws(SecError) -> [SecretServiceItemInfo] {
        try withStore(reading: true) { store in
            let state = try loadState(store)
            guard state.collection(collection) != nil else { throw SecError.notFound }
            return try select(SecretAttributes(), in: collection, state: state, store: store)
        }
    }

    /// Items whose attributes include every pair of `query`, in one collection or (nil) in all.
    /// Locked matches are found by their keyed hashes alone (docs/SECRET-SERVICE.md §2).
    public func search(_ query: SecretAttributes, in collection: String? = nil) throws(SecError)
        -> [SecretServiceItemInfo] {
        try query.validate()
        return try withStore(reading: true) { store in
            let state = try loadState(store)
            if let collection, state.collection(collection) == nil { throw SecError.notFound }
            var results: [SecretServiceItemInfo] = []
            for target in collection.map({ [$0] }) ?? state.collections.map(\.id) {
                results += try select(query, in: target, state: state, store: store)
            }
            return results
        }
    }

    /// Whether an item exists in a collection, and whether it is locked; nil when it does not.
    public func info(item id: [UInt8], in collection: String) throws(SecError) -> SecretServiceItemInfo? {
        try withStore(reading: true) { store in
            let state = try loadState(store)
            guard state.collection(collection) != nil, let row = try memberRow(id, collection, state, store) else {
                return nil
            }
            return SecretServiceItemInfo(id: id, collection: collection, locked: !isHeld(row.protection))
        }
    }

    /// An item's label, attributes and dates; errSecInteractionNotAllowed while it is locked.
    public func item(_ id: [UInt8], in collection: String) throws(SecError) -> SecretServiceItem {
        try withStore(reading: true) { store in
            let item = try openMember(id, collection, store)
            let data = SecretServiceMapping.data(of: item.attributes, sealed: item.secretService)
            return SecretServiceItem(id: id, collection: collection, label: SecretServiceMapping.label(of: item.attributes),
                                     attributes: data.attributes, contentType: data.contentType,
                                     created: SecretServiceMapping.unixSeconds(item.attributes[SecAttr.creationDate]),
                                     modified: SecretServiceMapping.unixSeconds(item.attributes[SecAttr.modificationDate]))
        }
    }

    /// An item's secret; errSecInteractionNotAllowed while it is locked.
    public func secret(_ id: [UInt8], in collection: String) throws(SecError) -> SecretServiceSecret {
        try withStore(reading: true) { store in
            let item = try openMember(id, collection, store)
            let data = SecretServiceMapping.data(of: item.attributes, sealed: item.secretService)
            return SecretServiceSecret(value: try ItemSealer.openSecret(item), contentType: data.contentType)
        }
    }

    // MARK: - Changes

    /// `CreateItem`: a new WhenUnlocked generic password in `collection`, or, with `replace`, the
    /// first item there with exactly these attributes gets the new label and secret. Returns the
    /// item's id and whether it was newly made (docs/SECRET-SERVICE.md §3).
    public func createItem(in collection: String, label: String, attributes: SecretAttributes,
                           secret: SecretServiceSecret, replace: Bool) throws(SecError)
        -> (id: [UInt8], created: Bool) {
        try Self.validate(label: label, attributes: attributes, secret: secret)
        return try withStore { store in
            let state = try loadState(store)
            guard state.collection(collection) != nil else { throw SecError.notFound }
            let classKey = try keychain.keys.key(for: .whenUnlocked)
            let indexKey = try keychain.keys.requireIndexKey()
            if replace, let existing = try exactMatch(attributes, in: collection, state: state, store: store) {
                var changed = existing.attributes
                changed[SecAttr.label] = .string(label)
                var data = SecretServiceMapping.data(of: existing.attributes, sealed: existing.secretService)
                data.contentType = secret.contentType
                try reseal(existing, attributes: changed, data: data, secret: secret.value, store: store)
                return (existing.persistentRef, false)
            }
            if replace, collection == Self.login,
               let existing = try secItemAccountItem(for: attributes, state: state, store: store) {
                // The account's SecItem item (keyring.set_password after SecItemAdd): it takes the
                // new attributes on top of its view and stays that account's generic password.
                var changed = existing.attributes
                changed[SecAttr.label] = .string(label)
                var data = SecretServiceMapping.data(of: existing.attributes, sealed: existing.secretService)
                for pair in attributes.pairs { data.attributes = data.attributes.setting(pair.name, pair.value) }
                data.contentType = secret.contentType
                data.keepsGenericIdentity = true
                try reseal(existing, attributes: changed, data: data, secret: secret.value, store: store)
                return (existing.persistentRef, false)
            }
            let primary = SecretServiceMapping.primaryKey(of: attributes)
            let now = Clock.now()
            var genp: SecDictionary = [
                SecAttr.label: .string(label), SecAttr.service: primary.service, SecAttr.account: primary.account,
                SecAttr.accessGroup: .string(Caller.defaultAccessGroup),
                SecAttr.accessible: .string(ProtectionClass.whenUnlocked.pdmn), SecAttr.synchronizable: .int(0),
                SecAttr.creationDate: .date(now), SecAttr.modificationDate: .date(now),
            ]
            for spec in ItemClass.genericPassword.primaryKey where genp[spec.name] == nil {
                if let implicit = spec.implicitValue { genp[spec.name] = implicit }
            }
            var data = SecretServiceData(attributes: attributes, collection: collection,
                                         contentType: secret.contentType)
            let ref = try SecureRandom.bytes(16)
            while true {
                let row = try ItemSealer.seal(ref: ref, itemClass: .genericPassword, protection: .whenUnlocked,
                                              synchronizable: false, attributes: genp, secret: secret.value,
                                              classKey: classKey, indexKey: indexKey, secretService: data)
                do {
                    _ = try store.insert(row)
                    return (ref, true)
                } catch StoreError.duplicate where data.nonce.isEmpty {
                    // The same attributes exist (or, for a plain item, the same genp identity): a
                    // deliberate duplicate, as the spec allows (docs/SECRET-SERVICE.md §3).
                    data.nonce = try SecureRandom.bytes(16)
                }
            }
        }
    }

    /// Changes an item's label, attributes and/or secret; errSecInteractionNotAllowed while it is
    /// locked.
    public func updateItem(_ id: [UInt8], in collection: String, label: String? = nil,
                           attributes: SecretAttributes? = nil, secret: SecretServiceSecret? = nil) throws(SecError) {
        if let label, label.utf8.count > SecretServiceLimits.maxStringBytes { throw .param("label too long") }
        try attributes?.validate()
        if let secret { try Self.validate(secret) }
        try withStore { store in
            let item = try openMember(id, collection, store)
            var genp = item.attributes
            var data = SecretServiceMapping.data(of: item.attributes, sealed: item.secretService)
            if let attributes {
                data.attributes = attributes
                let primary = SecretServiceMapping.primaryKey(of: attributes)
                genp[SecAttr.service] = primary.service
                genp[SecAttr.account] = primary.account
            }
            if let label { genp[SecAttr.label] = .string(label) }
            if let secret {
                data.contentType = secret.contentType
                try reseal(item, attributes: genp, data: data, secret: secret.value, store: store)
            } else {
                // Only resealed, never returned: wiped once written.
                var kept = try ItemSealer.openSecret(item)
                defer { SecretBytes.wipe(&kept) }
                try reseal(item, attributes: genp, data: data, secret: kept, store: store)
            }
        }
    }

    /// Deletes an item; works while it is locked (like SecItemDelete).
    public func deleteItem(_ id: [UInt8], in collection: String) throws(SecError) {
        try withStore { store in
            let state = try loadState(store)
            guard state.collection(collection) != nil, let row = try memberRow(id, collection, state, store) else {
                throw SecError.notFound
            }
            _ = try store.delete(ids: [row.id])
        }
    }

    // MARK: - Internals (mutex held)

    /// Runs `body` with the store under the keychain's mutex, after the pending re-indexing. With
    /// `reading`, `body` (which must not write) runs in one read transaction: its statements share one
    /// snapshot and one pair of file locks instead of taking and dropping them each (a search is five
    /// statements).
    private func withStore<T>(reading: Bool = false, _ body: (Store) throws -> T) throws(SecError) -> T {
        try keychain.locked { () throws(SecError) -> T in
            let store = try keychain.store()
            do {
                if reading {
                    // Usually there is nothing to re-index: then the check shares the read transaction.
                    let done: T? = try store.reading {
                        try needsReindexing(store) ? nil : try body(store)
                    }
                    if let done { return done }
                }
                try reindexPending(store)
                return reading ? try store.reading { try body(store) } : try body(store)
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    /// Whether `reindexPending` has anything to do now.
    private func needsReindexing(_ store: Store) throws -> Bool {
        let status = try store.secretServiceIndexStatus()
        return status.version < SecretServiceMapping.indexVersion || (status.pending && keychain.keys.indexKey != nil)
    }

    func isHeld(_ protection: Int) -> Bool {
        ProtectionClass(rawValue: UInt8(clamping: protection)).map { keychain.keys.isAvailable($0) } ?? false
    }

    private func requireUnlocked() throws(SecError) {
        _ = try keychain.keys.key(for: .whenUnlocked)
    }

    /// Adds the Secret Service hashes of rows written before they existed, for every class whose key
    /// is held (docs/SECRET-SERVICE.md §2); rows written before the current
    /// `SecretServiceMapping.indexVersion` are queued for it first. A row that fails authentication is
    /// left without them (its reads report errSecDecode) and not retried.
    private func reindexPending(_ store: Store) throws {
        var status = try store.secretServiceIndexStatus()
        if status.version < SecretServiceMapping.indexVersion {
            try store.queueReindex(itemClass: Int(ItemClass.genericPassword.rawValue),
                                   version: SecretServiceMapping.indexVersion)
            status.pending = try store.hasPendingIndexRows()
        }
        guard let indexKey = keychain.keys.indexKey, status.pending else { return }
        let held = ProtectionClass.allCases.filter { keychain.keys.isAvailable($0) }.map { Int($0.rawValue) }
        while true {
            let rows = try store.pendingIndexRows(protections: held, limit: 256)
            if rows.isEmpty { return }
            // One transaction (one fsync) per batch, not per row.
            try store.transaction {
                for row in rows {
                    var hashes: [[UInt8]] = []
                    if let item = try? ItemSealer.open(row, keys: keychain.keys) {
                        hashes = try SecretServiceMapping.indexHashes(attributes: item.attributes,
                                                                      sealed: item.secretService, indexKey: indexKey)
                    }
                    try store.completeIndex(item: row.id, adding: hashes)
                }
            }
        }
    }

    /// The row of item `id` if it is a member of `collection` (by its sealed data when it can be
    /// opened, else by its collection hash).
    private func memberRow(_ id: [UInt8], _ collection: String, _ state: SecretServiceState, _ store: Store) throws
        -> StoreRow? {
        try member(id, collection, state, store)?.row
    }

    /// Like `memberRow`, with the opened item when its class key is held (so callers open it once).
    private func member(_ id: [UInt8], _ collection: String, _ state: SecretServiceState, _ store: Store) throws
        -> (row: StoreRow, item: OpenItem?)? {
        guard id.count == 16, let row = try store.row(persistentRef: id),
              row.itemClass == Int(ItemClass.genericPassword.rawValue) else { return nil }
        if isHeld(row.protection) {
            let item = try ItemSealer.open(row, keys: keychain.keys)
            let data = SecretServiceMapping.data(of: item.attributes, sealed: item.secretService)
            // An item of a collection deleted meanwhile (none is left behind by deleteCollection) counts as login's.
            let owner = state.collection(data.collection) != nil ? data.collection : Self.login
            return owner == collection ? (row, item) : nil
        }
        let others = state.collections.map(\.id).filter { $0 != Self.login }
        if collection == Self.login && others.isEmpty { return (row, nil) }
        let indexKey = try keychain.keys.requireIndexKey()
        func carries(_ other: String) throws -> Bool {
            try !store.headers(matching: RowFilter(
                itemClass: row.itemClass, synchronizable: nil, persistentRef: id,
                allOfHashes: [SecretServiceMapping.collectionHash(other, indexKey: indexKey)])).isEmpty
        }
        if collection != Self.login { return try carries(collection) ? (row, nil) : nil }
        for other in others where try carries(other) { return nil }
        return (row, nil)
    }

    private func openMember(_ id: [UInt8], _ collection: String, _ store: Store) throws -> OpenItem {
        let state = try loadState(store)
        guard state.collection(collection) != nil, let found = try member(id, collection, state, store) else {
            throw SecError.notFound
        }
        return try found.item ?? ItemSealer.open(found.row, keys: keychain.keys)
    }

    /// Seals an item again with new genp attributes, Secret Service data and secret, keeping its
    /// persistent ref, class and creation date; the modification date moves forward.
    private func reseal(_ item: OpenItem, attributes: SecDictionary, data: SecretServiceData, secret: [UInt8],
                        store: Store) throws {
        let classKey = try keychain.keys.key(for: item.protection)
        let indexKey = try keychain.keys.requireIndexKey()
        var attributes = attributes
        var now = Clock.now()
        if case .date(let previous)? = item.attributes[SecAttr.modificationDate], now <= previous { now = previous.nextUp }
        attributes[SecAttr.modificationDate] = .date(now)
        var data = data
        while true {
            let row = try ItemSealer.seal(ref: item.persistentRef, itemClass: item.itemClass, protection: item.protection,
                                          synchronizable: item.row.synchronizable, attributes: attributes,
                                          secret: secret, classKey: classKey, indexKey: indexKey, secretService: data)
            do {
                try store.replace(id: item.id, with: row)
                return
            } catch StoreError.duplicate where data.nonce.isEmpty {
                data.nonce = try SecureRandom.bytes(16)
            }
        }
    }
}
