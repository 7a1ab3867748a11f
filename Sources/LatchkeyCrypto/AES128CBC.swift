internal import COpenSSL
import LatchkeySecrets

/// AES-128-CBC with PKCS#7 padding through OpenSSL's EVP interface: the cipher of the Secret Service
/// session algorithm `dh-ietf1024-sha256-aes128-cbc-pkcs7` (docs/SECRET-SERVICE.md §6).
///
/// Unauthenticated: it protects a secret on its way over the local bus, never anything stored.
package enum AES128CBC {
    package static let keySize = 16
    package static let blockSize = 16

    /// Fetched once per process, like the algorithms in `OpenSSLAlgorithms`.
    nonisolated(unsafe) private static let cipher: OpaquePointer? = {
        let fetched = EVP_CIPHER_fetch(nil, "AES-128-CBC", nil)
        ERR_clear_error()
        return fetched
    }()

    /// Encrypts `plaintext`; the result is padded to a whole number of blocks (one more block when the
    /// plaintext is already a multiple).
    package static func encrypt(_ plaintext: [UInt8], key: SecretBytes, iv: [UInt8]) throws -> [UInt8] {
        try run(encrypt: true, plaintext, key: key, iv: iv)
    }

    /// Decrypts and removes the padding; a wrong length or wrong padding throws.
    package static func decrypt(_ ciphertext: [UInt8], key: SecretBytes, iv: [UInt8]) throws -> [UInt8] {
        guard !ciphertext.isEmpty, ciphertext.count % blockSize == 0 else {
            throw CryptoError.invalidInput("AES-CBC ciphertext is not a whole number of blocks")
        }
        return try run(encrypt: false, ciphertext, key: key, iv: iv)
    }

    private static func run(encrypt: Bool, _ input: [UInt8], key: SecretBytes, iv: [UInt8]) throws -> [UInt8] {
        guard key.count == keySize else { throw CryptoError.invalidInput("AES-128 key must be 16 bytes") }
        guard iv.count == blockSize else { throw CryptoError.invalidInput("AES-CBC IV must be 16 bytes") }
        let length = try evpLength(input.count, "AES-CBC input")
        let cipher = try OpenSSLAlgorithms.require(Self.cipher, "AES-128-CBC")
        guard let ctx = EVP_CIPHER_CTX_new() else { throw opensslError("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: input.count + blockSize)
        var total = 0
        do {
            try out.withUnsafeMutableBufferPointer { buffer in
                let base = buffer.baseAddress!
                let initialised = key.withUnsafeBytes { keyBuffer in
                    EVP_CipherInit_ex2(
                        ctx, cipher, keyBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), iv,
                        encrypt ? 1 : 0, nil)
                }
                guard initialised == 1 else { throw opensslError("AES-CBC init") }
                var written: Int32 = 0
                if length > 0 {
                    guard EVP_CipherUpdate(ctx, base, &written, input, length) == 1 else {
                        throw opensslError("AES-CBC update")
                    }
                }
                total = Int(written)
                guard EVP_CipherFinal_ex(ctx, base + total, &written) == 1 else {
                    ERR_clear_error()
                    throw CryptoError.invalidInput("AES-CBC padding is wrong (wrong key or damaged data)")
                }
                total += Int(written)
            }
        } catch {
            SecretBytes.wipe(&out)
            throw error
        }
        if total < out.count {
            // Wipe the tail before dropping it: it may hold decrypted bytes of the padding block.
            for k in total..<out.count { out[k] = 0 }
            out.removeLast(out.count - total)
        }
        return out
    }
}
