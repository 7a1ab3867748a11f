import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// The keybag's derivations, exactly as docs/KEYBAG.md specifies them ("Key hierarchy").
///
/// Kept apart from parsing and I/O so that the whole of what a reimplementation (the C PAM module)
/// must reproduce is in one short file. Every label is ASCII with no terminator.
enum KeyHierarchy {
    /// Length of the master key, verifier, always seed, KEKs and class keys.
    static let keyLength = 32
    /// HKDF `info` for the verifier.
    static let verifierInfo = Array("latchkey keybag v1 verifier".utf8)
    /// HKDF `info` prefix for a class KEK; the class's raw value follows as one byte.
    static let classInfoPrefix = Array("latchkey keybag v1 class ".utf8)
    /// AES-GCM associated-data prefix for a wrapped class key; keybag id and class byte follow.
    static let wrapAADPrefix = Array("latchkey keybag v1".utf8)

    /// M = Argon2id(password, salt, t, m, p), 32 bytes, version 0x13. The password bytes are used
    /// exactly as given: normalising here would make the C module and this code disagree.
    static func masterKey(password: SecretBytes, salt: [UInt8], parameters: Argon2Parameters) throws -> SecretBytes {
        try Argon2id.deriveKey(password: password, salt: salt, parameters: parameters, length: keyLength)
    }

    /// V = HKDF-SHA256(ikm = M, salt = empty, info = "latchkey keybag v1 verifier", L = 32).
    ///
    /// A separate HKDF output rather than M itself, so storing V reveals nothing usable as a KEK.
    static func verifier(masterKey: SecretBytes) throws -> [UInt8] {
        try HKDF.sha256(ikm: masterKey, salt: [], info: verifierInfo, count: keyLength).unsafeCopyToArray()
    }

    /// KEK_c = HKDF-SHA256(ikm, salt = empty, info = "latchkey keybag v1 class " ‖ c, L = 32), where
    /// `ikm` is M for password classes and the always seed S for the Always classes.
    static func kek(for protectionClass: ProtectionClass, ikm: SecretBytes) throws -> SecretBytes {
        try HKDF.sha256(ikm: ikm, salt: [], info: classInfoPrefix + [protectionClass.rawValue], count: keyLength)
    }

    /// AAD = "latchkey keybag v1" ‖ keybag id (16) ‖ c. Binding the id and class stops a wrapped
    /// key from being moved to another class slot or spliced in from another keybag.
    static func aad(id: [UInt8], protectionClass: ProtectionClass) -> [UInt8] {
        wrapAADPrefix + id + [protectionClass.rawValue]
    }

    /// Wraps CK_c: AES-256-GCM(KEK_c, nonce, aad) → nonce (12) ‖ ciphertext (32) ‖ tag (16) = 60 bytes.
    static func wrap(classKey: SecretBytes, protectionClass: ProtectionClass, kek: SecretBytes,
                     id: [UInt8], nonce: [UInt8]?) throws -> [UInt8] {
        try AES256GCM.seal(classKey, key: kek, aad: aad(id: id, protectionClass: protectionClass), nonce: nonce)
    }

    /// Unwraps a 60-byte entry; throws `CryptoError.authenticationFailed` if it does not verify.
    static func unwrap(_ wrapped: [UInt8], protectionClass: ProtectionClass, kek: SecretBytes,
                       id: [UInt8]) throws -> SecretBytes {
        try AES256GCM.openSecret(wrapped, key: kek, aad: aad(id: id, protectionClass: protectionClass))
    }
}
