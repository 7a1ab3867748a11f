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

    /// HMAC message prefix of the device factor; uid (u32 big-endian) and keybag id follow.
    static let deviceFactorLabel = Array("latchkey device factor v1".utf8)

    /// DF = HMAC-SHA256(key = machine secret, "latchkey device factor v1" ‖ uid (u32 BE) ‖ keybag id).
    ///
    /// Only root can read the machine secret, so only the PAM module computes DF; binding uid and
    /// keybag id means one user's factor opens nothing of another user's, even on the same machine.
    static func deviceFactor(machineSecret: SecretBytes, uid: UInt32, keybagID: [UInt8]) throws -> SecretBytes {
        var message = deviceFactorLabel
        message.appendBigEndian(uid)
        message += keybagID
        var tag = try HMAC.sha256(key: machineSecret, message)
        return SecretBytes(consuming: &tag)
    }

    /// The input keying material of class `c`'s KEK: M (password classes) or S (Always classes),
    /// followed by DF for the ThisDeviceOnly classes of a device-bound keybag.
    static func kekInput(for protectionClass: ProtectionClass, base: SecretBytes, deviceFactor: SecretBytes?)
        -> SecretBytes
    {
        guard protectionClass.isThisDeviceOnly, let deviceFactor else { return base }
        let combined = SecretBytes(count: base.count + deviceFactor.count)
        combined.withUnsafeMutableBytes { out in
            base.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            deviceFactor.withUnsafeBytes {
                (out.baseAddress! + base.count).copyMemory(from: $0.baseAddress!, byteCount: $0.count)
            }
        }
        return combined
    }

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
    static func wrap(
        classKey: SecretBytes, protectionClass: ProtectionClass, kek: SecretBytes,
        id: [UInt8], nonce: [UInt8]?
    ) throws -> [UInt8] {
        try AES256GCM.seal(classKey, key: kek, aad: aad(id: id, protectionClass: protectionClass), nonce: nonce)
    }

    /// Unwraps a 60-byte entry; throws `CryptoError.authenticationFailed` if it does not verify.
    static func unwrap(
        _ wrapped: [UInt8], protectionClass: ProtectionClass, kek: SecretBytes,
        id: [UInt8]
    ) throws -> SecretBytes {
        try AES256GCM.openSecret(wrapped, key: kek, aad: aad(id: id, protectionClass: protectionClass))
    }
}
