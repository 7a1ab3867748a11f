import LatchkeyCrypto
import LatchkeyModel

/// Private keys already imported into OpenSSL, so that a key used again does not pay for the import
/// (for RSA, parsing the PKCS#1 key and OpenSSL's per-key Montgomery set-up on first use: 1–2 ms).
///
/// Part of `KeyState`, so it is dropped exactly when the keys that protect it are: every entry
/// belongs to the class key its item is sealed under, and locking that class (screen lock, logout,
/// `latchkey lock`) removes the entry in the same mutation that drops the class key. Freeing an
/// `AsymmetricKey` frees its `EVP_PKEY`; OpenSSL clears the private components as it frees them
/// (`BN_clear_free` for RSA's d, p, q, dP, dQ, qInv and its Montgomery contexts, and for an EC
/// key's private scalar), which is as far as wiping reaches inside OpenSSL: copies it made in
/// temporary big-number pools during operations are not under our control (docs/SECURITY.md).
///
/// An entry is used only for the same stored secret it was imported from: it remembers the sealed
/// blob (random nonce, so a re-sealed or replaced key never matches), and the item is still found,
/// opened and checked on every use, so access rules and lock states apply exactly as without the
/// cache. Bounded: the least recently used entry goes first.
///
/// A class, and touched only with the engine's mutex held: the item code borrows a copy of `KeyState`
/// for one request, and a key it imports must land in the one cache the lock state drops.
final class PrivateKeyCache {
    /// Keys kept at most. A keychain seldom uses more than a handful of private keys at a time.
    static let capacity = 32

    private struct Entry {
        var sealedSecret: [UInt8]
        var protection: ProtectionClass
        var key: AsymmetricKey
        var lastUse: UInt64
    }

    private var entries: [[UInt8]: Entry] = [:]
    private var clock: UInt64 = 0

    var count: Int { entries.count }

    /// The key imported from `sealedSecret` for the item `ref`, if it is still cached.
    func key(ref: [UInt8], sealedSecret: [UInt8]) -> AsymmetricKey? {
        guard var entry = entries[ref], entry.sealedSecret == sealedSecret else { return nil }
        clock += 1
        entry.lastUse = clock
        entries[ref] = entry
        return entry.key
    }

    /// Keeps `key` for the item `ref`, replacing what was kept for it and evicting the least
    /// recently used entry when full.
    func insert(_ key: AsymmetricKey, ref: [UInt8], sealedSecret: [UInt8], protection: ProtectionClass) {
        if entries[ref] == nil, entries.count >= Self.capacity,
            let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
        {
            entries.removeValue(forKey: oldest)
        }
        clock += 1
        entries[ref] = Entry(sealedSecret: sealedSecret, protection: protection, key: key, lastUse: clock)
    }

    /// Forgets the key of an item that was deleted or changed.
    func remove(ref: [UInt8]) {
        entries.removeValue(forKey: ref)
    }

    /// Forgets every key of the classes `dropped` selects (their class keys are being dropped).
    func removeAll(where dropped: (ProtectionClass) -> Bool) {
        entries = entries.filter { !dropped($0.value.protection) }
    }

    func removeAll() {
        entries.removeAll()
    }
}
