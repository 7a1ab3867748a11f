/// How many items a query returns.
package enum MatchLimit: Sendable, Equatable {
    case one
    case all
    case count(Int)

    /// The SQL-level limit, nil for all.
    package var maximum: Int? {
        switch self {
        case .one: 1
        case .all: nil
        case .count(let n): n
        }
    }

    /// Whether results come back as an array (any limit other than exactly one).
    package var returnsArray: Bool {
        switch self {
        case .one: false
        case .all: true
        case .count(let n): n != 1
        }
    }
}

/// Which `kSecReturn*` keys were set to true.
package struct ReturnFlags: Sendable, Equatable {
    package var data = false
    package var attributes = false
    package var ref = false
    package var persistentRef = false

    package init() {}

    /// True when nothing is to be returned.
    package var isEmpty: Bool { !data && !attributes && !ref && !persistentRef }

    /// Apple's rule: Attributes, or two or more return keys, give a dictionary.
    package var wantsDictionary: Bool {
        attributes || [data, ref, persistentRef].filter { $0 }.count >= 2
    }
}

/// A persistent reference: the item class tag followed by the item's 16-byte UUID (current format),
/// or by an 8-byte big-endian row id (Apple's legacy format, still accepted).
package struct PersistentRef: Sendable, Equatable {
    package var itemClass: ItemClass
    package var uuid: [UInt8]?
    package var rowID: Int64?
    /// An identity's reference (`idnt`): `itemClass` is `.certificate` and `uuid` the certificate's.
    package var identity = false

    package init(itemClass: ItemClass, uuid: [UInt8], identity: Bool = false) {
        self.itemClass = itemClass
        self.uuid = uuid
        self.identity = identity
    }

    /// Parses the bytes of a `kSecValuePersistentRef`; nil when they are not a persistent reference.
    package init?(bytes: [UInt8]) {
        guard bytes.count == 20 || bytes.count == 12,
            let tag = String(validating: bytes[0..<4], as: UTF8.self)
        else { return nil }
        if tag == SecKeys.classIdentity {
            itemClass = .certificate
            identity = true
        } else if let itemClass = ItemClass(name: tag) {
            self.itemClass = itemClass
        } else {
            return nil
        }
        if bytes.count == 20 {
            uuid = Array(bytes[4..<20])
        } else {
            rowID = bytes[4..<12].reduce(Int64(0)) { ($0 << 8) | Int64($1) }
        }
    }

    /// The 20-byte form returned to callers.
    package var bytes: [UInt8] {
        Array((identity ? SecKeys.classIdentity : itemClass.name).utf8) + (uuid ?? [])
    }
}

/// A parsed SecItemCopyMatching / SecItemUpdate / SecItemDelete query.
package struct ItemQuery: Sendable, Equatable {
    package var itemClass: ItemClass
    /// Coerced attribute filters other than `pdmn` and `sync`, keyed by attribute name.
    package var attributes: [String: SecValue] = [:]
    /// A `kSecAttrAccessible` filter.
    package var protection: ProtectionClass?
    /// The sync filter: false unless the query says otherwise; nil for `kSecAttrSynchronizableAny`.
    package var synchronizable: Bool? = false
    package var persistentRef: PersistentRef?
    package var limit: MatchLimit
    package var returns = ReturnFlags()
    /// `kSecUseAuthenticationUI` (and the legacy `kSecUseNoAuthenticationUI`): whether a user check may be
    /// asked for, or fails, or (CopyMatching only) leaves the items that need one out.
    package var authenticationUI = AuthenticationUI.allow
    /// `kSecUseOperationPrompt`: the reason a user check shows.
    package var operationPrompt: String?
    /// `kSecClassIdentity`: `itemClass` is then `.certificate`, `attributes` filter the certificate and
    /// `keyAttributes` the private key joined to it (docs/PROTOCOL.md, "Identities").
    package var identity = false
    /// Identity queries: the filters on key-only attributes.
    package var keyAttributes: [String: SecValue] = [:]
    /// `kSecValueRef`: the certificate, key or identity the query names.
    package var reference: ItemReference?
    /// `kSecMatchHostOrSubdomainOfHost` (internet passwords): the server is this host or ends with "." and it.
    package var hostOrSubdomain: String?
    /// `kSecMatchEmailAddressIfPresent` (certificates and identities): one of the certificate's email
    /// addresses is this one, whatever the case.
    package var emailAddress: String?

    package init(itemClass: ItemClass, limit: MatchLimit) {
        self.itemClass = itemClass
        self.limit = limit
    }

    /// Whether the query has filters only the opened item can answer (securityd's `SecServerMatch_Item`),
    /// so that a limit applies after them rather than to the rows the index finds.
    package var hasItemFilters: Bool { hostOrSubdomain != nil || emailAddress != nil }
}

/// A parsed SecItemAdd dictionary.
package struct AddRequest: Sendable, Equatable {
    package var itemClass: ItemClass
    /// Coerced attributes other than `pdmn` and `sync` (dates are replaced by the engine).
    package var attributes: [String: SecValue] = [:]
    package var protection: ProtectionClass?
    package var synchronizable = false
    package var data: [UInt8]?
    package var returns = ReturnFlags()
    /// `kSecValueRef`: the certificate, key or identity to add; the engine derives its attributes. For an
    /// identity `itemClass` is `.certificate` (the half added first).
    package var reference: ItemReference?
    /// `kSecAttrAccessControl`: `protection` is then its protection class.
    package var accessControl: AccessControl?
    /// `kSecUseAuthenticationUI` and `kSecUseOperationPrompt`: for an add by reference whose source item
    /// needs a user check.
    package var authenticationUI = AuthenticationUI.allow
    package var operationPrompt: String?

    package init(itemClass: ItemClass) {
        self.itemClass = itemClass
    }
}

/// A parsed `attributesToUpdate` dictionary.
package struct AttributeChanges: Sendable, Equatable {
    package var attributes: [String: SecValue] = [:]
    package var protection: ProtectionClass?
    package var synchronizable: Bool?
    package var data: [UInt8]?
    /// A new `kSecAttrAccessControl`; `protection` is then its protection class.
    package var accessControl: AccessControl?

    package init() {}
}

/// `kSecUseAuthenticationUI`'s three answers (secitem-semantics §4.4).
package enum AuthenticationUI: Sendable, Equatable {
    /// Ask the user (the default).
    case allow
    /// Do not ask: an item that needs a user check is errSecInteractionNotAllowed.
    case fail
    /// Do not ask: items that need a user check are left out (SecItemCopyMatching only).
    case skip
}
