/// The object form of a certificate, key or identity as it crosses the agent protocol: the value of
/// `kSecValueRef` in a request, and what `kSecReturnRef` gives back (docs/PROTOCOL.md, "References").
///
/// On the wire a reference is an ordinary dictionary value, so the value codec needs no new type:
///
/// | key | certificate | key | identity |
/// |---|---|---|---|
/// | `class` | `"cert"` | `"keys"` | `"idnt"` |
/// | `v_Data` | certificate DER | the key's external representation (a key the caller holds; requests only) | — |
/// | `type`, `kcls`, `bsiz` | — | key type (42 RSA, 73 EC), key class (0 public, 1 private), size in bits | — |
/// | `pubk` | — | the public key's external representation | — |
/// | `v_PersistentRef` | the item, when it is in the keychain | the item holding the key (a key the agent holds) | the certificate's item |
/// | `extr` | — | 0 when the key may not be exported | — |
/// | `cert`, `key` | — | — | the two halves |
///
/// A private key the agent holds never leaves it: its reference carries the public half and the
/// persistent reference, and every private-key operation is a request (`keyOperation`).
package enum ItemReference: Sendable, Equatable {
    case certificate(CertificateReference)
    case key(KeyReference)
    case identity(certificate: CertificateReference, key: KeyReference)

    /// The item class the reference belongs to, as `kSecClass` would name it.
    package var className: String {
        switch self {
        case .certificate: SecKeys.classCertificate
        case .key: SecKeys.classKey
        case .identity: SecKeys.classIdentity
        }
    }
}

/// A certificate: its DER bytes, and the item it was read from, if any.
package struct CertificateReference: Sendable, Equatable {
    package var der: [UInt8]
    package var persistentRef: [UInt8]?

    package init(der: [UInt8], persistentRef: [UInt8]? = nil) {
        self.der = der
        self.persistentRef = persistentRef
    }
}

/// An asymmetric key: either held by the caller (`material` is its external representation) or held
/// by the agent (`persistentRef` names the keychain item; `material` is nil).
package struct KeyReference: Sendable, Equatable {
    /// `kSecAttrKeyType` as a number: 42 (RSA) or 73 (EC).
    package var keyType: Int64
    /// `kSecAttrKeyClass` as a number: 0 public, 1 private.
    package var keyClass: Int64
    package var sizeInBits: Int64
    /// The public key's external representation (PKCS#1 RSAPublicKey, or the X9.63 point).
    package var publicKey: [UInt8]
    /// The key's own external representation, for a key the caller holds.
    package var material: [UInt8]?
    package var persistentRef: [UInt8]?
    /// False when the key may not leave the keychain (`kSecAttrIsExtractable` = false).
    package var extractable: Bool
    /// `kSecAttrTokenID` of a token's key (docs/TOKENS.md §2), which `SecKeyCopyAttributes` shows, as
    /// Apple's does for a key of CryptoTokenKit or the Secure Enclave. Only what the agent answered says
    /// so; the agent never takes it from a caller's reference.
    package var tokenID: String? = nil

    package static let typeRSA: Int64 = 42
    package static let typeEC: Int64 = 73
    package static let classPublic: Int64 = 0
    package static let classPrivate: Int64 = 1

    package init(
        keyType: Int64, keyClass: Int64, sizeInBits: Int64, publicKey: [UInt8], material: [UInt8]? = nil,
        persistentRef: [UInt8]? = nil, extractable: Bool = true
    ) {
        self.keyType = keyType
        self.keyClass = keyClass
        self.sizeInBits = sizeInBits
        self.publicKey = publicKey
        self.material = material
        self.persistentRef = persistentRef
        self.extractable = extractable
    }

    package var isPrivate: Bool { keyClass == Self.classPrivate }

    /// The attributes Apple derives for such a key (secitem-semantics §7.1, `SecKeyCopyAttributes` and
    /// SecItemAdd through `kSecValueRef`): its class, `klbl` (SHA-1 of the public key bytes, which the
    /// caller computes), type, sizes, and the usage flags, as numbers (what the keychain stores).
    ///
    /// The flags are those of Apple's `SecKeyCopyAttributeDictionaryWithLocalKey` (SecKey.m) with the
    /// changes of its key classes: an RSA key cannot derive and an RSA public key can "decrypt" (its raw
    /// public operation; SecRSAKey.c), an EC public key cannot derive (SecECKey.m).
    package func derivedAttributes(applicationLabel: [UInt8]) -> SecDictionary {
        let on: SecValue = .int(1)
        let off: SecValue = .int(0)
        let rsa = keyType == Self.typeRSA
        return [
            SecAttr.keyClass: .int(keyClass),
            SecAttr.applicationLabel: .data(applicationLabel),
            SecAttr.keyType: .int(keyType),
            SecAttr.keySizeInBits: .int(sizeInBits),
            SecAttr.effectiveKeySize: .int(sizeInBits),
            "perm": on, "priv": on, "modi": on, "sens": off, "asen": off, "extr": extractable ? on : off, "next": off,
            "encr": isPrivate ? off : on, "vrfy": isPrivate ? off : on, "wrap": isPrivate ? off : on,
            "decr": isPrivate || rsa ? on : off, "sign": isPrivate ? on : off, "unwp": isPrivate ? on : off,
            "drve": isPrivate && !rsa ? on : off, "snrc": off, "vyrc": off,
        ]
    }

    /// The usage flags among `derivedAttributes`, which `SecKeyCopyAttributes` gives as booleans.
    package static let usageFlags: Set<String> = [
        "perm", "priv", "modi", "sens", "asen", "extr", "next", "encr", "decr", "drve", "sign", "vrfy", "snrc", "vyrc",
        "wrap", "unwp",
    ]
}

