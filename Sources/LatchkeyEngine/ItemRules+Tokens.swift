import LatchkeyModel

/// Token items beside the store's (docs/TOKENS.md): a query sees both unless it names only tokens
/// (`kSecAttrAccessGroupToken`, or the id of a present token in `kSecAttrTokenID`). Every caller sees
/// them, whatever its access groups: the token group is readable by all, as on Apple systems.
extension ItemRules {
    /// The items of the present tokens, now (a snapshot: never waits for a token).
    var presentTokenItems: [TokenItem] { tokens?.items() ?? [] }

    /// Whether `query` can match no stored item: it names the token group (nothing is ever stored in
    /// it, `AccessGroupPolicy`), or a token id that a present token has.
    func namesTokensOnly(_ query: ItemQuery, present: [TokenItem]) -> Bool {
        if case .string(let group)? = query.attributes[SecAttr.accessGroup],
            Caller.sameAccessGroup(group, Caller.tokenAccessGroup)
        {
            return true
        }
        if case .string(let id)? = query.attributes[SecAttr.tokenID] {
            return present.contains { $0.tokenID.utf8.elementsEqual(id.utf8) }
        }
        return false
    }

    /// The token items `query` matches, as items the rules can return (at most `limit`).
    func tokenItems(_ query: ItemQuery, present: [TokenItem], limit: Int?) throws(SecError) -> [OpenItem] {
        guard limit.map({ $0 > 0 }) ?? true else { return [] }
        if query.synchronizable == true { return [] }
        if let protection = query.protection, protection != TokenItem.protection { return [] }
        var found: [OpenItem] = []
        for token in present where token.itemClass == query.itemClass {
            if let ref = query.persistentRef, ref.uuid != token.ref { continue }
            let item = OpenItem(token: token)
            guard ItemSealer.matches(item, query.attributes), try Self.passesItemFilters(item, query) else { continue }
            found.append(item)
            if let limit, found.count >= limit { break }
        }
        return found
    }

    /// Whether a delete names token items, which no request may delete (errSecParam, as Apple answers
    /// for a token that does not allow it).
    func deleteNamesTokens(_ query: ItemQuery) throws(SecError) -> Bool {
        let present = presentTokenItems
        guard !present.isEmpty else { return false }
        if query.persistentRef != nil || query.attributes[SecAttr.tokenID] != nil {
            var itemQuery = query
            itemQuery.identity = false
            if var ref = itemQuery.persistentRef {
                ref.identity = false
                itemQuery.persistentRef = ref
            }
            return try !tokenItems(itemQuery, present: present, limit: 1).isEmpty
        }
        return false
    }

    /// The items an update (or an identity's delete) changes: the stored ones only, unless the query names
    /// tokens (the token group, a token id, a token item's persistent reference), when the token items it
    /// matches are among them and the change is refused as read-only, as on Apple systems. Otherwise a
    /// query that happens to match a token item too would fail for the stored items it meant.
    func findForChange(_ query: ItemQuery, limit: Int?) throws(SecError) -> [OpenItem] {
        let present = presentTokenItems
        let namesTokens: Bool
        if case .string(let group)? = query.attributes[SecAttr.accessGroup],
            Caller.sameAccessGroup(group, Caller.tokenAccessGroup)
        {
            namesTokens = true
        } else if query.attributes[SecAttr.tokenID] != nil {
            namesTokens = true
        } else if let ref = query.persistentRef {
            namesTokens = present.contains { $0.ref == ref.uuid }
        } else {
            namesTokens = false
        }
        return try namesTokens ? find(query, limit: limit) : findStored(query, limit: limit)
    }

    /// The error for a change to a token item.
    static var tokenItemsAreReadOnly: SecError {
        SecError(SecStatus.param, "token items are read-only: the token provides them")
    }
}
