import LatchkeyCrypto
import LatchkeySecrets

/// What the Secret Service keeps of the AfterFirstUnlock class key once that key is dropped (`latchkey
/// lock --all`, a logout): the index key, to evaluate searches and report their matches as locked, and
/// the key that seals the list of collections and aliases (docs/SECRET-SERVICE.md §2, §4).
///
/// libsecret, and every program built on it, finds an item with `SearchItems` and unlocks what it
/// finds in the `locked` list; a search that fails with `IsLocked` ends there, without a prompt
/// (issue 11). Neither key opens an item: what they give while the keychain is locked is which
/// attribute sets and collections exist, and the collections' labels (docs/SECURITY.md). SecItem does
/// not use them: its queries see the index key only while AfterFirstUnlock is held, as before.
///
/// Derived when the AfterFirstUnlock class key is installed, in locked memory (the index key's HMAC
/// context is OpenSSL's, freed and cleared with its last reference); dropped only when everything is,
/// when the keybag is replaced by another keychain's. So an agent that never had the password (a fresh
/// start, an autologin) has none, and its searches still fail with `IsLocked`.
struct SecretServiceLookupKeys: Sendable {
    let indexKey: IndexKey
    /// HKDF of the AfterFirstUnlock class key for the sealed service state (docs/STORE.md, `ss_state`).
    let stateKey: SecretBytes

    init(afterFirstUnlock: SecretBytes, indexKey: IndexKey) throws {
        self.indexKey = indexKey
        stateKey = try HKDF.sha256(
            ikm: afterFirstUnlock, salt: [], info: SecretServiceStorage.stateKeyInfo, count: 32)
    }
}
