import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// SecItem's rules over sealed rows: add, copy, update and delete for one request, with the engine's
/// mutex held. `Keychain` builds one per request from the store and the keys held at that moment, after
/// the access policy admitted the request (`RequestGate`); the rules themselves know no caller, only the
/// access groups whose items the request may see (`scope`).
struct ItemRules {
    let store: Store
    let keys: KeyState
    /// The groups whose items this request sees and touches; every other item is, for it, not there.
    /// Rows are selected within it by the keyed hashes of their `agrp` (`filter(for:hashes:limit:)`),
    /// and every opened item is checked against it again (`isVisible`), so a tampered index cannot
    /// show another group's item.
    let scope: GroupScope
    /// Told of every change of a generic password, mutex held (see `Keychain.observeItemChanges`).
    let onChange: (@Sendable (KeychainItemChange) -> Void)?
    /// Whether the items whose secret the request reads, changes or uses may be (user presence).
    var presence = PresenceGate(session: nil)
    /// The tokens whose items join the store's (docs/TOKENS.md); nil: none.
    var tokens: (any TokenSource)? = nil

    /// SecItemAdd, in one transaction.
    func add(_ request: AddRequest) throws(SecError) -> SecValue? {
        var result: SecValue?
        do {
            // The result is built before the transaction commits: a request whose result cannot be
            // given (the data of a key that may not leave, say) adds nothing.
            try store.transaction { result = try addInTransaction(request) }
        } catch {
            throw EngineErrors.map(error)
        }
        return result
    }

    /// SecItemAdd inside the caller's store transaction.
    func addInTransaction(_ parsed: AddRequest) throws(SecError) -> SecValue? {
        var request = parsed
        switch request.reference {
        case .identity(let certificate, let key)?:
            return try Identities(items: self).add(certificate: certificate, key: key, request: request)
        case let reference?:
            try resolve(reference, into: &request)
        case nil:
            break
        }
        guard let item = try insert(request, open: !request.returns.isEmpty) else { return nil }
        return try ResultBuilder.value(for: item, returns: request.returns)
    }

    /// Seals and inserts one item; the opened item when `open` (for what SecItemAdd returns). Its access
    /// group is already among its attributes: `RequestGate` put it there when it admitted the request.
    func insert(_ request: AddRequest, open: Bool) throws(SecError) -> OpenItem? {
        let protection = request.protection ?? request.itemClass.defaultProtection
        let classKey = try keys.key(for: protection)
        let indexKey = try keys.requireIndexKey()

        var attributes = request.attributes
        guard attributes[SecAttr.accessGroup] != nil else {
            // Only a request that skipped the access policy gets here.
            throw SecError(SecStatus.internalComponent, "an item to add has no access group (not admitted)")
        }
        attributes[SecAttr.accessible] = .string(protection.pdmn)
        attributes[SecAttr.synchronizable] = .int(request.synchronizable ? 1 : 0)
        // Sealed with the other attributes, never a column or a hash (docs/STORE.md).
        if let control = request.accessControl { attributes[SecAttr.accessControl] = .data(control.encoded) }
        let now = Clock.now()
        attributes[SecAttr.creationDate] = .date(now)
        attributes[SecAttr.modificationDate] = .date(now)
        for spec in request.itemClass.primaryKey where attributes[spec.name] == nil {
            if let implicit = spec.implicitValue { attributes[spec.name] = implicit }
        }

        let secret = request.data ?? []
        let row: NewRow
        let id: Int64
        do {
            let ref = try SecureRandom.bytes(16)
            row = try ItemSealer.seal(
                ref: ref, itemClass: request.itemClass, protection: protection,
                synchronizable: request.synchronizable, attributes: attributes,
                secret: secret, classKey: classKey, indexKey: indexKey)
            id = try store.insert(row)
        } catch {
            throw EngineErrors.map(error)
        }
        if request.itemClass == .genericPassword { onChange?(.added(row.persistentRef)) }
        guard open else { return nil }
        return try ItemSealer.open(
            StoreRow(
                id: id, persistentRef: row.persistentRef, itemClass: row.itemClass, protection: row.protection,
                synchronizable: row.synchronizable, uniqueHash: row.uniqueHash, wrappedKey: row.wrappedKey,
                metadata: row.metadata, secret: row.secret),
            keys: keys)
    }

