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
/// What it holds is capped (items and bytes): any program of the user's can add to it, and it is the
/// agent's memory.
///
/// Loop thread only, like the service's sessions and prompts.
final class SessionCollection {
    /// Its id in object paths, and the alias that names it.
    static let id = "session"
    static let maxItems = 4_096
    /// Secrets, labels, attribute names and values, content types, all counted.
    static let maxBytes = 16 << 20

    struct Item {
        var id: [UInt8]
        var label: String
        var attributes: SecretAttributes
        var contentType: String
        /// The secret, sealed (`SecretServiceKeychain.sealInMemory`, bound to `id`).
        var sealed: [UInt8]
        /// Unix seconds.
        var created: UInt64
        var modified: UInt64

        /// What the cap counts for this item.
        var size: Int {
            sealed.count + label.utf8.count + contentType.utf8.count
                + attributes.pairs.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
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

    func item(_ id: [UInt8]) -> Item? { items.first { $0.id == id } }

    /// The ids of the items whose attributes include every pair of `query`, in the order they were made.
    func search(_ query: SecretAttributes) -> [[UInt8]] {
        items.filter { Self.includes($0.attributes, query) }.map(\.id)
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
        if replace, let existing = items.first(where: { $0.attributes == attributes }) {
            try update(existing.id, label: label, secret: secret, engine)
            return (existing.id, false)
        }
        guard items.count < Self.maxItems else { throw Self.full("at most \(Self.maxItems) items") }
        let id = try SecureRandom.bytes(16)
        let now = Self.now()
        let item = Item(
            id: id, label: label, attributes: attributes, contentType: secret.contentType,
            sealed: try engine.sealInMemory(secret.value, salt: salt, aad: id), created: now, modified: now)
        guard bytes + item.size <= Self.maxBytes else { throw Self.full("at most \(Self.maxBytes >> 20) MiB") }
        items.append(item)
        bytes += item.size
        return (id, true)
    }

    /// An item's secret; errSecInteractionNotAllowed while the keychain is locked, errSecItemNotFound
    /// when there is no such item.
    func secret(_ id: [UInt8], _ engine: SecretServiceKeychain) throws(SecError) -> SecretServiceSecret {
        guard let item = item(id) else { throw .notFound }
        return SecretServiceSecret(
            value: try engine.openInMemory(item.sealed, salt: salt, aad: id), contentType: item.contentType)
    }

    /// Changes an item's label, attributes and/or secret; errSecInteractionNotAllowed while the keychain
    /// is locked (the item then cannot be read, so it cannot be changed either).
    func update(
        _ id: [UInt8], label: String? = nil, attributes: SecretAttributes? = nil,
        secret: SecretServiceSecret? = nil, _ engine: SecretServiceKeychain
    ) throws {
        guard let index = items.firstIndex(where: { $0.id == id }) else { throw SecError.notFound }
        if let label, label.utf8.count > SecretServiceLimits.maxStringBytes { throw SecError.param("label too long") }
        try attributes?.validate()
        if let secret { try SecretServiceKeychain.validate(secret) }
        guard !engine.lockState().collectionsLocked else { throw SecError.locked }
        var item = items[index]
        if let label { item.label = label }
        if let attributes { item.attributes = attributes }
        if let secret {
            item.sealed = try engine.sealInMemory(secret.value, salt: salt, aad: id)
            item.contentType = secret.contentType
        }
        var replaced = items[index].sealed
        item.modified = max(item.modified, Self.now())
        guard bytes - items[index].size + item.size <= Self.maxBytes else {
            throw Self.full("at most \(Self.maxBytes >> 20) MiB")
        }
        bytes += item.size - items[index].size
        items[index] = item
        // The old secret sealed: ciphertext, but it would open while the class key is held again.
        if secret != nil { SecretBytes.wipe(&replaced) }
    }

    /// Deletes an item (locked or not, as any item); errSecItemNotFound when there is none.
    func delete(_ id: [UInt8]) throws(SecError) {
        guard let index = items.firstIndex(where: { $0.id == id }) else { throw .notFound }
        bytes -= items[index].size
        var removed = items.remove(at: index)
        SecretBytes.wipe(&removed.sealed)
    }

    private static func full(_ what: String) -> BusError {
        BusError(name: SS.ErrorName.limitsExceeded, message: "the session collection is full: \(what)")
    }
}
