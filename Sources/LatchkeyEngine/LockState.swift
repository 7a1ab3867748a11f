import LatchkeyCrypto
import LatchkeyKeybag
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// The keychain's lock state: its keybag (and the file it was read from), the class keys held, the
/// device factor from the PAM hand-off, and the store those keys open. Creating, unlocking (by password,
/// master key or hand-off), locking and re-wrapping change it; `status` reports it; one observer hears
/// of every change of which keys are held.
///
/// Everything here is guarded by the engine's mutex, which the item code shares: it borrows the store
/// and the keys through `withStore`. The slow Argon2id derivations run outside the mutex, so an unlock
/// never blocks other callers; each re-checks afterwards that the keybag did not change meanwhile.
final class LockState: @unchecked Sendable {
    let location: KeychainLocation
    private let mutex: EngineMutex
    /// The class keys held now (mutex held).
    private(set) var keys = KeyState()
    /// How many times keys were dropped (mutex held): a user check's right that outlives a lock must not
    /// (docs/ACCESS-CONTROL.md §7), and its holder compares this count rather than hear each lock.
    private var drops: UInt64 = 0
    private var keybag: Keybag?
    /// Identity of the keybag file `keybag` was read from, to notice a replacement by another
    /// process (pam_latchkey changing the password, or creating the keybag at first login).
    private var keybagFileIdentity: FileIdentity?
    /// The device factor from pam_latchkey, once one has opened this keybag's device classes. Kept
    /// for the agent's life so `latchkey unlock` can reopen the ThisDeviceOnly classes.
    private var deviceFactor: SecretBytes?
    /// Told after any change of which class keys are held (lock, unlock, hand-off, a replaced keybag),
    /// outside the mutex. Set once by the agent's Secret Service, which announces `Locked` changes.
    private var observer: (@Sendable () -> Void)?
    private var storage: Store?
    /// A damaged keybag or store: every operation reports it, naming the file. Nothing is overwritten.
    private var problem: SecError?
    /// The one Argon2id derivation at a time (create, unlock, password change); taken outside the mutex.
    private let derivations = DerivationSlot()

    /// Opens the keychain in `location` if it exists. Damaged files are reported by every later call,
    /// never repaired or replaced.
    init(location: KeychainLocation, mutex: EngineMutex) {
        self.location = location
        self.mutex = mutex
        reload()
    }

    /// Runs `body` with the store and the keys held now, under the engine's mutex.
    func withStore<T>(_ body: (Store, KeyState) throws(SecError) -> T) throws(SecError) -> T {
        try mutex.locked { () throws(SecError) -> T in try body(try store(), keys) }
    }

    /// `withStore`, with the lock count (`dropCount`) read under the same hold.
    func withStoreCountingLocks<T>(_ body: (Store, KeyState, UInt64) throws(SecError) -> T) throws(SecError) -> T {
        try mutex.locked { () throws(SecError) -> T in try body(try store(), keys, drops) }
    }

    /// How many times keys were dropped so far (a lock, a replaced keybag).
    func dropCount() -> UInt64 {
        mutex.withLock { drops }
    }

    /// Which keys are held now.
    func heldKeys() -> HeldKeys {
        mutex.withLock {
            HeldKeys(
                classes: Set(ProtectionClass.allCases.filter(keys.isAvailable)), indexKey: keys.indexKey != nil,
                secretServiceLookup: keys.secretServiceLookup != nil)
        }
    }

