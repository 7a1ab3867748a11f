/// How an attribute's values are coerced, following securityd's attribute kinds (SecDbAttrKind).
package enum AttributeKind: Sendable, Equatable {
    /// Accepts a string, data or number and keeps the caller's type; matches by bytes.
    case blob
    /// Data; a string becomes its UTF-8 bytes, a number its 4-byte little-endian SInt32.
    case data
    /// A string; data is decoded as UTF-8.
    case string
    /// An integer; a boolean becomes 0/1; a string stays a string unless it round-trips as an integer.
    case number
    /// A date (`CFAbsoluteTime`) only.
    case date
}

/// What a missing primary-key attribute defaults to (Apple's E and Z flags).
package enum AttributeDefault: Sendable, Equatable {
    case none
    /// "" or empty data (E).
    case empty
    /// 0 (Z).
    case zero
}

/// One attribute of an item class.
package struct AttributeSpec: Sendable, Equatable {
    package var name: String
    package var kind: AttributeKind
    /// Part of the class's uniqueness constraint (Apple's P flag).
    package var primaryKey: Bool
    package var defaultValue: AttributeDefault

    package init(
        _ name: String, _ kind: AttributeKind, primaryKey: Bool = false, defaultValue: AttributeDefault = .none
    ) {
        self.name = name
        self.kind = kind
        self.primaryKey = primaryKey
        self.defaultValue = defaultValue
    }

    /// The value stored for a missing primary-key attribute, or nil if it stays absent.
    package var implicitValue: SecValue? {
        switch defaultValue {
        case .none: nil
        case .zero: kind == .date ? .date(0) : .int(0)
        case .empty: kind == .string ? .string("") : .data([])
        }
    }
}

/// A stored item class. The raw value is the class id on disk and must never be renumbered.
package enum ItemClass: UInt8, CaseIterable, Sendable {
    case genericPassword = 1
    case internetPassword = 2
    case certificate = 3
    case key = 4

    /// Apple's `kSecClass` value.
    package var name: String {
        switch self {
        case .genericPassword: SecKeys.classGenericPassword
        case .internetPassword: SecKeys.classInternetPassword
        case .certificate: SecKeys.classCertificate
        case .key: SecKeys.classKey
        }
    }

    /// The class for a `kSecClass` value; nil for unknown values (and for the virtual identity class).
    package init?(name: String) {
        guard let match = ItemClass.allCases.first(where: { $0.name == name }) else { return nil }
        self = match
    }

    /// The attributes of the class, in the order used to compute the uniqueness hash.
    package var attributes: [AttributeSpec] { ItemSchema.attributes(of: self) }

    /// The attribute spec for a 4-character name, or nil if the class has no such attribute.
    package func attribute(_ name: String) -> AttributeSpec? {
        ItemSchema.lookup[self]?[name]
    }

    /// The attributes that form the uniqueness constraint, in a fixed order.
    package var primaryKey: [AttributeSpec] { attributes.filter(\.primaryKey) }

    /// The protection class an item gets when the caller names none (Apple: `dk` for certificates).
    package var defaultProtection: ProtectionClass {
        self == .certificate ? .always : .whenUnlocked
    }
}

/// The attribute tables of securityd's schema v12.11, limited to public attributes.
package enum ItemSchema {
    /// Attributes every class has.
    static let common: [AttributeSpec] = [
        AttributeSpec(SecAttr.accessGroup, .string, primaryKey: true, defaultValue: .empty),
        AttributeSpec(SecAttr.synchronizable, .number, primaryKey: true, defaultValue: .zero),
        AttributeSpec(SecAttr.tokenID, .string, primaryKey: true),
        AttributeSpec(SecAttr.accessible, .string),
        AttributeSpec(SecAttr.creationDate, .date),
        AttributeSpec(SecAttr.modificationDate, .date),
        AttributeSpec(SecAttr.label, .blob),
    ]

    /// Attributes shared by generic and internet passwords.
    static let password: [AttributeSpec] = [
        AttributeSpec(SecAttr.account, .blob, primaryKey: true, defaultValue: .empty),
        AttributeSpec(SecAttr.description, .blob),
        AttributeSpec(SecAttr.comment, .blob),
        AttributeSpec(SecAttr.creator, .number),
        AttributeSpec(SecAttr.type, .number),
        AttributeSpec(SecAttr.isInvisible, .number),
        AttributeSpec(SecAttr.isNegative, .number),
        AttributeSpec(SecAttr.alias, .blob),
        AttributeSpec(SecAttr.hasCustomIcon, .number),
        AttributeSpec(SecAttr.scriptCode, .number),
        AttributeSpec(SecAttr.prot, .blob),
    ]

    static func attributes(of itemClass: ItemClass) -> [AttributeSpec] {
        switch itemClass {
        case .genericPassword:
            return common + password + [
                AttributeSpec(SecAttr.service, .blob, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.generic, .blob),
            ]
        case .internetPassword:
            return common + password + [
                AttributeSpec(SecAttr.securityDomain, .blob, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.server, .blob, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.protocol, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.authenticationType, .blob, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.port, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.path, .blob, primaryKey: true, defaultValue: .empty),
            ]
        case .certificate:
            return common + [
                AttributeSpec(SecAttr.certificateType, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.certificateEncoding, .number),
                AttributeSpec(SecAttr.subject, .data),
                AttributeSpec(SecAttr.issuer, .data, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.serialNumber, .data, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.subjectKeyID, .data),
                AttributeSpec(SecAttr.publicKeyHash, .data),
                AttributeSpec(SecAttr.alias, .blob),
            ]
        case .key:
            let flags = [
                "perm", "priv", "modi", "sens", "asen", "extr", "next", "encr", "decr", "drve",
                "sign", "vrfy", "snrc", "vyrc", "wrap", "unwp",
            ]
            return common + [
                AttributeSpec(SecAttr.keyClass, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.applicationLabel, .data, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.applicationTag, .blob, primaryKey: true, defaultValue: .empty),
                AttributeSpec(SecAttr.keyType, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.creator, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.keySizeInBits, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.effectiveKeySize, .number, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.startDate, .date, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.endDate, .date, primaryKey: true, defaultValue: .zero),
                AttributeSpec(SecAttr.alias, .blob),
            ] + flags.map { AttributeSpec($0, .number) }
        }
    }

    static let lookup: [ItemClass: [String: AttributeSpec]] = {
        var table: [ItemClass: [String: AttributeSpec]] = [:]
        for itemClass in ItemClass.allCases {
            var byName: [String: AttributeSpec] = [:]
            for spec in attributes(of: itemClass) { byName[spec.name] = spec }
            table[itemClass] = byName
        }
        return table
    }()
}
