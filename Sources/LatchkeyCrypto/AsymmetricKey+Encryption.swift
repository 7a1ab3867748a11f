internal import COpenSSL
import LatchkeySecrets

/// `SecKeyCreateEncryptedData` / `SecKeyCreateDecryptedData`: the RSA algorithms here, ECIES in
/// `ECIES.swift`.
///
/// From Security's `SecKeyAdaptors.m`:
/// - Raw RSA pads the input on the left to the modulus size; decryption returns the full block.
/// - PKCS#1 v1.5 and OAEP need a modulus of at least 11 and 2·hLen+2 bytes; OAEP uses MGF1 with the
///   same hash and an empty label (`ccrsa_oaep_encode(di, …)`).
/// - RSA-OAEP+AES-GCM (`SecKeyRSAAESGCMCopyEncryptedData`): a random AES key, 16 bytes for moduli
///   below 4096 bits and 32 bytes from 4096 up, is wrapped with OAEP; the data is sealed with AES-GCM
///   under an all-zero 16-byte IV with the public key's external representation as AAD. Output:
///   `wrapped key ‖ ciphertext ‖ 16-byte tag`.
///
/// Failures that reveal nothing but "this ciphertext does not decrypt" (bad padding, wrong tag)
/// throw `.authenticationFailed`; Apple reports errSecParam for them.
extension AsymmetricKey {
    /// Encrypts `plaintext` with this public key.
    ///
    /// Throws `.unsupported` if the algorithm does not fit the key (wrong type, a private key, a
    /// modulus too small for the padding) and `.invalidInput` for plaintext too long for the padding.
    package func encrypt(_ algorithm: EncryptionAlgorithm, _ plaintext: SecretBytes) throws(CryptoError) -> [UInt8] {
        guard isSupported(.encrypt, algorithm: algorithm.rawValue) else {
            throw CryptoError.unsupported("\(algorithm.rawValue) cannot encrypt with this key")
        }
        var result: [UInt8] = []
        var failure: CryptoError?
        plaintext.withUnsafeBytes { input in
            do throws(CryptoError) { result = try encrypt(algorithm, buffer: input) } catch { failure = error }
        }
        if let failure { throw failure }
        return result
    }

    /// `encrypt(_:_:)` for plaintext in an ordinary array.
    package func encrypt(_ algorithm: EncryptionAlgorithm, _ plaintext: [UInt8]) throws(CryptoError) -> [UInt8] {
        try encrypt(algorithm, SecretBytes(copying: plaintext))
    }

    /// Decrypts `ciphertext` with this private key; the plaintext comes back in wiping storage.
    ///
    /// Throws `.unsupported` as `encrypt` does, `.invalidInput` for ciphertext of an impossible
    /// length, and `.authenticationFailed` when the ciphertext does not decrypt under this key.
    package func decrypt(_ algorithm: EncryptionAlgorithm, _ ciphertext: [UInt8]) throws(CryptoError) -> SecretBytes {
        guard isSupported(.decrypt, algorithm: algorithm.rawValue) else {
            throw CryptoError.unsupported("\(algorithm.rawValue) cannot decrypt with this key")
        }
        switch algorithm.scheme {
        case .ecies(let cofactor, let variableIV):
            return try eciesDecrypt(ciphertext, digest: algorithm.digest!, cofactor: cofactor, variableIV: variableIV)
        case .rsaRaw:
            return try rsaDecrypt(ciphertext[...], padding: RSA_NO_PADDING, digest: nil)
        case .rsaPKCS1:
            return try rsaDecrypt(ciphertext[...], padding: RSA_PKCS1_PADDING, digest: nil)
        case .rsaOAEP:
            return try rsaDecrypt(ciphertext[...], padding: RSA_PKCS1_OAEP_PADDING, digest: algorithm.digest)
        case .rsaOAEPAESGCM:
            let sessionKey = try rsaDecrypt(
                try rsaAESGCMWrappedKey(ciphertext), padding: RSA_PKCS1_OAEP_PADDING, digest: algorithm.digest)
            return try rsaAESGCMOpen(ciphertext, sessionKey: sessionKey)
        }
    }

    /// The OAEP-wrapped AES key at the start of an RSA-OAEP+AES-GCM ciphertext for this key (a private
    /// key, or the public half of one held elsewhere, a token's): its first modulus-size block, after
    /// the length check Apple makes.
    package func rsaAESGCMWrappedKey(_ ciphertext: [UInt8]) throws(CryptoError) -> ArraySlice<UInt8> {
        guard algorithm == .rsa, ciphertext.count >= blockSize + AESGCMCore.tagSize else {
            throw CryptoError.invalidInput("RSA-WRAP input too short")
        }
        return ciphertext.prefix(blockSize)
    }

    /// The second step of RSA-OAEP+AES-GCM decryption, wherever the AES key was unwrapped (here, or on a
    /// token): a key of any other size than this modulus's AES key is refused before use, then AES-GCM
    /// over the rest with the public key as AAD.
    package func rsaAESGCMOpen(_ ciphertext: [UInt8], sessionKey: SecretBytes) throws(CryptoError) -> SecretBytes {
        guard ciphertext.count >= blockSize + AESGCMCore.tagSize else {
            throw CryptoError.invalidInput("RSA-WRAP input too short")
        }
        guard sessionKey.count == wrapKeySize else { throw CryptoError.authenticationFailed }
        return try AESGCMCore.open(
            ciphertext.dropFirst(blockSize), key: sessionKey, iv: Self.zeroIV, aad: publicKeyBytes)
    }

