import LatchkeyModel
import LatchkeySecrets

/// Builds what SecItemCopyMatching and SecItemAdd return for one item, with Apple's shapes: a single
/// return key gives that value; Attributes, or two or more keys, give a dictionary.
enum ResultBuilder {
    static func value(for item: OpenItem, returns: ReturnFlags) throws(SecError) -> SecValue? {
        if returns.wantsDictionary {
            var result = returns.attributes ? item.attributes : [:]
            if returns.data {
                // securityd leaves v_Data out of the dictionary of an item that has no data (si-80-empty-data).
                // The store does not tell "no data" from empty data, so empty data is left out too.
                let data = try data(of: item)
                if !data.isEmpty { result[SecKeys.valueData] = .data(data) }
            }
            if returns.persistentRef { result[SecKeys.valuePersistentRef] = .data(persistentRef(item)) }
            if returns.ref {
                // securityd adds the class when a ref is asked for; passwords have no object form, so for
                // them that is all a ref adds.
                result[SecKeys.itemClass] = .string(item.itemClass.name)
                if let reference = try reference(for: item) { result[SecKeys.valueRef] = reference.secValue }
            }
            return .dictionary(result)
        }
        if returns.data { return .data(try data(of: item)) }
        if returns.persistentRef { return .data(persistentRef(item)) }
        if returns.ref { return try reference(for: item)?.secValue }
        return nil  // nothing requested
    }

    /// An identity: the key's attributes overlaid by the certificate's (which win on shared names),
    /// the key's data, and the `idnt` persistent reference of the certificate.
    static func value(for pair: IdentityPair, returns: ReturnFlags) throws(SecError) -> SecValue? {
        let reference = { () throws(SecError) -> SecValue in
            ItemReference.identity(
                certificate: try certificateReference(pair.certificate),
                key: try keyReference(pair.key)
            ).secValue
        }
        let ref = PersistentRef(itemClass: .certificate, uuid: pair.certificate.persistentRef, identity: true).bytes
        if returns.wantsDictionary {
            var result: SecDictionary = [:]
            if returns.attributes {
                result = pair.key.attributes
                for (name, value) in pair.certificate.attributes { result[name] = value }
            }
            if returns.data { result[SecKeys.valueData] = .data(try data(of: pair.key)) }
            if returns.persistentRef { result[SecKeys.valuePersistentRef] = .data(ref) }
            if returns.ref {
                result[SecKeys.itemClass] = .string(SecKeys.classIdentity)
                result[SecKeys.valueRef] = try reference()
            }
            return .dictionary(result)
        }
        if returns.data { return .data(try data(of: pair.key)) }
        if returns.persistentRef { return .data(ref) }
        if returns.ref { return try reference() }
        return nil
    }

    static func persistentRef(_ item: OpenItem) -> [UInt8] {
        PersistentRef(itemClass: item.itemClass, uuid: item.persistentRef).bytes
    }

    /// The item's data; a key that may not be exported never leaves through kSecReturnData (whatever
    /// its class attribute says, which an update could have changed).
    private static func data(of item: OpenItem) throws(SecError) -> [UInt8] {
        if item.itemClass == .key, !item.isExtractable {
            throw SecError(SecStatus.dataNotAvailable, "the key is not extractable (kSecAttrIsExtractable is false)")
        }
        return try ItemSealer.openSecret(item)
    }

    /// The object form of a certificate or key item; nil for passwords.
    static func reference(for item: OpenItem) throws(SecError) -> ItemReference? {
        switch item.itemClass {
        case .certificate: .certificate(try certificateReference(item))
        case .key: .key(try keyReference(item))
        case .genericPassword, .internetPassword: nil
        }
    }

    private static func certificateReference(_ item: OpenItem) throws(SecError) -> CertificateReference {
        CertificateReference(der: try ItemSealer.openSecret(item), persistentRef: persistentRef(item))
    }

    /// A key item as a reference. A private key is described by its public half and its persistent
    /// reference only: its bytes stay in the agent.
    private static func keyReference(_ item: OpenItem) throws(SecError) -> KeyReference {
        if let token = item.token {
            // A token key is described by its public half; a private one is used through its reference.
            let isPrivate = token.keyClass == KeyReference.classPrivate
            var reference = KeyReference(
                keyType: token.keyType, keyClass: token.keyClass, sizeInBits: token.sizeInBits, publicKey: token.data,
                material: isPrivate ? nil : token.data, persistentRef: persistentRef(item),
                extractable: !isPrivate)
            reference.tokenID = token.tokenID
            return reference
        }
        let keyClass = item.attributes[SecAttr.keyClass]?.integerValue ?? KeyReference.classPublic
        let keyType = item.attributes[SecAttr.keyType]?.integerValue ?? 0
        var material = try ItemSealer.openSecret(item)
        defer { SecretBytes.wipe(&material) }
        var reference = try KeyMaterial.reference(
            material: material, keyType: keyType, keyClass: keyClass, stored: true)
        reference.persistentRef = persistentRef(item)
        reference.extractable = item.isExtractable
        return reference
    }
}
