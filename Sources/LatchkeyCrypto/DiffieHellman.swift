internal import COpenSSL
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// Finite-field Diffie-Hellman in RFC 2409's second Oakley group (1024-bit MODP prime, generator 2),
/// through OpenSSL's `EVP_PKEY` "DH" key type: what the Secret Service session algorithm
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` uses (docs/SECRET-SERVICE.md §6).
///
/// 1024-bit DH is weak by today's standards; the Secret Service uses it only to keep secrets from
/// being plain text on the local bus, which every process of the user can reach anyway.
package final class OakleyGroup2KeyPair: @unchecked Sendable {
    /// Bytes of the prime, of a public key and of a shared secret.
    package static let size = 128

    /// RFC 2409 §6.2: 2^1024 - 2^960 - 1 + 2^64 * (floor(2^894 pi) + 129093), big-endian.
    package static let prime: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xC9, 0x0F, 0xDA, 0xA2, 0x21, 0x68, 0xC2, 0x34,
        0xC4, 0xC6, 0x62, 0x8B, 0x80, 0xDC, 0x1C, 0xD1, 0x29, 0x02, 0x4E, 0x08, 0x8A, 0x67, 0xCC, 0x74,
        0x02, 0x0B, 0xBE, 0xA6, 0x3B, 0x13, 0x9B, 0x22, 0x51, 0x4A, 0x08, 0x79, 0x8E, 0x34, 0x04, 0xDD,
        0xEF, 0x95, 0x19, 0xB3, 0xCD, 0x3A, 0x43, 0x1B, 0x30, 0x2B, 0x0A, 0x6D, 0xF2, 0x5F, 0x14, 0x37,
        0x4F, 0xE1, 0x35, 0x6D, 0x6D, 0x51, 0xC2, 0x45, 0xE4, 0x85, 0xB5, 0x76, 0x62, 0x5E, 0x7E, 0xC6,
        0xF4, 0x4C, 0x42, 0xE9, 0xA6, 0x37, 0xED, 0x6B, 0x0B, 0xFF, 0x5C, 0xB6, 0xF4, 0x06, 0xB7, 0xED,
        0xEE, 0x38, 0x6B, 0xFB, 0x5A, 0x89, 0x9F, 0xA5, 0xAE, 0x9F, 0x24, 0x11, 0x7C, 0x4B, 0x1F, 0xE6,
        0x49, 0x28, 0x66, 0x51, 0xEC, 0xE6, 0x53, 0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    ]
    static let generator: [UInt8] = [2]

    /// The key pair; its private half lives in OpenSSL's memory and is freed (cleared) on deinit.
    private let key: OpaquePointer

    /// Generates a fresh key pair.
    package init() throws {
        let parameters = try Self.makeKey(selection: Self.parametersSelection, publicKey: nil)
        defer { EVP_PKEY_free(parameters) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, parameters, nil) else {
            throw opensslError("DH keygen context")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_generate(ctx, &generated) == 1, let generated else {
            throw opensslError("DH key generation")
        }
        key = generated
    }

    deinit { EVP_PKEY_free(key) }

    /// Our public key, big-endian, left-padded with zeros to 128 bytes.
    package func publicKey() throws -> [UInt8] {
        var native = [UInt8](repeating: 0, count: Self.size)
        let ok = native.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var params = [
                OSSL_PARAM_construct_BN(Names.pub, buffer.baseAddress, buffer.count), OSSL_PARAM_construct_end(),
            ]
            return EVP_PKEY_get_params(key, &params)
        }
        guard ok == 1 else { throw opensslError("reading the DH public key") }
        return Self.bigEndian(fromNative: native)
    }

    /// The shared secret with a peer whose public key is `peer` (big-endian, at most 128 bytes),
    /// left-padded with zeros to 128 bytes. Throws `.invalidInput` for a key that is not in 2 ... p-2.
    package func sharedSecret(peer: [UInt8]) throws -> SecretBytes {
        guard peer.count <= Self.size, Self.isValidPublicKey(peer) else {
            throw CryptoError.invalidInput("the peer's DH public key is out of range")
        }
        let peerKey = try Self.makeKey(selection: Self.publicKeySelection, publicKey: peer)
        defer { EVP_PKEY_free(peerKey) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw opensslError("DH derive context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var length = 0
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer(ctx, peerKey) == 1,
            EVP_PKEY_derive(ctx, nil, &length) == 1, length > 0, length <= Self.size
        else {
            throw opensslError("DH derive")
        }
        let raw = SecretBytes(count: length)
        let derived = raw.withUnsafeMutableBytes { buffer -> Int32 in
            var written = buffer.count
            let result = EVP_PKEY_derive(ctx, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &written)
            length = written
            return result
        }
        guard derived == 1 else { throw opensslError("DH derive") }
        // OpenSSL drops leading zero bytes; the Secret Service pads to the prime's length.
        let padded = SecretBytes(count: Self.size)
        padded.withUnsafeMutableBytes { out in
            raw.withUnsafeBytes { input in
                for k in 0..<length { out[Self.size - length + k] = input[k] }
            }
        }
        return padded
    }

    /// 1 < y < p - 1, as big-endian bytes of any length.
    static func isValidPublicKey(_ y: [UInt8]) -> Bool {
        let trimmed = Array(y.drop { $0 == 0 })
        guard !trimmed.isEmpty, !(trimmed.count == 1 && trimmed[0] == 1) else { return false }
        guard trimmed.count == size else { return trimmed.count < size }
        var pMinus1 = prime
        pMinus1[size - 1] -= 1  // the prime ends in 0xFF
        return trimmed.lexicographicallyPrecedes(pMinus1)
    }

    // MARK: OpenSSL plumbing

    private static let parametersSelection = Int32(
        OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS)
    private static let publicKeySelection = parametersSelection | Int32(OSSL_KEYMGMT_SELECT_PUBLIC_KEY)

    /// `OSSL_PARAM` keeps the name pointers it is given, so they must outlive every use: allocated
    /// once, never freed.
    private enum Names {
        nonisolated(unsafe) static let p = strdup("p")!
        nonisolated(unsafe) static let g = strdup("g")!
        nonisolated(unsafe) static let pub = strdup("pub")!
    }

    /// An `EVP_PKEY` of type DH with the group's parameters and, when given, a public key.
    private static func makeKey(selection: Int32, publicKey: [UInt8]?) throws -> OpaquePointer {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "DH", nil) else { throw opensslError("DH context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        // OSSL_PARAM integers are unsigned in native byte order.
        var p = native(fromBigEndian: prime)
        var g = native(fromBigEndian: generator)
        var y = native(fromBigEndian: publicKey ?? [])
        var made: OpaquePointer?
        let ok = p.withUnsafeMutableBufferPointer { pBuffer in
            g.withUnsafeMutableBufferPointer { gBuffer in
                y.withUnsafeMutableBufferPointer { yBuffer -> Int32 in
                    var params = [
                        OSSL_PARAM_construct_BN(Names.p, pBuffer.baseAddress, pBuffer.count),
                        OSSL_PARAM_construct_BN(Names.g, gBuffer.baseAddress, gBuffer.count),
                    ]
                    if publicKey != nil {
                        params.append(OSSL_PARAM_construct_BN(Names.pub, yBuffer.baseAddress, yBuffer.count))
                    }
                    params.append(OSSL_PARAM_construct_end())
                    guard EVP_PKEY_fromdata_init(ctx) == 1 else { return 0 }
                    return EVP_PKEY_fromdata(ctx, &made, selection, &params)
                }
            }
        }
        guard ok == 1, let made else { throw opensslError("DH key from data") }
        return made
    }

    private static func native(fromBigEndian bytes: [UInt8]) -> [UInt8] {
        let isLittleEndian = 1.littleEndian == 1
        let value = bytes.isEmpty ? [0] : bytes
        return isLittleEndian ? value.reversed() : value
    }

    private static func bigEndian(fromNative bytes: [UInt8]) -> [UInt8] {
        1.littleEndian == 1 ? bytes.reversed() : bytes
    }
}
