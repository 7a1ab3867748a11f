import LatchkeyModel
import LatchkeyStore

/// Finding Secret Service items by keyed hashes (docs/SECRET-SERVICE.md §2–3): the lookup behind
/// `SearchItems`, `Items` and `CreateItem(replace)`.
extension SecretServiceStorage {
    /// Hashes joined in one lookup; further ones are probed per row found (`select`).
    static let maxJoinedHashes = 8
    /// How far `select` counts the rows of each hash to find the rarest (two rounds).
    static let firstFrequencyCap = 8
    static let frequencyCap = 64

    /// The items of `collection` whose attributes include every pair of `query` (every item for an
    /// empty query): first those with their own Secret Service attributes, then those seen through the
    /// SecItem view, then locked ones, matched on their hashes alone. `collections` are the ids of every
    /// collection there is. errSecInteractionNotAllowed when the lookup needs the index key and neither
    /// it nor the Secret Service's (`lookupIndexKey`) is held.
    package func select(_ query: SecretAttributes, in collection: String, collections: [String]) throws
        -> [SecretServiceMatch]
    {
        let login = SecretServiceData.login
        let genp = Int(ItemClass.genericPassword.rawValue)
        let others = collections.filter { $0 != login }
        // Every lookup needs a key, an empty query too: before the first unlock there is none, and an
        // answer listing every item (locked) would tell how many there are; the search is then answered
        // by a locked stand-in instead (docs/SECRET-SERVICE.md §2).
        let lookupIndexKey = lookupIndexKey
        guard lookupIndexKey != nil else { throw SecError.locked }
        var hashes: [[UInt8]] = []
        // Hashes the lookup does not join: probed per row found, for every row, or only for rows that
        // cannot be opened (an opened row is compared with the query pair by pair anyway).
        var probed: [[UInt8]] = []
        var probedWhenLocked: [[UInt8]] = []
        if let indexKey = lookupIndexKey {
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
            if collection != login {
                hashes.insert(try SecretServiceMapping.collectionHash(collection, indexKey: indexKey), at: 0)
            }
        }
        let groups = try scopeHashes()
        var excluded = Set<Int64>()
        if collection == login, let indexKey = lookupIndexKey {
            for other in others {
                let filter = RowFilter(
                    itemClass: genp, synchronizable: nil,
                    allOfHashes: [try SecretServiceMapping.collectionHash(other, indexKey: indexKey)] + hashes)
                for header in try store.headers(matching: filter) { excluded.insert(header.id) }
            }
        }
        let filter = RowFilter(itemClass: genp, synchronizable: nil, allOfHashes: hashes, anyOfHashes: groups)
        if query.isEmpty {  // (then nothing is left to probe)
            // An item whose access control awaits a user check is locked for this client (§4c): only
            // its sealed attributes tell, so the readable rows are opened.
            return try store.rows(matching: filter).filter { !excluded.contains($0.id) }.map { row in
                guard isHeld(row.protection) else { return SecretServiceMatch(id: row.persistentRef, locked: true) }
                let item = try ItemSealer.open(row, keys: keys)
                return SecretServiceMatch(id: row.persistentRef, locked: try awaitsUserCheck(item) != nil)
            }
        }
        // Items with their own Secret Service attributes come before items seen through the SecItem
        // view, so a client that takes the first match finds the item it stored itself (§1).
        var own: [SecretServiceMatch] = []
        var viewed: [SecretServiceMatch] = []
        var locked: [SecretServiceMatch] = []
        for row in try store.rows(matching: filter) where !excluded.contains(row.id) {
            guard try store.carriesAll(probed, item: row.id) else { continue }
            if isHeld(row.protection) {
                // The hashes found it; the sealed attributes must agree, or the index was tampered with.
                guard let item = try? ItemSealer.open(row, keys: keys), isVisible(item) else { continue }
                let data = SecretServiceMapping.data(of: item.attributes, sealed: item.secretService)
                guard data.collection == collection, data.attributes.contains(query) else { continue }
                let match = SecretServiceMatch(id: row.persistentRef, locked: try awaitsUserCheck(item) != nil)
                if item.secretService != nil { own.append(match) } else { viewed.append(match) }
            } else if try store.carriesAll(probedWhenLocked, item: row.id) {
                // Matched on its hashes alone.
                locked.append(SecretServiceMatch(id: row.persistentRef, locked: true))
            }
        }
        return own + viewed + locked
    }
}
