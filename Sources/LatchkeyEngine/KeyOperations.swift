import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// Private-key operations and key generation: the private key stays in the engine, only a result or a
/// reference leaves. Each is cut in the parts that need the engine's mutex (opening or storing the item,
/// through `ItemRules`) and those that must not hold it (the cryptography: an RSA-4096 signature or key
/// generation takes a good fraction of a second, and would hold up a screen lock and every other caller).
enum KeyOperations {
    /// A key-operation request, parsed.
    struct Request {
        var ref: PersistentRef
        var operation: KeyOperation
        var algorithm: String
        var input: [UInt8]
        var exchange: KeyMaterial.ExchangeParameters
        /// `kSecUseOperationPrompt`, for the user check a protected key needs.
        var prompt: String?
        /// `kSecUseAuthenticationUI`: whether a token's PIN may be asked for.
        var authenticationUI = AuthenticationUI.allow
        /// A token key's PIN, given by the program with its `LAContext`.
        var pin: SecretBytes?

        init(parsing request: SecDictionary) throws(SecError) {
            guard case .data(let refBytes)? = request[KeyOperation.Field.key], let ref = PersistentRef(bytes: refBytes),
                ref.itemClass == .key, !ref.identity
            else {
                throw .param("a key operation needs the key's persistent reference")
            }
            guard case .string(let name)? = request[KeyOperation.Field.operation],
                let operation = KeyOperation(rawValue: name)
            else {
                throw .param("unknown key operation")
            }
            self.ref = ref
            self.operation = operation
            algorithm = request[KeyOperation.Field.algorithm]?.stringValue ?? ""
            input = request[KeyOperation.Field.input]?.dataValue ?? []
            exchange = KeyMaterial.ExchangeParameters(
                peer: request[KeyOperation.Field.peer]?.dataValue ?? [],
                requestedSize: request[KeyOperation.Field.requestedSize]?.integerValue.map(Int.init),
                sharedInfo: request[KeyOperation.Field.sharedInfo]?.dataValue ?? [])
            prompt = request[SecKeys.useOperationPrompt]?.stringValue
            authenticationUI = request.tokenAuthenticationUI
            pin = try request.smartCardPIN()
        }

        /// What the access policy is asked: an export reads the key's data; the others only use it.
        var accessKind: AccessKind { operation == .export ? .readData : .useKey }
    }

    /// A key item opened for one operation: its private key already imported (from the cache), or
    /// its stored bytes, which whoever holds them wipes.
    struct OpenedKey {
        var material: [UInt8]
        var keyType: Int64
        var keyClass: Int64
        var imported: AsymmetricKey?
        /// The item, for keeping the key it imports (`keep`).
        var ref: [UInt8]
        var sealedSecret: [UInt8]
        var protection: ProtectionClass
        /// A token's key: the operation runs on the token (`Keychain.keyOperation`).
        var token: TokenItem? = nil
    }

    /// Opens the key item a request names (mutex held). Its class key must be held
    /// (errSecInteractionNotAllowed otherwise), as for reading the item. The item is found, opened and
    /// checked on every use; only the import of its private key is skipped when it is cached.
    static func open(_ request: Request, in items: ItemRules) throws(SecError) -> OpenedKey {
        var query = ItemQuery(itemClass: .key, limit: .one)
        query.persistentRef = request.ref
        query.synchronizable = nil
        guard let found = try items.find(query, limit: 1).first else { throw SecError.notFound }
        // Using a protected key (or exporting it) needs the user check, whatever kSecAccessControlPrivateKeyUsage
        // says: here the key's bytes are the item's secret (docs/ACCESS-CONTROL.md §2).
        guard
            let item = try items.presence.admit(
                [found], ui: .allow, prompt: request.prompt, operation: UserCheckOperation(request.operation)
            ).first
        else {
            throw SecError(SecStatus.interactionNotAllowed, "the key needs a user check")
        }
        let keyClass = item.attributes[SecAttr.keyClass]?.integerValue ?? KeyReference.classPublic
        let keyType = item.attributes[SecAttr.keyType]?.integerValue ?? 0
        if request.operation == .export, !item.isExtractable {
            throw SecError(SecStatus.dataNotAvailable, "the key is not extractable (kSecAttrIsExtractable is false)")
        }
        if request.operation != .export, keyClass != KeyReference.classPrivate {
            throw SecError(SecStatus.param, "\(request.operation.rawValue) needs a private key")
        }
        var opened = OpenedKey(
            material: [], keyType: keyType, keyClass: keyClass, imported: nil,
            ref: item.persistentRef, sealedSecret: item.row.secret, protection: item.protection)
        if let token = item.token, request.operation != .export {
            opened.token = token
            return opened
        }
        if request.operation != .export,
            let cached = items.keys.privateKeys.key(ref: item.persistentRef, sealedSecret: item.row.secret)
        {
            opened.imported = cached
        } else {
            opened.material = try ItemSealer.openSecret(item)
        }
        return opened
    }

