import LatchkeyCrypto
import LatchkeyModel

/// `kSecValueRef` in add and query dictionaries: what a certificate or key object means for the item
/// added or matched.
extension ItemRules {
    /// Fills an add request from its `kSecValueRef`: the bytes to store and the attributes Apple derives,
    /// under the caller's own attributes (which win).
    func resolve(_ reference: ItemReference, into request: inout AddRequest) throws(SecError) {
        guard request.data == nil else { throw .param("kSecValueRef and kSecValueData cannot both be given") }
        let derived: SecDictionary
        var forced: SecDictionary = [:]
        switch reference {
        case .certificate(let certificate):
            derived = try KeyMaterial.attributes(ofCertificate: certificate.der)
            request.data = certificate.der
        case .key(let key):
            let (material, source) = try keyMaterial(of: key, for: request)
            var checked = try KeyMaterial.reference(
                material: material, keyType: key.keyType, keyClass: key.keyClass,
                stored: source != nil)
            checked.extractable = key.extractable && (source.map(\.isExtractable) ?? true)
            derived = KeyMaterial.attributes(of: checked)
            // What the bytes are is not the caller's to say.
            for name in [SecAttr.keyClass, SecAttr.keyType, SecAttr.keySizeInBits] { forced[name] = derived[name] }
            if !checked.extractable {
                forced["extr"] = .int(0)
                // A key that may not leave keeps its item's protection: a copy in a weaker class (Always,
                // whose key is on disk unprotected) would be a way out.
                if let source {
                    if let asked = request.protection, asked != source.protection {
                        throw .param("a non-extractable key keeps its accessibility (\(source.protection.pdmn))")
                    }
                    request.protection = source.protection
                    request.synchronizable = source.row.synchronizable
                    // And its access control: a copy without it would sign without the user.
                    let control = try source.accessControl()
                    if control != nil, let asked = request.accessControl, asked != control {
                        throw .param("a non-extractable key keeps its kSecAttrAccessControl")
                    }
                    if let control { request.accessControl = control }
                }
            }
            request.data = material
        case .identity:
            throw .param("an identity is added as its certificate and its key")
        }
        for (name, value) in derived where request.attributes[name] == nil {
            request.attributes[name] = value
        }
        for (name, value) in forced { request.attributes[name] = value }
    }

    /// The external representation of a key named by a reference: the bytes it carries, or those of the
    /// keychain item holding it (which must be readable), and that item.
    /// Reading a protected item's key this way is reading its secret: it needs the user check.
    private func keyMaterial(of key: KeyReference, for request: AddRequest) throws(SecError)
        -> ([UInt8], source: OpenItem?)
    {
        if let material = key.material { return (material, nil) }
        guard let refBytes = key.persistentRef, let ref = PersistentRef(bytes: refBytes), ref.itemClass == .key else {
            throw .param("the key reference names no key")
        }
        var query = ItemQuery(itemClass: .key, limit: .one)
        query.persistentRef = ref
        query.synchronizable = nil
        var item = try find(query, limit: 1).first
        if item == nil {
            // The item the key was read from is gone; another item may hold the same key.
            var same = ItemQuery(itemClass: .key, limit: .one)
            try Self.apply(.key(key), to: &same)
            same.synchronizable = nil
            item = try find(same, limit: 1).first
        }
        guard let item else { throw SecError(SecStatus.itemNotFound, "the key is no longer in the keychain") }
        guard
            let admitted = try presence.admit([item], ui: request.authenticationUI, prompt: request.operationPrompt)
                .first
        else { throw SecError(SecStatus.interactionNotAllowed, "the key needs a user check") }
        return (try ItemSealer.openSecret(admitted), admitted)
    }

    /// The attributes a query's `kSecValueRef` implies, for matching, as Apple infers them from the
    /// object: a certificate's issuer, serial number and type; a key's application label, class and
    /// type. (Not the item it was read from: an object outlives its item, and one re-added since is the
    /// same certificate or key.)
    static func apply(_ reference: ItemReference, to query: inout ItemQuery) throws(SecError) {
        switch reference {
        case .certificate(let certificate):
            let attributes = try KeyMaterial.attributes(ofCertificate: certificate.der)
            for name in [SecAttr.issuer, SecAttr.serialNumber, SecAttr.certificateType] {
                query.attributes[name] = attributes[name]
            }
        case .key(let key):
            query.attributes[SecAttr.applicationLabel] = .data(SHA1.hash(key.publicKey))
            query.attributes[SecAttr.keyClass] = .int(key.keyClass)
            query.attributes[SecAttr.keyType] = .int(key.keyType)
        case .identity(let certificate, _):
            var certificateQuery = query
            try apply(.certificate(certificate), to: &certificateQuery)
            query = certificateQuery
        }
    }
}
