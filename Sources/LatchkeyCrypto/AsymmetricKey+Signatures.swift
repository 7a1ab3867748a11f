internal import COpenSSL
import LatchkeySecrets

/// Signing and verification with Apple's algorithms (`SecKeyCreateSignature`,
/// `SecKeyVerifySignature`), following Security's `SecKeyAdaptors.m`: message algorithms hash and
/// then run the digest algorithm; ECDSA digest algorithms check the digest length; RSA-PSS needs a
/// modulus of at least 2·hLen+2 bytes; RFC 4754 signatures are the DER signature converted to `r ‖ s`.
extension AsymmetricKey {
    /// Signs `input` (a message or a digest, as `algorithm` says) with this private key.
    ///
    /// Throws `.unsupported` if the algorithm does not fit the key (wrong key type, a public key,
    /// RSA-PSS with a modulus too small for the hash), `.invalidInput` for a digest of the wrong length
    /// or raw input too long for the modulus.
    package func sign(_ algorithm: SignatureAlgorithm, _ input: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard isSupported(.sign, algorithm: algorithm.rawValue) else {
            throw CryptoError.unsupported("\(algorithm.rawValue) cannot sign with this key")
        }
        let digest = try signingInput(algorithm, input)
        switch algorithm.scheme {
        case .ecdsaDER:
            return try pkeySign(digest, configure: { _ in true })
        case .ecdsaRaw:
            return try Self.rawECDSASignature(fromDER: pkeySign(digest, configure: { _ in true }), fieldSize: blockSize)
        case .rsaPKCS1v15:
            if algorithm.digest == nil, digest.count > blockSize - 11 {
                throw CryptoError.invalidInput("input too long for PKCS#1 v1.5 signing with this key")
            }
            return try pkeySign(digest) { ctx throws(CryptoError) in
                try Self.configureRSA(ctx, padding: RSA_PKCS1_PADDING, digest: algorithm.digest, pss: false)
            }
        case .rsaPSS:
            return try pkeySign(digest) { ctx throws(CryptoError) in
                try Self.configureRSA(ctx, padding: RSA_PKCS1_PSS_PADDING, digest: algorithm.digest, pss: true)
            }
        case .rsaRaw:
            guard digest.count <= blockSize else { throw CryptoError.invalidInput("input longer than the RSA modulus") }
            let padded = [UInt8](repeating: 0, count: blockSize - digest.count) + digest
            return try pkeySign(padded) { ctx throws(CryptoError) in
                try Self.configureRSA(ctx, padding: RSA_NO_PADDING, digest: nil, pss: false)
            }
        }
    }

    /// Verifies `signature` over `input` with this public key: true if it is valid, false for any bad
    /// or malformed signature. Throws only for misuse (`.unsupported` algorithm for the key,
    /// `.invalidInput` digest of the wrong length).
    package func verify(_ algorithm: SignatureAlgorithm, _ input: [UInt8], signature: [UInt8]) throws(CryptoError)
        -> Bool
    {
        guard isSupported(.verify, algorithm: algorithm.rawValue) else {
            throw CryptoError.unsupported("\(algorithm.rawValue) cannot verify with this key")
        }
        let digest = try signingInput(algorithm, input)
        switch algorithm.scheme {
        case .ecdsaDER:
            return try pkeyVerify(digest, signature: signature, configure: { _ in true })
        case .ecdsaRaw:
            guard let der = Self.derECDSASignature(fromRaw: signature, fieldSize: blockSize) else { return false }
            return try pkeyVerify(digest, signature: der, configure: { _ in true })
        case .rsaPKCS1v15, .rsaPSS:
            let pss = algorithm.scheme == .rsaPSS
            return try pkeyVerify(digest, signature: signature) { ctx throws(CryptoError) in
                try Self.configureRSA(
                    ctx, padding: pss ? RSA_PKCS1_PSS_PADDING : RSA_PKCS1_PADDING, digest: algorithm.digest, pss: pss)
            }
        case .rsaRaw:
            guard let recovered = try rsaPublicRaw(signature) else { return false }
            // Apple's raw verification skips leading zeros of the result and compares the rest with
            // the input as given.
            return Array(recovered.drop { $0 == 0 }) == digest
        }
    }

    // MARK: Helpers

    /// The bytes actually signed: the hash of a message, or the given digest after a length check.
    private func signingInput(_ algorithm: SignatureAlgorithm, _ input: [UInt8]) throws(CryptoError) -> [UInt8] {
        if algorithm.hashesInput, let digest = algorithm.digest { return try digest.hash(input) }
        if let required = algorithm.requiredInputLength, input.count != required {
            throw CryptoError.invalidInput("bad digest size for signing with algorithm \(algorithm.rawValue)")
        }
        return input
    }

