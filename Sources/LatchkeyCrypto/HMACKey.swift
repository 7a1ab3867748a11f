internal import COpenSSL
import LatchkeySecrets

/// An HMAC-SHA256 key set up once, for a key that computes many MACs (the keychain's index key
/// hashes every attribute of every query and every stored item).
///
/// Keying a context (`EVP_MAC_init`) looks the digest up by name in the provider store and hashes the
/// key into the inner and outer pads: about 19k instructions, which made 15 % of a Secret Service
/// search when every hash keyed a fresh context. Here the keyed context is made once; each MAC
/// duplicates it (`EVP_MAC_CTX_dup`: plain copies of the already keyed digest states) and only hashes
/// the message. `HMAC.sha256(key:_:)`, for a key used once, is this with a context of its own.
///
/// The keyed context holds the pads derived from the key, which are as secret as the key. It is
/// freed, and OpenSSL clears it (`HMAC_CTX_free` cleanses its digest contexts), when the last
/// reference to this object goes away: the engine drops its reference whenever it drops the class
/// key the index key comes from. OpenSSL 3's HMAC also keeps a copy of the key bytes in the context
/// (and in each duplicate); it frees them with `OPENSSL_secure_clear_free`, so they are cleared too.
///
/// Thread-safe: the keyed context is only ever read (duplicated), and each MAC works on its own copy.
package final class HMACKey: @unchecked Sendable {
    private let keyed: OpaquePointer

    /// Keys a context with `key` (any length).
    package init(_ key: SecretBytes) throws {
        let mac = try OpenSSLAlgorithms.require(OpenSSLAlgorithms.shared.hmac, "HMAC")
        guard let ctx = EVP_MAC_CTX_new(mac) else { throw opensslError("EVP_MAC_CTX_new") }
        var params = sha256DigestParams()
        // SecretBytes always has a non-nil base address, even when empty; a NULL key would mean
        // "reuse the previous key" to OpenSSL, which a fresh context does not have.
        let initialised = key.withUnsafeBytes { keyBuffer in
            EVP_MAC_init(ctx, keyBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), keyBuffer.count, &params)
        }
        guard initialised == 1 else {
            EVP_MAC_CTX_free(ctx)
            throw opensslError("HMAC init")
        }
        keyed = ctx
    }

    deinit { EVP_MAC_CTX_free(keyed) }

    /// HMAC-SHA256 of `data`; 32 bytes.
    package func sha256(_ data: [UInt8]) throws -> [UInt8] {
        try data.withUnsafeBytes { try sha256($0) }
    }

    /// HMAC-SHA256 of the bytes in `data`; 32 bytes.
    package func sha256(_ data: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard let ctx = EVP_MAC_CTX_dup(keyed) else { throw opensslError("EVP_MAC_CTX_dup") }
        defer { EVP_MAC_CTX_free(ctx) }  // clears the copied keyed state
        if data.count > 0 {
            guard EVP_MAC_update(ctx, data.baseAddress!.assumingMemoryBound(to: UInt8.self), data.count) == 1 else {
                throw opensslError("HMAC update")
            }
        }
        var out = [UInt8](repeating: 0, count: 32)
        var written = 0
        guard EVP_MAC_final(ctx, &out, &written, out.count) == 1, written == 32 else {
            throw opensslError("HMAC final")
        }
        return out
    }
}
