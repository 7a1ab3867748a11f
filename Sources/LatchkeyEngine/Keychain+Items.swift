#if canImport(Glibc)
import Glibc
#endif
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

extension Keychain {
    /// SecItemAdd.
    public func add(_ dictionary: SecDictionary, caller: Caller) throws(SecError) -> SecValue? {
        let request = try DictionaryParser.parseAdd(dictionary)
        return try locked { () throws(SecError) -> SecValue? in
            let store = try store()
            var result: SecValue?
            do {
                // The result is built before the transaction commits: a request whose result cannot be
                // given (the data of a key that may not leave, say) adds nothing.
                try store.transaction { result = try addLocked(request, caller: caller) }
            } catch {
                throw EngineErrors.map(error)
            }
            return result
        }
    }

    /// SecItemAdd with the keychain locked by the caller, inside a store transaction.
    func addLocked(_ parsed: AddRequest, caller: Caller) throws(SecError) -> SecValue? {
        var request = parsed
        switch request.reference {
        case .identity(let certificate, let key)?:
            return try addIdentity(certificate: certificate, key: key, request: request, caller: caller)
        case let reference?:
            try resolve(reference, into: &request, caller: caller)
        case nil:
            break
        }
        guard let item = try insert(request, caller: caller, open: !request.returns.isEmpty) else { return nil }
        return try ResultBuilder.value(for: item, returns: request.returns)
    }

