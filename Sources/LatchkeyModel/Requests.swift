/// How many items a query returns.
public enum MatchLimit: Sendable, Equatable {
    case one
    case all
    case count(Int)

    /// The SQL-level limit, nil for all.
    public var maximum: Int? {
        switch self {
        case .one: 1
        case .all: nil
        case .count(let n): n
        }
    }

    /// Whether results come back as an array (any limit other than exactly one).
    public var returnsArray: Bool {
        switch self {
        case .one: false
        case .all: true
        case .count(let n): n != 1
        }
    }
}

/// Which `kSecReturn*` keys were set to true.
public struct ReturnFlags: Sendable, Equatable {
    public var data = false
    public var attributes = false
    public var ref = false
    public var persistentRef = false

    public init() {}

    /// True when nothing is to be returned.
    public var isEmpty: Bool { !data && !attributes && !ref && !persistentRef }

    /// Apple's rule: Attributes, or two or more return keys, give a dictionary.
    public var wantsDictionary: Bool {
        attributes || [data, ref, persistentRef].filter { $0 }.count >= 2
    }
}

/// A persistent reference: the item class tag followed by the item's 16-byte UUID (current format),
/// or by an 8-byte big-endian row id (Apple's legacy format, still accepted).
public struct PersistentRef: Sendable, Equatable {
    public var itemClass: ItemClass
    public var uuid: [UInt8]?
    public var rowID: Int64?
    /// An identity's reference (`idnt`): `itemClass` is `.certificate` and `uuid` the certificate's.
    public var identity = false

    public init(itemClass: ItemClass, uuid: [UInt8], identity: Bool = false) {
        self.itemClass = itemClass
        self.uuid = uuid
        self.identity = identity
    }

    /// Parses the bytes of a `kSecValuePersistentRef`; nil when they are not a persistent reference.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 20 || bytes.count == 12,
              let tag = String(validating: bytes[0..<4], as: UTF8.self) else { return nil }
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
    public var bytes: [UInt8] {
        Array((identity ? SecKeys.classIdentity : itemClass.name).utf8) + (uuid ?? [])
    }
}

/// A parsed SecItemCopyMatching / SecItemUpdate / SecItemDelete query.
public struct ItemQuery: Sendable, Equatable {
    public var itemClass: ItemClass
    /// Coerced attribute filters other than `pdmn` and `sync`, keyed by attribute name.
    public var attributes: [String: SecValue] = [:]
    /// A `kSecAttrAccessible` filter.
    public var protection: ProtectionClass?
    /// The sync filter: false unless the query says otherwise; nil for `kSecAttrSynchronizableAny`.
    public var synchronizable: Bool? = false
    public var persistentRef: PersistentRef?
    public var limit: MatchLimit
    public var returns = ReturnFlags()
    /// `kSecUseAuthenticationUISkip`: skip items that would need authentication (none can yet).
    public var skipAuthenticationUI = false
    /// `kSecClassIdentity`: `itemClass` is then `.certificate`, `attributes` filter the certificate and
    /// `keyAttributes` the private key joined to it (docs/PROTOCOL.md, "Identities").
    public var identity = false
    /// Identity queries: the filters on key-only attributes.
    public var keyAttributes: [String: SecValue] = [:]
    /// `kSecValueRef`: the certificate, key or identity the query names.
    public var reference: ItemReference?

    public init(itemClass: ItemClass, limit: MatchLimit) {
        self.itemClass = itemClass
        self.limit = limit
    }
}

/// A parsed SecItemAdd dictionary.
public struct AddRequest: Sendable, Equatable {
    public var itemClass: ItemClass
    /// Coerced attributes other than `pdmn` and `sync` (dates are replaced by the engine).
    public var attributes: [String: SecValue] = [:]
    public var protection: ProtectionClass?
    public var synchronizable = false
    public var data: [UInt8]?
    public var returns = ReturnFlags()
    /// `kSecValueRef`: the certificate, key or identity to add; the engine derives its attributes. For an
    /// identity `itemClass` is `.certificate` (the half added first).
    public var reference: ItemReference?

    public init(itemClass: ItemClass) {
        self.itemClass = itemClass
    }
}

/// A parsed `attributesToUpdate` dictionary.
public struct AttributeChanges: Sendable, Equatable {
    public var attributes: [String: SecValue] = [:]
    public var protection: ProtectionClass?
    public var synchronizable: Bool?
    public var data: [UInt8]?

    public init() {}
}
