import LatchkeyModel
import LatchkeyStore

/// A certificate and the private key whose application label equals the certificate's public key hash.
struct IdentityPair {
    var certificate: OpenItem
    var key: OpenItem
}

/// Identities are not stored: as in securityd, `kSecClassIdentity` is the join of the certificate and
/// key tables on `cert.pkhh == keys.klbl` (secitem-semantics §7.3). Unlike securityd, whose join tests
/// `keys.priv` (which SecKey sets for public keys too), only private keys (`kcls` 1) join: an identity
/// whose "key" cannot sign is of no use to anyone. Works with the engine's mutex held, through the
/// item rules of the request.
struct Identities {
    let items: ItemRules

    /// The identities a query matches: certificates by the certificate filters, each joined to a
    /// private key that also matches the key filters.
    func find(_ query: ItemQuery, limit: Int?) throws(SecError) -> [IdentityPair] {
        var pairs: [IdentityPair] = []
        for certificate in try items.find(Self.certificateHalf(of: query), limit: nil) {
            guard let key = try privateKey(for: certificate, filters: query.keyAttributes) else { continue }
            pairs.append(IdentityPair(certificate: certificate, key: key))
            if let limit, pairs.count >= limit { break }
        }
        return pairs
    }

    /// An identity query's certificate half: its certificate filters (and persistent reference).
    private static func certificateHalf(of query: ItemQuery) -> ItemQuery {
        var certificateQuery = query
        certificateQuery.identity = false
        certificateQuery.keyAttributes = [:]
        if var ref = certificateQuery.persistentRef {
            ref.identity = false
            certificateQuery.persistentRef = ref
        }
        return certificateQuery
    }

    /// The private key a certificate forms an identity with: from the same place only. A stored
    /// certificate joins a stored key; a token's certificate a key of the same token. Otherwise any program
    /// could store a certificate it made for the public key of the user's smart card (a public key is
    /// public) and have it stand as an identity of the card's key, under a subject and issuer it chose;
    /// or a token could lend its certificate to a stored key (docs/TOKENS.md §8).
    private func privateKey(for certificate: OpenItem, filters: SecDictionary) throws(SecError) -> OpenItem? {
        guard case .data(let hash)? = certificate.attributes[SecAttr.publicKeyHash], !hash.isEmpty else { return nil }
        var keyQuery = ItemQuery(itemClass: .key, limit: .one)
        keyQuery.attributes = filters
        keyQuery.attributes[SecAttr.applicationLabel] = .data(hash)
        keyQuery.attributes[SecAttr.keyClass] = .int(KeyReference.classPrivate)
        keyQuery.synchronizable = nil
        guard let token = certificate.token else { return try items.findStored(keyQuery, limit: 1).first }
        if let asked = keyQuery.attributes[SecAttr.tokenID], asked != .string(token.tokenID) { return nil }
        keyQuery.attributes[SecAttr.tokenID] = .string(token.tokenID)
        return try items.tokenItems(keyQuery, present: items.presentTokenItems, limit: 1).first
    }

