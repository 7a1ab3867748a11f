import LatchkeyModel

/// The collections and aliases as a value, which the engine seals and stores under its key
/// (docs/SECRET-SERVICE.md §4; `SecretServiceStorage.saveState`).
extension SecretServiceState {
    var encoded: SecValue {
        .dictionary([
            "collections": .array(
                collections.map {
                    .dictionary([
                        "id": .string($0.id), "label": .string($0.label),
                        "created": .int(Int64(clamping: $0.created)), "modified": .int(Int64(clamping: $0.modified)),
                    ])
                }),
            "aliases": .dictionary(aliases.mapValues { .string($0) }),
        ])
    }

    /// Decodes the stored form; nil when it is malformed. A state without `login` gets it back first.
    init?(decoding value: SecValue) {
        guard case .dictionary(let d) = value, case .array(let list)? = d["collections"],
            case .dictionary(let aliases)? = d["aliases"]
        else { return nil }
        var collections: [SecretServiceCollection] = []
        for entry in list {
            guard case .dictionary(let c) = entry, case .string(let id)? = c["id"],
                case .string(let label)? = c["label"],
                case .int(let created)? = c["created"], case .int(let modified)? = c["modified"],
                !collections.contains(where: { $0.id == id })
            else { return nil }
            collections.append(
                SecretServiceCollection(
                    id: id, label: label, created: UInt64(clamping: created),
                    modified: UInt64(clamping: modified)))
        }
        if !collections.contains(where: { $0.id == SecretServiceKeychain.login }) {
            collections.insert(SecretServiceState.initial.collections[0], at: 0)
        }
        var names: [String: String] = [:]
        for (name, target) in aliases {
            guard case .string(let id) = target else { return nil }
            names[name] = id
        }
        self.init(collections: collections, aliases: names)
    }

    /// The ids of every collection, for the engine's lookups.
    var collectionIDs: [String] { collections.map(\.id) }
}
