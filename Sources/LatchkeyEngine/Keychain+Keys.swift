import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

extension Keychain {
    /// A private-key operation for a caller: the key stays here, only the result leaves. The key's
    /// class key must be held (errSecInteractionNotAllowed otherwise), as for reading the item.
    public func keyOperation(_ request: SecDictionary, caller: Caller) throws(SecError) -> SecValue {
        guard case .data(let refBytes)? = request[KeyOperation.Field.key], let ref = PersistentRef(bytes: refBytes),
              ref.itemClass == .key, !ref.identity else {
            throw .param("a key operation needs the key's persistent reference")
        }
        guard case .string(let name)? = request[KeyOperation.Field.operation], let operation = KeyOperation(rawValue: name) else {
            throw .param("unknown key operation")
        }
        let algorithm = request[KeyOperation.Field.algorithm]?.stringValue ?? ""
        let input = request[KeyOperation.Field.input]?.dataValue ?? []
        let exchange = KeyMaterial.ExchangeParameters(
            peer: request[KeyOperation.Field.peer]?.dataValue ?? [],
            requestedSize: request[KeyOperation.Field.requestedSize]?.integerValue.map(Int.init),
            sharedInfo: request[KeyOperation.Field.sharedInfo]?.dataValue ?? [])
        // Only opening the item needs the keychain's lock; the cryptography (an RSA-4096 signature takes
        // a good fraction of a second) runs outside it, so it never holds up a screen lock or other callers.
        // The item is found, opened and checked on every use; only the import of its private key into
        // OpenSSL is skipped when the key is cached (PrivateKeyCache).
        let found = try locked { () throws(SecError) -> StoredKey in
            var query = ItemQuery(itemClass: .key, limit: .one)
            query.persistentRef = ref
            query.synchronizable = nil
            guard let item = try find(query, caller: caller, limit: 1).first else { throw SecError.notFound }
            let keyClass = item.attributes[SecAttr.keyClass]?.integerValue ?? KeyReference.classPublic
            let keyType = item.attributes[SecAttr.keyType]?.integerValue ?? 0
            if operation == .export, !Self.isExtractable(item) {
                throw SecError(SecStatus.dataNotAvailable, "the key is not extractable (kSecAttrIsExtractable is false)")
            }
            if operation != .export, keyClass != KeyReference.classPrivate {
                throw SecError(SecStatus.param, "\(operation.rawValue) needs a private key")
            }
            if operation != .export, let cached = keys.privateKeys.key(ref: item.persistentRef, sealedSecret: item.row.secret) {
                return StoredKey(item: item, keyType: keyType, keyClass: keyClass, imported: cached)
            }
            return StoredKey(item: item, keyType: keyType, keyClass: keyClass, material: try ItemSealer.openSecret(item))
        }
        var material = found.material
        defer { SecretBytes.wipe(&material) }
        if operation == .export {
            return .data(try KeyMaterial.perform(operation, algorithm: algorithm, input: input, exchange: exchange,
                                                 material: material, keyType: found.keyType, keyClass: found.keyClass))
        }
        let key: AsymmetricKey
        if let imported = found.imported {
            key = imported
        } else {
            key = try KeyMaterial.key(material, keyType: found.keyType, keyClass: found.keyClass, stored: true)
        }
        let result = try KeyMaterial.perform(operation, algorithm: algorithm, input: input, exchange: exchange,
                                             key: key, keyType: found.keyType)
        if found.imported == nil {
            // Kept only while the item's class key is still held: a lock that came meanwhile has already
            // emptied the cache for that class, and must not be undone here.
            try? locked { () throws(SecError) -> Void in
                guard keys.isAvailable(found.item.protection) else { return }
                keys.privateKeys.insert(key, ref: found.item.persistentRef, sealedSecret: found.item.row.secret,
                                        protection: found.item.protection)
            }
        }
        return .data(result)
    }

    /// A key item found for a key operation: its private key already imported, or its stored bytes.
    private struct StoredKey {
        var item: OpenItem
        var keyType: Int64
        var keyClass: Int64
        var imported: AsymmetricKey? = nil
        var material: [UInt8] = []
    }

