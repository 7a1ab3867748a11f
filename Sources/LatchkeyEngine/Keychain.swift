#if canImport(Glibc)
import Glibc
#endif
import LatchkeyCrypto
import LatchkeyKeybag
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// Where a keychain's files live: the keybag and the SQLite store in one directory
/// (by default `$XDG_DATA_HOME/latchkey`, chosen by the agent).
public struct KeychainLocation: Sendable, Equatable {
    public var directory: String
    public var keybagPath: String { directory + "/keybag" }
    public var databasePath: String { directory + "/keychain.db" }
    /// Written by pam_latchkey when the login password changed without the old one (or a login
    /// succeeded with a password that does not open the keychain); removed when they agree again.
    public var outOfStepMarkerPath: String { directory + "/password-out-of-step" }

    public init(directory: String) {
        self.directory = directory
    }
}

/// The state of one accessibility class, as `latchkey status` shows it.
public struct KeychainStatus: Sendable, Equatable {
    public var location: KeychainLocation
    public var exists: Bool
    /// Which class keys are held right now.
    public var available: [ProtectionClass: Bool]
    /// Why the keychain cannot be used, when its files are damaged.
    public var problem: String?
    public var argon2: Argon2Parameters?
    /// Whether the ThisDeviceOnly classes are bound to this machine (docs/KEYBAG.md "Device binding").
    public var deviceBound: Bool = false
    /// Whether the agent holds this machine's device factor (handed over by pam_latchkey).
    public var deviceFactorHeld: Bool = false
    /// The first line of the out-of-step marker, when the login password and the keychain password
    /// are known to differ.
    public var passwordOutOfStep: String?
}

/// The keychain engine: keybag, class-key lock states and the SecItem operations for a caller.
///
/// It knows nothing of sockets or buses. All methods are safe to call from several threads: a mutex
/// serialises access to the key state and the store, and the slow Argon2id derivation runs outside it
/// so an unlock never blocks other callers.
public final class Keychain: @unchecked Sendable {
    public let location: KeychainLocation
    private var mutex = pthread_mutex_t()
    var keys = KeyState()
    private var keybag: Keybag?
    /// Identity of the keybag file `keybag` was read from, to notice a replacement by another
    /// process (pam_latchkey changing the password, or creating the keybag at first login).
    private var keybagFileIdentity: FileIdentity?
    /// The device factor from pam_latchkey, once one has opened this keybag's device classes. Kept
    /// for the agent's life so `latchkey unlock` can reopen the ThisDeviceOnly classes.
    private var deviceFactor: SecretBytes?
    /// Told after any change of which class keys are held (lock, unlock, hand-off, a replaced keybag),
    /// outside the mutex. Set once by the agent's Secret Service, which announces `Locked` changes.
    private var lockStateObserver: (@Sendable () -> Void)?
    /// Told of every SecItem change of a generic password, with the mutex held (Secret Service signals).
    private var itemChangeObserver: (@Sendable (KeychainItemChange) -> Void)?
    private var storage: Store?
    /// A damaged keybag or store: every operation reports it, naming the file. Nothing is overwritten.
    private var problem: SecError?

    /// Opens the keychain in `location` if it exists. Damaged files are reported by every later call,
    /// never repaired or replaced.
    public init(location: KeychainLocation) {
        self.location = location
        pthread_mutex_init(&mutex, nil)
        reload()
    }

    deinit {
        pthread_mutex_destroy(&mutex)
    }