    private func reload() {
        problem = nil
        do {
            guard fileExists(location.keybagPath) else {
                // An empty database alone is what a creation interrupted before its keybag leaves: it
                // holds nothing, and the next creation uses it.
                if fileExists(location.databasePath), !Store.holdsNothing(path: location.databasePath) {
                    problem = SecError(
                        SecStatus.invalidKeychain,
                        "\(location.databasePath) exists but its keybag \(location.keybagPath) is missing; "
                            + "restore the keybag (nothing was changed)")
                }
                return
            }
            keybagFileIdentity = FileIdentity(path: location.keybagPath)
            let bag = try Keybag.load(path: location.keybagPath)
            keybag = bag
            do {
                try keys.install(bag.unlockAlwaysClasses(deviceFactor: deviceFactor).keys)
            } catch KeybagError.wrongDevice {
                try keys.install(bag.unlockAlwaysClasses().keys)
            }
            // Every creator writes the database before the keybag, so a keybag without one means the
            // database was lost: a new, empty one would silently stand in for every item.
            storage = try Store(path: location.databasePath, mustExist: true)
        } catch StoreError.missingDatabase {
            problem = SecError(
                SecStatus.invalidKeychain,
                "keychain database \(location.databasePath) is missing, but its keybag \(location.keybagPath) is "
                    + "there: restore the database (and its -wal file, if it had one) from a backup; nothing was "
                    + "created")
        } catch {
            problem = EngineErrors.map(error)
        }
    }

    /// The store, or the reason there is none (mutex held).
    private func store() throws(SecError) -> Store {
        if let problem { throw problem }
        guard let storage else {
            throw SecError(
                SecStatus.noDefaultKeychain, "no keychain in \(location.directory); create one with 'latchkey init'")
        }
        return storage
    }

    // MARK: - Lifecycle

    /// Creates a keychain protected by `password` and leaves it unlocked.
    func create(password: SecretBytes, parameters: Argon2Parameters, allowWeakParameters: Bool) throws(SecError) {
        try mutex.locked { () throws(SecError) in
            if let problem { throw problem }
            guard keybag == nil else {
                throw SecError(SecStatus.duplicateKeychain, "a keychain already exists in \(location.directory)")
            }
        }
        // Argon2id takes a few hundred milliseconds: do it without holding the mutex.
        let created = try derivations.run { () throws(SecError) -> (Keybag, ClassKeys) in
            do {
                return try Keybag.create(
                    password: password, parameters: parameters,
                    allowWeakParameters: allowWeakParameters)
            } catch {
                throw EngineErrors.map(error)
            }
        }
        try mutex.locked { () throws(SecError) in
            if let problem { throw problem }
            guard keybag == nil else {
                throw SecError(SecStatus.duplicateKeychain, "a keychain already exists in \(location.directory)")
            }
            try makeDirectory(location.directory)
            // The database first, the keybag last: a keybag is what makes a keychain, and one without its
            // database is refused as a lost database (`reload`). A crash in between leaves an empty
            // database, which holds nothing and is used by the next creation.
            var madeDatabase = false
            do {
                madeDatabase = try Store.createEmpty(path: location.databasePath)
                try created.0.write(to: location.keybagPath)
            } catch {
                if madeDatabase { unlink(location.databasePath) }
                throw EngineErrors.map(error)
            }
            do {
                keybag = created.0
                storage = try Store(path: location.databasePath, mustExist: true)
                try keys.install(created.1.keys)
            } catch {
                throw EngineErrors.map(error)
            }
        }
        notifyChanged()
    }

    /// Registers (or with nil removes) the one observer of lock-state changes. It runs on the thread
    /// that changed the state, after the engine's mutex is released, and must return quickly.
    func observe(_ observer: (@Sendable () -> Void)?) {
        mutex.withLock { self.observer = observer }
    }

    private func notifyChanged() {
        let observer = mutex.withLock { self.observer }
        observer?()
    }