    /// `SecKeyCreateRandomKey` for a key stored at once: the private key is made here and never leaves;
    /// what comes back is its reference. Top-level parameters apply to both halves, `kSecPrivateKeyAttrs`
    /// and `kSecPublicKeyAttrs` to one each, as Apple documents; each half whose merged
    /// `kSecAttrIsPermanent` is true is stored (the library generates keys that are not stored itself).
    public func generateKey(_ parameters: SecDictionary, caller: Caller) throws(SecError) -> SecValue {
        guard let type = parameters[SecAttr.keyType]?.integerValue else {
            throw .param("kSecAttrKeyType is missing or not a key type")
        }
        guard let size = parameters[SecAttr.keySizeInBits]?.integerValue else {
            throw .param("kSecAttrKeySizeInBits is missing or not a number")
        }
        if parameters[SecAttr.tokenID] != nil {
            throw SecError(SecStatus.unimplemented, "kSecAttrTokenID: this keychain has no Secure Enclave or token")
        }
        let privateParameters = try KeyGeneration.parameters(parameters, half: SecKeys.privateKeyAttributes)
        let publicParameters = try KeyGeneration.parameters(parameters, half: SecKeys.publicKeyAttributes)
        guard KeyGeneration.isPermanent(privateParameters) else {
            throw .param("generateKey stores the private key: kSecAttrIsPermanent must be true for it")
        }
        var (material, publicKey) = try KeyMaterial.generate(keyType: type, sizeInBits: size)
        var privateMaterial = material.withUnsafeBytes { Array($0) }
        defer { SecretBytes.wipe(&privateMaterial) }
        material = SecretBytes(count: 0)
        let privateRef = KeyReference(keyType: type, keyClass: KeyReference.classPrivate, sizeInBits: size,
                                      publicKey: publicKey, material: privateMaterial)
        let publicRef = KeyReference(keyType: type, keyClass: KeyReference.classPublic, sizeInBits: size,
                                     publicKey: publicKey, material: publicKey)
        var privateRequest = try DictionaryParser.parseAdd(Self.addDictionary(privateParameters, .key(privateRef)))
        privateRequest.returns.ref = true
        let publicRequest = KeyGeneration.isPermanent(publicParameters)
            ? try DictionaryParser.parseAdd(Self.addDictionary(publicParameters, .key(publicRef))) : nil
        // Both halves or neither: one transaction.
        return try locked { () throws(SecError) -> SecValue in
            let store = try store()
            var reference: SecValue?
            do {
                try store.transaction {
                    reference = try addLocked(privateRequest, caller: caller)
                    if let publicRequest { _ = try addLocked(publicRequest, caller: caller) }
                }
            } catch {
                throw EngineErrors.map(error)
            }
            guard let reference else { throw SecError(SecStatus.internalComponent, "the new key has no reference") }
            return reference
        }
    }

    // MARK: - References in add and query dictionaries

    /// Fills an add request from its `kSecValueRef`: the bytes to store and the attributes Apple derives,
    /// under the caller's own attributes (which win).
    func resolve(_ reference: ItemReference, into request: inout AddRequest, caller: Caller) throws(SecError) {
        guard request.data == nil else { throw .param("kSecValueRef and kSecValueData cannot both be given") }
        let derived: SecDictionary
        var forced: SecDictionary = [:]
        switch reference {
        case .certificate(let certificate):
            derived = try KeyMaterial.attributes(ofCertificate: certificate.der)
            request.data = certificate.der
        case .key(let key):
            let (material, source) = try keyMaterial(of: key, caller: caller)
            var checked = try KeyMaterial.reference(material: material, keyType: key.keyType, keyClass: key.keyClass,
                                                    stored: source != nil)
            checked.extractable = key.extractable && (source.map(Self.isExtractable) ?? true)
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
    private func keyMaterial(of key: KeyReference, caller: Caller) throws(SecError) -> ([UInt8], source: OpenItem?) {
        if let material = key.material { return (material, nil) }
        guard let refBytes = key.persistentRef, let ref = PersistentRef(bytes: refBytes), ref.itemClass == .key else {
            throw .param("the key reference names no key")
        }
        var query = ItemQuery(itemClass: .key, limit: .one)
        query.persistentRef = ref
        query.synchronizable = nil
        var item = try find(query, caller: caller, limit: 1).first
        if item == nil {
            // The item the key was read from is gone; another item may hold the same key.
            var same = ItemQuery(itemClass: .key, limit: .one)
            try apply(.key(key), to: &same)
            same.synchronizable = nil
            item = try find(same, caller: caller, limit: 1).first
        }
        guard let item else { throw SecError(SecStatus.itemNotFound, "the key is no longer in the keychain") }
        return (try ItemSealer.openSecret(item), item)
    }

    /// The attributes a query's `kSecValueRef` implies, for matching, as Apple infers them from the
    /// object: a certificate's issuer, serial number and type; a key's application label, class and
    /// type. (Not the item it was read from: an object outlives its item, and one re-added since is the
    /// same certificate or key.)
    func apply(_ reference: ItemReference, to query: inout ItemQuery) throws(SecError) {
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

    // MARK: - Helpers


    /// Whether a key item may be exported: yes without the attribute (Apple's default), otherwise only
    /// when it says 1; anything unreadable counts as no.
    static func isExtractable(_ item: OpenItem) -> Bool {
        guard let value = item.attributes["extr"] else { return true }
        return value.integerValue == 1
    }


    /// The SecItemAdd dictionary for a generated half: its reference plus the attributes the caller
    /// gave for it (generation-only keys removed; type and size come from the key itself).
    private static func addDictionary(_ parameters: SecDictionary, _ reference: ItemReference) -> SecDictionary {
        var dictionary = parameters.filter { DictionaryParser.isAttributeKey($0.key) || $0.key.hasPrefix("u_") }
        // Type, class and size come from the key itself.
        for name in [SecAttr.keyType, SecAttr.keySizeInBits, SecAttr.keyClass, SecAttr.effectiveKeySize] {
            dictionary[name] = nil
        }
        dictionary[SecKeys.itemClass] = .string(SecKeys.classKey)
        dictionary[SecKeys.valueRef] = reference.secValue
        return dictionary
    }
}