    /// SecItemAdd of an identity reference: the certificate, then the key. A duplicate certificate is
    /// tolerated; a duplicate key is too when the certificate was new; both duplicates are
    /// errSecDuplicateItem (secitem-semantics §7.3). Runs inside the add's store transaction.
    func add(certificate: CertificateReference, key: KeyReference, request: AddRequest) throws(SecError) -> SecValue? {
        guard key.isPrivate else { throw .param("an identity's key must be a private key") }
        guard request.data == nil else { throw .param("kSecValueRef and kSecValueData cannot both be given") }
        var certificateRequest = AddRequest(itemClass: .certificate)
        certificateRequest.protection = request.protection
        certificateRequest.synchronizable = request.synchronizable
        certificateRequest.accessControl = request.accessControl
        var keyRequest = AddRequest(itemClass: .key)
        keyRequest.protection = request.protection
        keyRequest.synchronizable = request.synchronizable
        keyRequest.accessControl = request.accessControl
        keyRequest.authenticationUI = request.authenticationUI
        keyRequest.operationPrompt = request.operationPrompt
        // The caller's attributes go to whichever half has them (the certificate for shared names), the
        // access group the request was admitted to among them; but not the two hashes that join the halves
        // (the certificate's public-key hash, the key's application label): derived from the certificate
        // and the key, they bind this identity to its own key. Named by the caller, they let an identity
        // of the caller's join another key (and return that key's data).
        for (name, value) in request.attributes
        where name != SecAttr.publicKeyHash && name != SecAttr.applicationLabel {
            if ItemClass.certificate.attribute(name) != nil { certificateRequest.attributes[name] = value }
            if ItemClass.key.attribute(name) != nil { keyRequest.attributes[name] = value }
        }
        try items.resolve(.certificate(certificate), into: &certificateRequest)
        try items.resolve(.key(key), into: &keyRequest)
        guard certificateRequest.attributes[SecAttr.publicKeyHash] == keyRequest.attributes[SecAttr.applicationLabel]
        else {
            throw .param("the identity's key does not belong to its certificate")
        }
        var certificateItem: OpenItem?
        var certificateWasDuplicate = false
        do {
            try items.store.transaction {
                do {
                    certificateItem = try items.insert(certificateRequest, open: true)
                } catch let error as SecError where error.status == SecStatus.duplicateItem {
                    certificateWasDuplicate = true
                }
                do {
                    _ = try items.insert(keyRequest, open: false)
                } catch let error as SecError where error.status == SecStatus.duplicateItem && !certificateWasDuplicate
                {
                    // the key was there already; the new certificate makes the identity
                }
            }
        } catch {
            throw EngineErrors.map(error)
        }
        guard !request.returns.isEmpty else { return nil }
        // Return what was added, or what it duplicated.
        var query = ItemQuery(itemClass: .certificate, limit: .one)
        query.identity = true
        query.synchronizable = nil
        if let certificateItem {
            query.persistentRef = PersistentRef(
                itemClass: .certificate, uuid: certificateItem.persistentRef, identity: true)
        } else {
            try ItemRules.apply(.certificate(certificate), to: &query)
        }
        guard let found = try find(query, limit: 1).first else { throw SecError.notFound }
        // The key's data is its secret: a protected key's needs the user check here too.
        guard
            let pair = try items.presence.admit(
                [found], ui: request.authenticationUI, prompt: request.operationPrompt,
                protectedItems: { request.returns.data ? [$0.key] : [] }
            ).first
        else { throw SecError.notFound }
        return try ResultBuilder.value(for: pair, returns: request.returns)
    }

    /// SecItemDelete of identities. With a reference (persistent or object): the certificate, then its
    /// key unless another certificate still uses it. With filters: every matching certificate that forms
    /// an identity, then every key joined to one. Keys are found by their keyed hashes without being
    /// opened, so this works while their class is locked, as securityd's delete does.
    func delete(_ query: ItemQuery) throws(SecError) {
        let store = items.store
        do {
            var pairs: [(certificate: OpenItem, keys: [RowHeader])] = []
            for certificate in try items.findForChange(Self.certificateHalf(of: query), limit: nil) {
                let keys = try privateKeyHeaders(for: certificate, filters: query.keyAttributes)
                if !keys.isEmpty { pairs.append((certificate, keys)) }
            }
            guard !pairs.isEmpty else { throw SecError.notFound }
            if pairs.contains(where: { $0.certificate.token != nil }) { throw ItemRules.tokenItemsAreReadOnly }
            let certificateIDs = Set(pairs.map(\.certificate.id))
            var keyIDs: Set<Int64> = []
            var keyRefs: [[UInt8]] = []
            for pair in pairs {
                if query.persistentRef != nil || query.reference != nil {
                    // Keep a key that another certificate still forms an identity with.
                    var others = ItemQuery(itemClass: .certificate, limit: .all)
                    others.attributes[SecAttr.publicKeyHash] = pair.certificate.attributes[SecAttr.publicKeyHash]
                    others.synchronizable = nil
                    let sharing = try store.headers(
                        matching: try items.filter(
                            for: others, hashes: try items.queryHashes(others),
                            limit: nil))
                    if sharing.contains(where: { !certificateIDs.contains($0.id) }) { continue }
                }
                keyIDs.formUnion(pair.keys.map(\.id))
                keyRefs += pair.keys.map(\.persistentRef)
            }
            _ = try store.delete(ids: Array(certificateIDs) + Array(keyIDs))
            for ref in keyRefs { items.keys.privateKeys.remove(ref: ref) }
        } catch {
            throw EngineErrors.map(error)
        }
    }

