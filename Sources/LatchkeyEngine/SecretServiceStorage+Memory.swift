import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// Sealing for what the Secret Service keeps in the agent's memory only: the secrets of its `session`
/// collection (docs/SECRET-SERVICE.md §4a). They are sealed with AES-256-GCM under
/// `HKDF-SHA-256(WhenUnlocked class key, salt, "latchkey ss-memory v1")`, where the salt is drawn when
/// the service starts: so they lock with the keychain (while the WhenUnlocked key is not held nothing
/// can open them, exactly as a stored WhenUnlocked item), and what one agent sealed opens in no other.
/// Nothing of it is ever written to disk.
extension SecretServiceStorage {
    static let memoryKeyInfo = Array("latchkey ss-memory v1".utf8)

    private func memoryKey(salt: [UInt8]) throws -> SecretBytes {
        try HKDF.sha256(ikm: try keys.key(for: .whenUnlocked), salt: salt, info: Self.memoryKeyInfo, count: 32)
    }

    /// `plaintext` sealed for memory; `aad` binds it to what it belongs to. errSecInteractionNotAllowed
    /// while the WhenUnlocked class is locked.
    package func sealInMemory(_ plaintext: [UInt8], salt: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        try AES256GCM.seal(plaintext, key: try memoryKey(salt: salt), aad: aad)
    }

    /// What `sealInMemory` sealed with the same salt and `aad`; errSecInteractionNotAllowed while the
    /// WhenUnlocked class is locked.
    package func openInMemory(_ sealed: [UInt8], salt: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        let key = try memoryKey(salt: salt)
        do {
            return try AES256GCM.open(sealed, key: key, aad: aad)
        } catch {
            throw SecError(SecStatus.decode, "a secret kept in memory failed authentication")
        }
    }
}
