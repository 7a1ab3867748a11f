internal import COpenSSL
import LatchkeySecrets

/// ECIES exactly as Apple's Security framework defines it (`kSecKeyAlgorithmECIESEncryption…`).
///
/// Read from Security's `OSX/sec/Security/SecKeyAdaptors.m` (`SecKeyECIESCopyEncryptedData`,
/// `SecKeyECIESCopyDecryptedData`, `SecKeyECIESKeyExchangeKDFX963CopyResult`,
/// `SecKeyECIESEncryptAESGCMCopyResult`), and checked against ciphertexts that Apple's
/// `SecKeyCreateEncryptedData` produced (see the tests):
///
/// 1. A fresh ephemeral key pair on the recipient's curve.
/// 2. Z = ECDH(ephemeral private, recipient public) (cofactor ECDH for the `Cofactor` variants; the
///    same on the NIST curves), the x-coordinate padded to the field size.
/// 3. The AES key size is 16 bytes when the curve has at most 256 bits and 32 bytes above
///    (`((pubKeyLength - 1) / 2) * 8 > 256`), so P-256 uses AES-128 and P-384/P-521 AES-256.
/// 4. K = X9.63-KDF(hash, Z, sharedInfo = ephemeral public key `04 ‖ X ‖ Y`), as long as the AES key,
///    plus 16 bytes for the `VariableIV` variants.
/// 5. AES-GCM with a 16-byte IV: all zeros for the standard variants, the last 16 bytes of K for
///    `VariableIV`; no AAD; 16-byte tag.
/// 6. Output: `ephemeral public key ‖ ciphertext ‖ tag`.
///
/// Decryption needs at least `2·fieldSize + 1` bytes (else errSecParam in Apple's code) and then at
/// least the 16-byte tag. Apple's private `SecKeyCreateEncryptedDataWithParameters` can add shared
/// info, AAD or another AES size; the public API cannot, so neither does this.
extension AsymmetricKey {
    private static let eciesIVSize = 16

    /// AES key bytes for ECIES on this key's curve.
    private var eciesKeySize: Int { blockSize * 8 > 256 ? 32 : 16 }

    func eciesEncrypt(
        _ plaintext: UnsafeRawBufferPointer, digest: DigestAlgorithm, cofactor: Bool,
        variableIV: Bool
    ) throws(CryptoError) -> [UInt8] {
        let ephemeral = try AsymmetricKey.generateEC(bits: sizeInBits)
        let secret = try ephemeral.ecdh(peer: pkey, cofactor: cofactor)
        let (key, iv) = try eciesKeyAndIV(
            secret: secret, ephemeralPublic: ephemeral.publicKeyBytes, digest: digest,
            variableIV: variableIV)
        return ephemeral.publicKeyBytes + (try AESGCMCore.seal(plaintext, key: key, iv: iv, aad: []))
    }

    func eciesDecrypt(_ data: [UInt8], digest: DigestAlgorithm, cofactor: Bool, variableIV: Bool) throws(CryptoError)
        -> SecretBytes
    {
        let ephemeral = try eciesEphemeralKey(data)
        let secret = try ecdh(peer: ephemeral.pkey, cofactor: cofactor)
        return try eciesOpen(data, secret: secret, digest: digest, variableIV: variableIV)
    }

    /// The ephemeral public key at the start of an ECIES ciphertext for this key (a private key, or
    /// the public half of one held elsewhere, a token's), checked to be a point on this key's curve,
    /// after the length checks Apple makes.
    package func eciesEphemeralKey(_ data: [UInt8]) throws(CryptoError) -> AsymmetricKey {
        let pointLength = 2 * blockSize + 1
        guard algorithm == .ec, data.count >= pointLength else {
            throw CryptoError.invalidInput("too small input packet for ECIES decrypt")
        }
        guard data.count - pointLength >= AESGCMCore.tagSize else {
            throw CryptoError.invalidInput("ECIES: input data too short")
        }
        let ephemeral: AsymmetricKey
        do throws(CryptoError) {
            ephemeral = try AsymmetricKey(
                externalRepresentation: Array(data.prefix(pointLength)), algorithm: .ec, isPrivate: false)
        } catch {
            throw CryptoError.invalidInput("ECIES: the ephemeral public key is not a point on the curve")
        }
        guard ephemeral.curve == curve else {
            throw CryptoError.invalidInput("ECIES: the ephemeral public key is not a point on the curve")
        }
        return ephemeral
    }

    /// Steps 3–5 of decryption, wherever the ECDH with the ciphertext's ephemeral key ran (here, or
    /// on a token): the KDF of `secret` and AES-GCM over the rest of `data`, whose length
    /// `eciesEphemeralKey` checked.
    package func eciesOpen(_ data: [UInt8], secret: SecretBytes, digest: DigestAlgorithm, variableIV: Bool)
        throws(CryptoError) -> SecretBytes
    {
        let pointLength = 2 * blockSize + 1
        guard data.count - pointLength >= AESGCMCore.tagSize, secret.count == blockSize else {
            throw CryptoError.invalidInput("ECIES: input data too short")
        }
        let (key, iv) = try eciesKeyAndIV(
            secret: secret, ephemeralPublic: Array(data.prefix(pointLength)), digest: digest, variableIV: variableIV)
        return try AESGCMCore.open(data.dropFirst(pointLength), key: key, iv: iv, aad: [])
    }

    /// Step 3–5: the AES key (wiping storage) and the IV.
    private func eciesKeyAndIV(
        secret: SecretBytes, ephemeralPublic: [UInt8], digest: DigestAlgorithm,
        variableIV: Bool
    ) throws(CryptoError) -> (SecretBytes, [UInt8]) {
        let keySize = eciesKeySize
        let derived = try Self.x963KDF(
            digest, secret: secret, sharedInfo: ephemeralPublic,
            count: keySize + (variableIV ? Self.eciesIVSize : 0))
        let key = derived.prefix(keySize)
        let iv =
            variableIV
            ? derived.withUnsafeBytes { Array($0[keySize..<(keySize + Self.eciesIVSize)]) }
            : [UInt8](repeating: 0, count: Self.eciesIVSize)
        return (key, iv)
    }
}
