internal import COpenSSL
import LatchkeySecrets

/// HMAC (RFC 2104) through OpenSSL's `EVP_MAC`. The `EVP_MAC` object is fetched once per process
/// (see `OpenSSLAlgorithms`) because this runs once per indexed attribute on every query.
package enum HMAC {
    /// HMAC-SHA256 of `data` under `key`; 32 bytes.
    package static func sha256(key: SecretBytes, _ data: [UInt8]) throws -> [UInt8] {
        try data.withUnsafeBytes { try sha256(key: key, $0) }
    }

    /// HMAC-SHA256 of the bytes in `data` under `key`; 32 bytes.
    package static func sha256(key: SecretBytes, _ data: UnsafeRawBufferPointer) throws -> [UInt8] {
        let mac = try OpenSSLAlgorithms.require(OpenSSLAlgorithms.shared.hmac, "HMAC")
        guard let ctx = EVP_MAC_CTX_new(mac) else { throw opensslError("EVP_MAC_CTX_new") }
        defer { EVP_MAC_CTX_free(ctx) }  // wipes the keyed state

        var params = sha256DigestParams()
        // SecretBytes always has a non-nil base address, even for an empty key; OpenSSL treats a
        // NULL key as "reuse the previous key", which would fail on a fresh context.
        let initialised = key.withUnsafeBytes { keyBuffer in
            EVP_MAC_init(ctx, keyBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), keyBuffer.count, &params)
        }
        guard initialised == 1 else { throw opensslError("HMAC init") }
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
