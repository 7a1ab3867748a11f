import LatchkeyCrypto
import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// The `session` collection (docs/SECRET-SERVICE.md §4a): gnome-keyring's in-memory collection, which
/// libsecret names `SECRET_COLLECTION_SESSION` and programs (and keyring's tests) use for secrets that
/// must not outlive the login. Its items live in this object only, never in the keychain's database,
/// and are gone when the agent exits.
///
/// Each secret is sealed under a key derived from the WhenUnlocked class key and a salt drawn here
/// (`SecretServiceKeychain.sealInMemory`), so the collection locks with the keychain: while the key is
/// not held its secrets cannot be opened by anything, as a stored WhenUnlocked item's. Labels and
/// attributes stay readable to the service, as gnome-keyring keeps them, so a search finds locked
/// items; clients see them only while the collection is unlocked, like the stored items'.
///
/// Each item belongs to the access group of the client that made it (its first), and only clients that
/// may use that group see it, as stored items (docs/IDENTITY.md §4).
///
/// What it holds is capped (items, and the memory they take): any program of the user's can add to it,
/// and it is the agent's memory.
///
/// Loop thread only, like the service's sessions and prompts.
final class SessionCollection {
    /// Its id in object paths, and the alias that names it.
    static let id = "session"
    static let maxItems = 4_096
    /// What the items take in the agent's memory, all counted (`Item.size`).
    static let maxBytes = 16 << 20

    struct Item {
        var id: [UInt8]
        var label: String
        var attributes: SecretAttributes
        var contentType: String
        /// The access group it belongs to: its maker's first.
        var group: String
        /// The secret, sealed (`SecretServiceKeychain.sealInMemory`, bound to `id`).
        var sealed: [UInt8]
        /// Unix seconds.
        var created: UInt64
        var modified: UInt64

        /// What the item takes in the agent's memory, as the cap counts it: not only its bytes (an attribute
        /// costs a 32-byte pair however short, and a 16-byte name a 64-byte block besides), but every block
        /// it holds, as Swift and glibc's malloc lay them out on 64-bit Linux (SessionCollectionUnitTests'
        /// testCapBoundsWhatItemsTakeInMemory measures it):
        /// - its place in `items`, whose capacity doubles as it grows: twice `Item`'s stride (88 bytes);
        /// - each array it holds (its id, sealed secret and attribute pairs, each pair two 16-byte `String`s):
        ///   its capacity, Swift's 32-byte header and malloc's 8-byte chunk header and 16-byte rounding;
        /// - each string longer than 15 bytes (shorter ones live inside the `String`): a block of its bytes,
        ///   a NUL, Swift's 32-byte header, malloc's chunk header and rounding. `Item.made` stores strings
        ///   without the spare capacity a string built by appending keeps, so their length is what they take.
        /// An item with no attributes, label or secret counts 350 bytes; one as libsecret's
        /// clients store them (a label, five attributes, a short password) about 950, so that 4,096 of them
        /// take less than a quarter of the cap. What malloc keeps between the blocks comes on top: at worst
        /// a fifth more in that test.
        var size: Int {
            2 * MemoryLayout<Item>.stride + Self.size(id) + Self.size(sealed) + Self.size(attributes.pairs)
                + Self.size(label) + Self.size(contentType) + Self.size(group)
                + attributes.pairs.reduce(0) { $0 + Self.size($1.name) + Self.size($1.value) }
        }

        /// The item, with its strings in storage of their exact length (see `size`).
        static func made(
            id: [UInt8], label: String, attributes: SecretAttributes, contentType: String, group: String,
            sealed: [UInt8], created: UInt64, modified: UInt64
        ) -> Item {
            Item(
                id: id, label: compact(label), attributes: compact(attributes), contentType: compact(contentType),
                group: compact(group), sealed: sealed, created: created, modified: modified)
        }

        static func compact(_ attributes: SecretAttributes) -> SecretAttributes {
            // Still unique and sorted: the same names.
            SecretAttributes(attributes.pairs.map { SecretAttributes.Pair(compact($0.name), compact($0.value)) })!
        }

        /// `text` in a block of its exact length: one built by appending keeps up to twice its length.
        static func compact(_ text: String) -> String {
            let count = text.utf8.count
            guard count > inlineStringBytes else { return text }
            return String(unsafeUninitializedCapacity: count) { $0.initialize(fromContentsOf: text.utf8) }
        }

        /// The most UTF-8 bytes a `String` holds inside itself, without a block of its own.
        private static let inlineStringBytes = 15

        private static func size(_ text: String) -> Int {
            let count = text.utf8.count
            return count > inlineStringBytes ? count + 1 + 32 + 8 + 15 : 0
        }

        private static func size<Element>(_ array: [Element]) -> Int {
            array.capacity == 0 ? 0 : array.capacity * MemoryLayout<Element>.stride + 32 + 8 + 15
        }
    }

    /// In the order they were made.
    private(set) var items: [Item] = []
    private var bytes = 0
    private let salt: [UInt8]
    private(set) var label = ""
    /// Unix seconds: when the service started; `modified` moves with a new label.
    let created: UInt64
    private(set) var modified: UInt64

    init() throws {
        salt = try SecureRandom.bytes(32)
        created = Self.now()
        modified = created
    }

    static func now() -> UInt64 { UInt64(max(0, Clock.now() + Clock.unixToReferenceDate)) }

    /// The collection as the service lists it.
    var collection: SecretServiceCollection {
        SecretServiceCollection(id: Self.id, label: label, created: created, modified: modified)
    }

    /// Item `id`, if `caller` may use its group.
    func item(_ id: [UInt8], for caller: Caller) -> Item? {
        items.first { $0.id == id && caller.mayUse(group: $0.group) }
    }

