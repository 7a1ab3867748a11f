import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// Copying an item of another Secret Service provider into the keychain (`latchkey migrate`,
/// docs/MIGRATING.md): `CreateItem`'s validation and storage, with the comparison that makes a second
/// run add nothing.
extension SecretServiceKeychain {
    /// Stores `item` unless its collection already holds it: returns what was done (in a dry run, what
    /// would be done) and the collection's id (in a dry run that would create it, its label).
    ///
    /// One request to the access policy (an add, in the caller's first group), under the engine's mutex:
    /// the look for an existing item and the write cannot be separated by another client's change.
    package func importItem(_ item: SecretServiceImportItem) throws(SecError)
        -> (outcome: SecretServiceImportOutcome, collection: String)
    {
        try Self.validate(label: item.label, attributes: item.attributes, secret: item.secret)
        if let label = item.collectionLabel, label.utf8.count > SecretServiceLimits.maxStringBytes {
            throw .param("collection label too long")
        }
        return try withStorage(.add) { storage in
            var state = try loadState(storage)
            try storage.requireUnlocked()
            guard let collection = try target(item, &state, storage) else {
                // A dry run into a collection that does not exist yet: everything in it would be new.
                return (.added, item.collectionLabel ?? "")
            }
            var differing: SecretServiceEntry?
            let query = item.attributes.withoutMirroredUsername.setting(Self.schemaAttribute, nil)
            for match in try storage.select(query, in: collection, collections: state.collectionIDs)
            where !match.locked {
                guard let entry = try storage.entry(match.id),
                    Self.sameItem(entry.data.attributes, item.attributes, exactly: false)
                else { continue }
                if try Self.holds(entry, item, storage) { return (.unchanged, collection) }
                if differing == nil { differing = entry }
            }
            let outcome: SecretServiceImportOutcome
            switch (differing, item.onConflict) {
            case (nil, _): outcome = .added
            case (_?, .keep): return (.kept, collection)
            case (_?, .replace): outcome = .replaced
            case (_?, .duplicate): outcome = .duplicated
            }
            guard !item.dryRun else { return (outcome, collection) }
            if outcome == .replaced, let existing = differing {
                // As CreateItem(replace) changes an item: its attributes, path and creation date stay.
                var changed = existing.genericAttributes
                changed[SecAttr.label] = .string(item.label)
                var data = existing.data
                data.contentType = item.secret.contentType
                try storage.reseal(existing, attributes: changed, data: data, secret: item.secret.value)
            } else {
                let data = SecretServiceData(
                    attributes: item.attributes, collection: collection, contentType: item.secret.contentType)
                _ = try storage.insert(label: item.label, data: data, secret: item.secret.value)
            }
            return (outcome, collection)
        }
    }

    /// The id of the collection `item` goes to, creating it (unless in a dry run: then nil) when no
    /// collection has its label. The default collection is the one `default` names, else `login`.
    private func target(
        _ item: SecretServiceImportItem, _ state: inout SecretServiceState, _ storage: SecretServiceStorage
    ) throws -> String? {
        guard let label = item.collectionLabel else {
            if let id = state.aliases["default"], state.collection(id) != nil { return id }
            return Self.login
        }
        // Labels compare byte for byte, as attributes do; `session` is the in-memory collection's id,
        // which hides a stored collection of that id (docs/SECRET-SERVICE.md §4a).
        if let found = state.collections.first(where: {
            $0.id != SessionCollection.id && $0.label.utf8.elementsEqual(label.utf8)
        }) {
            return found.id
        }
        guard !item.dryRun else { return nil }
        guard state.collections.count <= SecretServiceLimits.maxCollections else {
            throw SecError.param("at most \(SecretServiceLimits.maxCollections) collections")
        }
        let now = UInt64(max(0, Clock.now() + Clock.unixToReferenceDate))
        let collection = SecretServiceCollection(
            id: Self.newIdentifier(for: label, taken: state), label: label, created: now, modified: now)
        state.collections.append(collection)
        try storage.saveState(state.encoded)
        return collection.id
    }

    /// Whether the keychain's `entry` is `item` already: the same attributes (byte for byte), label,
    /// content type and secret. The secret of an item that needs a user check is never read here, so it
    /// counts as different, and this request cannot tell whether a guess was right.
    private static func holds(
        _ entry: SecretServiceEntry, _ item: SecretServiceImportItem, _ storage: SecretServiceStorage
    ) throws -> Bool {
        guard sameItem(entry.data.attributes, item.attributes, exactly: true),
            entry.label.utf8.elementsEqual(item.label.utf8),
            entry.data.contentType.utf8.elementsEqual(item.secret.contentType.utf8)
        else { return false }
        guard var stored = try? storage.secret(of: entry) else { return false }
        defer { SecretBytes.wipe(&stored) }
        return stored.withUnsafeBytes { a in
            item.secret.value.withUnsafeBytes { b in SecretBytes.constantTimeEquals(a, b) }
        }
    }

    /// libsecret's attribute naming an item's schema.
    static let schemaAttribute = "xdg:schema"

    /// Whether the keychain's attributes `stored` and the provider's `incoming` are the same item's:
    /// byte for byte (`exactly`) or as `CreateItem(replace)` compares them, and either way also when one
    /// of them lacks `xdg:schema` and they are the same without it. gnome-keyring reports the schema of an
    /// item stored without one (by a client that is not libsecret) only once it has read the keyring
    /// from its file again, so the same item is seen without it in one run and with it after a restart.
    static func sameItem(_ stored: SecretAttributes, _ incoming: SecretAttributes, exactly: Bool) -> Bool {
        func same(_ a: SecretAttributes, _ b: SecretAttributes) -> Bool { exactly ? a == b : a.namesSameItem(as: b) }
        if same(stored, incoming) { return true }
        guard stored[schemaAttribute] == nil || incoming[schemaAttribute] == nil else { return false }
        return same(stored.setting(schemaAttribute, nil), incoming.setting(schemaAttribute, nil))
    }
}
