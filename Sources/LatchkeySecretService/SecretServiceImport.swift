import LatchkeyEngine
import LatchkeyModel

/// One item of another Secret Service provider, to copy into the keychain (`latchkey migrate`, the
/// socket request `importSecretServiceItem`, docs/PROTOCOL.md). It is stored as the D-Bus `CreateItem`
/// stores an item, with the same caps, in the caller's first access group.
package struct SecretServiceImportItem: Sendable {
    /// What to do when the collection holds an item with the same attributes (up to a `username` that
    /// repeats `account`, as `CreateItem(replace)` compares them) whose label, secret or content type
    /// differ.
    package enum Conflict: String, Sendable {
        /// Leave the keychain's item as it is (the default).
        case keep
        /// Give the keychain's item the provider's label, secret and content type.
        case replace
        /// Add the provider's item beside it, a deliberate duplicate (docs/SECRET-SERVICE.md §3).
        case duplicate
    }

    /// The keychain collection: nil is the one the alias `default` names (`login`), otherwise the
    /// first collection with this label, created when there is none.
    package var collectionLabel: String?
    package var label: String
    package var attributes: SecretAttributes
    package var secret: SecretServiceSecret
    package var onConflict: Conflict
    /// Only say what would happen: nothing is written, no collection is created.
    package var dryRun: Bool

    /// The keys of the request's dictionary (docs/PROTOCOL.md, "importSecretServiceItem").
    package enum Key {
        package static let collection = "collection"
        package static let label = "label"
        package static let attributes = "attributes"
        package static let secret = "secret"
        package static let contentType = "contentType"
        package static let onConflict = "onConflict"
        package static let dryRun = "dryRun"
        /// Of the reply: the outcome's name.
        package static let outcome = "outcome"
        /// Of the reply: the collection's id (its label when a dry run would create it).
        package static let collectionID = "collectionID"
    }

    /// Reads the request's dictionary; errSecParam for a missing or malformed entry (unknown keys are
    /// refused too, so a misspelt option is never silently ignored).
    package init(decoding d: SecDictionary) throws(SecError) {
        let known: Set<String> = [
            Key.collection, Key.label, Key.attributes, Key.secret, Key.contentType, Key.onConflict, Key.dryRun,
        ]
        if let unknown = d.keys.first(where: { !known.contains($0) }) {
            throw .param("importSecretServiceItem: unknown key '\(unknown)'")
        }
        func string(_ key: String) throws(SecError) -> String? {
            guard let value = d[key] else { return nil }
            guard case .string(let s) = value else {
                throw .param("importSecretServiceItem: '\(key)' must be a string")
            }
            return s
        }
        switch d[Key.collection] {
        case nil: collectionLabel = nil
        case .string(let label)?: collectionLabel = label
        default: throw .param("importSecretServiceItem: 'collection' must be a string")
        }
        guard let label = try string(Key.label) else { throw .param("importSecretServiceItem: no 'label'") }
        self.label = label
        guard case .array(let flat)? = d[Key.attributes], flat.count % 2 == 0,
            flat.count / 2 <= SecretServiceLimits.maxAttributes
        else {
            throw .param("importSecretServiceItem: 'attributes' must be a list of name, value strings")
        }
        var pairs: [SecretAttributes.Pair] = []
        for k in stride(from: 0, to: flat.count, by: 2) {
            guard case .string(let name) = flat[k], case .string(let value) = flat[k + 1] else {
                throw .param("importSecretServiceItem: an attribute name or value is not a string")
            }
            pairs.append(.init(name, value))
        }
        guard let attributes = SecretAttributes(pairs) else {
            throw .param("importSecretServiceItem: an attribute name appears twice")
        }
        self.attributes = attributes
        guard case .data(let value)? = d[Key.secret] else { throw .param("importSecretServiceItem: no 'secret' data") }
        secret = SecretServiceSecret(value: value, contentType: try string(Key.contentType) ?? "text/plain")
        let conflict = try string(Key.onConflict) ?? Conflict.keep.rawValue
        guard let onConflict = Conflict(rawValue: conflict) else {
            throw .param("importSecretServiceItem: 'onConflict' must be keep, replace or duplicate")
        }
        self.onConflict = onConflict
        switch d[Key.dryRun] {
        case nil: dryRun = false
        case .bool(let b)?: dryRun = b
        default: throw .param("importSecretServiceItem: 'dryRun' must be a boolean")
        }
    }
}

/// What `SecretServiceKeychain.importItem` did (or, in a dry run, would do) with one item.
package enum SecretServiceImportOutcome: String, Sendable {
    /// A new item.
    case added
    /// An item with the same attributes, label, secret and content type was there: nothing written.
    case unchanged
    /// The item with the same attributes differs; it was left as it is (`Conflict.keep`).
    case kept
    /// The item with the same attributes took the provider's label, secret and content type.
    case replaced
    /// Added beside the item with the same attributes (`Conflict.duplicate`).
    case duplicated
}

extension Keychain {
    /// The keychain's Secret Service operations for `caller` (a socket client: `latchkey migrate`).
    package func secretService(for caller: Caller) -> SecretServiceKeychain {
        SecretServiceKeychain(keychain: self, caller: caller)
    }
}
