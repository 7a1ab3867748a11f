import LatchkeyEngine
import LatchkeyModel

#if canImport(Glibc)
    import Glibc
#endif

extension Keychain {
    /// The keychain's Secret Service operations (docs/SECRET-SERVICE.md).
    /// The keychain's Secret Service operations for a client the agent has not identified (an unlisted
    /// program: the `default` group only).
    package var secretService: SecretServiceKeychain {
        SecretServiceKeychain(keychain: self, caller: UnlistedBusClients().caller(ofBusClient: nil))
    }
}

/// Secret Service operations on a keychain: Secret Service items are generic passwords stored by the
/// same engine (docs/SECRET-SERVICE.md). Here are the collections, the aliases and the rules of the
/// items' lifecycle; how items and the state are sealed, stored and found is the engine's
/// (`SecretServiceStorage`), which every method goes through once, as one request put to the access
/// policy, under the keychain's mutex. None knows D-Bus.
/// Errors are `SecError`s: errSecInteractionNotAllowed when a needed key is not held,
/// errSecItemNotFound for an unknown collection or item, errSecParam for input over a cap.
package struct SecretServiceKeychain: Sendable {
    /// The keychain's own collection.
    package static let login = SecretServiceData.login

    let keychain: Keychain
    /// Who the requests are made for.
    let caller: Caller
    /// The user checks the calling bus client passed (docs/SECRET-SERVICE.md §4c).
    let userChecks: UserCheckGrants.Client?

    init(keychain: Keychain, caller: Caller, userChecks: UserCheckGrants.Client? = nil) {
        self.keychain = keychain
        self.caller = caller
        self.userChecks = userChecks
    }

    /// What unlocking the items `ids` needs the user to pass (their access control); nil when nothing.
    func userCheckRequirement(for ids: [[UInt8]]) throws(SecError) -> UserCheckRequirement? {
        try withStorage(.readAttributes, reading: true) { storage in try storage.userCheckRequirement(for: ids) }
    }

    /// Runs `body` with the engine's storage as one request of `kind` (see `Keychain.withSecretServiceStorage`).
    func withStorage<T>(
        _ kind: AccessKind, reading: Bool = false,
        _ body: (SecretServiceStorage) throws -> T
    ) throws(SecError) -> T {
        try keychain.withSecretServiceStorage(
            AccessRequest(kind, caller: caller, itemClass: .genericPassword),
            reading: reading, userChecks: userChecks, body)
    }

    /// The collections and aliases stored, or the initial ones.
    func loadState(_ storage: SecretServiceStorage) throws -> SecretServiceState {
        guard let value = try storage.loadState() else { return .initial }
        guard let state = SecretServiceState(decoding: value) else {
            throw SecError(SecStatus.decode, "the Secret Service state is malformed")
        }
        return state
    }

    /// `state` with the dates of `login` as clients see them: `login` is the keychain, created with it
    /// (the 0 it is stored with reads as the keychain's creation time) and modified no earlier.
    private func withLoginDates(_ state: SecretServiceState, _ storage: SecretServiceStorage) throws
        -> SecretServiceState
    {
        var state = state
        if let index = state.collections.firstIndex(where: { $0.id == Self.login }),
            state.collections[index].created == 0
        {
            let created = try storage.keychainCreationTime()
            state.collections[index].created = created
            state.collections[index].modified = max(state.collections[index].modified, created)
        }
        return state
    }

    // MARK: - Memory

    /// `plaintext` sealed under a key of the WhenUnlocked class and `salt`, for the Secret Service's
    /// memory only (`SessionCollection`); errSecInteractionNotAllowed while the class is locked.
    package func sealInMemory(_ plaintext: [UInt8], salt: [UInt8], aad: [UInt8]) throws(SecError) -> [UInt8] {
        try withStorage(.add, reading: true) { storage in try storage.sealInMemory(plaintext, salt: salt, aad: aad) }
    }

    /// What `sealInMemory` sealed; errSecInteractionNotAllowed while the WhenUnlocked class is locked.
    package func openInMemory(_ sealed: [UInt8], salt: [UInt8], aad: [UInt8]) throws(SecError) -> [UInt8] {
        try withStorage(.readData, reading: true) { storage in try storage.openInMemory(sealed, salt: salt, aad: aad) }
    }

    // MARK: - Lock state

    package func lockState() -> SecretServiceLockState {
        let held = keychain.heldKeys()
        return SecretServiceLockState(
            collectionsLocked: !held.classes.contains(.whenUnlocked), searchable: held.secretServiceLookup)
    }

    // MARK: - Collections and aliases

    /// The collections and aliases, with `login`'s dates. Before the first unlock, when collections were
    /// created but the key that seals their list was never held, the initial ones (`login` alone).
    package func state() throws(SecError) -> SecretServiceState {
        try withStorage(.readAttributes, reading: true) { storage in
            do {
                return try withLoginDates(try loadState(storage), storage)
            } catch let error as SecError where error.status == SecStatus.interactionNotAllowed {
                return try withLoginDates(.initial, storage)
            }
        }
    }

    /// Creates a collection labelled `label`, or, when `alias` already names a collection, returns
    /// that one (`created` false). A non-empty `alias` is set to the new collection.
    package func createCollection(label: String, alias: String) throws(SecError)
        -> (collection: SecretServiceCollection, created: Bool)
    {
        guard label.utf8.count <= SecretServiceLimits.maxStringBytes else { throw .param("label too long") }
        if !alias.isEmpty { try Self.validateIdentifier(alias, "alias") }
        return try withStorage(.update) { storage in
            var state = try loadState(storage)
            if !alias.isEmpty, let id = state.aliases[alias], let existing = state.collection(id) {
                return (existing, false)
            }
            guard state.collections.count <= SecretServiceLimits.maxCollections else {
                throw SecError.param("at most \(SecretServiceLimits.maxCollections) collections")
            }
            let now = UInt64(max(0, Clock.now() + Clock.unixToReferenceDate))
            let collection = SecretServiceCollection(
                id: Self.newIdentifier(for: label, taken: state),
                label: label, created: now, modified: now)
            state.collections.append(collection)
            if !alias.isEmpty { state.aliases[alias] = collection.id }
            try storage.saveState(state.encoded)
            return (collection, true)
        }
    }

    /// Sets a collection's label.
    package func setLabel(_ label: String, ofCollection id: String) throws(SecError) {
        guard label.utf8.count <= SecretServiceLimits.maxStringBytes else { throw .param("label too long") }
        try withStorage(.update) { storage in
            var state = try loadState(storage)
            guard let index = state.collections.firstIndex(where: { $0.id == id }) else { throw SecError.notFound }
            try storage.requireUnlocked()
            state.collections[index].label = label
            state.collections[index].modified = UInt64(max(0, Clock.now() + Clock.unixToReferenceDate))
            try storage.saveState(state.encoded)
        }
    }

    /// Points alias `name` at collection `id`, or removes it when `id` is nil.
    package func setAlias(_ name: String, to id: String?) throws(SecError) {
        try Self.validateIdentifier(name, "alias")
        try withStorage(.update) { storage in
            var state = try loadState(storage)
            if let id {
                guard state.collection(id) != nil else { throw SecError.notFound }
                guard state.aliases[name] != nil || state.aliases.count < SecretServiceLimits.maxAliases else {
                    throw SecError.param("at most \(SecretServiceLimits.maxAliases) aliases")
                }
                state.aliases[name] = id
            } else {
                state.aliases[name] = nil
            }
            try storage.saveState(state.encoded)
        }
    }

    /// Deletes a collection other than `login` with all its items, in one transaction; returns the
    /// ids of the deleted items.
    package func deleteCollection(_ id: String) throws(SecError) -> [[UInt8]] {
        guard id != Self.login else {
            throw SecError(SecStatus.unimplemented, "the login collection is the keychain and cannot be deleted")
        }
        return try withStorage(.delete) { storage in
            var state = try loadState(storage)
            guard state.collection(id) != nil else { throw SecError.notFound }
            state.collections.removeAll { $0.id == id }
            state.aliases = state.aliases.filter { $0.value != id }
            return try storage.deleteItems(ofCollection: id, savingState: state.encoded)
        }
    }
}