    /// Performs the operation on an opened key (without the mutex). Returns the result and, when the
    /// key was imported for it, the imported key for `keep`.
    static func perform(_ request: Request, with key: OpenedKey) throws(SecError) -> (SecValue, AsymmetricKey?) {
        if request.operation == .export {
            return (
                .data(
                    try KeyMaterial.perform(
                        request.operation, algorithm: request.algorithm, input: request.input,
                        exchange: request.exchange, material: key.material,
                        keyType: key.keyType, keyClass: key.keyClass)), nil
            )
        }
        let imported: AsymmetricKey
        if let cached = key.imported {
            imported = cached
        } else {
            imported = try KeyMaterial.key(key.material, keyType: key.keyType, keyClass: key.keyClass, stored: true)
        }
        let result = try KeyMaterial.perform(
            request.operation, algorithm: request.algorithm, input: request.input,
            exchange: request.exchange, key: imported, keyType: key.keyType)
        return (.data(result), key.imported == nil ? imported : nil)
    }

    /// Keeps a key imported for `opened` in the cache (mutex held), only while the item's class key is
    /// still held and the item still holds the very key it was imported from: a lock, a delete or an
    /// update that came during the operation has already emptied the cache of it, and must not be
    /// undone here.
    static func keep(_ imported: AsymmetricKey, for opened: OpenedKey, in items: ItemRules) {
        guard items.keys.isAvailable(opened.protection),
            (try? items.store.row(persistentRef: opened.ref))??.secret == opened.sealedSecret
        else { return }
        items.keys.privateKeys.insert(
            imported, ref: opened.ref, sealedSecret: opened.sealedSecret,
            protection: opened.protection)
    }

    /// A generated key pair, as the add requests that store it.
    struct GeneratedPair {
        var privateRequest: AddRequest
        /// Nil when the public half is not to be stored.
        var publicRequest: AddRequest?
    }

    /// `SecKeyCreateRandomKey` for a key stored at once: the private key is made here and never leaves;
    /// what comes back is its reference. Top-level parameters apply to both halves, `kSecPrivateKeyAttrs`
    /// and `kSecPublicKeyAttrs` to one each, as Apple documents; each half whose merged
    /// `kSecAttrIsPermanent` is true is stored (the library generates keys that are not stored itself).
    /// Generates the key (without the mutex); the caller wipes the private key's bytes (`privateMaterial`)
    /// once the pair is stored.
    static func generate(_ parameters: SecDictionary) throws(SecError)
        -> (pair: GeneratedPair, privateMaterial: [UInt8])
    {
        guard let type = parameters[SecAttr.keyType]?.integerValue else {
            throw .param("kSecAttrKeyType is missing or not a key type")
        }
        guard let size = parameters[SecAttr.keySizeInBits]?.integerValue else {
            throw .param("kSecAttrKeySizeInBits is missing or not a number")
        }
        if parameters[SecAttr.tokenID] != nil {
            throw SecError(SecStatus.unimplemented, "kSecAttrTokenID: generating a key on a token is not supported yet")
        }
        let privateParameters = try KeyGeneration.parameters(parameters, half: SecKeys.privateKeyAttributes)
        let publicParameters = try KeyGeneration.parameters(parameters, half: SecKeys.publicKeyAttributes)
        guard KeyGeneration.isPermanent(privateParameters) else {
            throw .param("generateKey stores the private key: kSecAttrIsPermanent must be true for it")
        }
        var (material, publicKey) = try KeyMaterial.generate(keyType: type, sizeInBits: size)
        var privateMaterial = material.withUnsafeBytes { Array($0) }
        material = SecretBytes(count: 0)
        do {
            let privateRef = KeyReference(
                keyType: type, keyClass: KeyReference.classPrivate, sizeInBits: size,
                publicKey: publicKey, material: privateMaterial)
            let publicRef = KeyReference(
                keyType: type, keyClass: KeyReference.classPublic, sizeInBits: size,
                publicKey: publicKey, material: publicKey)
            var privateRequest = try DictionaryParser.parseAdd(addDictionary(privateParameters, .key(privateRef)))
            privateRequest.returns.ref = true
            let publicRequest =
                KeyGeneration.isPermanent(publicParameters)
                ? try DictionaryParser.parseAdd(addDictionary(publicParameters, .key(publicRef))) : nil
            return (GeneratedPair(privateRequest: privateRequest, publicRequest: publicRequest), privateMaterial)
        } catch {
            SecretBytes.wipe(&privateMaterial)
            throw error
        }
    }

    /// Stores both halves or neither, in one transaction (mutex held); returns the private key's reference.
    static func store(_ pair: GeneratedPair, in items: ItemRules) throws(SecError) -> SecValue {
        var reference: SecValue?
        do {
            try items.store.transaction {
                reference = try items.addInTransaction(pair.privateRequest)
                if let publicRequest = pair.publicRequest { _ = try items.addInTransaction(publicRequest) }
            }
        } catch {
            throw EngineErrors.map(error)
        }
        guard let reference else { throw SecError(SecStatus.internalComponent, "the new key has no reference") }
        return reference
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
