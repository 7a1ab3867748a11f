import LatchkeyEngine
import LatchkeyModel

/// The collections and aliases of a restored backup joined to the keychain's (docs/BACKUP.md §6).
extension SecretServiceState {
    /// `current` (nil: none stored yet, the initial state) with every collection of `restored` it does
    /// not have, by id, and every alias it does not have that names a collection there; a collection
    /// both have keeps this keychain's label. nil when `restored` is malformed, or when the join would
    /// hold more collections than the service allows. Encoded as `SecretServiceStorage` stores it.
    package static func mergedForRestore(current: SecValue?, restored: SecValue) -> SecValue? {
        guard let incoming = SecretServiceState(decoding: restored) else { return nil }
        var state: SecretServiceState
        if let current {
            guard let decoded = SecretServiceState(decoding: current) else { return nil }
            state = decoded
        } else {
            state = .initial
        }
        for collection in incoming.collections where state.collection(collection.id) == nil {
            // Ids become object paths and labels go to clients: the same rules as CreateCollection's.
            // `session` is the in-memory collection's: a stored one of that id would hide behind it.
            guard collection.id != SessionCollection.id,
                (try? SecretServiceKeychain.validateIdentifier(collection.id, "collection")) != nil,
                collection.label.utf8.count <= SecretServiceLimits.maxStringBytes
            else { return nil }
            state.collections.append(collection)
        }
        guard state.collections.count <= SecretServiceLimits.maxCollections else { return nil }
        for (alias, id) in incoming.aliases where state.aliases[alias] == nil && state.collection(id) != nil {
            guard (try? SecretServiceKeychain.validateIdentifier(alias, "alias")) != nil else { return nil }
            state.aliases[alias] = id
        }
        return state.encoded
    }
}