    /// SecItemCopyMatching.
    func copy(_ query: ItemQuery) throws(SecError) -> SecValue? {
        if query.identity {
            var pairs = try Identities(items: self).find(query, limit: limit(of: query))
            // A certificate reference carries the certificate's data; an identity's data is its key's.
            pairs = try presence.admit(pairs, ui: query.authenticationUI, prompt: query.operationPrompt) { pair in
                (query.returns.ref || query.returns.data ? [pair.certificate] : [])
                    + (query.returns.data ? [pair.key] : [])
            }
            if let maximum = query.limit.maximum { pairs = Array(pairs.prefix(maximum)) }
            guard !pairs.isEmpty else { throw SecError.notFound }
            var values: [SecValue] = []
            for pair in pairs {
                if let value = try ResultBuilder.value(for: pair, returns: query.returns) { values.append(value) }
            }
            return query.limit.returnsArray ? .array(values) : values.first
        }
        var items = try find(query, limit: limit(of: query))
        let readsData = query.returns.data || query.returns.ref
        items = try presence.admit(items, ui: query.authenticationUI, prompt: query.operationPrompt) { item in
            readsData && (query.returns.data || item.itemClass == .certificate) ? [item] : []
        }
        if let maximum = query.limit.maximum { items = Array(items.prefix(maximum)) }
        guard !items.isEmpty else { throw SecError.notFound }
        var values: [SecValue] = []
        for item in items {
            if let value = try ResultBuilder.value(for: item, returns: query.returns) { values.append(value) }
        }
        return query.limit.returnsArray ? .array(values) : values.first
    }

    /// The row limit of a query: none when `kSecUseAuthenticationUISkip` may leave rows out, so that
    /// the limit counts the items returned (the limit is applied after the gate).
    private func limit(of query: ItemQuery) -> Int? {
        query.authenticationUI == .skip ? nil : query.limit.maximum
    }

    /// SecItemUpdate: every matching item, in one transaction; any failure changes nothing. Changing
    /// a protected item (its secret, its attributes or its access control) needs a user check, as on
    /// Apple systems, where an update decrypts the item.
    func update(_ query: ItemQuery, _ changes: AttributeChanges) throws(SecError) {
        let items = try presence.admit(
            try findForChange(query, limit: nil), ui: query.authenticationUI, prompt: query.operationPrompt,
            operation: .change)
        guard !items.isEmpty else { throw SecError.notFound }
        do {
            try store.transaction {
                for item in items { try rewrite(item, with: changes) }
            }
            for item in items where item.itemClass == .genericPassword { onChange?(.changed(item.persistentRef)) }
        } catch {
            throw EngineErrors.map(error)
        }
    }

    /// SecItemDelete. Works whatever the lock state: matching uses only the plaintext columns and the
    /// keyed hashes, never an item's class key, exactly as securityd matches on its columns.
    func delete(_ query: ItemQuery) throws(SecError) {
        if try deleteNamesTokens(query) { throw Self.tokenItemsAreReadOnly }
        if query.identity { return try Identities(items: self).delete(query) }
        do {
            let ids: [Int64]
            var refs: [[UInt8]] = []
            let selected: RowFilter
            if let ref = query.persistentRef {
                var row = try lookup(ref)
                if let found = row, try !isVisible(found) { row = nil }
                ids = row.map { [$0.id] } ?? []
                refs = row.map { [$0.persistentRef] } ?? []
                selected = RowFilter(
                    itemClass: Int(query.itemClass.rawValue), synchronizable: nil, persistentRef: row?.persistentRef)
            } else {
                // Without the index key the filters cannot be evaluated; refusing is the only answer
                // that never deletes the wrong item.
                let hashes = try queryHashes(query)
                selected = try filter(for: query, hashes: hashes, limit: nil)
                let headers = try store.headers(matching: selected)
                ids = headers.map(\.id)
                refs = headers.map(\.persistentRef)
            }
            guard !ids.isEmpty else { throw SecError.notFound }
            // Deletions are announced to every client of the Secret Service: only those of `default`'s
            // items, which every unlisted program sees anyway (docs/SECRET-SERVICE.md §4b).
            let announced =
                query.itemClass == .genericPassword && onChange != nil
                ? try Set(refsInDefaultGroup(selected, itemClass: query.itemClass)).intersection(refs) : []
            _ = try store.delete(ids: ids)
            for ref in refs where announced.contains(ref) { onChange?(.deleted(ref)) }
            if query.itemClass == .key { for ref in refs { keys.privateKeys.remove(ref: ref) } }
        } catch {
            throw EngineErrors.map(error)
        }
    }

