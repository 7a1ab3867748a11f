internal import COpenSSL
import LatchkeySecrets

/// Apple's external representation of keys: what `SecKeyCopyExternalRepresentation` returns and
/// `SecKeyCreateWithData` accepts, and what the keychain stores as a key item's value data.
///
/// From Apple's sources (Security, `OSX/sec/Security/SecRSAKey.c` and `SecECKey.m`):
/// - RSA private: PKCS#1 `RSAPrivateKey` DER; RSA public: PKCS#1 `RSAPublicKey` DER. Apple imports
///   moduli up to 8192 bits (`kMaximumRSAKeyBits`).
/// - EC public: the X9.63 uncompressed point `04 ‖ X ‖ Y`; EC private: `04 ‖ X ‖ Y ‖ K` with K
///   left-padded to the field size (`ccec_export_pub` then `ccn_write_uint_padded`). The curve is
///   inferred from the length (`ccec_x963_import_pub_size` / `_priv_size`), so a caller need not give
///   the size.
///
/// latchkey checks more than Apple does: an imported EC point must be on its curve and an EC private
/// scalar must match its point (Apple reads K without comparing), and an RSA private key must pass
/// OpenSSL's key check, so a damaged blob fails here rather than producing wrong signatures later.
extension AsymmetricKey {
    /// Apple's `SecKeyCreateWithData`: a key from its external representation. Throws
    /// `.invalidInput` for bytes that do not parse, a point that is not on its curve, a scalar that
    /// does not match its point, or a blob of the other class (a private blob with `isPrivate`
    /// false or the reverse); `.unsupported` for RSA moduli outside `importableRSABits`.
    ///
    /// `validate: false` skips OpenSSL's key check (the RSA primality and pairwise tests cost tens of
    /// milliseconds to seconds): only for bytes that were validated before and have been authenticated
    /// since, such as a keychain item's (AES-GCM sealed) key material. Structure is always checked.
    package convenience init(
        externalRepresentation data: SecretBytes, algorithm: Algorithm, isPrivate: Bool,
        validate: Bool = true
    ) throws(CryptoError) {
        var made: OpaquePointer?
        var failure: CryptoError?
        data.withUnsafeBytes { buffer in
            do throws(CryptoError) {
                made = try Self.makeKey(
                    external: buffer, algorithm: algorithm, isPrivate: isPrivate, validate: validate)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        try self.init(adopting: made!)
        guard self.isPrivate == isPrivate else {
            throw CryptoError.invalidInput(
                isPrivate ? "the data is a public key, not a private key" : "the data is a private key")
        }
    }

    /// `init(externalRepresentation:algorithm:isPrivate:)` for data in an ordinary array (public keys).
    package convenience init(
        externalRepresentation data: [UInt8], algorithm: Algorithm, isPrivate: Bool,
        validate: Bool = true
    ) throws(CryptoError) {
        try self.init(
            externalRepresentation: SecretBytes(copying: data), algorithm: algorithm, isPrivate: isPrivate,
            validate: validate)
    }

    /// Apple's `SecKeyCopyExternalRepresentation`: PKCS#1 DER for RSA, `04 ‖ X ‖ Y [‖ K]` for EC.
    /// For a public key this is `publicKeyBytes`.
    package func externalRepresentation() throws(CryptoError) -> SecretBytes {
        guard isPrivate else { return SecretBytes(copying: publicKeyBytes) }
        switch algorithm {
        case .rsa:
            return try KeyCodec.encode(
                pkey, selection: KeyCodec.keyPairSelection, outputType: "DER", structure: "type-specific")
        case .ec:
            let scalar = try ecPrivateScalar()
            let out = SecretBytes(count: publicKeyBytes.count + scalar.count)
            out.withUnsafeMutableBytes { buffer in
                for k in 0..<publicKeyBytes.count { buffer[k] = publicKeyBytes[k] }
                scalar.withUnsafeBytes { k in
                    for index in 0..<k.count { buffer[publicKeyBytes.count + index] = k[index] }
                }
            }
            return out
        }
    }

    // MARK: Import

    private static func makeKey(
        external data: UnsafeRawBufferPointer, algorithm: Algorithm,
        isPrivate: Bool, validate: Bool
    ) throws(CryptoError) -> OpaquePointer {
        switch algorithm {
        case .rsa: return try makeRSA(pkcs1: data, isPrivate: isPrivate, validate: validate)
        case .ec: return try makeEC(x963: data, isPrivate: isPrivate, validate: validate)
        }
    }

    /// Decodes PKCS#1 DER, then insists that re-encoding gives the same bytes (so the input was one
    /// canonical structure of the right class, with nothing after it) and that OpenSSL's key check
    /// passes.
    private static func makeRSA(pkcs1 data: UnsafeRawBufferPointer, isPrivate: Bool, validate: Bool) throws(CryptoError)
        -> OpaquePointer
    {
        let selection = isPrivate ? KeyCodec.keyPairSelection : KeyCodec.publicSelection
        let pkey = try KeyCodec.decode(
            data, inputType: "DER", structure: "type-specific", keyType: "RSA",
            selection: selection, password: nil)
        do throws(CryptoError) {
            guard EVP_PKEY_is_a(pkey, "RSA") == 1 else { throw CryptoError.invalidInput("the data is not an RSA key") }
            let bits = Int(EVP_PKEY_get_bits(pkey))
            guard importableRSABits.contains(bits) else {
                throw CryptoError.unsupported("RSA keys of \(bits) bits are not supported")
            }
            let reencoded = try KeyCodec.encode(
                pkey, selection: selection, outputType: "DER", structure: "type-specific")
            let same = reencoded.withUnsafeBytes { SecretBytes.constantTimeEquals($0, data) }
            guard same else {
                throw CryptoError.invalidInput(
                    isPrivate ? "the data is not one PKCS#1 RSAPrivateKey" : "the data is not one PKCS#1 RSAPublicKey")
            }
            if validate { try check(pkey, full: isPrivate) }
            return pkey
        } catch {
            EVP_PKEY_free(pkey)
            throw error
        }
    }

    /// Builds an EC key from `04 ‖ X ‖ Y [‖ K]`, inferring the curve from the length.
    private static func makeEC(x963 data: UnsafeRawBufferPointer, isPrivate: Bool, validate: Bool) throws(CryptoError)
        -> OpaquePointer
    {
        let parts = isPrivate ? 3 : 2
        guard data.count > 1, (data.count - 1) % parts == 0,
            let curve = EllipticCurve.allCases.first(where: { $0.fieldSize == (data.count - 1) / parts })
        else {
            throw CryptoError.invalidInput("EC key data has a length that fits no supported curve")
        }
        guard data[0] == 0x04 else {
            throw CryptoError.invalidInput("EC public key is not an uncompressed X9.63 point")
        }
        let pointLength = 1 + 2 * curve.fieldSize
        // OSSL_PARAM BIGNUMs are unsigned native-endian: reverse K into wiping storage on little-endian hosts.
        let scalar = SecretBytes(count: isPrivate ? curve.fieldSize : 0)
        scalar.withUnsafeMutableBytes { out in
            let isLittleEndian = 1.littleEndian == 1
            for k in 0..<out.count {
                out[k] = data[pointLength + (isLittleEndian ? out.count - 1 - k : k)]
            }
        }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw opensslError("EC key context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var made: OpaquePointer?
        let ok = scalar.withUnsafeMutableBytes { k -> Int32 in
            var params = [
                OSSL_PARAM_construct_utf8_string(staticCString("group"), curve.groupName, 0),
                OSSL_PARAM_construct_octet_string(
                    staticCString("pub"), UnsafeMutableRawPointer(mutating: data.baseAddress!), pointLength),
            ]
            if isPrivate {
                params.append(
                    OSSL_PARAM_construct_BN(
                        staticCString("priv"), k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count))
            }
            params.append(OSSL_PARAM_construct_end())
            guard EVP_PKEY_fromdata_init(ctx) == 1 else { return 0 }
            return EVP_PKEY_fromdata(
                ctx, &made, isPrivate ? KeyCodec.keyPairSelection : KeyCodec.publicSelection, &params)
        }
        ERR_clear_error()
        guard ok == 1, let made else {
            throw CryptoError.invalidInput("EC key data is not a valid point on \(curve.bits)-bit curve")
        }
        do throws(CryptoError) {
            if validate { try check(made, full: isPrivate) }
        } catch {
            EVP_PKEY_free(made)
            throw error
        }
        return made
    }

    /// OpenSSL's key validation: the public check (point on the curve; RSA modulus odd, composite and
    /// exponent sane), and for private keys the full check (scalar range, pairwise consistency).
    static func check(_ pkey: OpaquePointer, full: Bool) throws(CryptoError) {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { throw opensslError("key check context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        let ok = full ? EVP_PKEY_check(ctx) : EVP_PKEY_public_check(ctx)
        ERR_clear_error()
        guard ok == 1 else {
            throw CryptoError.invalidInput(
                full
                    ? "the private key is inconsistent (its parts do not belong together)"
                    : "the public key is not valid")
        }
    }
}