    // MARK: Helpers

    /// Apple's all-zero 16-byte IV (`kSecKeyIESIV`).
    static let zeroIV = [UInt8](repeating: 0, count: 16)

    /// AES key size for RSA-OAEP+AES-GCM: 16 bytes below 4096 bits, else 32.
    private var wrapKeySize: Int { sizeInBits >= 4096 ? 32 : 16 }

    private func encrypt(_ algorithm: EncryptionAlgorithm, buffer: UnsafeRawBufferPointer) throws(CryptoError)
        -> [UInt8]
    {
        switch algorithm.scheme {
        case .ecies(let cofactor, let variableIV):
            return try eciesEncrypt(buffer, digest: algorithm.digest!, cofactor: cofactor, variableIV: variableIV)
        case .rsaRaw:
            guard buffer.count <= blockSize else {
                throw CryptoError.invalidInput("plaintext longer than the RSA modulus")
            }
            let padded = SecretBytes(count: blockSize)
            padded.withUnsafeMutableBytes { out in
                for k in 0..<buffer.count { out[blockSize - buffer.count + k] = buffer[k] }
            }
            return try padded.withUnsafeBytesTyped { input throws(CryptoError) in
                try rsaEncrypt(input, padding: RSA_NO_PADDING, digest: nil)
            }
        case .rsaPKCS1:
            guard buffer.count <= blockSize - 11 else {
                throw CryptoError.invalidInput("plaintext too long for PKCS#1 v1.5 with this key")
            }
            return try rsaEncrypt(buffer, padding: RSA_PKCS1_PADDING, digest: nil)
        case .rsaOAEP:
            let digest = algorithm.digest!
            guard buffer.count <= blockSize - 2 * digest.size - 2 else {
                throw CryptoError.invalidInput("plaintext too long for OAEP with this key")
            }
            return try rsaEncrypt(buffer, padding: RSA_PKCS1_OAEP_PADDING, digest: digest)
        case .rsaOAEPAESGCM:
            let sessionKey = try withCryptoErrors { try SecureRandom.secret(wrapKeySize) }
            let wrapped = try sessionKey.withUnsafeBytesTyped { key throws(CryptoError) in
                try rsaEncrypt(key, padding: RSA_PKCS1_OAEP_PADDING, digest: algorithm.digest)
            }
            return wrapped + (try AESGCMCore.seal(buffer, key: sessionKey, iv: Self.zeroIV, aad: publicKeyBytes))
        }
    }

    private func rsaEncrypt(_ input: UnsafeRawBufferPointer, padding: Int32, digest: DigestAlgorithm?)
        throws(CryptoError) -> [UInt8]
    {
        let ctx = try operationContext()
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_encrypt_init(ctx) == 1 else { throw opensslError("RSA encryption init") }
        try Self.configureRSAEncryption(ctx, padding: padding, digest: digest)
        var out = [UInt8](repeating: 0, count: blockSize)
        var length = out.count
        let ok = EVP_PKEY_encrypt(
            ctx, &out, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count)
        guard ok == 1 else {
            ERR_clear_error()
            throw CryptoError.invalidInput(
                "the plaintext cannot be encrypted with this key (too long, or not below the modulus)")
        }
        // RSA ciphertext is always a full block; OpenSSL already pads it, this only guards the length.
        return [UInt8](repeating: 0, count: blockSize - length) + out.prefix(length)
    }

    private func rsaDecrypt(_ ciphertext: ArraySlice<UInt8>, padding: Int32, digest: DigestAlgorithm?)
        throws(CryptoError) -> SecretBytes
    {
        guard ciphertext.count <= blockSize else {
            throw CryptoError.invalidInput("ciphertext longer than the RSA modulus")
        }
        // Apple reads the ciphertext as a big-endian number, so a shorter input is left-padded.
        let input = [UInt8](repeating: 0, count: blockSize - ciphertext.count) + ciphertext
        let ctx = try operationContext()
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_decrypt_init(ctx) == 1 else { throw opensslError("RSA decryption init") }
        try Self.configureRSAEncryption(ctx, padding: padding, digest: digest)
        let out = SecretBytes(count: blockSize)
        var length = blockSize
        let ok = out.withUnsafeMutableBytes { buffer in
            EVP_PKEY_decrypt(ctx, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, input, input.count)
        }
        ERR_clear_error()
        guard ok == 1 else {
            if padding == RSA_NO_PADDING { throw CryptoError.invalidInput("ciphertext is not below the RSA modulus") }
            throw CryptoError.authenticationFailed
        }
        if padding == RSA_NO_PADDING, length < blockSize {
            // Raw decryption returns the whole block, big-endian, as Apple does.
            let full = SecretBytes(count: blockSize)
            full.withUnsafeMutableBytes { destination in
                out.withUnsafeBytes { source in
                    for k in 0..<length { destination[blockSize - length + k] = source[k] }
                }
            }
            return full
        }
        return length == blockSize ? out : out.prefix(length)
    }

    private static func configureRSAEncryption(_ ctx: OpaquePointer, padding: Int32, digest: DigestAlgorithm?)
        throws(CryptoError)
    {
        guard EVP_PKEY_CTX_set_rsa_padding(ctx, padding) == 1 else { throw opensslError("setting RSA padding") }
        if padding == RSA_PKCS1_OAEP_PADDING, let digest {
            let md = try digest.md()
            guard EVP_PKEY_CTX_set_rsa_oaep_md(ctx, md) == 1, EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, md) == 1 else {
                throw opensslError("setting OAEP digests")
            }
        }
    }
}
