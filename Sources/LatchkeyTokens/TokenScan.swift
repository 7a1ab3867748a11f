import CP11Kit
import LatchkeyCrypto
import LatchkeyEngine
import LatchkeyModel

/// A token as the agent sees it after a scan: its id, what the token says of itself, and its items with
/// the objects behind them. A value: the watcher replaces it, never changes it.
struct TokenView: Sendable {
    var id: String
    var info: PKCS11Module.TokenInfo
    var slot: CK_SLOT_ID
    var items: [TokenItem]
    /// The object behind each private key item, by the item's reference.
    var keys: [[UInt8]: KeyObject]

    struct KeyObject: Sendable {
        /// 0 for a private key the token hides until the user logs in (`CKA_PRIVATE`): it is found by
        /// its `ckaID` after the login.
        var handle: CK_OBJECT_HANDLE
        var ckaID: [UInt8]
        /// `CKA_ALWAYS_AUTHENTICATE`: the PIN is asked for every use (a PIV signing key).
        var alwaysAuthenticate: Bool
    }
}

/// Reads a token's certificates and keys into items (docs/TOKENS.md, "What maps to what"). Runs on the
/// module's thread. Never reads a private key's CKA_VALUE: what a private key item shows comes from its
/// public attributes and from the public key or certificate with the same CKA_ID.
enum TokenScan {
    /// A token's id: `module:serial` (docs/TOKENS.md, "Token ids"), the serial as the token reports it
    /// (blank padding dropped); a token without a serial is named by its label.
    static func tokenID(module: String, info: PKCS11Module.TokenInfo) -> String {
        let own = info.serial.isEmpty ? info.label : info.serial
        return printable(module) + ":" + printable(own)
    }

    /// Text from a module, without controls (C0, DEL, C1), bidirectional and other format characters or
    /// line separators, and bounded to `limit` scalars: it is shown in prompts and listings, where a
    /// right-to-left override or a line break could make one token or key read as another.
    static func printable(_ text: String, limit: Int = 64) -> String {
        let kept = text.unicodeScalars.filter { scalar in
            guard scalar.value >= 0x20, !(0x7F...0x9F).contains(scalar.value) else { return false }
            switch scalar.properties.generalCategory {
            case .format, .lineSeparator, .paragraphSeparator, .control: return false
            default: return true
            }
        }
        return String(String.UnicodeScalarView(kept.prefix(limit)))
    }

    /// The longest label (`labl`) a token object gives its item, in scalars.
    static let labelLimit = 256