    /// Seals and inserts one item; the opened item when `open` (for what SecItemAdd returns).
    func insert(_ request: AddRequest, caller: Caller, open: Bool) throws(SecError) -> OpenItem? {
        let store = try store()
        let protection = request.protection ?? request.itemClass.defaultProtection
        let classKey = try keys.key(for: protection)
        let indexKey = try keys.requireIndexKey()

        var attributes = request.attributes
        let group = attributes[SecAttr.accessGroup]?.stringValue ?? caller.accessGroups.first ?? Caller.defaultAccessGroup
        try checkGroup(group, caller)
        attributes[SecAttr.accessGroup] = .string(group)
        attributes[SecAttr.accessible] = .string(protection.pdmn)
        attributes[SecAttr.synchronizable] = .int(request.synchronizable ? 1 : 0)
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
            row = try ItemSealer.seal(ref: ref, itemClass: request.itemClass, protection: protection,
                                      synchronizable: request.synchronizable, attributes: attributes,
                                      secret: secret, classKey: classKey, indexKey: indexKey)
            id = try store.insert(row)
        } catch {
            throw EngineErrors.map(error)
        }
        if request.itemClass == .genericPassword { notifyItemChange(.added(row.persistentRef)) }
        guard open else { return nil }
        return try ItemSealer.open(
            StoreRow(id: id, persistentRef: row.persistentRef, itemClass: row.itemClass, protection: row.protection,
                     synchronizable: row.synchronizable, uniqueHash: row.uniqueHash, wrappedKey: row.wrappedKey,
                     metadata: row.metadata, secret: row.secret),
            keys: keys)
    }

    /// SecItemCopyMatching.
    public func copyMatching(_ dictionary: SecDictionary, caller: Caller) throws(SecError) -> SecValue? {
        let query = try prepared(DictionaryParser.parseQuery(dictionary, for: .copyMatching))
        return try locked { () throws(SecError) -> SecValue? in
            if query.identity {
                let pairs = try findIdentities(query, caller: caller, limit: query.limit.maximum)
                guard !pairs.isEmpty else { throw SecError.notFound }
                var values: [SecValue] = []
                for pair in pairs {
                    if let value = try ResultBuilder.value(for: pair, returns: query.returns) { values.append(value) }
                }
                return query.limit.returnsArray ? .array(values) : values.first
            }
            let items = try find(query, caller: caller, limit: query.limit.maximum)
            guard !items.isEmpty else { throw SecError.notFound }
            var values: [SecValue] = []
            for item in items {
                if let value = try ResultBuilder.value(for: item, returns: query.returns) { values.append(value) }
            }
            return query.limit.returnsArray ? .array(values) : values.first
        }
    }

    /// SecItemUpdate: every matching item, in one transaction; any failure changes nothing.
    public func update(_ queryDictionary: SecDictionary, _ changesDictionary: SecDictionary, caller: Caller) throws(SecError) {
        let query = try prepared(DictionaryParser.parseQuery(queryDictionary, for: .update))
        if query.identity { return try updateIdentities(query, changesDictionary, caller: caller) }
        let changes = try DictionaryParser.parseChanges(changesDictionary, itemClass: query.itemClass)
        if let group = changes.attributes[SecAttr.accessGroup]?.stringValue { try checkGroup(group, caller) }
        try checkExtractability(changes, query)
        try locked { () throws(SecError) in
            let store = try store()
            let items = try find(query, caller: caller, limit: nil)
            guard !items.isEmpty else { throw SecError.notFound }
            do {
                try store.transaction {
                    for item in items { try rewrite(item, with: changes, in: store) }
                }
                for item in items where item.itemClass == .genericPassword { notifyItemChange(.changed(item.persistentRef)) }
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    /// SecItemDelete. Works whatever the lock state: matching uses only the plaintext columns and the
    /// keyed hashes, never an item's class key, exactly as securityd matches on its columns.
    public func delete(_ dictionary: SecDictionary, caller: Caller) throws(SecError) {
        let query = try prepared(DictionaryParser.parseQuery(dictionary, for: .delete))
        if let group = query.attributes[SecAttr.accessGroup]?.stringValue { try checkGroup(group, caller) }
        if query.identity { return try deleteIdentities(query, caller: caller) }
        try locked { () throws(SecError) in
            let store = try store()
            do {
                let ids: [Int64]
                var refs: [[UInt8]] = []
                if let ref = query.persistentRef {
                    let row = try lookup(ref, in: store)
                    ids = row.map { [$0.id] } ?? []
                    refs = row.map { [$0.persistentRef] } ?? []
                } else {
                    // Without the index key the filters cannot be evaluated; refusing is the only answer
                    // that never deletes the wrong item.
                    let hashes = try queryHashes(query)
                    let headers = try store.headers(matching: filter(for: query, hashes: hashes, limit: nil))
                    ids = headers.map(\.id)
                    refs = headers.map(\.persistentRef)
                }
                guard !ids.isEmpty else { throw SecError.notFound }
                _ = try store.delete(ids: ids)
                if query.itemClass == .genericPassword { for ref in refs { notifyItemChange(.deleted(ref)) } }
                if query.itemClass == .key { for ref in refs { keys.privateKeys.remove(ref: ref) } }
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    // MARK: - Matching

    /// Finds and opens the items a query matches, in row order. The first matching row whose class key
    /// is not held ends the search with errSecInteractionNotAllowed, as securityd's scan does.
    func find(_ query: ItemQuery, caller: Caller, limit: Int?) throws(SecError) -> [OpenItem] {
        let store = try store()
        if let group = query.attributes[SecAttr.accessGroup]?.stringValue { try checkGroup(group, caller) }
        let rows: [StoreRow]
        do {
            if let ref = query.persistentRef {
                rows = try lookup(ref, in: store).map { [$0] } ?? []
            } else if keys.indexKey == nil && !query.attributes.isEmpty {
                // Without the index key (before first unlock, or after `lock --all`) no hash can be
                // computed. Only the classes whose keys are held (the Always classes) can be read at all,
                // so scan those and match the opened attributes; rows of locked classes cannot be
                // evaluated and are not visible.
                var scan = filter(for: query, hashes: [], limit: nil)
                let held = ProtectionClass.allCases.filter { keys.isAvailable($0) && (query.protection ?? $0) == $0 }
                scan.protections = held.map { Int($0.rawValue) }
                rows = try store.rows(matching: scan)
            } else {
                rows = try store.rows(matching: filter(for: query, hashes: try queryHashes(query), limit: limit))
            }
        } catch {
            throw EngineErrors.map(error)
        }
        var items: [OpenItem] = []
        for row in rows {
            let item = try ItemSealer.open(row, keys: keys)
            // The index found the row by keyed hashes; the opened attributes must agree, or the index was
            // tampered with and the row is not returned.
            guard ItemSealer.matches(item, query.attributes) else { continue }
            items.append(item)
            if let limit, items.count >= limit { break }
        }
        if keys.indexKey == nil, query.persistentRef == nil, !query.attributes.isEmpty, items.count < (limit ?? .max) {
            // Rows of locked classes could not be evaluated. If any exist, "not found" might be false,
            // and callers that delete what they cannot read would destroy credentials: say locked.
            var locked = filter(for: query, hashes: [], limit: 1)
            locked.protections = ProtectionClass.allCases
                .filter { !keys.isAvailable($0) && (query.protection ?? $0) == $0 }
                .map { Int($0.rawValue) }
            let unknown: Bool
            do {
                unknown = try !locked.protections!.isEmpty && !store.headers(matching: locked).isEmpty
            } catch {
                throw EngineErrors.map(error)
            }
            if unknown { throw SecError.locked }
        }
        return items
    }

    /// A parsed query made ready for matching: what its `kSecValueRef` names, and certificate names
    /// given as a full DER Name converted to the stored form, as Apple's client converts them.
    func prepared(_ parsed: ItemQuery) throws(SecError) -> ItemQuery {
        var query = parsed
        if let reference = query.reference { try apply(reference, to: &query) }
        if query.itemClass == .certificate {
            for name in [SecAttr.issuer, SecAttr.subject] {
                if let value = query.attributes[name] { query.attributes[name] = KeyMaterial.normalizedName(value) }
            }
        }
        return query
    }

    /// A key that may not leave keeps its protection, sync state and kind: moving it to a weaker class
    /// (Always, whose key is unprotected on disk) would be a way out, and relabelling it as a public key
    /// would make its bytes look public.
    private func checkKeptIn(_ item: OpenItem, _ changes: AttributeChanges) throws(SecError) {
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
    private func checkExtractability(_ changes: AttributeChanges, _ query: ItemQuery) throws(SecError) {
        guard query.itemClass == .key, let value = changes.attributes["extr"], value.integerValue != 0 else { return }
        throw .param("kSecAttrIsExtractable cannot be changed to true")
    }

    func queryHashes(_ query: ItemQuery) throws -> [[UInt8]] {
        guard !query.attributes.isEmpty else { return [] }
        let indexKey = try keys.requireIndexKey()
        return try query.attributes.sorted(by: { $0.key < $1.key }).map { name, value in
            guard let spec = query.itemClass.attribute(name) else { throw SecError.noSuchAttr(name, query.itemClass.name) }
            return try ItemSealer.attributeHash(spec, value, indexKey: indexKey)
        }
    }

    func filter(for query: ItemQuery, hashes: [[UInt8]], limit: Int?) -> RowFilter {
        RowFilter(itemClass: Int(query.itemClass.rawValue),
                  protections: query.protection.map { [Int($0.rawValue)] },
                  synchronizable: query.synchronizable,
                  allOfHashes: hashes,
                  limit: limit)
    }

    func lookup(_ ref: PersistentRef, in store: Store) throws -> StoreRow? {
        // Only UUID references are issued here; a legacy row-id reference can name none of our items.
        guard let uuid = ref.uuid, let row = try store.row(persistentRef: uuid),
              row.itemClass == Int(ref.itemClass.rawValue) else { return nil }
        return row
    }

    func checkGroup(_ group: String, _ caller: Caller) throws(SecError) {
        guard caller.mayUse(group: group) else {
            throw SecError(SecStatus.missingEntitlement, "access group '\(group)' is not one of the caller's groups")
        }
    }

    // MARK: - Update

    func rewrite(_ item: OpenItem, with changes: AttributeChanges, in store: Store) throws {
        if item.itemClass == .key, !Self.isExtractable(item) { try checkKeptIn(item, changes) }
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
        attributes[SecAttr.accessible] = .string(protection.pdmn)
        attributes[SecAttr.synchronizable] = .int(synchronizable ? 1 : 0)
        // The modification date is always strictly newer than before, even within one clock tick.
        var now = Clock.now()
        if case .date(let previous)? = item.attributes[SecAttr.modificationDate], now <= previous {
            now = previous.nextUp
        }
        attributes[SecAttr.modificationDate] = .date(now)
        let secret = try changes.data ?? ItemSealer.openSecret(item)
        // A Secret Service item's attribute map follows its svce/acct (docs/SECRET-SERVICE.md §1).
        let secretService = item.secretService?.applying(secItemChanges: changes.attributes)
        let row = try ItemSealer.seal(ref: item.persistentRef, itemClass: item.itemClass, protection: protection,
                                      synchronizable: synchronizable, attributes: attributes, secret: secret,
                                      classKey: classKey, indexKey: indexKey, secretService: secretService)
        try store.replace(id: item.id, with: row)
    }
}

/// Wall-clock time as `CFAbsoluteTime` (seconds since 2001-01-01 UTC).
enum Clock {
    static let unixToReferenceDate = 978_307_200.0

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) - unixToReferenceDate + Double(ts.tv_nsec) / 1e9
    }
}
