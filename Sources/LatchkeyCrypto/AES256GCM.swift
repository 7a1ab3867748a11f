internal import COpenSSL
import LatchkeySecrets

/// AES-256-GCM authenticated encryption through OpenSSL's EVP interface.
///
/// Sealed layout: `nonce (12) ‖ ciphertext (same length as plaintext) ‖ tag (16)`. Keeping the nonce
/// inside the sealed bytes means a stored blob is self-contained and a caller can never pair a
/// ciphertext with the wrong nonce. Each call uses its own cipher context, so concurrent use is safe.
package enum AES256GCM {
    /// Key length in bytes.
    package static let keySize = 32
    /// Nonce length in bytes (GCM's native 96-bit IV; other lengths would be hashed first).
    package static let nonceSize = 12
    /// Authentication tag length in bytes (the full 128 bits; GCM tags must not be truncated here).
    package static let tagSize = 16
    /// Bytes a sealed box adds to its plaintext: nonce plus tag.
    package static let overhead = 28

    /// Encrypts and authenticates `plaintext` and `aad`. `nonce` must be nil in production: a random
    /// nonce is drawn per call; the parameter exists so test vectors can be reproduced.
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer, key: SecretBytes, aad: [UInt8],
        nonce: [UInt8]? = nil
    ) throws -> [UInt8] {
        try checkKey(key)
        let nonceBytes = try nonce ?? SecureRandom.bytes(nonceSize)
        guard nonceBytes.count == nonceSize else { throw CryptoError.invalidInput("AES-GCM nonce must be 12 bytes") }
        let plaintextLength = try evpLength(plaintext.count, "AES-GCM plaintext")
        let aadLength = try evpLength(aad.count, "AES-GCM associated data")
        let cipher = try OpenSSLAlgorithms.require(OpenSSLAlgorithms.shared.aes256gcm, "AES-256-GCM")
        guard let ctx = EVP_CIPHER_CTX_new() else { throw opensslError("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }  // also wipes the expanded key schedule

        var sealed = [UInt8](repeating: 0, count: plaintext.count + overhead)
        try sealed.withUnsafeMutableBufferPointer { out in
            let base = out.baseAddress!
            for i in 0..<nonceSize { base[i] = nonceBytes[i] }
            let initialised = key.withUnsafeBytes { keyBuffer in
                EVP_EncryptInit_ex2(ctx, cipher, keyBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), base, nil)
            }
            guard initialised == 1 else { throw opensslError("AES-GCM encrypt init") }
            var written: Int32 = 0
            if aadLength > 0 {
                guard EVP_EncryptUpdate(ctx, nil, &written, aad, aadLength) == 1 else {
                    throw opensslError("AES-GCM aad")
                }
            }
            if plaintextLength > 0 {
                let input = plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self)
                guard EVP_EncryptUpdate(ctx, base + nonceSize, &written, input, plaintextLength) == 1,
                    written == plaintextLength
                else { throw opensslError("AES-GCM encrypt") }
            }
            // GCM is a stream mode: Final emits no bytes, it only completes the tag computation.
            guard EVP_EncryptFinal_ex(ctx, base + nonceSize + plaintext.count, &written) == 1 else {
                throw opensslError("AES-GCM encrypt final")
            }
            let tag = base + nonceSize + plaintext.count
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), tag) == 1 else {
                throw opensslError("AES-GCM get tag")
            }
        }
        return sealed
    }

    /// Array convenience for `seal(_:key:aad:nonce:)`.
    package static func seal(_ plaintext: [UInt8], key: SecretBytes, aad: [UInt8], nonce: [UInt8]? = nil) throws
        -> [UInt8]
    {
        try plaintext.withUnsafeBytes { try seal($0, key: key, aad: aad, nonce: nonce) }
    }

    /// Seals secret bytes without copying them out of their wiping storage first.
    package static func seal(_ plaintext: SecretBytes, key: SecretBytes, aad: [UInt8], nonce: [UInt8]? = nil) throws
        -> [UInt8]
    {
        try plaintext.withUnsafeBytes { try seal($0, key: key, aad: aad, nonce: nonce) }
    }

    /// Verifies and decrypts a sealed box. Throws `.authenticationFailed` for a wrong key, wrong
    /// `aad`, any modified byte, or a box too short to contain nonce and tag; no plaintext is
    /// returned unless the tag verified.
    package static func open(_ sealed: [UInt8], key: SecretBytes, aad: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= overhead else { throw CryptoError.authenticationFailed }
        var plaintext = [UInt8](repeating: 0, count: sealed.count - overhead)
        do {
            try plaintext.withUnsafeMutableBytes { try decrypt(sealed, key: key, aad: aad, into: $0) }
        } catch {
            SecretBytes.wipe(&plaintext)  // unauthenticated plaintext must not linger
            throw error
        }
        return plaintext
    }

    /// Like `open`, but decrypts straight into wiping storage so the plaintext (a key, a password)
    /// never exists in an ordinary array.
    package static func openSecret(_ sealed: [UInt8], key: SecretBytes, aad: [UInt8]) throws -> SecretBytes {
        guard sealed.count >= overhead else { throw CryptoError.authenticationFailed }
        let plaintext = SecretBytes(count: sealed.count - overhead)
        // On failure `plaintext` is released here and its deinit wipes whatever was decrypted.
        try plaintext.withUnsafeMutableBytes { try decrypt(sealed, key: key, aad: aad, into: $0) }
        return plaintext
    }

    private static func checkKey(_ key: SecretBytes) throws {
        guard key.count == keySize else { throw CryptoError.invalidInput("AES-256-GCM key must be 32 bytes") }
    }

    /// Decrypts into `out` (exactly the ciphertext length). `out` holds unauthenticated bytes if this
    /// throws; the callers wipe it.
    private static func decrypt(
        _ sealed: [UInt8], key: SecretBytes, aad: [UInt8],
        into out: UnsafeMutableRawBufferPointer
    ) throws {
        try checkKey(key)
        let ciphertextLength = try evpLength(sealed.count - overhead, "AES-GCM ciphertext")
        let aadLength = try evpLength(aad.count, "AES-GCM associated data")
        let cipher = try OpenSSLAlgorithms.require(OpenSSLAlgorithms.shared.aes256gcm, "AES-256-GCM")
        guard let ctx = EVP_CIPHER_CTX_new() else { throw opensslError("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }

        var tag = Array(sealed.suffix(tagSize))
        try sealed.withUnsafeBufferPointer { input in
            let base = input.baseAddress!
            let initialised = key.withUnsafeBytes { keyBuffer in
                EVP_DecryptInit_ex2(ctx, cipher, keyBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), base, nil)
            }
            guard initialised == 1 else { throw opensslError("AES-GCM decrypt init") }
            var written: Int32 = 0
            if aadLength > 0 {
                guard EVP_DecryptUpdate(ctx, nil, &written, aad, aadLength) == 1 else {
                    throw opensslError("AES-GCM aad")
                }
            }
            let output = out.baseAddress?.assumingMemoryBound(to: UInt8.self)
            if ciphertextLength > 0 {
                guard EVP_DecryptUpdate(ctx, output, &written, base + nonceSize, ciphertextLength) == 1,
                    written == ciphertextLength
                else { throw opensslError("AES-GCM decrypt") }
            }
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), &tag) == 1 else {
                throw opensslError("AES-GCM set tag")
            }
            // Final is where the tag is compared (in constant time, inside OpenSSL).
            var finalBuffer = [UInt8](repeating: 0, count: 16)
            guard EVP_DecryptFinal_ex(ctx, &finalBuffer, &written) == 1 else {
                ERR_clear_error()
                throw CryptoError.authenticationFailed
            }
        }
    }
}
