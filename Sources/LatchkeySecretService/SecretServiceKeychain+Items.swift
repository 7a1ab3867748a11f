import LatchkeyEngine
import LatchkeyModel

/// Secret Service items: listing, searching, reading, and the lifecycle rules of `CreateItem`,
/// `SetSecret`, `Set(Label|Attributes)` and `Delete` (docs/SECRET-SERVICE.md §1–3).
extension SecretServiceKeychain {
    // MARK: - Listing and searching

    /// Every item of a collection, in row order.
    package func items(in collection: String) throws(SecError) -> [SecretServiceItemInfo] {
        try withStorage(.readAttributes, reading: true) { storage in
            let state = try loadState(storage)
            guard state.collection(collection) != nil else { throw SecError.notFound }
            return try select(SecretAttributes(), in: collection, state: state, storage: storage)
        }
    }

    /// Items whose attributes include every pair of `query`, in one collection or (nil) in all.
    /// Locked matches are found by their keyed hashes alone (docs/SECRET-SERVICE.md §2).
    package func search(_ query: SecretAttributes, in collection: String? = nil) throws(SecError)
        -> [SecretServiceItemInfo]
    {
        try query.validate()
        return try withStorage(.readAttributes, reading: true) { storage in
            let state = try loadState(storage)
            if let collection, state.collection(collection) == nil { throw SecError.notFound }
            var results: [SecretServiceItemInfo] = []
            for target in collection.map({ [$0] }) ?? state.collectionIDs {
                results += try select(query, in: target, state: state, storage: storage)
            }
            return results
        }
    }

    /// Whether an item exists in a collection, and whether it is locked; nil when it does not.
    package func info(item id: [UInt8], in collection: String) throws(SecError) -> SecretServiceItemInfo? {
        try withStorage(.readAttributes, reading: true) { storage in
            let state = try loadState(storage)
            guard state.collection(collection) != nil,
                let member = try storage.member(id, of: collection, collections: state.collectionIDs)
            else {
                return nil
            }
            return SecretServiceItemInfo(
                id: id, collection: collection, locked: member.locked || member.awaitsUserCheck,
                awaitsUserCheck: !member.locked && member.awaitsUserCheck)
        }
    }

    /// An item's label, attributes and dates; errSecInteractionNotAllowed while it is locked.
    package func item(_ id: [UInt8], in collection: String) throws(SecError) -> SecretServiceItem {
        try withStorage(.readAttributes, reading: true) { storage in
            let entry = try openMember(id, collection, storage)
            let data = entry.data
            return SecretServiceItem(
                id: id, collection: collection, label: entry.label, attributes: data.attributes,
                contentType: data.contentType, created: entry.created, modified: entry.modified)
        }
    }

    /// An item's secret; errSecInteractionNotAllowed while it is locked.
    package func secret(_ id: [UInt8], in collection: String) throws(SecError) -> SecretServiceSecret {
        try withStorage(.readData, reading: true) { storage in
            let entry = try openMember(id, collection, storage)
            return SecretServiceSecret(value: try storage.secret(of: entry), contentType: entry.data.contentType)
        }
    }

    // MARK: - Changes

    /// `CreateItem`: a new WhenUnlocked generic password in `collection`, or, with `replace`, the
    /// first item there with exactly these attributes gets the new label and secret. Returns the
    /// item's id and whether it was newly made (docs/SECRET-SERVICE.md §3).
    package func createItem(
        in collection: String, label: String, attributes: SecretAttributes,
        secret: SecretServiceSecret, replace: Bool
    ) throws(SecError)
        -> (id: [UInt8], created: Bool)
    {
        try Self.validate(label: label, attributes: attributes, secret: secret)
        return try withStorage(.add) { storage in
            let state = try loadState(storage)
            guard state.collection(collection) != nil else { throw SecError.notFound }
            try storage.requireUnlocked()
            if replace, let existing = try exactMatch(attributes, in: collection, state: state, storage: storage) {
                var changed = existing.genericAttributes
                changed[SecAttr.label] = .string(label)
                var data = existing.data
                data.contentType = secret.contentType
                try storage.reseal(existing, attributes: changed, data: data, secret: secret.value)
                return (existing.id, false)
            }
            if replace, collection == Self.login,
                let existing = try secItemAccountItem(for: attributes, state: state, storage: storage)
            {
                // The account's SecItem item (keyring.set_password after SecItemAdd): it takes the
                // new attributes on top of its view and stays that account's generic password.
                var changed = existing.genericAttributes
                changed[SecAttr.label] = .string(label)
                var data = existing.data
                for pair in attributes.pairs { data.attributes = data.attributes.setting(pair.name, pair.value) }
                data.contentType = secret.contentType
                data.keepsGenericIdentity = true
                try storage.reseal(existing, attributes: changed, data: data, secret: secret.value)
                return (existing.id, false)
            }
            let data = SecretServiceData(
                attributes: attributes, collection: collection, contentType: secret.contentType)
            return (try storage.insert(label: label, data: data, secret: secret.value), true)
        }
    }

