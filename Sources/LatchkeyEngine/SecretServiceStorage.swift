import LatchkeyCodec
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

extension Keychain {
    /// Runs `body` with the Secret Service's storage, once the access policy has admitted `request`
    /// (a request that adds items is given the caller's default group, where they go). `body` runs under
    /// the engine's mutex, after rows written before the current Secret Service index got its hashes.
    /// With `reading`, `body` must not write: it runs in one read transaction, so its statements share
    /// one snapshot and one pair of file locks instead of taking and dropping them each (a search is five
    /// statements). Errors thrown by `body` are mapped to `SecError`s as the engine's own are.
    package func withSecretServiceStorage<T>(
        _ request: AccessRequest, reading: Bool = false, userChecks: UserCheckGrants.Client? = nil,
        _ body: (SecretServiceStorage) throws -> T
    ) throws(SecError) -> T {
        let admitted = try gate.admit(request)
        return try lockState.withStoreCountingLocks { (store, keys, locks) throws(SecError) -> T in
            let storage = SecretServiceStorage(
                store: store, keys: keys, admitted: admitted, scope: gate.scope(for: admitted.caller),
                userChecks: userChecks, lockCount: locks)
            do {
                if reading {
                    // Usually there is nothing to re-index: then the check shares the read transaction.
                    let done: T? = try store.reading {
                        try storage.needsReindexing() ? nil : try body(storage)
                    }
                    if let done { return done }
                }
                try storage.reindexPending()
                return reading ? try store.reading { try body(storage) } : try body(storage)
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }
}

/// How Secret Service items and the service's own state are stored and indexed (docs/SECRET-SERVICE.md
/// §1–4): generic-password rows sealed with their Secret Service data, found by the keyed hashes of
/// `SecretServiceMapping`, and the sealed state blob of the collections and aliases. The collections,
/// aliases and object paths themselves are the Secret Service module's; this is all it asks of the
/// engine. Valid only inside `Keychain.withSecretServiceStorage` (the engine's mutex held).
package struct SecretServiceStorage {
    let store: Store
    let keys: KeyState
    /// The request as the access policy admitted it.
    let admitted: AccessRequest
    /// The access groups whose items the request sees (`GroupScope`): lookups select rows by the keyed
    /// hashes of their `agrp`, and every opened item is checked against its sealed one.
    let scope: GroupScope
    /// The user checks the calling bus client passed (nil: none); an item whose access control needs a
    /// check is locked for it unless one covers the item.
    var userChecks: UserCheckGrants.Client? = nil
    /// The keychain's lock count now: a grant made before a later lock covers nothing.
    var lockCount: UInt64 = 0

    /// HKDF label of the key that seals the service state (docs/SECRET-SERVICE.md §4).
    static let stateKeyInfo = Array("latchkey secret-service v1".utf8)
    static let stateAADLabel = Array("latchkey ss-state v1".utf8)
    static let stateName = "collections"

    // MARK: - Keys

    /// The key of the hashes a Secret Service lookup computes: the index key, or while AfterFirstUnlock
    /// is locked the one the Secret Service keeps (`SecretServiceLookupKeys`). Lookups only: what writes
    /// hashes asks for the index key itself.
    var lookupIndexKey: IndexKey? { keys.indexKey ?? keys.secretServiceLookup?.indexKey }

    func requireLookupIndexKey() throws(SecError) -> IndexKey {
        guard let key = lookupIndexKey else { throw SecError.locked }
        return key
    }

    /// Whether the class key of a row's protection class is held.
    func isHeld(_ protection: Int) -> Bool {
        ProtectionClass(rawValue: UInt8(clamping: protection)).map { keys.isAvailable($0) } ?? false
    }

    /// Throws errSecInteractionNotAllowed unless the WhenUnlocked class key, which Secret Service
    /// collections lock with (docs/SECRET-SERVICE.md §4), is held. (The index key is then held too: the
    /// WhenUnlocked family is dropped before AfterFirstUnlock, never after.)
    package func requireUnlocked() throws(SecError) {
        _ = try keys.key(for: .whenUnlocked)
        _ = try keys.requireIndexKey()
    }

    // MARK: - The sealed state

    /// HKDF of the AfterFirstUnlock class key, derived with it and kept after it (`SecretServiceLookupKeys`).
    private func stateKey() throws(SecError) -> SecretBytes {
        guard let kept = keys.secretServiceLookup else { throw SecError.locked }
        return kept.stateKey
    }

    /// The service state (the collections and aliases, as the Secret Service module encodes them), or nil
    /// when none was ever stored. errSecInteractionNotAllowed before AfterFirstUnlock was first unlocked;
    /// errSecDecode when the blob fails authentication.
    package func loadState() throws -> SecValue? {
        guard let sealed = try store.stateValue(named: Self.stateName) else { return nil }
        let key = try stateKey()
        var plain: [UInt8]
        do {
            plain = try AES256GCM.open(sealed, key: key, aad: Self.stateAADLabel + Array(Self.stateName.utf8))
        } catch {
            throw SecError(SecStatus.decode, "the Secret Service state failed authentication (damaged or tampered)")
        }
        defer { SecretBytes.wipe(&plain) }
        return try ValueCodec.decode(plain)
    }

    /// When the keychain was made (Unix seconds): the creation time of the `login` collection, which is
    /// the keychain (docs/SECRET-SERVICE.md §4). 0 when the database does not record it.
    package func keychainCreationTime() throws -> UInt64 {
        UInt64(clamping: max(0, try store.creationTime() ?? 0))
    }

    /// Seals and stores the service state, inside the caller's transaction when there is one.
    package func saveState(_ state: SecValue) throws {
        // The state key is kept after a lock so that searches still list locked items; writing the state
        // (aliases, collections) needs the class key it comes from, so the kept key only ever reads.
        _ = try keys.key(for: .afterFirstUnlock)
        var plain: [UInt8] = []
        ValueCodec.encode(state, into: &plain)
        defer { SecretBytes.wipe(&plain) }
        let sealed = try AES256GCM.seal(
            plain, key: try stateKey(), aad: Self.stateAADLabel + Array(Self.stateName.utf8))
        try store.setStateValue(sealed, named: Self.stateName)
    }

    // MARK: - Items

    /// The keyed hashes of the scope's groups for generic passwords; nil for every group.
    func scopeHashes() throws(SecError) -> [[UInt8]]? {
        guard case .only(let groups) = scope else { return nil }
        guard let indexKey = lookupIndexKey, let spec = ItemClass.genericPassword.attribute(SecAttr.accessGroup)
        else { throw SecError.locked }
        var hashes: [[UInt8]] = []
        for group in groups {
            do {
                hashes.append(try ItemSealer.rememberedAttributeHash(spec, .string(group), indexKey: indexKey))
            } catch {
                throw EngineErrors.map(error)
            }
        }
        return hashes
    }

    /// Whether an opened item is in the scope (its sealed `agrp`).
    func isVisible(_ item: OpenItem) -> Bool {
        guard case .only = scope else { return true }
        guard case .string(let group)? = item.attributes[SecAttr.accessGroup] else { return false }
        return scope.contains(group)
    }

    /// Whether the row with persistent reference `id` is in the scope, by its keyed `agrp` hash (it may
    /// be locked).
    func isVisible(rowWithID id: [UInt8]) throws -> Bool {
        guard let hashes = try scopeHashes() else { return true }
        return try !store.headers(
            matching: RowFilter(
                itemClass: Int(ItemClass.genericPassword.rawValue), synchronizable: nil, persistentRef: id,
                anyOfHashes: hashes, limit: 1)
        ).isEmpty
    }

    /// The row of item `id` if it is a member of `collection`, opened when its class key is held:
    /// membership by its sealed data when it can be opened, else by its collection hash. `collections`
    /// are the ids of every collection there is; an item of one deleted meanwhile counts as login's.
    package func member(_ id: [UInt8], of collection: String, collections: [String]) throws -> SecretServiceMember? {
        guard id.count == 16, let row = try store.row(persistentRef: id),
            row.itemClass == Int(ItemClass.genericPassword.rawValue)
        else { return nil }
        let login = SecretServiceData.login
        if isHeld(row.protection) {
            // Its sealed group decides (no index can change it), without a second look at the rows.
            let item = try ItemSealer.open(row, keys: keys)
            guard isVisible(item) else { return nil }
            let entry = SecretServiceEntry(item: item)
            let data = entry.data
            // An item of a collection deleted meanwhile (none is left behind by deleteCollection) counts as login's.
            let owner = collections.contains(data.collection) ? data.collection : login
            guard owner == collection else { return nil }
            return SecretServiceMember(row: row, entry: entry, awaitsUserCheck: try awaitsUserCheck(item) != nil)
        }
        // Locked: its group by the keyed hash of its `agrp`.
        guard try isVisible(rowWithID: id) else { return nil }
        let others = collections.filter { $0 != login }
        if collection == login && others.isEmpty { return SecretServiceMember(row: row, entry: nil) }
        let indexKey = try requireLookupIndexKey()
        func carries(_ other: String) throws -> Bool {
            try !store.headers(
                matching: RowFilter(
                    itemClass: row.itemClass, synchronizable: nil, persistentRef: id,
                    allOfHashes: [SecretServiceMapping.collectionHash(other, indexKey: indexKey)])
            ).isEmpty
        }
        if collection != login { return try carries(collection) ? SecretServiceMember(row: row, entry: nil) : nil }
        for other in others where try carries(other) { return nil }
        return SecretServiceMember(row: row, entry: nil)
    }

    /// A member opened; errSecInteractionNotAllowed while it is locked.
    package func open(_ member: SecretServiceMember) throws(SecError) -> SecretServiceEntry {
        if let entry = member.entry { return entry }
        return SecretServiceEntry(item: try ItemSealer.open(member.row, keys: keys))
    }

    /// Item `id` opened, if there is such a row (for the readable matches of a lookup).
    package func entry(_ id: [UInt8]) throws -> SecretServiceEntry? {
        guard let row = try store.row(persistentRef: id) else { return nil }
        let item = try ItemSealer.open(row, keys: keys)
        return isVisible(item) ? SecretServiceEntry(item: item) : nil
    }

    /// An opened item's secret.
    package func secret(of entry: SecretServiceEntry) throws(SecError) -> [UInt8] {
        try refuseUnchecked(entry)
        return try ItemSealer.openSecret(entry.item)
    }

    /// The constraint of `item` when its access control needs a user check that the calling client has
    /// not passed (`userChecks`); nil when it may be read. The Secret Service's one decision about user
    /// presence, made here as `PresenceGate` makes it for SecItem requests (docs/SECRET-SERVICE.md §4c).
    func awaitsUserCheck(_ item: OpenItem) throws(SecError) -> AccessConstraint? {
        let control = try item.accessControl()
        // An application password's box (docs/ACCESS-CONTROL.md §8) is never opened or replaced here: no
        // bus client can bring the password, so such an item stays locked whatever an Unlock passed (a
        // companion device, which Linux never has, is the check that cannot be satisfied).
        if control?.flags.contains(.applicationPassword) == true { return .check(.companion) }
        guard let constraint = control?.constraint else { return nil }
        if let userChecks,
            userChecks.grants.covers(item.persistentRef, constraint, client: userChecks.name, lockCount: lockCount)
        {
            return nil
        }
        return constraint
    }

    /// The secret of an item whose access control needs a user check is not read or changed through the
    /// Secret Service until the client passed it (an `Unlock` of the item): IsLocked until then.
    func refuseUnchecked(_ entry: SecretServiceEntry) throws(SecError) {
        if try entry.item.accessControl()?.flags.contains(.applicationPassword) == true {
            throw SecError(SecStatus.interactionNotAllowed, "the item is sealed under an application password")
        }
        if try awaitsUserCheck(entry.item) != nil {
            throw SecError(SecStatus.interactionNotAllowed, "the item needs a user check (kSecAttrAccessControl)")
        }
    }

    /// What an `Unlock` of `ids` needs the user to pass: the items among them (of this caller's scope,
    /// with their class key held) whose access control needs a check the client has not passed; nil when
    /// there is none.
    package func userCheckRequirement(for ids: [[UInt8]]) throws -> UserCheckRequirement? {
        var items: [[UInt8]] = []
        var constraints: [AccessConstraint] = []
        var names: [UserCheckItemName] = []
        for id in ids where id.count == 16 && !items.contains(id) {
            guard let row = try store.row(persistentRef: id), row.itemClass == Int(ItemClass.genericPassword.rawValue),
                isHeld(row.protection)
            else { continue }
            let item = try ItemSealer.open(row, keys: keys)
            guard isVisible(item), let constraint = try awaitsUserCheck(item) else { continue }
            items.append(id)
            if !constraints.contains(constraint) { constraints.append(constraint) }
            if names.count < UserCheckItemName.maximum { names.append(UserCheckItemName(item)) }
        }
        guard !items.isEmpty else { return nil }
        return UserCheckRequirement(
            serial: 0, items: items, constraints: constraints, prompt: nil, operation: .read, names: names)
    }

    /// Adds a new WhenUnlocked generic password to the collection `data` names, in the access group the
    /// request was admitted to (docs/SECRET-SERVICE.md §1); returns its id. When its attributes (or, for a
    /// plain item, its genp identity) exist already, it becomes a deliberate duplicate (§3).
    package func insert(label: String, data: SecretServiceData, secret: [UInt8]) throws -> [UInt8] {
        guard admitted.kind == .add, let group = admitted.accessGroups.first else {
            throw SecError(SecStatus.internalComponent, "a Secret Service item to add was not admitted as an add")
        }
        let classKey = try keys.key(for: .whenUnlocked)
        let indexKey = try keys.requireIndexKey()
        let primary = SecretServiceMapping.primaryKey(of: data.attributes)
        let now = Clock.now()
        var genp: SecDictionary = [
            SecAttr.label: .string(label), SecAttr.service: primary.service, SecAttr.account: primary.account,
            SecAttr.accessGroup: .string(group),
            SecAttr.accessible: .string(ProtectionClass.whenUnlocked.pdmn), SecAttr.synchronizable: .int(0),
            SecAttr.creationDate: .date(now), SecAttr.modificationDate: .date(now),
        ]
        for spec in ItemClass.genericPassword.primaryKey where genp[spec.name] == nil {
            if let implicit = spec.implicitValue { genp[spec.name] = implicit }
        }
        var data = data
        let ref = try SecureRandom.bytes(16)
        while true {
            let row = try ItemSealer.seal(
                ref: ref, itemClass: .genericPassword, protection: .whenUnlocked,
                synchronizable: false, attributes: genp, secret: secret,
                classKey: classKey, indexKey: indexKey, secretService: data)
            do {
                _ = try store.insert(row)
                return ref
            } catch StoreError.duplicate where data.nonce.isEmpty {
                // The same attributes exist (or, for a plain item, the same genp identity): a
                // deliberate duplicate, as the spec allows (docs/SECRET-SERVICE.md §3).
                data.nonce = try SecureRandom.bytes(16)
            }
        }
    }

    /// Seals an item again with new genp attributes, Secret Service data and secret (nil keeps its
    /// secret), keeping its persistent ref, class and creation date; the modification date moves forward.
    package func reseal(
        _ entry: SecretServiceEntry, attributes: SecDictionary, data: SecretServiceData,
        secret: [UInt8]?
    ) throws {
        try refuseUnchecked(entry)
        guard let secret else {
            // Only resealed, never returned: wiped once written.
            var kept = try ItemSealer.openSecret(entry.item)
            defer { SecretBytes.wipe(&kept) }
            return try reseal(entry, attributes: attributes, data: data, secret: kept)
        }
        let item = entry.item
        let classKey = try keys.key(for: item.protection)
        let indexKey = try keys.requireIndexKey()
        var attributes = attributes
        var now = Clock.now()
        if case .date(let previous)? = item.attributes[SecAttr.modificationDate], now <= previous {
            now = previous.nextUp
        }
        attributes[SecAttr.modificationDate] = .date(now)
        var data = data
        while true {
            let row = try ItemSealer.seal(
                ref: item.persistentRef, itemClass: item.itemClass, protection: item.protection,
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

    /// Deletes a member; works while it is locked (like SecItemDelete).
    package func delete(_ member: SecretServiceMember) throws {
        _ = try store.delete(ids: [member.row.id])
    }

    /// Deletes every item of collection `id` (found by its collection hash, so locked ones too) and
    /// stores `state`, in one transaction; returns the ids of the deleted items.
    /// errSecMissingEntitlement, deleting nothing, while the collection holds items of groups outside the
    /// scope: deleting the collection would leave them in none, and they are not the caller's to delete.
    package func deleteItems(ofCollection id: String, savingState state: SecValue) throws -> [[UInt8]] {
        // A whole collection goes only while the keychain is unlocked: the kept lookup key finds its items,
        // but must not be enough to delete them (unlike one item, as SecItemDelete, through `delete`).
        _ = try keys.key(for: .afterFirstUnlock)
        let indexKey = try keys.requireIndexKey()
        let members = RowFilter(
            itemClass: Int(ItemClass.genericPassword.rawValue), synchronizable: nil,
            allOfHashes: [try SecretServiceMapping.collectionHash(id, indexKey: indexKey)])
        var scoped = members
        scoped.anyOfHashes = try scopeHashes()
        let headers = try store.headers(matching: scoped)
        if scoped.anyOfHashes != nil, try store.headers(matching: members).count != headers.count {
            throw SecError(
                SecStatus.missingEntitlement, "the collection holds items of other applications; it is not deleted")
        }
        try store.transaction {
            _ = try store.delete(ids: headers.map(\.id))
            try saveState(state)
        }
        return headers.map(\.persistentRef)
    }
}
