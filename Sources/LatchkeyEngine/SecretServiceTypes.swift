#if canImport(Glibc)
import Glibc
#endif
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// A Secret Service collection (docs/SECRET-SERVICE.md §4).
public struct SecretServiceCollection: Sendable, Equatable {
    /// The id used in object paths: `[A-Za-z0-9_]`, at most 64 bytes.
    public var id: String
    public var label: String
    /// Unix seconds.
    public var created: UInt64
    public var modified: UInt64

    public init(id: String, label: String, created: UInt64, modified: UInt64) {
        self.id = id
        self.label = label
        self.created = created
        self.modified = modified
    }
}

/// The collections and aliases of the keychain's Secret Service.
public struct SecretServiceState: Sendable, Equatable {
    /// `login` first, then the others in creation order.
    public var collections: [SecretServiceCollection]
    /// Alias name → collection id.
    public var aliases: [String: String]

    /// The state of a keychain on which no collection was ever created: `login`, aliased `default`.
    public static let initial = SecretServiceState(
        collections: [SecretServiceCollection(id: SecretServiceKeychain.login, label: "Login", created: 0, modified: 0)],
        aliases: ["default": SecretServiceKeychain.login])

    public func collection(_ id: String) -> SecretServiceCollection? { collections.first { $0.id == id } }
}

/// An item as a Secret Service listing sees it: which item, where, and whether it can be read now.
public struct SecretServiceItemInfo: Sendable, Equatable {
    /// The item's persistent reference UUID (16 bytes).
    public var id: [UInt8]
    public var collection: String
    /// Whether the item's class key is not held.
    public var locked: Bool
}

/// An opened Secret Service item (its secret stays sealed until asked for).
public struct SecretServiceItem: Sendable, Equatable {
    public var id: [UInt8]
    public var collection: String
    public var label: String
    public var attributes: SecretAttributes
    public var contentType: String
    /// Unix seconds.
    public var created: UInt64
    public var modified: UInt64
}

/// A secret and its content type.
public struct SecretServiceSecret: Sendable {
    public var value: [UInt8]
    public var contentType: String

    public init(value: [UInt8], contentType: String) {
        self.value = value
        self.contentType = contentType
    }
}

/// What the keychain's lock state means for the Secret Service (docs/SECRET-SERVICE.md §4).
public struct SecretServiceLockState: Sendable, Equatable {
    /// The WhenUnlocked class key is not held: every collection reports `Locked`.
    public var collectionsLocked: Bool
    /// The index key is held, so searches and listings can be evaluated.
    public var searchable: Bool
}
