import LatchkeyModel
import LatchkeyStore

/// Finding rows for a query: by persistent reference, by keyed hashes, or, without the index key, by
/// opening what can be opened.
extension ItemRules {
    /// Finds and opens the items a query matches, in row order. The first matching row whose class key
    /// is not held ends the search with errSecInteractionNotAllowed, as securityd's scan does.
    func find(_ query: ItemQuery, limit: Int?) throws(SecError) -> [OpenItem] {
        let present = presentTokenItems
        if !present.isEmpty, namesTokensOnly(query, present: present) {
            return try tokenItems(query, present: present, limit: limit)
        }
        var items = try findStored(query, limit: limit)
        if !present.isEmpty {
            items += try tokenItems(query, present: present, limit: limit.map { $0 - items.count })
        }
        return items
    }

    /// `find` among the store's rows only.
    func findStored(_ query: ItemQuery, limit: Int?) throws(SecError) -> [OpenItem] {
        let rows: [StoreRow]
        do {
            if let ref = query.persistentRef {
                rows = try lookup(ref).map { [$0] } ?? []
            } else if keys.indexKey == nil && !query.attributes.isEmpty {
                // Without the index key (before first unlock, or after `lock --all`) no hash can be
                // computed. Only the classes whose keys are held (the Always classes) can be read at all,
                // so scan those and match the opened attributes; rows of locked classes cannot be
                // evaluated and are not visible.
                // Every row is opened and checked against the scope below (no hash of `agrp` either).
                var scan = unscopedFilter(for: query, hashes: [], limit: nil)
                let held = ProtectionClass.allCases.filter { keys.isAvailable($0) && (query.protection ?? $0) == $0 }
                scan.protections = held.map { Int($0.rawValue) }
                rows = try store.rows(matching: scan)
            } else {
                // Filters on the opened item come after the index: a limit there would cut too early.
                let indexLimit = query.hasItemFilters ? nil : limit
                rows = try store.rows(
                    matching: try filter(for: query, hashes: try queryHashes(query), limit: indexLimit))
            }
        } catch {
            throw EngineErrors.map(error)
        }
        var items: [OpenItem] = []
        for row in rows {
            let item = try ItemSealer.open(row, keys: keys)
            // The index found the row by keyed hashes; the opened attributes must agree, or the index was
            // tampered with and the row is not returned.
            // The same goes for the access group, which the scope's hashes selected (or nothing did: a
            // lookup by reference, a scan without the index key).
            guard isVisible(item), ItemSealer.matches(item, query.attributes), try Self.passesItemFilters(item, query)
            else { continue }
            items.append(item)
            if let limit, items.count >= limit { break }
        }
        if keys.indexKey == nil, query.persistentRef == nil, !query.attributes.isEmpty, items.count < (limit ?? .max) {
            // Rows of locked classes could not be evaluated. If any exist, "not found" might be false,
            // and callers that delete what they cannot read would destroy credentials: say locked.
            // Rows of other groups cannot be told apart without the index key either: they count too.
            var locked = unscopedFilter(for: query, hashes: [], limit: 1)
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

    /// The filters securityd applies to each item it has read (SecItemServer.c, `SecServerMatch_Item`).
    ///
    /// `kSecMatchHostOrSubdomainOfHost`: the server is a string equal to the host, or ending with "." and
    /// the host; compared code unit by code unit, as `CFEqual` and `CFStringHasSuffix` do (no case folding,
    /// no Unicode normalisation), and a server stored as data never matches.
    /// `kSecMatchEmailAddressIfPresent`: one of the certificate's addresses (subject emailAddress and
    /// subjectAltName rfc822Name) equals the given one without regard to case; a certificate without an
    /// address does not match.
    static func passesItemFilters(_ item: OpenItem, _ query: ItemQuery) throws(SecError) -> Bool {
        if let host = query.hostOrSubdomain {
            guard case .string(let server)? = item.attributes[SecAttr.server] else { return false }
            let serverUnits = Array(server.utf16), hostUnits = Array(host.utf16)
            let subdomainSuffix = Array(".".utf16) + hostUnits
            guard serverUnits == hostUnits || serverUnits.reversed().starts(with: subdomainSuffix.reversed()) else {
                return false
            }
        }
        if let address = query.emailAddress {
            guard item.itemClass == .certificate else { return false }
            let der = try ItemSealer.openSecret(item)  // a certificate: public, nothing to wipe
            let wanted = address.lowercased()
            guard try KeyMaterial.certificate(der).emailAddresses.contains(where: { $0.lowercased() == wanted }) else {
                return false
            }
        }
        return true
    }

    /// A parsed query made ready for matching: what its `kSecValueRef` names, and certificate names
    /// given as a full DER Name converted to the stored form, as Apple's client converts them.
    static func prepared(_ parsed: ItemQuery) throws(SecError) -> ItemQuery {
        var query = parsed
        if let reference = query.reference { try apply(reference, to: &query) }
        if query.itemClass == .certificate {
            for name in [SecAttr.issuer, SecAttr.subject] {
                if let value = query.attributes[name] { query.attributes[name] = KeyMaterial.normalizedName(value) }
            }
        }
        return query
    }

    func queryHashes(_ query: ItemQuery) throws -> [[UInt8]] {
        guard !query.attributes.isEmpty else { return [] }
        let indexKey = try keys.requireIndexKey()
        return try query.attributes.sorted(by: { $0.key < $1.key }).map { name, value in
            guard let spec = query.itemClass.attribute(name) else {
                throw SecError.noSuchAttr(name, query.itemClass.name)
            }
            return try ItemSealer.attributeHash(spec, value, indexKey: indexKey)
        }
    }

    /// The rows `query` selects by `hashes`, within the request's scope: rows of other access groups are
    /// not selected (the keyed hashes of the scope's `agrp` values, which need the index key).
    func filter(for query: ItemQuery, hashes: [[UInt8]], limit: Int?) throws(SecError) -> RowFilter {
        var filter = unscopedFilter(for: query, hashes: hashes, limit: limit)
        filter.anyOfHashes = try scopeHashes(query.itemClass)
        return filter
    }

    /// The same rows in every group: only for rows that are opened and checked with `isVisible`
    /// afterwards, or counted without being returned.
    func unscopedFilter(for query: ItemQuery, hashes: [[UInt8]], limit: Int?) -> RowFilter {
        RowFilter(
            itemClass: Int(query.itemClass.rawValue),
            protections: query.protection.map { [Int($0.rawValue)] },
            synchronizable: query.synchronizable,
            allOfHashes: hashes,
            limit: limit)
    }

    /// The keyed hashes of the scope's groups (`agrp` values) for rows of `itemClass`; nil for every group.
    /// With the index key, or after `lock --all` with the copy of it the agent keeps for lookups
    /// (`SecretServiceLookupKeys`): a hash here only narrows what a request reaches, so the kept key
    /// serves as for any lookup. Before the first unlock there is neither, and a scope cannot be applied
    /// to unopened rows: errSecInteractionNotAllowed.
    func scopeHashes(_ itemClass: ItemClass) throws(SecError) -> [[UInt8]]? {
        guard case .only(let groups) = scope else { return nil }
        guard let spec = itemClass.attribute(SecAttr.accessGroup) else { return [] }
        guard let indexKey = keys.indexKey ?? keys.secretServiceLookup?.indexKey else { throw SecError.locked }
        var hashes: [[UInt8]] = []
        hashes.reserveCapacity(groups.count)
        for group in groups {
            do {
                hashes.append(try ItemSealer.rememberedAttributeHash(spec, .string(group), indexKey: indexKey))
            } catch {
                throw EngineErrors.map(error)
            }
        }
        return hashes
    }

    /// The persistent references of the rows `filter` selects that are in the group `default` (by the
    /// keyed hash of their `agrp`), whatever the request's scope; none when no index key is held.
    func refsInDefaultGroup(_ filter: RowFilter, itemClass: ItemClass) throws -> [[UInt8]] {
        guard let spec = itemClass.attribute(SecAttr.accessGroup),
            let indexKey = keys.indexKey ?? keys.secretServiceLookup?.indexKey
        else { return [] }
        var narrowed = filter
        narrowed.anyOfHashes = [
            try ItemSealer.attributeHash(spec, .string(Caller.defaultAccessGroup), indexKey: indexKey)
        ]
        narrowed.limit = nil
        return try store.headers(matching: narrowed).map(\.persistentRef)
    }

    /// Whether an opened item belongs to a group of the request's scope (its sealed `agrp`, which no
    /// index can change).
    func isVisible(_ item: OpenItem) -> Bool {
        guard case .only = scope else { return true }
        guard case .string(let group)? = item.attributes[SecAttr.accessGroup] else { return false }
        return scope.contains(group)
    }

    /// Whether a row found by its persistent reference (not opened) belongs to a group of the scope: its
    /// keyed `agrp` hash. Deletes work without the item's class key, so they cannot open it.
    func isVisible(_ row: StoreRow) throws(SecError) -> Bool {
        guard case .only = scope else { return true }
        guard let raw = UInt8(exactly: row.itemClass), let itemClass = ItemClass(rawValue: raw),
            let hashes = try scopeHashes(itemClass)
        else { return false }
        do {
            let filter = RowFilter(
                itemClass: row.itemClass, synchronizable: nil, persistentRef: row.persistentRef,
                anyOfHashes: hashes, limit: 1)
            return try !store.headers(matching: filter).isEmpty
        } catch {
            throw EngineErrors.map(error)
        }
    }

    func lookup(_ ref: PersistentRef) throws -> StoreRow? {
        // Only UUID references are issued here; a legacy row-id reference can name none of our items.
        guard let uuid = ref.uuid, let row = try store.row(persistentRef: uuid),
            row.itemClass == Int(ref.itemClass.rawValue)
        else { return nil }
        return row
    }
}
