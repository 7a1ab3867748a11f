internal import COpenSSL
import LatchkeySecrets

/// HKDF (RFC 5869) through OpenSSL's `EVP_KDF` "HKDF", extract-then-expand mode.
package enum HKDF {
    /// HKDF-SHA256 of `ikm` with `salt` and `info`, producing `count` bytes (1...8160) into wiping
    /// storage. An empty salt is equivalent to RFC 5869's default of 32 zero bytes.
    package static func sha256(ikm: SecretBytes, salt: [UInt8], info: [UInt8], count: Int) throws -> SecretBytes {
        guard count > 0, count <= 255 * 32 else { throw CryptoError.invalidInput("HKDF output length out of range") }
        let kdf = try OpenSSLAlgorithms.require(OpenSSLAlgorithms.shared.hkdf, "HKDF")
        guard let ctx = EVP_KDF_CTX_new(kdf) else { throw opensslError("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(ctx) }  // wipes the copied key material

        let output = SecretBytes(count: count)
        var salt = salt
        var info = info
        let ok = ikm.withUnsafeBytes { ikmBuffer in
            salt.withUnsafeMutableBytes { saltBuffer in
                info.withUnsafeMutableBytes { infoBuffer in
                    output.withUnsafeMutableBytes { outBuffer -> Int32 in
                        var params: [OSSL_PARAM] = [
                            OSSL_PARAM_construct_utf8_string(staticCString("digest"), staticCString("SHA256"), 0),
                            OSSL_PARAM_construct_octet_string(
                                staticCString("key"),
                                UnsafeMutableRawPointer(mutating: ikmBuffer.baseAddress),
                                ikmBuffer.count),
                        ]
                        // Empty salt/info are left out rather than passed as zero-length buffers:
                        // OpenSSL then applies RFC 5869's defaults, and no NULL pointer is handed over.
                        if saltBuffer.count > 0 {
                            params.append(
                                OSSL_PARAM_construct_octet_string(
                                    staticCString("salt"),
                                    saltBuffer.baseAddress, saltBuffer.count))
                        }
                        if infoBuffer.count > 0 {
                            params.append(
                                OSSL_PARAM_construct_octet_string(
                                    staticCString("info"),
                                    infoBuffer.baseAddress, infoBuffer.count))
                        }
                        params.append(OSSL_PARAM_construct_end())
                        return EVP_KDF_derive(
                            ctx, outBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            outBuffer.count, &params)
                    }
                }
            }
        }
        guard ok == 1 else { throw opensslError("HKDF derive") }
        return output
    }
}