    /// `password`'s master key for `bag`: one Argon2id derivation, one at a time as every other
    /// (`derivations`).
    private func deriveMasterKey(_ password: SecretBytes, from bag: Keybag) throws(SecError) -> SecretBytes {
        try derivations.run { () throws(SecError) -> SecretBytes in
            do {
                return try bag.deriveMasterKey(password: password)
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    /// Derives the master key from `password` and unlocks every password-protected class.
    /// A wrong password is errSecAuthFailed and changes nothing.
    func unlock(password: SecretBytes) throws(SecError) {
        let bag = try currentKeybag()
        let master = try deriveMasterKey(password, from: bag)
        try unlock(masterKey: master, keybag: bag)
    }

    /// Whether `password` is the keychain password, without changing what is locked: errSecAuthFailed
    /// when it is not. Costs one Argon2id derivation, one at a time as every other (`derivations`).
    func verify(password: SecretBytes) throws(SecError) {
        let bag = try currentKeybag()
        let master = try deriveMasterKey(password, from: bag)
        guard bag.verify(masterKey: master) else {
            throw SecError(SecStatus.authFailed, "wrong keychain password")
        }
    }

    /// Unlocks with an already derived master key (the PAM hand-off delivers one).
    func unlock(masterKey: SecretBytes) throws(SecError) {
        try unlock(masterKey: masterKey, keybag: try currentKeybag())
    }

    /// The PAM hand-off: a master key derived from the login password and, when the module could
    /// read the machine secret, this user's device factor. Unlocks every password class (the
    /// ThisDeviceOnly ones too, when the factor opens them), binds a keybag that is not yet bound
    /// to this machine, and keeps the factor for later unlocks. A wrong master key is
    /// errSecAuthFailed and changes nothing.
    func handOff(masterKey: SecretBytes, deviceFactor factor: SecretBytes?) throws(SecError) {
        defer { notifyChanged() }
        var bag = try currentKeybag()
        guard bag.verify(masterKey: masterKey) else {
            throw SecError(SecStatus.authFailed, "the login password does not open the keychain")
        }
        try mutex.locked { () throws(SecError) in
            guard bag == keybag else { throw SecError(SecStatus.authFailed, "the keychain changed meanwhile") }
            do {
                if let factor, !bag.isDeviceBound {
                    let bound = try bag.binding(masterKey: masterKey, deviceFactor: factor)
                    try ensureKeybagFileUnchanged()
                    try bound.write(to: location.keybagPath)
                    keybag = bound
                    keybagFileIdentity = FileIdentity(path: location.keybagPath)
                    bag = bound
                }
                // Without a factor in this hand-off (a screen locker runs as the user and cannot read
                // the machine secret), the one held since the login serves.
                var usable = factor ?? deviceFactor
                if let candidate = factor {
                    do {
                        try keys.install(bag.unlockAlwaysClasses(deviceFactor: candidate).keys)
                        deviceFactor = candidate
                    } catch KeybagError.wrongDevice {
                        usable = deviceFactor  // keep a factor that works, if one was held
                    }
                }
                try keys.install(bag.unlockPasswordClasses(masterKey: masterKey, deviceFactor: usable).keys)
            } catch let error as SecError {
                throw error
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    private func unlock(masterKey: SecretBytes, keybag bag: Keybag) throws(SecError) {
        defer { notifyChanged() }
        try mutex.locked { () throws(SecError) in
            guard bag == keybag else { throw SecError(SecStatus.authFailed, "the keychain password changed meanwhile") }
            do {
                try keys.install(bag.unlockPasswordClasses(masterKey: masterKey, deviceFactor: deviceFactor).keys)
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    /// Drops the WhenUnlocked family of class keys (screen lock), or all password-protected ones (logout).
    /// Returns whether any key was held, so callers can tell a lock from a no-op.
    func lock(all: Bool) -> Bool {
        let dropped = mutex.withLock { () -> Bool in
            let dropped = keys.drop(all: all)
            // Every lock counts, a no-op one too: what a user check granted (an evaluated LAContext, a
            // Secret Service unlock) ends at any lock, even when the keys it needed were gone already.
            drops &+= 1
            return dropped
        }
        // Every lock, a no-op one too: it ends Secret Service grants, whose clients are told of it.
        notifyChanged()
        return dropped
    }

    /// Re-wraps the class keys under a new password. Items are not re-encrypted. The keybag is replaced
    /// atomically, so a crash leaves one that opens with the old or the new password.
    func changePassword(
        old: SecretBytes, new: SecretBytes, parameters: Argon2Parameters?,
        allowWeakParameters: Bool
    ) throws(SecError) {
        let bag = try currentKeybag()
        let factor = mutex.withLock { deviceFactor }
        // Two derivations (the old password's, then the new one's), one slot.
        let rewrapped = try derivations.run { () throws(SecError) -> Keybag in
            do {
                let master = try bag.deriveMasterKey(password: old)
                guard bag.verify(masterKey: master) else { throw KeybagError.wrongPassword }
                return try bag.changingPassword(
                    masterKey: master, deviceFactor: factor, newPassword: new,
                    parameters: parameters, allowWeakParameters: allowWeakParameters)
            } catch {
                throw EngineErrors.map(error)
            }
        }
        try mutex.locked { () throws(SecError) in
            guard bag == keybag else { throw SecError(SecStatus.authFailed, "the keychain password changed meanwhile") }
            do {
                try ensureKeybagFileUnchanged()
                try rewrapped.write(to: location.keybagPath)
            } catch {
                throw EngineErrors.map(error)
            }
            keybag = rewrapped
            keybagFileIdentity = FileIdentity(path: location.keybagPath)
            // The user chose the keychain password deliberately; pam_latchkey re-creates the marker
            // at the next login if it still differs from the login password.
            unlink(location.outOfStepMarkerPath)
        }
    }

    /// The state of the keychain and of every class key.
    func status() -> KeychainStatus {
        mutex.withLock {
            var available: [ProtectionClass: Bool] = [:]
            for cls in ProtectionClass.allCases { available[cls] = keys.isAvailable(cls) }
            return KeychainStatus(
                location: location, exists: keybag != nil, available: available,
                problem: problem?.detail, argon2: keybag?.parameters,
                deviceBound: keybag?.isDeviceBound ?? false, deviceFactorHeld: deviceFactor != nil,
                passwordOutOfStep: firstLine(of: location.outOfStepMarkerPath))
        }
    }

    private func currentKeybag() throws(SecError) -> Keybag {
        try mutex.locked { () throws(SecError) -> Keybag in
            refreshKeybagIfReplaced()
            _ = try store()
            guard let keybag else { throw SecError(SecStatus.noDefaultKeychain) }
            return keybag
        }
    }

    /// Refuses to replace a keybag file that another process (pam_latchkey's chauthtok) replaced since
    /// this engine read it, so a re-wrap written there is never silently undone (mutex held).
    private func ensureKeybagFileUnchanged() throws(SecError) {
        guard FileIdentity(path: location.keybagPath) == keybagFileIdentity else {
            throw SecError(SecStatus.authFailed, "the keybag was changed by another process meanwhile; try again")
        }
    }

    /// Re-reads the keybag when its file was replaced since it was read (mutex held). The class
    /// keys never change for a keybag id, so keys already held stay valid; a keybag with another id
    /// is another keychain, and everything held for the old one is dropped.
    private func refreshKeybagIfReplaced() {
        let identity = FileIdentity(path: location.keybagPath)
        guard identity != keybagFileIdentity else { return }
        if let current = keybag, identity != nil,
            let replacement = try? Keybag.load(path: location.keybagPath), replacement.id == current.id
        {
            keybag = replacement
            keybagFileIdentity = identity
            return
        }
        keys.dropEverything()
        drops &+= 1
        keybag = nil
        storage?.close()
        storage = nil
        deviceFactor = nil
        reload()
    }
}

/// Which keys the engine holds at one moment.
package struct HeldKeys: Sendable, Equatable {
    /// The classes whose keys are held.
    package var classes: Set<ProtectionClass>
    /// Whether the index key is held (exactly while AfterFirstUnlock is), so keyed-hash lookups work.
    package var indexKey: Bool
    /// Whether the Secret Service can evaluate its searches (`SecretServiceLookupKeys`): from the first
    /// unlock on, also while AfterFirstUnlock is locked.
    package var secretServiceLookup: Bool
}
