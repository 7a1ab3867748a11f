import LatchkeyModel
import LatchkeyStore

/// Finding Secret Service items (docs/SECRET-SERVICE.md §2–3): the keyed-hash lookup behind
/// `SearchItems` and `Items`, and the two lookups `CreateItem(replace)` makes. Mutex held.
extension SecretServiceKeychain {
    /// Hashes joined in one lookup; further ones are probed per row found (`select`).
    static let maxJoinedHashes = 8
    /// How far `select` counts the rows of each hash to find the rarest (two rounds).
    static let firstFrequencyCap = 8
    static let frequencyCap = 64

    /// The rows of `collection` matching `query` (every item for an empty query).
    func select(_ query: SecretAttributes, in collection: String, state: SecretServiceState,
                        store: Store) throws -> [SecretServiceItemInfo] {
        let genp = Int(ItemClass.genericPassword.rawValue)
        let others = state.collections.map(\.id).filter { $0 != Self.login }
        let needsIndex = !query.isEmpty || collection != Self.login || !others.isEmpty
        guard !needsIndex || keychain.keys.indexKey != nil else { throw SecError.locked }
        var hashes: [[UInt8]] = []
        // Hashes the lookup does not join: probed per row found, for every row, or only for rows that
        // cannot be opened (an opened row is compared with the query pair by pair anyway).
        var probed: [[UInt8]] = []
        var probedWhenLocked: [[UInt8]] = []
        if let indexKey = keychain.keys.indexKey {
            hashes = try query.pairs.map { try SecretServiceMapping.pairHash($0, indexKey: indexKey) }
            if hashes.count > 1 {
                // The lookup walks the rows of the first hash: start from the rarest. Counting stops at
                // a cap; a small one first, which usually tells (one pair nearly always names a few
                // items), and a larger one only when every pair is that common.
                var counts = try store.hashFrequencies(hashes, cap: Self.firstFrequencyCap)
                if counts.min() == Self.firstFrequencyCap {
                    counts = try store.hashFrequencies(hashes, cap: Self.frequencyCap)
                }
                hashes = zip(hashes, counts).sorted { $0.1 < $1.1 }.map(\.0)
                if let rarest = counts.min(), rarest < Self.firstFrequencyCap {
                    // A few rows at most: joining the other hashes would only add an index probe per
                    // row into the (large) runs of common hashes, for rows that are opened anyway.
                    probedWhenLocked = Array(hashes.dropFirst())
                    hashes = [hashes[0]]
                } else {
                    // SQLite joins at most 200 tables (a 256-pair query would fail), and after the
                    // rarest few hashes the others narrow nothing down.
                    probed = Array(hashes.dropFirst(Self.maxJoinedHashes))
                    hashes = Array(hashes.prefix(Self.maxJoinedHashes))
                }
            }
            if collection != Self.login {
                hashes.insert(try SecretServiceMapping.collectionHash(collection, indexKey: indexKey), at: 0)
            }
        }
        var excluded = Set<Int64>()
        if collection == Self.login, let indexKey = keychain.keys.indexKey {
            for other in others {
                let filter = RowFilter(itemClass: genp, synchronizable: nil,
                                       allOfHashes: [try SecretServiceMapping.collectionHash(other, indexKey: indexKey)] + hashes)
                for header in try store.headers(matching: filter) { excluded.insert(header.id) }
            }
        }
        let filter = RowFilter(itemClass: genp, synchronizable: nil, allOfHashes: hashes)
        if query.isEmpty {  // (then nothing is left to probe)
            return try store.headers(matching: filter).filter { !excluded.contains($0.id) }.map {
                SecretServiceItemInfo(id: $0.persistentRef, collection: collection, locked: !isHeld($0.protection))
            }
        }
        // Items with their own Secret Service attributes come before items seen through the SecItem
        // view, so a client that takes the first match finds the item it stored itself (§1).
        var own: [SecretServiceItemInfo] = []
        var viewed: [SecretServiceItemInfo] = []
        var locked: [SecretServiceItemInfo] = []
        for row in try store.rows(matching: filter) where !excluded.contains(row.id) {
            guard try store.carriesAll(probed, item: row.id) else { continue }
            if isHeld(row.protection) {
                // The hashes found it; the sealed attributes must agree, or the index was tampered with.
                guard let item = try? ItemSealer.open(row, keys: keychain.keys) else { continue }
                let data = SecretServiceMapping.data(of: item.attributes, sealed: item.secretService)
                guard data.collection == collection, data.attributes.contains(query) else { continue }
                let info = SecretServiceItemInfo(id: row.persistentRef, collection: collection, locked: false)
                if item.secretService != nil { own.append(info) } else { viewed.append(info) }
            } else if try store.carriesAll(probedWhenLocked, item: row.id) {
                // Matched on its hashes alone.
                locked.append(SecretServiceItemInfo(id: row.persistentRef, collection: collection, locked: true))
            }
        }
        return own + viewed + locked
    }

    /// The first item of `collection` whose attribute set is `attributes` (up to a `username` that
    /// repeats `account`), if one can be read.
    func exactMatch(_ attributes: SecretAttributes, in collection: String, state: SecretServiceState,
                            store: Store) throws -> OpenItem? {
        let query = attributes.withoutMirroredUsername
        for info in try select(query, in: collection, state: state, store: store) where !info.locked {
            guard let row = try store.row(persistentRef: info.id) else { continue }
            let item = try ItemSealer.open(row, keys: keychain.keys)
            if SecretServiceMapping.data(of: item.attributes, sealed: item.secretService).attributes.namesSameItem(as: attributes) {
                return item
            }
        }
        return nil
    }

    /// The first readable item made through SecItem (no Secret Service data, or taken over this way
    /// before) whose `svce` and `acct` are the ones `attributes` define, when they define a non-empty
    /// `acct` (docs/SECRET-SERVICE.md §3).
    func secItemAccountItem(for attributes: SecretAttributes, state: SecretServiceState,
                                    store: Store) throws -> OpenItem? {
        guard let account = attributes.account, !account.isEmpty else { return nil }
        let service = attributes.service ?? ""
        var pairs = [SecretAttributes.Pair("account", account)]
        if !service.isEmpty { pairs.append(.init("service", service)) }
        for info in try select(SecretAttributes(pairs)!, in: Self.login, state: state, store: store) where !info.locked {
            guard let row = try store.row(persistentRef: info.id) else { continue }
            let item = try ItemSealer.open(row, keys: keychain.keys)
            guard item.secretService?.keepsGenericIdentity ?? true,
                  (SecretServiceMapping.text(item.attributes[SecAttr.service]) ?? "").utf8.elementsEqual(service.utf8),
                  SecretServiceMapping.text(item.attributes[SecAttr.account])?.utf8.elementsEqual(account.utf8) == true
            else { continue }
            return item
        }
        return nil
    }
}