    /// Changes an item's label, attributes and/or secret; errSecInteractionNotAllowed while it is
    /// locked.
    package func updateItem(
        _ id: [UInt8], in collection: String, label: String? = nil,
        attributes: SecretAttributes? = nil, secret: SecretServiceSecret? = nil
    ) throws(SecError) {
        if let label, label.utf8.count > SecretServiceLimits.maxStringBytes { throw .param("label too long") }
        try attributes?.validate()
        if let secret { try Self.validate(secret) }
        try withStorage(.update) { storage in
            let entry = try openMember(id, collection, storage)
            var genp = entry.genericAttributes
            var data = entry.data
            if let attributes {
                data.attributes = attributes
                let primary = SecretServiceMapping.primaryKey(of: attributes)
                genp[SecAttr.service] = primary.service
                genp[SecAttr.account] = primary.account
            }
            if let label { genp[SecAttr.label] = .string(label) }
            if let secret { data.contentType = secret.contentType }
            try storage.reseal(entry, attributes: genp, data: data, secret: secret?.value)
        }
    }

    /// Deletes an item; works while it is locked (like SecItemDelete).
    package func deleteItem(_ id: [UInt8], in collection: String) throws(SecError) {
        try withStorage(.delete) { storage in
            let state = try loadState(storage)
            guard state.collection(collection) != nil,
                let member = try storage.member(id, of: collection, collections: state.collectionIDs)
            else {
                throw SecError.notFound
            }
            try storage.delete(member)
        }
    }

    // MARK: - Lookups

    /// The items of `collection` matching `query` (every item for an empty query).
    private func select(
        _ query: SecretAttributes, in collection: String, state: SecretServiceState,
        storage: SecretServiceStorage
    ) throws -> [SecretServiceItemInfo] {
        try storage.select(query, in: collection, collections: state.collectionIDs).map {
            SecretServiceItemInfo(id: $0.id, collection: collection, locked: $0.locked)
        }
    }

    /// Item `id` of `collection`, opened; errSecItemNotFound when it is not there.
    private func openMember(_ id: [UInt8], _ collection: String, _ storage: SecretServiceStorage) throws
        -> SecretServiceEntry
    {
        let state = try loadState(storage)
        guard state.collection(collection) != nil,
            let member = try storage.member(id, of: collection, collections: state.collectionIDs)
        else {
            throw SecError.notFound
        }
        return try storage.open(member)
    }

    /// The first item of `collection` whose attribute set is `attributes` (up to a `username` that
    /// repeats `account`), if one can be read.
    private func exactMatch(
        _ attributes: SecretAttributes, in collection: String, state: SecretServiceState,
        storage: SecretServiceStorage
    ) throws -> SecretServiceEntry? {
        let query = attributes.withoutMirroredUsername
        for match in try storage.select(query, in: collection, collections: state.collectionIDs) where !match.locked {
            guard let entry = try storage.entry(match.id) else { continue }
            if entry.data.attributes.namesSameItem(as: attributes) { return entry }
        }
        return nil
    }

    /// The first readable item made through SecItem (no Secret Service data, or taken over this way
    /// before) whose `svce` and `acct` are the ones `attributes` define, when they define a non-empty
    /// `acct` (docs/SECRET-SERVICE.md §3).
    private func secItemAccountItem(
        for attributes: SecretAttributes, state: SecretServiceState,
        storage: SecretServiceStorage
    ) throws -> SecretServiceEntry? {
        guard let account = attributes.account, !account.isEmpty else { return nil }
        let service = attributes.service ?? ""
        var pairs = [SecretAttributes.Pair("account", account)]
        if !service.isEmpty { pairs.append(.init("service", service)) }
        for match in try storage.select(SecretAttributes(pairs)!, in: Self.login, collections: state.collectionIDs)
        where !match.locked {
            guard let entry = try storage.entry(match.id) else { continue }
            let generic = entry.genericAttributes
            guard entry.sealedData?.keepsGenericIdentity ?? true,
                (SecretServiceMapping.text(generic[SecAttr.service]) ?? "").utf8.elementsEqual(service.utf8),
                SecretServiceMapping.text(generic[SecAttr.account])?.utf8.elementsEqual(account.utf8) == true
            else { continue }
            return entry
        }
        return nil
    }
}
