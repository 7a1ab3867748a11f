import LatchkeyEngine

/// A Secret Service collection (docs/SECRET-SERVICE.md §4).
package struct SecretServiceCollection: Sendable, Equatable {
    /// The id used in object paths: `[A-Za-z0-9_]`, at most 64 bytes.
    package var id: String
    package var label: String
    /// Unix seconds.
    package var created: UInt64
    package var modified: UInt64

    package init(id: String, label: String, created: UInt64, modified: UInt64) {
        self.id = id
        self.label = label
        self.created = created
        self.modified = modified
    }
}

/// The collections and aliases of the keychain's Secret Service.
package struct SecretServiceState: Sendable, Equatable {
    /// `login` first, then the others in creation order.
    package var collections: [SecretServiceCollection]
    /// Alias name → collection id.
    package var aliases: [String: String]

    /// The state of a keychain on which no collection was ever created: `login`, aliased `default`.
    package static let initial = SecretServiceState(
        collections: [
            SecretServiceCollection(id: SecretServiceKeychain.login, label: "Login", created: 0, modified: 0)
        ],
        aliases: ["default": SecretServiceKeychain.login])

    package func collection(_ id: String) -> SecretServiceCollection? { collections.first { $0.id == id } }
}

/// An item as a Secret Service listing sees it: which item, where, and whether it can be read now.
package struct SecretServiceItemInfo: Sendable, Equatable {
    /// The item's persistent reference UUID (16 bytes).
    package var id: [UInt8]
    package var collection: String
    /// Whether the item's class key is not held, or its access control awaits a user check of this client.
    package var locked: Bool
    /// Whether it is locked by its access control alone (docs/SECRET-SERVICE.md §4c): its label and
    /// attributes can be read, its secret not.
    package var awaitsUserCheck = false
}

/// An opened Secret Service item (its secret stays sealed until asked for).
package struct SecretServiceItem: Sendable, Equatable {
    package var id: [UInt8]
    package var collection: String
    package var label: String
    package var attributes: SecretAttributes
    package var contentType: String
    /// Unix seconds.
    package var created: UInt64
    package var modified: UInt64
}

/// A secret and its content type.
package struct SecretServiceSecret: Sendable {
    package var value: [UInt8]
    package var contentType: String

    package init(value: [UInt8], contentType: String) {
        self.value = value
        self.contentType = contentType
    }
}

/// What the keychain's lock state means for the Secret Service (docs/SECRET-SERVICE.md §4).
package struct SecretServiceLockState: Sendable, Equatable {
    /// The WhenUnlocked class key is not held: every collection reports `Locked`.
    package var collectionsLocked: Bool
    /// The index key is held, so searches and listings can be evaluated.
    package var searchable: Bool
}

/// A keychain collection's `Items` as an unlisted program read them when `stamp` commits had been made
/// and the keychain's lock state was `lock` (`SecretService.broadcastItems`).
struct BroadcastItems {
    var stamp: UInt64
    var lock: SecretServiceLockState
    var paths: [String]
}