    /// The ids of the items `caller` may use whose attributes include every pair of `query`, in the order
    /// they were made.
    func search(_ query: SecretAttributes, for caller: Caller) -> [[UInt8]] {
        items.filter { caller.mayUse(group: $0.group) && Self.includes($0.attributes, query) }.map(\.id)
    }

    /// Where `caller`'s item `id` is in `items`; errSecItemNotFound for an item of a group it may not use,
    /// as for none.
    private func index(of id: [UInt8], for caller: Caller) throws(SecError) -> Int {
        guard let index = items.firstIndex(where: { $0.id == id }), caller.mayUse(group: items[index].group) else {
            throw .notFound
        }
        return index
    }

    /// Whether `attributes` has every pair of `query`: one merge of the two name-sorted lists, so that a
    /// search of a full collection with a full query costs what they hold, not its product.
    static func includes(_ attributes: SecretAttributes, _ query: SecretAttributes) -> Bool {
        let have = attributes.pairs
        guard query.count <= have.count else { return false }
        var k = 0
        for wanted in query.pairs {
            while k < have.count, have[k].name.utf8.lexicographicallyPrecedes(wanted.name.utf8) { k += 1 }
            guard k < have.count, have[k] == wanted else { return false }
            k += 1
        }
        return true
    }

    func setLabel(_ label: String, _ engine: SecretServiceKeychain) throws(SecError) {
        guard label.utf8.count <= SecretServiceLimits.maxStringBytes else { throw .param("label too long") }
        // As a stored collection's label: changed only while the keychain is unlocked.
        _ = try engine.sealInMemory([], salt: salt, aad: [])
        self.label = label
        modified = max(modified, Self.now())
    }

    /// `CreateItem`: with `replace`, the first item with exactly these attributes takes the new label and
    /// secret; otherwise a new item. Returns its id and whether it is new. errSecInteractionNotAllowed
    /// while the keychain is locked; LimitsExceeded past the caps.
    func create(
        label: String, attributes: SecretAttributes, secret: SecretServiceSecret, replace: Bool,
        _ engine: SecretServiceKeychain
    ) throws -> (id: [UInt8], created: Bool) {
        try SecretServiceKeychain.validate(label: label, attributes: attributes, secret: secret)
        guard let group = engine.caller.accessGroups.first else {
            throw SecError(SecStatus.missingEntitlement, "the caller may use no access group")
        }
        if replace,
            let existing = items.first(where: { $0.attributes == attributes && Caller.sameAccessGroup($0.group, group) }
            )
        {
            try update(existing.id, label: label, secret: secret, engine)
            return (existing.id, false)
        }
        guard items.count < Self.maxItems else { throw Self.full("at most \(Self.maxItems) items") }
        let id = try SecureRandom.bytes(16)
        let now = Self.now()
        let item = Item.made(
            id: id, label: label, attributes: attributes, contentType: secret.contentType, group: group,
            sealed: try engine.sealInMemory(secret.value, salt: salt, aad: id), created: now, modified: now)
        guard bytes + item.size <= Self.maxBytes else {
            throw Self.full("its items take at most \(Self.maxBytes >> 20) MiB of memory")
        }
        items.append(item)
        bytes += item.size
        return (id, true)
    }

    /// An item's secret; errSecInteractionNotAllowed while the keychain is locked, errSecItemNotFound
    /// when there is no such item.
    func secret(_ id: [UInt8], _ engine: SecretServiceKeychain) throws(SecError) -> SecretServiceSecret {
        guard let item = item(id, for: engine.caller) else { throw .notFound }
        return SecretServiceSecret(
            value: try engine.openInMemory(item.sealed, salt: salt, aad: id), contentType: item.contentType)
    }

    /// Changes an item's label, attributes and/or secret; errSecInteractionNotAllowed while the keychain
    /// is locked (the item then cannot be read, so it cannot be changed either).
    func update(
        _ id: [UInt8], label: String? = nil, attributes: SecretAttributes? = nil,
        secret: SecretServiceSecret? = nil, _ engine: SecretServiceKeychain
    ) throws {
        let index = try index(of: id, for: engine.caller)
        if let label, label.utf8.count > SecretServiceLimits.maxStringBytes { throw SecError.param("label too long") }
        try attributes?.validate()
        if let secret { try SecretServiceKeychain.validate(secret) }
        guard !engine.lockState().collectionsLocked else { throw SecError.locked }
        var item = items[index]
        if let label { item.label = Item.compact(label) }
        if let attributes { item.attributes = Item.compact(attributes) }
        if let secret {
            item.sealed = try engine.sealInMemory(secret.value, salt: salt, aad: id)
            item.contentType = Item.compact(secret.contentType)
        }
        var replaced = items[index].sealed
        item.modified = max(item.modified, Self.now())
        guard bytes - items[index].size + item.size <= Self.maxBytes else {
            throw Self.full("its items take at most \(Self.maxBytes >> 20) MiB of memory")
        }
        bytes += item.size - items[index].size
        items[index] = item
        // The old secret sealed: ciphertext, but it would open while the class key is held again.
        if secret != nil { SecretBytes.wipe(&replaced) }
    }

    /// Deletes `caller`'s item (locked or not, as any item); errSecItemNotFound when there is none.
    func delete(_ id: [UInt8], for caller: Caller) throws(SecError) {
        let index = try index(of: id, for: caller)
        bytes -= items[index].size
        var removed = items.remove(at: index)
        SecretBytes.wipe(&removed.sealed)
    }

    private static func full(_ what: String) -> BusError {
        BusError(name: SS.ErrorName.limitsExceeded, message: "the session collection is full: \(what)")
    }
}