    static func scan(
        _ module: PKCS11Module, session: CK_SESSION_HANDLE, slot: CK_SLOT_ID, id: String, info: PKCS11Module.TokenInfo
    ) -> TokenView {
        var view = TokenView(id: id, info: info, slot: slot, items: [], keys: [:])
        let common: SecDictionary = [
            SecAttr.tokenID: .string(id), SecAttr.accessGroup: .string(Caller.tokenAccessGroup),
            SecAttr.accessible: .string(TokenItem.protection.pdmn), SecAttr.synchronizable: .int(0),
        ]
        // Certificates first: their public keys name the private keys that have no public key object.
        var publicKeysByID: [[UInt8]: KeyReference] = [:]
        var publicFlags: [[UInt8]: SecDictionary] = [:]
        var privateIDs: Set<[UInt8]> = []
        for object in (try? module.objects(session, objectClass: CK_OBJECT_CLASS(CKO_CERTIFICATE))) ?? [] {
            guard module.number(session, object, CK_ATTRIBUTE_TYPE(CKA_CERTIFICATE_TYPE)) == CK_ULONG(CKC_X_509),
                let der = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_VALUE)),
                var attributes = try? TokenAttributes.certificate(der)
            else { continue }
            let ckaID = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_ID)) ?? []
            if let label = label(module, session, object) { attributes[SecAttr.label] = .string(label) }
            attributes.merge(common) { _, token in token }
            // The same certificate twice on a token is one item (its reference is its content's).
            let ref = reference(id, "cert", der)
            guard !view.items.contains(where: { $0.ref == ref }) else { continue }
            view.items.append(TokenItem(ref: ref, itemClass: .certificate, attributes: attributes, data: der))
            if !ckaID.isEmpty, let certificate = try? X509Certificate(der: der),
                let keyType = certificateKeyType(certificate),
                let key = try? TokenAttributes.publicKey(certificate.publicKeyBytes, keyType: keyType),
                publicKeysByID[ckaID] == nil
            {
                // The first object with a CKA_ID names its key: a later one (a key another program put
                // on the token with the same CKA_ID) does not take over the identity's public half.
                publicKeysByID[ckaID] = key
            }
        }
        for object in (try? module.objects(session, objectClass: CK_OBJECT_CLASS(CKO_PUBLIC_KEY))) ?? [] {
            guard let key = publicKey(module, session, object) else { continue }
            let ckaID = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_ID)) ?? []
            var attributes = TokenAttributes.key(key)
            attributes["encr"] = .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_ENCRYPT)) ? 1 : 0)
            attributes["vrfy"] = .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_VERIFY)) ? 1 : 0)
            attributes["wrap"] = .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_WRAP)) ? 1 : 0)
            attributes["drve"] = .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_DERIVE)) ? 1 : 0)
            finish(&attributes, module, session, object, ckaID: ckaID, common: common)
            if !ckaID.isEmpty, publicKeysByID[ckaID] == nil || publicKeysByID[ckaID]?.publicKey == key.publicKey,
                publicFlags[ckaID] == nil
            {
                publicKeysByID[ckaID] = key
                publicFlags[ckaID] = attributes
            }
            guard !view.items.contains(where: { $0.ref == reference(id, "pubk", key.publicKey) }) else { continue }
            view.items.append(
                TokenItem(
                    ref: reference(id, "pubk", key.publicKey), itemClass: .key, attributes: attributes,
                    data: key.publicKey, keyType: key.keyType, keyClass: KeyReference.classPublic,
                    sizeInBits: key.sizeInBits))
        }
        for object in (try? module.objects(session, objectClass: CK_OBJECT_CLASS(CKO_PRIVATE_KEY))) ?? [] {
            let ckaID = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_ID)) ?? []
            // RSA private keys carry their public modulus and exponent; EC ones are matched by CKA_ID.
            guard let publicKey = publicKey(module, session, object) ?? (ckaID.isEmpty ? nil : publicKeysByID[ckaID])
            else { continue }
            if !ckaID.isEmpty { privateIDs.insert(ckaID) }
            var attributes: SecDictionary = [
                "sign": .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_SIGN)) ? 1 : 0),
                "decr": .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_DECRYPT)) ? 1 : 0),
                "drve": .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_DERIVE)) ? 1 : 0),
                "unwp": .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_UNWRAP)) ? 1 : 0),
                "sens": .int(module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_SENSITIVE), otherwise: true) ? 1 : 0),
            ]
            if let label = label(module, session, object) { attributes[SecAttr.label] = .string(label) }
            addPrivateKey(
                &view, publicKey, ckaID: ckaID, flags: attributes, common: common,
                object: TokenView.KeyObject(
                    handle: object, ckaID: ckaID,
                    alwaysAuthenticate: module.flag(session, object, CK_ATTRIBUTE_TYPE(CKA_ALWAYS_AUTHENTICATE))))
        }
        // A token that wants a login usually hides its private keys until then (CKA_PRIVATE): each public
        // key or certificate with a CKA_ID stands for the private key with the same CKA_ID, found after the
        // login, with the usage its public half shows (verify: sign, encrypt: decrypt, derive: derive).
        if info.needsLogin {
            for (ckaID, publicKey) in publicKeysByID.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) })
            where !privateIDs.contains(ckaID) {
                let shown = publicFlags[ckaID]
                var flags: SecDictionary = [
                    "sign": shown?["vrfy"] ?? .int(1), "unwp": shown?["wrap"] ?? .int(1), "sens": .int(1),
                    "decr": publicKey.keyType == KeyReference.typeRSA ? (shown?["encr"] ?? .int(1)) : .int(0),
                    "drve": publicKey.keyType == KeyReference.typeEC ? (shown?["drve"] ?? .int(0)) : .int(0),
                ]
                if let label = shown?[SecAttr.label] { flags[SecAttr.label] = label }
                addPrivateKey(
                    &view, publicKey, ckaID: ckaID, flags: flags, common: common,
                    object: TokenView.KeyObject(handle: 0, ckaID: ckaID, alwaysAuthenticate: false))
            }
        }
        return view
    }

    /// A private key item: Apple's derived attributes for its public half, the token's usage flags over them.
    private static func addPrivateKey(
        _ view: inout TokenView, _ publicKey: KeyReference, ckaID: [UInt8], flags: SecDictionary,
        common: SecDictionary, object: TokenView.KeyObject
    ) {
        var key = publicKey
        key.keyClass = KeyReference.classPrivate
        key.material = nil
        key.extractable = false
        var attributes = TokenAttributes.key(key)
        attributes.merge(flags) { _, token in token }
        attributes["extr"] = .int(0)
        if !ckaID.isEmpty { attributes[SecAttr.applicationTag] = .data(ckaID) }
        attributes.merge(common) { _, token in token }
        let ref = reference(view.id, "priv", key.publicKey)
        guard view.keys[ref] == nil else { return }
        view.items.append(
            TokenItem(
                ref: ref, itemClass: .key, attributes: attributes, data: key.publicKey, keyType: key.keyType,
                keyClass: KeyReference.classPrivate, sizeInBits: key.sizeInBits))
        view.keys[ref] = object
    }

    /// The label and application tag every key item takes from its object, and the token's attributes.
    private static func finish(
        _ attributes: inout SecDictionary, _ module: PKCS11Module, _ session: CK_SESSION_HANDLE,
        _ object: CK_OBJECT_HANDLE, ckaID: [UInt8], common: SecDictionary
    ) {
        if let label = label(module, session, object) { attributes[SecAttr.label] = .string(label) }
        if !ckaID.isEmpty { attributes[SecAttr.applicationTag] = .data(ckaID) }
        attributes.merge(common) { _, token in token }
    }

    private static func label(_ module: PKCS11Module, _ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE)
        -> String?
    {
        guard let bytes = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_LABEL)), !bytes.isEmpty,
            let text = String(validating: bytes, as: UTF8.self)
        else { return nil }
        return printable(text, limit: labelLimit)
    }

    /// The public key an object shows (a public key, or an RSA private key's modulus and exponent), checked.
    static func publicKey(_ module: PKCS11Module, _ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE)
        -> KeyReference?
    {
        switch module.number(session, object, CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE)) {
        case CK_ULONG(CKK_RSA)?:
            guard let modulus = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_MODULUS)),
                let exponent = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_PUBLIC_EXPONENT))
            else { return nil }
            return try? TokenAttributes.publicKey(
                TokenDER.rsaPublicKey(modulus: modulus, exponent: exponent), keyType: KeyReference.typeRSA)
        case CK_ULONG(CKK_EC)?:
            guard let point = module.attribute(session, object, CK_ATTRIBUTE_TYPE(CKA_EC_POINT)) else { return nil }
            return try? TokenAttributes.publicKey(TokenDER.ecPoint(point), keyType: KeyReference.typeEC)
        default:
            return nil
        }
    }

    private static func certificateKeyType(_ certificate: X509Certificate) -> Int64? {
        guard let key = try? certificate.publicKey() else { return nil }
        return key.algorithm == .rsa ? KeyReference.typeRSA : KeyReference.typeEC
    }

    /// An item's persistent reference: 16 bytes of SHA-256 over the token id, the kind of object and its
    /// public content, so it is the same on every scan and after the token comes back.
    static func reference(_ tokenID: String, _ kind: String, _ content: [UInt8]) -> [UInt8] {
        let input = Array("latchkey token item\0".utf8) + Array(tokenID.utf8) + [0] + Array(kind.utf8) + [0] + content
        return Array(SHA256.hash(input).prefix(16))
    }
}
