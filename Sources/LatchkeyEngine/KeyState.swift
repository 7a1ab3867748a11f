import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// The class keys the engine holds right now, and the index key derived from the AfterFirstUnlock class.
///
/// Code that needs plaintext asks for a key and gets `errSecInteractionNotAllowed` when it is not held:
/// there is no "locked" flag to forget to check. Dropping a key drops the only reference to its
/// `SecretBytes`, which wipes it.
struct KeyState {
    private var classKeys: [ProtectionClass: SecretBytes] = [:]
    /// HMAC key for the lookup and uniqueness hashes; available exactly while AfterFirstUnlock is.
    private(set) var indexKey: IndexKey?
    /// The Secret Service's lookup keys, kept after AfterFirstUnlock is dropped (see
    /// `SecretServiceLookupKeys`); nil until AfterFirstUnlock was first installed.
    private(set) var secretServiceLookup: SecretServiceLookupKeys?
    /// Private keys imported for key operations, each dropped with the class key of its item (shared
    /// by every copy of this state: see `PrivateKeyCache`).
    let privateKeys = PrivateKeyCache()

    /// HKDF label of the index key; part of the on-disk format (docs/STORE.md, "Keys").
    static let indexKeyInfo = Array("latchkey index v1".utf8)

    /// The key of a class, or errSecInteractionNotAllowed.
    func key(for protection: ProtectionClass) throws(SecError) -> SecretBytes {
        guard let key = classKeys[protection] else { throw SecError.locked }
        return key
    }

    /// The index key, or errSecInteractionNotAllowed.
    func requireIndexKey() throws(SecError) -> IndexKey {
        guard let indexKey else { throw SecError.locked }
        return indexKey
    }

    func isAvailable(_ protection: ProtectionClass) -> Bool {
        classKeys[protection] != nil
    }

    /// Installs unwrapped class keys (from the keybag) and derives the index key when possible.
    mutating func install(_ keys: [ProtectionClass: SecretBytes]) throws {
        for (cls, key) in keys { classKeys[cls] = key }
        if indexKey == nil, let afterFirstUnlock = classKeys[.afterFirstUnlock] {
            let derived = try IndexKey(afterFirstUnlock: afterFirstUnlock)
            indexKey = derived
            if secretServiceLookup == nil {
                secretServiceLookup = try SecretServiceLookupKeys(afterFirstUnlock: afterFirstUnlock, indexKey: derived)
            }
        }
    }

    /// Drops the WhenUnlocked family (screen lock), or every password-protected key (logout); the
    /// Secret Service's lookup keys stay. Returns whether any key was held (and so dropped).
    @discardableResult
    mutating func drop(all: Bool) -> Bool {
        var dropped = false
        for cls in ProtectionClass.allCases where cls.requiresPassword {
            if all || cls.isWhenUnlockedFamily { dropped = classKeys.removeValue(forKey: cls) != nil || dropped }
        }
        if classKeys[.afterFirstUnlock] == nil { indexKey = nil }
        let held = classKeys
        privateKeys.removeAll { held[$0] == nil }
        return dropped
    }

    mutating func dropEverything() {
        classKeys.removeAll()
        indexKey = nil
        secretServiceLookup = nil
        privateKeys.removeAll()
    }
}
