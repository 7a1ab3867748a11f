internal import COpenSSL
import LatchkeySecrets

/// Apple's key-exchange algorithms (`SecKeyCopyKeyExchangeResult`). Raw values are Apple's exact
/// strings from Security's `SecKeyAdaptors.m`.
///
/// The plain variants return the ECDH shared secret (the x-coordinate, padded to the field size,
/// `ccecdh_compute_shared_secret`). The X9.63 variants run that secret through the ANSI X9.63 KDF
/// with the caller's shared info and requested size (`SecKeyECDHCopyX963Result`); Apple's
/// `kSecKeyKeyExchangeParameterRequestedSize` is required for them.
package enum KeyExchangeAlgorithm: String, Sendable, CaseIterable {
    /// `kSecKeyAlgorithmECDHKeyExchangeStandard`.
    case ecdhKeyExchangeStandard = "algid:keyexchange:ECDH"
    /// `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA1`.
    case ecdhKeyExchangeStandardX963SHA1 = "algid:keyexchange:ECDH:KDFX963:SHA1"
    /// `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA224`.
    case ecdhKeyExchangeStandardX963SHA224 = "algid:keyexchange:ECDH:KDFX963:SHA224"
    /// `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA256`.
    case ecdhKeyExchangeStandardX963SHA256 = "algid:keyexchange:ECDH:KDFX963:SHA256"
    /// `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA384`.
    case ecdhKeyExchangeStandardX963SHA384 = "algid:keyexchange:ECDH:KDFX963:SHA384"
    /// `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA512`.
    case ecdhKeyExchangeStandardX963SHA512 = "algid:keyexchange:ECDH:KDFX963:SHA512"
    /// Cofactor ECDH: the same results as Standard on the NIST curves, whose cofactor is 1.
    case ecdhKeyExchangeCofactor = "algid:keyexchange:ECDHC"
    /// `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA1`.
    case ecdhKeyExchangeCofactorX963SHA1 = "algid:keyexchange:ECDHC:KDFX963:SHA1"
    /// `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA224`.
    case ecdhKeyExchangeCofactorX963SHA224 = "algid:keyexchange:ECDHC:KDFX963:SHA224"
    /// `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA256`.
    case ecdhKeyExchangeCofactorX963SHA256 = "algid:keyexchange:ECDHC:KDFX963:SHA256"
    /// `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA384`.
    case ecdhKeyExchangeCofactorX963SHA384 = "algid:keyexchange:ECDHC:KDFX963:SHA384"
    /// `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA512`.
    case ecdhKeyExchangeCofactorX963SHA512 = "algid:keyexchange:ECDHC:KDFX963:SHA512"

    /// True for the cofactor variants.
    package var usesCofactor: Bool { rawValue.hasPrefix("algid:keyexchange:ECDHC") }

    /// The X9.63 KDF hash, or nil for the raw shared secret.
    package var kdfDigest: DigestAlgorithm? {
        let name = rawValue
        if name.hasSuffix("SHA1") { return .sha1 }
        if name.hasSuffix("SHA224") { return .sha224 }
        if name.hasSuffix("SHA256") { return .sha256 }
        if name.hasSuffix("SHA384") { return .sha384 }
        if name.hasSuffix("SHA512") { return .sha512 }
        return nil
    }
}

extension AsymmetricKey {
    /// Largest output `keyExchange` derives (a cap on a caller-supplied size, far above any key).
    package static let maximumKeyExchangeOutput = 1 << 16

    /// ECDH between this private key and `peer`'s public half (on the same curve), optionally
    /// through the X9.63 KDF. `requestedSize` (bytes, 1...`maximumKeyExchangeOutput`) is required
    /// for the KDF variants and ignored otherwise, as is `sharedInfo`.
    package func keyExchange(
        _ algorithm: KeyExchangeAlgorithm, with peer: AsymmetricKey, requestedSize: Int? = nil,
        sharedInfo: [UInt8] = []
    ) throws(CryptoError) -> SecretBytes {
        guard isSupported(.keyExchange, algorithm: algorithm.rawValue) else {
            throw CryptoError.unsupported("\(algorithm.rawValue) needs an EC private key")
        }
        try checkExchangePeer(peer)
        let secret = try ecdh(peer: peer.pkey, cofactor: algorithm.usesCofactor)
        return try Self.keyExchangeResult(
            algorithm, secret: secret, requestedSize: requestedSize, sharedInfo: sharedInfo)
    }

