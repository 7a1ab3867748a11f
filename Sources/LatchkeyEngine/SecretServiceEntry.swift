import LatchkeyModel
import LatchkeyStore

/// A generic password opened for the Secret Service: its genp attributes and its Secret Service data
/// (sealed with it, or the view of an item made through SecItem). Its secret stays sealed until
/// `SecretServiceStorage.secret(of:)`.
package struct SecretServiceEntry {
    let item: OpenItem

    /// The item's persistent reference UUID (16 bytes), its id on the bus.
    package var id: [UInt8] { item.persistentRef }
    /// Its genp attributes (`labl`, `svce`, `acct`, `cdat`, `mdat`, ...).
    package var genericAttributes: SecDictionary { item.attributes }
    /// The Secret Service data sealed with it; nil for an item made through SecItem.
    package var sealedData: SecretServiceData? { item.secretService }
    /// Its Secret Service data: the sealed one, or the view of a SecItem item (docs/SECRET-SERVICE.md §1).
    package var data: SecretServiceData { SecretServiceMapping.data(of: item.attributes, sealed: item.secretService) }
    /// Its label as the Secret Service shows it.
    package var label: String { SecretServiceMapping.label(of: item.attributes) }
    /// Unix seconds.
    package var created: UInt64 { SecretServiceMapping.unixSeconds(item.attributes[SecAttr.creationDate]) }
    package var modified: UInt64 { SecretServiceMapping.unixSeconds(item.attributes[SecAttr.modificationDate]) }
}

/// An item found to be a member of a collection: its row, and the item opened when its class key is held.
package struct SecretServiceMember {
    let row: StoreRow
    /// Nil while the item is locked.
    package let entry: SecretServiceEntry?
    /// Whether the item's access control needs a user check the client has not passed: its secret
    /// cannot be read now, though its attributes can.
    package var awaitsUserCheck = false

    /// Whether the item's class key is not held, so it cannot be read now.
    package var locked: Bool { entry == nil }
}

/// An item a lookup found in a collection, and whether it is locked.
package struct SecretServiceMatch: Sendable, Equatable {
    package var id: [UInt8]
    package var locked: Bool
}