    /// Sets RSA padding, and for digest algorithms the signature hash (and for PSS the MGF1 hash and
    /// a salt as long as the digest). Returns true so it can serve as a `configure` closure.
    @discardableResult
    static func configureRSA(_ ctx: OpaquePointer, padding: Int32, digest: DigestAlgorithm?, pss: Bool)
        throws(CryptoError) -> Bool
    {
        guard EVP_PKEY_CTX_set_rsa_padding(ctx, padding) == 1 else { throw opensslError("setting RSA padding") }
        if let digest {
            let md = try digest.md()
            guard EVP_PKEY_CTX_set_signature_md(ctx, md) == 1 else {
                throw opensslError("setting the signature digest")
            }
            if pss {
                guard EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, md) == 1,
                    EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, RSA_PSS_SALTLEN_DIGEST) == 1
                else {
                    throw opensslError("setting RSA-PSS parameters")
                }
            }
        }
        return true
    }

    /// A fresh operation context for this key.
    func operationContext() throws(CryptoError) -> OpaquePointer {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { throw opensslError("key operation context") }
        return ctx
    }

    private func pkeySign(_ tbs: [UInt8], configure: (OpaquePointer) throws(CryptoError) -> Bool) throws(CryptoError)
        -> [UInt8]
    {
        let ctx = try operationContext()
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_sign_init(ctx) == 1 else { throw opensslError("signature init") }
        _ = try configure(ctx)
        var length = 0
        guard EVP_PKEY_sign(ctx, nil, &length, tbs, tbs.count) == 1 else { throw opensslError("signature size") }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_sign(ctx, &signature, &length, tbs, tbs.count) == 1 else {
            ERR_clear_error()
            throw CryptoError.invalidInput("the key cannot sign this input")
        }
        signature.removeLast(signature.count - length)
        return signature
    }

    private func pkeyVerify(
        _ tbs: [UInt8], signature: [UInt8],
        configure: (OpaquePointer) throws(CryptoError) -> Bool
    ) throws(CryptoError) -> Bool {
        let ctx = try operationContext()
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_verify_init(ctx) == 1 else { throw opensslError("verification init") }
        _ = try configure(ctx)
        let result = EVP_PKEY_verify(ctx, signature, signature.count, tbs, tbs.count)
        ERR_clear_error()  // a bad signature leaves reasons on the queue; they are not errors here
        return result == 1
    }

    /// The RSA public operation without padding (`signature^e mod n`), left-padded to the modulus
    /// size; nil for input that is too long or not below the modulus.
    private func rsaPublicRaw(_ input: [UInt8]) throws(CryptoError) -> [UInt8]? {
        guard input.count <= blockSize else { return nil }
        let padded = [UInt8](repeating: 0, count: blockSize - input.count) + input
        let ctx = try operationContext()
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_verify_recover_init(ctx) == 1 else { throw opensslError("RSA recover init") }
        try Self.configureRSA(ctx, padding: RSA_NO_PADDING, digest: nil, pss: false)
        var out = [UInt8](repeating: 0, count: blockSize)
        var length = out.count
        guard EVP_PKEY_verify_recover(ctx, &out, &length, padded, padded.count) == 1 else {
            ERR_clear_error()
            return nil
        }
        return [UInt8](repeating: 0, count: blockSize - length) + out.prefix(length)
    }

    /// DER `Ecdsa-Sig-Value` → `r ‖ s`, each left-padded to `fieldSize` (Apple's RFC 4754 form).
    static func rawECDSASignature(fromDER der: [UInt8], fieldSize: Int) throws(CryptoError) -> [UInt8] {
        var outer = try DER.single(der[...], "ECDSA signature").expect(DER.sequence, "ECDSA signature").contents()
        var out: [UInt8] = []
        for name in ["r", "s"] {
            let magnitude = try DER.unsignedMagnitude(outer.read(DER.integer, "ECDSA \(name)").content, "ECDSA \(name)")
            guard magnitude.count <= fieldSize else { throw CryptoError.invalidInput("ECDSA \(name) is too long") }
            out += [UInt8](repeating: 0, count: fieldSize - magnitude.count) + magnitude
        }
        try outer.finish("ECDSA signature")
        return out
    }

    /// `r ‖ s` → DER; nil unless the input is exactly two field-size halves.
    static func derECDSASignature(fromRaw raw: [UInt8], fieldSize: Int) -> [UInt8]? {
        guard raw.count == 2 * fieldSize else { return nil }
        let r = DER.unsignedInteger(raw.prefix(fieldSize)), s = DER.unsignedInteger(raw.suffix(fieldSize))
        return DER.encode(DER.sequence, r + s)
    }
}