extension ItemReference {
    enum Field {
        static let certificate = "cert"
        static let key = "key"
        static let publicKey = "pubk"
        static let extractable = "extr"
    }

    /// The wire dictionary for this reference.
    package var secValue: SecValue {
        switch self {
        case .certificate(let certificate):
            return .dictionary(Self.fields(certificate))
        case .key(let key):
            return .dictionary(Self.fields(key))
        case .identity(let certificate, let key):
            return .dictionary([
                SecKeys.itemClass: .string(SecKeys.classIdentity),
                Field.certificate: .dictionary(Self.fields(certificate)),
                Field.key: .dictionary(Self.fields(key)),
            ])
        }
    }

    private static func fields(_ certificate: CertificateReference) -> SecDictionary {
        var fields: SecDictionary = [
            SecKeys.itemClass: .string(SecKeys.classCertificate),
            SecKeys.valueData: .data(certificate.der),
        ]
        if let ref = certificate.persistentRef { fields[SecKeys.valuePersistentRef] = .data(ref) }
        return fields
    }

    private static func fields(_ key: KeyReference) -> SecDictionary {
        var fields: SecDictionary = [
            SecKeys.itemClass: .string(SecKeys.classKey),
            SecAttr.keyType: .int(key.keyType), SecAttr.keyClass: .int(key.keyClass),
            SecAttr.keySizeInBits: .int(key.sizeInBits), Field.publicKey: .data(key.publicKey),
            Field.extractable: .int(key.extractable ? 1 : 0),
        ]
        if let material = key.material { fields[SecKeys.valueData] = .data(material) }
        if let ref = key.persistentRef { fields[SecKeys.valuePersistentRef] = .data(ref) }
        if let tokenID = key.tokenID { fields[SecAttr.tokenID] = .string(tokenID) }
        return fields
    }

    /// Parses a wire dictionary; errSecParam when it is not a reference.
    package init(_ value: SecValue) throws(SecError) {
        guard case .dictionary(let fields) = value, case .string(let name)? = fields[SecKeys.itemClass] else {
            throw .param("kSecValueRef is not a certificate, key or identity")
        }
        switch name {
        case SecKeys.classCertificate:
            self = .certificate(try Self.certificate(fields))
        case SecKeys.classKey:
            self = .key(try Self.key(fields))
        case SecKeys.classIdentity:
            guard let certificate = fields[Field.certificate], case .dictionary(let c) = certificate,
                let key = fields[Field.key], case .dictionary(let k) = key
            else {
                throw .param("an identity reference needs a certificate and a key")
            }
            self = .identity(certificate: try Self.certificate(c), key: try Self.key(k))
        default:
            throw .param("kSecValueRef of class '\(name)' is not a certificate, key or identity")
        }
    }