    /// Refuses a peer that is not an EC public key on this key's curve (this key may be the public
    /// half of a private key held elsewhere, a token's).
    package func checkExchangePeer(_ peer: AsymmetricKey) throws(CryptoError) {
        guard algorithm == .ec, peer.algorithm == .ec, peer.curve == curve else {
            throw CryptoError.invalidInput("the peer key is not a key on the same curve")
        }
    }

    /// The bytes the X9.63 variants derive (`requestedSize`, checked), or nil for the raw secret:
    /// a check that can run before the ECDH, as a token key's does (no PIN asked for a bad request).
    package static func keyExchangeOutputSize(_ algorithm: KeyExchangeAlgorithm, requestedSize: Int?)
        throws(CryptoError) -> Int?
    {
        guard algorithm.kdfDigest != nil else { return nil }
        guard let requestedSize else {
            throw CryptoError.invalidInput("kSecKeyKeyExchangeParameterRequestedSize is missing")
        }
        guard requestedSize >= 1, requestedSize <= Self.maximumKeyExchangeOutput else {
            throw CryptoError.invalidInput("requested key exchange size out of range")
        }
        return requestedSize
    }

    /// What follows the ECDH for `algorithm`, wherever the ECDH ran (here, or on a token): the
    /// shared secret as it is, or the X9.63 KDF of it with `sharedInfo` to the requested size.
    package static func keyExchangeResult(
        _ algorithm: KeyExchangeAlgorithm, secret: SecretBytes, requestedSize: Int?, sharedInfo: [UInt8]
    ) throws(CryptoError) -> SecretBytes {
        guard let count = try keyExchangeOutputSize(algorithm, requestedSize: requestedSize),
            let digest = algorithm.kdfDigest
        else { return secret }
        return try x963KDF(digest, secret: secret, sharedInfo: sharedInfo, count: count)
    }

    /// The ECDH shared secret with `peer` (an `EVP_PKEY` on the same curve): the x-coordinate,
    /// left-padded to the field size.
    func ecdh(peer: OpaquePointer, cofactor: Bool) throws(CryptoError) -> SecretBytes {
        let ctx = try operationContext()
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_CTX_set_ecdh_cofactor_mode(ctx, cofactor ? 1 : 0) == 1 else {
            throw opensslError("ECDH init")
        }
        guard EVP_PKEY_derive_set_peer(ctx, peer) == 1 else {
            ERR_clear_error()
            throw CryptoError.invalidInput("the peer public key cannot be used for ECDH with this key")
        }
        var length = 0
        guard EVP_PKEY_derive(ctx, nil, &length) == 1, length == blockSize else { throw opensslError("ECDH size") }
        let secret = SecretBytes(count: length)
        let ok = secret.withUnsafeMutableBytes { buffer in
            EVP_PKEY_derive(ctx, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &length)
        }
        guard ok == 1, length == blockSize else { throw opensslError("ECDH") }
        return secret
    }

    /// ANSI X9.63 KDF (SEC 1 §3.6.1): `Hash(Z ‖ counter ‖ sharedInfo)` for counter 1, 2, …,
    /// truncated to `count` bytes; OpenSSL's "X963KDF".
    static func x963KDF(_ digest: DigestAlgorithm, secret: SecretBytes, sharedInfo: [UInt8], count: Int)
        throws(CryptoError) -> SecretBytes
    {
        let kdf = try fetched(AsymmetricAlgorithms.shared.x963kdf, "X963KDF")
        guard let ctx = EVP_KDF_CTX_new(kdf) else { throw opensslError("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(ctx) }
        let output = SecretBytes(count: count)
        var info = sharedInfo
        let ok = secret.withUnsafeBytes { key in
            info.withUnsafeMutableBytes { infoBuffer in
                output.withUnsafeMutableBytes { out -> Int32 in
                    var params = [
                        OSSL_PARAM_construct_utf8_string(staticCString("digest"), digest.parameterName, 0),
                        OSSL_PARAM_construct_octet_string(
                            staticCString("key"), UnsafeMutableRawPointer(mutating: key.baseAddress!), key.count),
                    ]
                    if infoBuffer.count > 0 {
                        params.append(
                            OSSL_PARAM_construct_octet_string(
                                staticCString("info"), infoBuffer.baseAddress, infoBuffer.count))
                    }
                    params.append(OSSL_PARAM_construct_end())
                    return EVP_KDF_derive(ctx, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, &params)
                }
            }
        }
        guard ok == 1 else { throw opensslError("X9.63 KDF") }
        return output
    }
}
