// Value types exchanged with the engine. Every byte array here is opaque to the store: sealed
// blobs or keyed hashes computed by the engine. Integers (item class, protection class) are stored
// as given; the store attaches no meaning to them beyond equality.

/// One stored item, as read back from the database.
public struct StoreRow: Sendable, Equatable {
    /// Row id; assigned by the store, never reused (AUTOINCREMENT), stable across `replace`.
    public var id: Int64
    /// 16 random bytes chosen by the engine; stable across updates.
    public var persistentRef: [UInt8]
    /// Item class (1 genp, 2 inet, 3 cert, 4 keys); opaque to the store.
    public var itemClass: Int
    /// Protection class (1...7); opaque to the store.
    public var protection: Int
    /// Whether the item is synchronizable.
    public var synchronizable: Bool
    /// Keyed hash of the item's primary-key attributes; unique per item class.
    public var uniqueHash: [UInt8]
    /// The item key, wrapped by its class key.
    public var wrappedKey: [UInt8]
    /// Sealed attributes.
    public var metadata: [UInt8]
    /// Sealed secret data.
    public var secret: [UInt8]

    /// Memberwise initializer.
    public init(
        id: Int64, persistentRef: [UInt8], itemClass: Int, protection: Int, synchronizable: Bool,
        uniqueHash: [UInt8], wrappedKey: [UInt8], metadata: [UInt8], secret: [UInt8]
    ) {
        self.id = id
        self.persistentRef = persistentRef
        self.itemClass = itemClass
        self.protection = protection
        self.synchronizable = synchronizable
        self.uniqueHash = uniqueHash
        self.wrappedKey = wrappedKey
        self.metadata = metadata
        self.secret = secret
    }
}

/// An item to insert, or the new contents for `Store.replace(id:with:)`.
public struct NewRow: Sendable, Equatable {
    /// 16 random bytes chosen by the engine; must be unique in the store.
    public var persistentRef: [UInt8]
    /// Item class; opaque to the store.
    public var itemClass: Int
    /// Protection class; opaque to the store.
    public var protection: Int
    /// Whether the item is synchronizable.
    public var synchronizable: Bool
    /// Keyed hash of the primary-key attributes; (itemClass, uniqueHash) must be unique.
    public var uniqueHash: [UInt8]
    /// The wrapped item key.
    public var wrappedKey: [UInt8]
    /// Sealed attributes.
    public var metadata: [UInt8]
    /// Sealed secret data.
    public var secret: [UInt8]
    /// Keyed hashes of searchable attribute values, matched by `RowFilter.allOfHashes`.
    /// Duplicates are ignored.
    public var indexHashes: [[UInt8]]

    /// Memberwise initializer.
    public init(
        persistentRef: [UInt8], itemClass: Int, protection: Int, synchronizable: Bool = false,
        uniqueHash: [UInt8], wrappedKey: [UInt8], metadata: [UInt8], secret: [UInt8],
        indexHashes: [[UInt8]] = []
    ) {
        self.persistentRef = persistentRef
        self.itemClass = itemClass
        self.protection = protection
        self.synchronizable = synchronizable
        self.uniqueHash = uniqueHash
        self.wrappedKey = wrappedKey
        self.metadata = metadata
        self.secret = secret
        self.indexHashes = indexHashes
    }
}

/// Which rows a query selects. All conditions are ANDed.
public struct RowFilter: Sendable, Equatable {
    /// Item class to search; always required (SecItem queries always name a class).
    public var itemClass: Int
    /// Allowed protection classes; nil means any. An empty array matches nothing.
    public var protections: [Int]? = nil
    /// Synchronizable state to match; nil matches both. Defaults to false, as SecItem does.
    public var synchronizable: Bool? = false
    /// Restrict to the item with this persistent reference.
    public var persistentRef: [UInt8]? = nil
    /// The row must have every one of these hashes in its index hashes.
    ///
    /// Put the most selective hash first (e.g. account before service): the lookup walks the rows
    /// carrying the first hash and probes the others, so its cost is proportional to how many
    /// rows carry the first one. Duplicates are ignored.
    public var allOfHashes: [[UInt8]] = []
    /// When set, the row must also carry at least one of these hashes (an empty list matches nothing).
    /// The engine restricts a caller to its access groups with it (the keyed hashes of `agrp` for each
    /// group): one primary-key probe per hash for each row the rest of the filter selects, so it
    /// never changes which index the lookup walks.
    public var anyOfHashes: [[UInt8]]? = nil
    /// At most this many rows (lowest ids first); nil means all. Zero or negative matches nothing.
    public var limit: Int? = nil

    /// Memberwise initializer; defaults select every non-synchronizable row of `itemClass`.
    public init(
        itemClass: Int, protections: [Int]? = nil, synchronizable: Bool? = false,
        persistentRef: [UInt8]? = nil, allOfHashes: [[UInt8]] = [], anyOfHashes: [[UInt8]]? = nil,
        limit: Int? = nil
    ) {
        self.itemClass = itemClass
        self.protections = protections
        self.synchronizable = synchronizable
        self.persistentRef = persistentRef
        self.allOfHashes = allOfHashes
        self.anyOfHashes = anyOfHashes
        self.limit = limit
    }
}

/// The columns needed to delete items or check whether their class keys are available, without
/// reading (and copying) the sealed blobs.
public struct RowHeader: Sendable, Equatable {
    /// Row id.
    public var id: Int64
    /// Persistent reference.
    public var persistentRef: [UInt8]
    /// Protection class.
    public var protection: Int
    /// Whether the item is synchronizable.
    public var synchronizable: Bool

    /// Memberwise initializer.
    public init(id: Int64, persistentRef: [UInt8], protection: Int, synchronizable: Bool) {
        self.id = id
        self.persistentRef = persistentRef
        self.protection = protection
        self.synchronizable = synchronizable
    }
}

/// Removes repeated byte strings, keeping first occurrences in order (order matters for lookups).
func uniqued(_ hashes: [[UInt8]]) -> [[UInt8]] {
    // Lists are a handful of hashes: a quadratic scan beats allocating a Set on every lookup.
    var result: [[UInt8]] = []
    result.reserveCapacity(hashes.count)
    for hash in hashes where !result.contains(hash) { result.append(hash) }
    return result
}