    // MARK: - Update

    func rewrite(_ item: OpenItem, with changes: AttributeChanges) throws {
        if item.token != nil { throw Self.tokenItemsAreReadOnly }
        if item.itemClass == .key, !item.isExtractable { try Self.checkKeptIn(item, changes) }
        if item.itemClass == .key { keys.privateKeys.remove(ref: item.persistentRef) }
        let protection = changes.protection ?? item.protection
        let classKey = try keys.key(for: protection)
        let indexKey = try keys.requireIndexKey()
        var attributes = item.attributes
        for (name, value) in changes.attributes { attributes[name] = value }
        let synchronizable: Bool
        if let sync = changes.synchronizable {
            synchronizable = sync
        } else {
            synchronizable = item.row.synchronizable
        }
        if let control = changes.accessControl {
            if synchronizable { throw SecError.param("kSecAttrAccessControl cannot be given to a synchronizable item") }
            attributes[SecAttr.accessControl] = .data(control.encoded)
        } else if let control = try item.accessControl() {
            // The access control's protection is the item's: the one may not change without the other.
            if protection != control.protection {
                throw SecError.param("an item with kSecAttrAccessControl changes its accessibility through it")
            }
            if synchronizable { throw SecError.param("an item with kSecAttrAccessControl cannot be synchronizable") }
        }
        attributes[SecAttr.accessible] = .string(protection.pdmn)
        attributes[SecAttr.synchronizable] = .int(synchronizable ? 1 : 0)
        // The modification date is always strictly newer than before, even within one clock tick.
        var now = Clock.now()
        if case .date(let previous)? = item.attributes[SecAttr.modificationDate], now <= previous {
            now = previous.nextUp
        }
        attributes[SecAttr.modificationDate] = .date(now)
        let secret = try ApplicationPassword.secretForRewrite(item, changes)
        // A Secret Service item's attribute map follows its svce/acct (docs/SECRET-SERVICE.md §1).
        let secretService = item.secretService?.applying(secItemChanges: changes.attributes)
        let row = try ItemSealer.seal(
            ref: item.persistentRef, itemClass: item.itemClass, protection: protection,
            synchronizable: synchronizable, attributes: attributes, secret: secret,
            classKey: classKey, indexKey: indexKey, secretService: secretService)
        try store.replace(id: item.id, with: row)
    }

    /// A key that may not leave keeps its protection, sync state and kind: moving it to a weaker class
    /// (Always, whose key is unprotected on disk) would be a way out, and relabelling it as a public key
    /// would make its bytes look public.
    private static func checkKeptIn(_ item: OpenItem, _ changes: AttributeChanges) throws(SecError) {
        if let protection = changes.protection, protection != item.protection {
            throw .param("a non-extractable key keeps its accessibility (\(item.protection.pdmn))")
        }
        if let sync = changes.synchronizable, sync != item.row.synchronizable {
            throw .param("a non-extractable key keeps kSecAttrSynchronizable")
        }
        for name in [SecAttr.keyClass, SecAttr.keyType, SecAttr.keySizeInBits] {
            if let value = changes.attributes[name], value.integerValue != item.attributes[name]?.integerValue {
                throw .param("the class, type and size of a non-extractable key describe its bytes and cannot change")
            }
        }
    }

    /// `kSecAttrIsExtractable` only ever goes from true to false: a key once kept in cannot be let out.
    static func checkExtractability(_ changes: AttributeChanges, _ query: ItemQuery) throws(SecError) {
        guard query.itemClass == .key, let value = changes.attributes["extr"], value.integerValue != 0 else { return }
        throw .param("kSecAttrIsExtractable cannot be changed to true")
    }
}

extension OpenItem {
    /// Whether a key item may be exported: yes without the attribute (Apple's default), otherwise only
    /// when it says 1; anything unreadable counts as no.
    var isExtractable: Bool {
        guard let value = attributes["extr"] else { return true }
        return value.integerValue == 1
    }
}