    /// The rows of the private keys joined to a certificate, by keyed hashes only.
    private func privateKeyHeaders(for certificate: OpenItem, filters: SecDictionary) throws -> [RowHeader] {
        guard case .data(let hash)? = certificate.attributes[SecAttr.publicKeyHash], !hash.isEmpty else { return [] }
        var keyQuery = ItemQuery(itemClass: .key, limit: .all)
        keyQuery.attributes = filters
        keyQuery.attributes[SecAttr.applicationLabel] = .data(hash)
        keyQuery.attributes[SecAttr.keyClass] = .int(KeyReference.classPrivate)
        keyQuery.synchronizable = nil
        return try items.store.headers(
            matching: try items.filter(
                for: keyQuery, hashes: try items.queryHashes(keyQuery),
                limit: nil))
    }

    /// The changes of an identity update, split between its certificate and its key.
    struct Changes {
        var certificate: AttributeChanges
        var key: AttributeChanges
    }

    /// Splits and parses an identity update's changes (before the request is admitted: the policy sees
    /// the groups they name).
    static func changes(_ changesDictionary: SecDictionary) throws(SecError) -> Changes {
        var certificateChanges: SecDictionary = [:]
        var keyChanges: SecDictionary = [:]
        for (name, value) in changesDictionary {
            let forCertificate =
                ItemClass.certificate.attribute(name) != nil || name == SecAttr.accessible
                || name == SecAttr.synchronizable
            let forKey =
                ItemClass.key.attribute(name) != nil || name == SecAttr.accessible || name == SecAttr.synchronizable
            guard forCertificate || forKey else { throw .noSuchAttr(name, SecKeys.classIdentity) }
            if forCertificate { certificateChanges[name] = value }
            if forKey { keyChanges[name] = value }
        }
        let certificate = try DictionaryParser.parseChanges(certificateChanges, itemClass: .certificate)
        let key = try DictionaryParser.parseChanges(keyChanges, itemClass: .key)
        if let value = key.attributes["extr"], value.integerValue != 0 {
            throw .param("kSecAttrIsExtractable cannot be changed to true")
        }
        return Changes(certificate: certificate, key: key)
    }

    /// SecItemUpdate of identities: the certificate's attributes, then the key's, in one transaction.
    /// Token identities are among those changed only when the query names tokens, and then the update is
    /// refused as read-only (`findForChange`): a query that also matched a smart card's identity must
    /// still change the stored ones it meant.
    func update(_ query: ItemQuery, _ changes: Changes) throws(SecError) {
        var pairs: [IdentityPair] = []
        for certificate in try items.findForChange(Self.certificateHalf(of: query), limit: nil) {
            guard let key = try privateKey(for: certificate, filters: query.keyAttributes) else { continue }
            if certificate.token != nil || key.token != nil { throw ItemRules.tokenItemsAreReadOnly }
            pairs.append(IdentityPair(certificate: certificate, key: key))
        }
        pairs = try items.presence.admit(
            pairs, ui: query.authenticationUI, prompt: query.operationPrompt, operation: .change
        ) { [$0.certificate, $0.key] }
        guard !pairs.isEmpty else { throw SecError.notFound }
        do {
            try items.store.transaction {
                for pair in pairs { try items.rewrite(pair.certificate, with: changes.certificate) }
                var done: Set<Int64> = []
                for pair in pairs where done.insert(pair.key.id).inserted {
                    try items.rewrite(pair.key, with: changes.key)
                }
            }
        } catch {
            throw EngineErrors.map(error)
        }
    }
}