    private static func certificate(_ fields: SecDictionary) throws(SecError) -> CertificateReference {
        guard case .data(let der)? = fields[SecKeys.valueData], !der.isEmpty else {
            throw .param("a certificate reference carries no certificate")
        }
        return CertificateReference(der: der, persistentRef: fields[SecKeys.valuePersistentRef]?.dataValue)
    }

    private static func key(_ fields: SecDictionary) throws(SecError) -> KeyReference {
        guard case .int(let type)? = fields[SecAttr.keyType], case .int(let keyClass)? = fields[SecAttr.keyClass],
            case .int(let size)? = fields[SecAttr.keySizeInBits], case .data(let publicKey)? = fields[Field.publicKey]
        else {
            throw .param("a key reference needs its type, class, size and public key")
        }
        let material = fields[SecKeys.valueData]?.dataValue
        let ref = fields[SecKeys.valuePersistentRef]?.dataValue
        guard material != nil || ref != nil else { throw .param("a key reference names neither key bytes nor an item") }
        // Fails closed: anything but 1 (or true) means the key may not be exported.
        let extractable = fields[Field.extractable].map { $0 == .int(1) || $0 == .bool(true) } ?? true
        var reference = KeyReference(
            keyType: type, keyClass: keyClass, sizeInBits: size, publicKey: publicKey,
            material: material, persistentRef: ref, extractable: extractable)
        reference.tokenID = fields[SecAttr.tokenID]?.stringValue
        return reference
    }
}

/// What a `keyOperation` request asks of a private key the agent holds (docs/PROTOCOL.md, "Key
/// operations").
package enum KeyOperation: String, Sendable, CaseIterable {
    /// `SecKeyCreateSignature`.
    case sign
    /// `SecKeyCreateDecryptedData`.
    case decrypt
    /// `SecKeyCopyExternalRepresentation`: refused for a key that is not extractable.
    case export
    /// `SecKeyCopyKeyExchangeResult`: ECDH with a peer's public key.
    case exchange

    /// The request dictionary's keys.
    package enum Field {
        /// Data: the key item's persistent reference.
        package static let key = SecKeys.valuePersistentRef
        /// String: the operation's raw value.
        package static let operation = "op"
        /// String: Apple's `SecKeyAlgorithm` name ("algid:sign:ECDSA:message-X962:SHA256", ...).
        package static let algorithm = "algid"
        /// Data: what to sign or decrypt.
        package static let input = SecKeys.valueData
        /// Data (exchange): the peer's public key, external representation.
        package static let peer = "pubk"
        /// Int (exchange, optional): `kSecKeyKeyExchangeParameterRequestedSize`.
        package static let requestedSize = "size"
        /// Data (exchange, optional): `kSecKeyKeyExchangeParameterSharedInfo`.
        package static let sharedInfo = "info"
    }
}

/// `SecKeyCreateRandomKey`'s parameters, shared by the library (which generates keys that are not
/// stored) and the agent (which generates those that are).
package enum KeyGeneration {
    /// The parameters for one half: the top level overlaid with `kSecPrivateKeyAttrs` or
    /// `kSecPublicKeyAttrs` (`half`), as Apple documents; errSecParam when the half is not a dictionary.
    package static func parameters(_ parameters: SecDictionary, half: String) throws(SecError) -> SecDictionary {
        var result = parameters
        result[SecKeys.privateKeyAttributes] = nil
        result[SecKeys.publicKeyAttributes] = nil
        if let sub = parameters[half] {
            guard case .dictionary(let entries) = sub else { throw .param("'\(half)' must be a dictionary") }
            for (name, value) in entries { result[name] = value }
        }
        return result
    }

    /// Whether a half's merged parameters say `kSecAttrIsPermanent`.
    package static func isPermanent(_ parameters: SecDictionary) -> Bool {
        parameters["perm"]?.integerValue == 1
    }
}

extension SecValue {
    /// The value as an integer where Apple's number coercion gives one: a number (an integral double
    /// too), a boolean (0/1) or a string such as "73" (`kSecAttrKeyTypeEC`).
    package var integerValue: Int64? {
        switch self {
        case .int(let n): n
        case .bool(let b): b ? 1 : 0
        case .string(let s): Int64(s)
        case .double(let d): Int64(exactly: d)
        default: nil
        }
    }
}
