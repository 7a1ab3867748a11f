import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// The keychain engine: what the agent's socket and its Secret Service ask of a keychain.
///
/// A thin front over the parts that do the work: `LockState` (the keybag, the class keys held and their
/// changes), `RequestGate` (the access policy, asked once per request), `ItemRules` (SecItem over sealed
/// rows), `Identities`, `KeyOperations`, and, for the Secret Service, `SecretServiceStorage`. It knows
/// nothing of sockets or buses. All methods are safe to call from several threads: one mutex serialises
/// the lock state and the store, and the slow Argon2id derivations and private-key operations run
/// outside it, so they never block other callers.
package final class Keychain: @unchecked Sendable {
    package let location: KeychainLocation
    let mutex = EngineMutex()
    let lockState: LockState
    let gate: RequestGate
    /// The tokens whose items join the store's (docs/TOKENS.md); nil: none.
    let tokens: (any TokenSource)?
    /// Told of every SecItem change of a generic password, with the mutex held (Secret Service signals).
    var itemChangeObserver: (@Sendable (KeychainItemChange) -> Void)?

    /// Opens the keychain in `location` if it exists. Damaged files are reported by every later call,
    /// never repaired or replaced.
    package convenience init(location: KeychainLocation) {
        self.init(location: location, policy: AccessGroupPolicy())
    }

    /// Opens the keychain in `location`, deciding access with `policy`.
    package init(location: KeychainLocation, policy: any AccessPolicy, tokens: (any TokenSource)? = nil) {
        self.location = location
        self.tokens = tokens
        gate = RequestGate(policy: policy)
        lockState = LockState(location: location, mutex: mutex)
    }

    /// Runs `body` with the item rules of the store and keys held now, seeing the items of `scope`, under
    /// the mutex. `checks` is the request's user-check session (nil: protected items cannot be asked for).
    func withItems<T>(
        scope: GroupScope = .all, checks: UserCheckSession? = nil, _ body: (ItemRules) throws(SecError) -> T
    ) throws(SecError) -> T {
        try lockState.withStore { (store, keys) throws(SecError) -> T in
            try body(
                ItemRules(
                    store: store, keys: keys, scope: scope, onChange: itemChangeObserver,
                    presence: PresenceGate(session: checks), tokens: tokens))
        }
    }

    /// Runs `body` with the item rules `caller` may use: the items of its groups only.
    func withItems<T>(
        for caller: Caller, checks: UserCheckSession? = nil, _ body: (ItemRules) throws(SecError) -> T
    ) throws(SecError) -> T {
        try withItems(scope: gate.scope(for: caller), checks: checks, body)
    }

    // MARK: - SecItem

    /// SecItemAdd. `checks`: the request's user checks (see `UserCheckSession`), for an item added by the
    /// reference of a protected key; nil for callers that cannot ask the user.
    package func add(_ dictionary: SecDictionary, caller: Caller, checks: UserCheckSession? = nil) throws(SecError)
        -> SecValue?
    {
        var request = try DictionaryParser.parseAdd(dictionary)
        try gate.admit(&request, caller: caller)
        // Before the mutex: the application password's derivation takes a fraction of a second.
        try ApplicationPassword.seal(&request, session: checks)
        return try withItems(for: caller, checks: checks) { items throws(SecError) in try items.add(request) }
    }

    /// SecItemCopyMatching. A protected item whose secret the query reads needs a user check:
    /// errSecAuthNeeded with the requirement in `checks` until the session's grant covers it
    /// (docs/ACCESS-CONTROL.md §3).
    package func copyMatching(_ dictionary: SecDictionary, caller: Caller, checks: UserCheckSession? = nil)
        throws(SecError) -> SecValue?
    {
        let query = try ItemRules.prepared(DictionaryParser.parseQuery(dictionary, for: .copyMatching))
        // A certificate's (or an identity's) reference carries the certificate's DER, its item's data.
        let readsData = query.returns.data || (query.returns.ref && (query.itemClass == .certificate || query.identity))
        try gate.admit(readsData ? .readData : .readAttributes, query, caller: caller)
        return try withItems(for: caller, checks: checks) { items throws(SecError) in try items.copy(query) }
    }

    /// SecItemUpdate: every matching item, in one transaction; any failure changes nothing.
    package func update(
        _ queryDictionary: SecDictionary, _ changesDictionary: SecDictionary, caller: Caller,
        checks: UserCheckSession? = nil
    ) throws(SecError) {
        let query = try ItemRules.prepared(DictionaryParser.parseQuery(queryDictionary, for: .update))
        if query.identity {
            let changes = try Identities.changes(changesDictionary)
            try gate.admit(.update, query, changes: [changes.certificate, changes.key], caller: caller)
            return try withItems(for: caller, checks: checks) { items throws(SecError) in
                try Identities(items: items).update(query, changes)
            }
        }
        let changes = try DictionaryParser.parseChanges(changesDictionary, itemClass: query.itemClass)
        try gate.admit(.update, query, changes: [changes], caller: caller)
        try ItemRules.checkExtractability(changes, query)
        try withItems(for: caller, checks: checks) { items throws(SecError) in try items.update(query, changes) }
    }

    /// SecItemDelete. Works whatever the lock state (see `ItemRules.delete`).
    package func delete(_ dictionary: SecDictionary, caller: Caller) throws(SecError) {
        let query = try ItemRules.prepared(DictionaryParser.parseQuery(dictionary, for: .delete))
        try gate.admit(.delete, query, caller: caller)
        try withItems(for: caller) { items throws(SecError) in try items.delete(query) }
    }

    /// A private-key operation for a caller: the key stays here, only the result leaves. The key's
    /// class key must be held (errSecInteractionNotAllowed otherwise), as for reading the item.
    package func keyOperation(_ request: SecDictionary, caller: Caller, checks: UserCheckSession? = nil)
        throws(SecError) -> SecValue
    {
        let operation = try KeyOperations.Request(parsing: request)
        _ = try gate.admit(AccessRequest(operation.accessKind, caller: caller, itemClass: .key))
        // Only opening the item needs the mutex; the cryptography runs outside it.
        var key = try withItems(for: caller, checks: checks) { items throws(SecError) in
            try KeyOperations.open(operation, in: items)
        }
        defer { SecretBytes.wipe(&key.material) }
        if let token = key.token {
            guard let tokens else { throw SecError.notFound }
            return .data(
                try tokens.perform(
                    TokenKeyRequest(
                        item: token, operation: operation.operation, algorithm: operation.algorithm,
                        input: operation.input, peer: operation.exchange.peer,
                        requestedSize: operation.exchange.requestedSize, sharedInfo: operation.exchange.sharedInfo,
                        caller: caller, prompt: operation.prompt, authenticationUI: operation.authenticationUI,
                        pin: operation.pin)))
        }
        let (result, imported) = try KeyOperations.perform(operation, with: key)
        if let imported {
            _ = try? withItems(for: caller) { items throws(SecError) in
                KeyOperations.keep(imported, for: key, in: items)
            }
        }
        return result
    }

    /// `SecKeyCreateRandomKey` for a key stored at once (see `KeyOperations.generate`); returns the
    /// private key's reference.
    package func generateKey(_ parameters: SecDictionary, caller: Caller) throws(SecError) -> SecValue {
        if let tokenID = parameters[SecAttr.tokenID] {
            return try generateOnToken(parameters, tokenID: tokenID, caller: caller)
        }
        var privateMaterial: [UInt8] = []
        #if DEBUG
            var generated: UInt?
        #endif
        defer {
            #if DEBUG
                // The requests share the key's buffer; the wipe reaches it only once they are gone (a wipe of
                // a shared array zeroes a fresh copy instead). Tests run debug builds, so a regression fails there.
                privateMaterial.withUnsafeMutableBufferPointer {  // mutable: a shared buffer is copied here
                    assert(
                        generated == nil || UInt(bitPattern: $0.baseAddress) == generated,
                        "generateKey: the private key's buffer is still shared when it is wiped")
                }
            #endif
            SecretBytes.wipe(&privateMaterial)
        }
        // `pair` lives in this scope only, so it is released before the deferred wipe runs.
        let reference: SecValue
        do {
            var pair: KeyOperations.GeneratedPair
            (pair, privateMaterial) = try KeyOperations.generate(parameters)
            #if DEBUG
                generated = privateMaterial.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
            #endif
            try ApplicationPassword.checkSupported(pair.privateRequest.accessControl, itemClass: .key)
            try gate.admit(&pair.privateRequest, caller: caller)
            if var publicRequest = pair.publicRequest {
                try gate.admit(&publicRequest, caller: caller)
                pair.publicRequest = publicRequest
            }
            reference = try withItems(for: caller) { [pair] items throws(SecError) in
                try KeyOperations.store(pair, in: items)
            }
        }
        return reference
    }

    /// `SecKeyCreateRandomKey` with `kSecAttrTokenID` (docs/TOKENS.md §4): the pair is made on the token
    /// and stays there; what comes back is the new private key's reference, a token item.
    private func generateOnToken(_ parameters: SecDictionary, tokenID: SecValue, caller: Caller) throws(SecError)
        -> SecValue
    {
        guard case .string(let id) = tokenID else { throw .param("kSecAttrTokenID must be a string") }
        // Apple's kSecAttrTokenIDSecureEnclave: a PC has none, and a key made anywhere else would not have
        // the protection its caller asked for.
        guard id != "com.apple.setoken" else {
            throw SecError(SecStatus.unimplemented, "kSecAttrTokenIDSecureEnclave: there is no Secure Enclave")
        }
        guard let tokens else { throw SecError(SecStatus.itemNotFound, "kSecAttrTokenID: no token \(id) is present") }
        guard let type = parameters[SecAttr.keyType]?.integerValue,
            let size = parameters[SecAttr.keySizeInBits]?.integerValue
        else { throw .param("kSecAttrKeyType or kSecAttrKeySizeInBits is missing or not a number") }
        let privateParameters = try KeyGeneration.parameters(parameters, half: SecKeys.privateKeyAttributes)
        // The token's group is written by nobody; making a key on a token is using it, as on Apple systems.
        _ = try gate.admit(AccessRequest(.useKey, caller: caller, itemClass: .key))
        let item = try tokens.generate(
            TokenKeyGeneration(
                tokenID: id, keyType: type, sizeInBits: size, label: privateParameters[SecAttr.label]?.stringValue,
                tag: privateParameters[SecAttr.applicationTag]?.dataValue, caller: caller,
                prompt: parameters[SecKeys.useOperationPrompt]?.stringValue,
                authenticationUI: parameters.tokenAuthenticationUI, pin: try parameters.smartCardPIN()))
        guard let reference = try ResultBuilder.reference(for: OpenItem(token: item)) else {
            throw SecError(SecStatus.internalComponent, "the new token key has no reference")
        }
        return reference.secValue
    }

    /// Calls `observer` after every SecItem change of a generic password, so the Secret Service can
    /// emit ItemCreated/ItemChanged/ItemDeleted. It runs on the caller's thread with the keychain's
    /// mutex held: it must only queue work (calling back into this keychain from it would deadlock).
    /// One observer per keychain; nil removes it.
    package func observeItemChanges(_ observer: (@Sendable (KeychainItemChange) -> Void)?) {
        mutex.withLock { itemChangeObserver = observer }
    }

    /// How many commits the stores of this process have made (`CommitCount`): equal readings mean the
    /// database did not change in between, readings one apart that exactly one transaction committed.
    package static var commitStamp: UInt64 { CommitCount.current }

    // MARK: - Lock state

    /// Creates a keychain protected by `password` and leaves it unlocked.
    package func create(
        password: SecretBytes, parameters: Argon2Parameters = .default,
        allowWeakParameters: Bool = false
    ) throws(SecError) {
        try lockState.create(password: password, parameters: parameters, allowWeakParameters: allowWeakParameters)
    }

    /// Derives the master key from `password` and unlocks every password-protected class.
    /// A wrong password is errSecAuthFailed and changes nothing.
    package func unlock(password: SecretBytes) throws(SecError) {
        try lockState.unlock(password: password)
    }

    /// Checks that `password` is the keychain password without changing what is locked (errSecAuthFailed
    /// when it is not): the administrator's proof before a connection may use other access groups.
    package func verify(password: SecretBytes) throws(SecError) {
        try lockState.verify(password: password)
    }

    /// Unlocks with an already derived master key (the PAM hand-off delivers one).
    package func unlock(masterKey: SecretBytes) throws(SecError) {
        try lockState.unlock(masterKey: masterKey)
    }

    /// The PAM hand-off: a master key and, when pam_latchkey could read the machine secret, this user's
    /// device factor (see `LockState.handOff`). A wrong master key is errSecAuthFailed and changes nothing.
    package func handOff(masterKey: SecretBytes, deviceFactor factor: SecretBytes?) throws(SecError) {
        try lockState.handOff(masterKey: masterKey, deviceFactor: factor)
    }

    /// Drops the WhenUnlocked family of class keys (screen lock), or all password-protected ones (logout).
    /// Returns whether any key was held, so callers can tell a lock from a no-op.
    @discardableResult
    package func lock(all: Bool) -> Bool {
        let wasHeld = lockState.lock(all: all)
        // A token's login goes with the keychain's keys (docs/TOKENS.md, "The PIN").
        tokens?.keychainLocked()
        return wasHeld
    }

    /// Re-wraps the class keys under a new password. Items are not re-encrypted. The keybag is replaced
    /// atomically, so a crash leaves one that opens with the old or the new password.
    package func changePassword(
        old: SecretBytes, new: SecretBytes, parameters: Argon2Parameters? = nil,
        allowWeakParameters: Bool = false
    ) throws(SecError) {
        try lockState.changePassword(
            old: old, new: new, parameters: parameters, allowWeakParameters: allowWeakParameters)
    }

    /// The state of the keychain and of every class key.
    package func status() -> KeychainStatus {
        lockState.status()
    }

    /// Which keys are held now (cheaper than `status`, which also reads the out-of-step marker).
    package func heldKeys() -> HeldKeys {
        lockState.heldKeys()
    }

    /// How many times class keys were dropped (a lock of any kind, a replaced keybag) since the agent
    /// started: what was granted before a lock compares it to refuse itself after one.
    package func lockCount() -> UInt64 {
        lockState.dropCount()
    }

    /// Registers (or with nil removes) the one observer of lock-state changes. It runs on the thread
    /// that changed the state, after the engine's mutex is released, and must return quickly.
    package func observeLockState(_ observer: (@Sendable () -> Void)?) {
        lockState.observe(observer)
    }
}
