internal import COpenSSL
import LatchkeySecrets

/// AES-GCM with a 128- or 256-bit key and a caller-chosen IV length, for Apple's hybrid schemes
/// (ECIES and RSA-OAEP+AES-GCM), which use 16-byte IVs (GHASHed, unlike the 12-byte IV of
/// `AES256GCM`) and put the 16-byte tag after the ciphertext.
enum AESGCMCore {
    static let tagSize = 16

    /// `ciphertext ‖ tag` of `plaintext`.
    static func seal(_ plaintext: UnsafeRawBufferPointer, key: SecretBytes, iv: [UInt8], aad: [UInt8])
        throws(CryptoError) -> [UInt8]
    {
        let ctx = try context(encrypt: true, key: key, iv: iv)
        defer { EVP_CIPHER_CTX_free(ctx) }
        let length = try evpLengthTyped(plaintext.count)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagSize)
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            let base = buffer.baseAddress!
            var written: Int32 = 0
            if !aad.isEmpty, EVP_EncryptUpdate(ctx, nil, &written, aad, Int32(aad.count)) != 1 { return false }
            if length > 0,
                EVP_EncryptUpdate(
                    ctx, base, &written, plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    length) != 1 || written != length
            {
                return false
            }
            guard EVP_EncryptFinal_ex(ctx, base + plaintext.count, &written) == 1 else { return false }
            return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), base + plaintext.count) == 1
        }
        guard ok else { throw opensslError("AES-GCM encryption") }
        return out
    }

    /// Verifies the tag at the end of `sealed` and returns the plaintext in wiping storage. Throws
    /// `.authenticationFailed` for a wrong key, IV, AAD or any changed byte; no plaintext is released
    /// unless the tag verified.
    static func open(_ sealed: ArraySlice<UInt8>, key: SecretBytes, iv: [UInt8], aad: [UInt8]) throws(CryptoError)
        -> SecretBytes
    {
        guard sealed.count >= tagSize else { throw CryptoError.invalidInput("AES-GCM input too short for its tag") }
        let ctx = try context(encrypt: false, key: key, iv: iv)
        defer { EVP_CIPHER_CTX_free(ctx) }
        let ciphertext = Array(sealed.dropLast(tagSize))
        var tag = Array(sealed.suffix(tagSize))
        let length = try evpLengthTyped(ciphertext.count)
        let plaintext = SecretBytes(count: ciphertext.count)
        let ok = plaintext.withUnsafeMutableBytes { buffer -> Bool in
            let out = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var written: Int32 = 0
            if !aad.isEmpty, EVP_DecryptUpdate(ctx, nil, &written, aad, Int32(aad.count)) != 1 { return false }
            if length > 0, EVP_DecryptUpdate(ctx, out, &written, ciphertext, length) != 1 || written != length {
                return false
            }
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), &tag) == 1 else { return false }
            var final = [UInt8](repeating: 0, count: 16)
            return EVP_DecryptFinal_ex(ctx, &final, &written) == 1
        }
        ERR_clear_error()
        // On failure `plaintext` is released here and wiped by its deinit.
        guard ok else { throw CryptoError.authenticationFailed }
        return plaintext
    }

    private static func context(encrypt: Bool, key: SecretBytes, iv: [UInt8]) throws(CryptoError) -> OpaquePointer {
        let cipher: OpaquePointer
        switch key.count {
        case 16: cipher = try fetched(AsymmetricAlgorithms.shared.aes128gcm, "AES-128-GCM")
        case 32: cipher = try fetched(OpenSSLAlgorithms.shared.aes256gcm, "AES-256-GCM")
        default: throw CryptoError.invalidInput("AES-GCM key must be 16 or 32 bytes")
        }
        guard !iv.isEmpty, iv.count <= 64 else { throw CryptoError.invalidInput("AES-GCM IV length out of range") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw opensslError("EVP_CIPHER_CTX_new") }
        let ok = key.withUnsafeBytes { keyBuffer -> Bool in
            let keyPointer = keyBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            if encrypt {
                return EVP_EncryptInit_ex2(ctx, cipher, nil, nil, nil) == 1
                    && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(iv.count), nil) == 1
                    && EVP_EncryptInit_ex2(ctx, nil, keyPointer, iv, nil) == 1
            }
            return EVP_DecryptInit_ex2(ctx, cipher, nil, nil, nil) == 1
                && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(iv.count), nil) == 1
                && EVP_DecryptInit_ex2(ctx, nil, keyPointer, iv, nil) == 1
        }
        guard ok else {
            EVP_CIPHER_CTX_free(ctx)
            throw opensslError("AES-GCM init")
        }
        return ctx
    }

    private static func evpLengthTyped(_ count: Int) throws(CryptoError) -> Int32 {
        guard count <= Int(Int32.max) else { throw CryptoError.invalidInput("AES-GCM input is too large") }
        return Int32(count)
    }
}