    func locked<T>(_ body: () throws(SecError) -> T) throws(SecError) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body()
    }

    private func reload() {
        problem = nil
        do {
            guard fileExists(location.keybagPath) else {
                if fileExists(location.databasePath) {
                    problem = SecError(SecStatus.invalidKeychain,
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
            storage = try Store(path: location.databasePath)
        } catch {
            problem = EngineErrors.map(error)
        }
    }

    /// The store, or the reason there is none.
    func store() throws(SecError) -> Store {
        if let problem { throw problem }
        guard let storage else {
            throw SecError(SecStatus.noDefaultKeychain, "no keychain in \(location.directory); create one with 'latchkey init'")
        }
        return storage
    }

    // MARK: - Lifecycle

    /// Creates a keychain protected by `password` and leaves it unlocked.
    public func create(password: SecretBytes, parameters: Argon2Parameters = .default,
                       allowWeakParameters: Bool = false) throws(SecError) {
        try locked { () throws(SecError) in
            if let problem { throw problem }
            guard keybag == nil else {
                throw SecError(SecStatus.duplicateKeychain, "a keychain already exists in \(location.directory)")
            }
        }
        // Argon2id takes a few hundred milliseconds: do it without holding the mutex.
        let created: (Keybag, ClassKeys)
        do {
            created = try Keybag.create(password: password, parameters: parameters,
                                        allowWeakParameters: allowWeakParameters)
        } catch {
            throw EngineErrors.map(error)
        }
        try locked { () throws(SecError) in
            guard keybag == nil else {
                throw SecError(SecStatus.duplicateKeychain, "a keychain already exists in \(location.directory)")
            }
            do {
                try makeDirectory(location.directory)
                try created.0.write(to: location.keybagPath)
                keybag = created.0
                storage = try Store(path: location.databasePath)
                try keys.install(created.1.keys)
            } catch {
                throw EngineErrors.map(error)
            }
        }
        notifyLockStateChanged()
    }

    /// Registers (or with nil removes) the one observer of lock-state changes. It runs on the thread
    /// that changed the state, after the engine's mutex is released, and must return quickly.
    public func observeLockState(_ observer: (@Sendable () -> Void)?) {
        pthread_mutex_lock(&mutex)
        lockStateObserver = observer
        pthread_mutex_unlock(&mutex)
    }

    /// Calls `observer` after every SecItem change of a generic password, so the Secret Service can
    /// emit ItemCreated/ItemChanged/ItemDeleted. It runs on the caller's thread with the keychain's
    /// mutex held: it must only queue work (calling back into this keychain from it would deadlock).
    /// One observer per keychain; nil removes it.
    public func observeItemChanges(_ observer: (@Sendable (KeychainItemChange) -> Void)?) {
        pthread_mutex_lock(&mutex)
        itemChangeObserver = observer
        pthread_mutex_unlock(&mutex)
    }

    /// Mutex held (see `observeItemChanges`).
    func notifyItemChange(_ change: KeychainItemChange) {
        itemChangeObserver?(change)
    }

    private func notifyLockStateChanged() {
        pthread_mutex_lock(&mutex)
        let observer = lockStateObserver
        pthread_mutex_unlock(&mutex)
        observer?()
    }

    /// Derives the master key from `password` and unlocks every password-protected class.
    /// A wrong password is errSecAuthFailed and changes nothing.
    public func unlock(password: SecretBytes) throws(SecError) {
        let bag = try currentKeybag()
        let master: SecretBytes
        do {
            master = try bag.deriveMasterKey(password: password)
        } catch {
            throw EngineErrors.map(error)
        }
        try unlock(masterKey: master, keybag: bag)
    }

    /// Unlocks with an already derived master key (the PAM hand-off delivers one).
    public func unlock(masterKey: SecretBytes) throws(SecError) {
        try unlock(masterKey: masterKey, keybag: try currentKeybag())
    }

    /// The PAM hand-off: a master key derived from the login password and, when the module could
    /// read the machine secret, this user's device factor. Unlocks every password class (the
    /// ThisDeviceOnly ones too, when the factor opens them), binds a keybag that is not yet bound
    /// to this machine, and keeps the factor for later unlocks. A wrong master key is
    /// errSecAuthFailed and changes nothing.
    public func handOff(masterKey: SecretBytes, deviceFactor factor: SecretBytes?) throws(SecError) {
        defer { notifyLockStateChanged() }
        var bag = try currentKeybag()
        guard bag.verify(masterKey: masterKey) else {
            throw SecError(SecStatus.authFailed, "the login password does not open the keychain")
        }
        try locked { () throws(SecError) in
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
        defer { notifyLockStateChanged() }
        try locked { () throws(SecError) in
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
    @discardableResult
    public func lock(all: Bool) -> Bool {
        pthread_mutex_lock(&mutex)
        let dropped = keys.drop(all: all)
        pthread_mutex_unlock(&mutex)
        if dropped { notifyLockStateChanged() }
        return dropped
    }

    /// Re-wraps the class keys under a new password. Items are not re-encrypted. The keybag is replaced
    /// atomically, so a crash leaves one that opens with the old or the new password.
    public func changePassword(old: SecretBytes, new: SecretBytes, parameters: Argon2Parameters? = nil,
                               allowWeakParameters: Bool = false) throws(SecError) {
        let bag = try currentKeybag()
        let factor = try locked { () throws(SecError) -> SecretBytes? in deviceFactor }
        let rewrapped: Keybag
        do {
            let master = try bag.deriveMasterKey(password: old)
            guard bag.verify(masterKey: master) else { throw KeybagError.wrongPassword }
            rewrapped = try bag.changingPassword(masterKey: master, deviceFactor: factor, newPassword: new,
                                                 parameters: parameters, allowWeakParameters: allowWeakParameters)
        } catch {
            throw EngineErrors.map(error)
        }
        try locked { () throws(SecError) in
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
    public func status() -> KeychainStatus {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        var available: [ProtectionClass: Bool] = [:]
        for cls in ProtectionClass.allCases { available[cls] = keys.isAvailable(cls) }
        return KeychainStatus(location: location, exists: keybag != nil, available: available,
                              problem: problem?.detail, argon2: keybag?.parameters,
                              deviceBound: keybag?.isDeviceBound ?? false, deviceFactorHeld: deviceFactor != nil,
                              passwordOutOfStep: firstLine(of: location.outOfStepMarkerPath))
    }

    private func currentKeybag() throws(SecError) -> Keybag {
        try locked { () throws(SecError) -> Keybag in
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
           let replacement = try? Keybag.load(path: location.keybagPath), replacement.id == current.id {
            keybag = replacement
            keybagFileIdentity = identity
            return
        }
        keys.dropEverything()
        keybag = nil
        storage?.close()
        storage = nil
        deviceFactor = nil
        reload()
    }
}

/// Enough of `stat` to tell that a file was replaced (an atomic rename gives a new inode).
struct FileIdentity: Equatable {
    var device: UInt64, inode: UInt64, size: Int64, modifiedSeconds: Int, modifiedNanoseconds: Int

    init?(path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modifiedSeconds = st.st_mtim.tv_sec
        modifiedNanoseconds = st.st_mtim.tv_nsec
    }
}

/// The first line of a small text file (at most 512 bytes read), or nil if there is none.
func firstLine(of path: String) -> String? {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
    var buffer = [UInt8](repeating: 0, count: 512)
    let count = read(fd, &buffer, buffer.count)
    guard count > 0 else { return nil }
    let line = buffer[0..<count].split(separator: 10, omittingEmptySubsequences: false).first ?? []
    let text = String(decoding: line, as: UTF8.self)
    return text.isEmpty ? "the login password and the keychain password differ" : text
}

func fileExists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
}

/// Creates `path` and its parents with mode 0700 (existing directories are left as they are).
func makeDirectory(_ path: String) throws(SecError) {
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
        prefix += "/" + component
        if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
            throw SecError(SecStatus.io, "cannot create directory \(prefix): \(String(cString: strerror(errno)))")
        }
    }
}
