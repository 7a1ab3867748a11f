internal import COpenSSL
import LatchkeySecrets

/// An RSA or elliptic-curve (P-256, P-384, P-521) key, public or private: the cryptography behind
/// Apple's `SecKey`.
///
/// Wraps an OpenSSL `EVP_PKEY`, which is freed (and its private parts cleared) when the object goes
/// away. Immutable after creation; every operation uses its own OpenSSL context, so one key may be
/// used from several threads at once.
///
/// The Apple formats are in `AsymmetricKey+ExternalRepresentation.swift`, the standard files
/// (PKCS#8, SubjectPublicKeyInfo, PEM) in `+Formats`, and the operations in `+Signatures`,
/// `+Encryption`, `ECIES.swift` and `+KeyExchange`. `+AlgorithmSupport` says which algorithm each
/// kind of key supports.
package final class AsymmetricKey: @unchecked Sendable {
    /// The key type: Apple's `kSecAttrKeyTypeRSA` or `kSecAttrKeyTypeECSECPrimeRandom`.
    package enum Algorithm: Sendable, Equatable, Hashable {
        case rsa, ec
    }

    /// RSA or EC.
    package let algorithm: Algorithm
    /// RSA: the modulus length in bits. EC: 256, 384 or 521 (Apple's `kSecAttrKeySizeInBits`).
    package let sizeInBits: Int
    /// True for a private key (which also holds its public half).
    package let isPrivate: Bool
    /// The public key's external representation: PKCS#1 `RSAPublicKey` DER for RSA, the X9.63
    /// uncompressed point `04 ‖ X ‖ Y` for EC. These are exactly the contents of a certificate's
    /// subjectPublicKey BIT STRING, and their SHA-1 is Apple's `kSecAttrApplicationLabel`.
    package let publicKeyBytes: [UInt8]

    /// The OpenSSL key, owned.
    let pkey: OpaquePointer
    /// The curve of an EC key.
    let curve: EllipticCurve?

    /// Smallest and largest RSA modulus accepted from outside (Apple's own limit is 8192 bits; keys
    /// below 512 bits are toys that OpenSSL's checks refuse anyway).
    package static let importableRSABits = 512...8192
    /// RSA sizes `generateRSA(bits:)` accepts, as Apple's `SecKeyCreateRandomKey` does in practice.
    package static let generatableRSABits = 1024...4096

    /// Takes ownership of `pkey` (freed here if it is not an RSA or supported EC key).
    init(adopting pkey: OpaquePointer) throws(CryptoError) {
        do throws(CryptoError) {
            let facts = try Self.inspect(pkey)
            algorithm = facts.algorithm
            sizeInBits = facts.bits
            isPrivate = facts.isPrivate
            curve = facts.curve
            publicKeyBytes = facts.publicBytes
            self.pkey = pkey
        } catch {
            EVP_PKEY_free(pkey)
            throw error
        }
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Apple's `SecKeyGetBlockSize`: bytes of the RSA modulus, or of an EC field element.
    package var blockSize: Int {
        switch algorithm {
        case .rsa: (sizeInBits + 7) / 8
        case .ec: curve!.fieldSize
        }
    }

    /// SHA-1 of `publicKeyBytes`: Apple's `kSecAttrApplicationLabel` (`klbl`) for a key and the
    /// public-key hash (`pkhh`) of its certificate.
    package var applicationLabel: [UInt8] { SHA1.hash(publicKeyBytes) }

    // MARK: Generation

    /// A new RSA key pair with public exponent 65537. `bits` must be in `generatableRSABits` and a
    /// multiple of 8; otherwise throws `.invalidInput`. Slow for large sizes (4096 bits: seconds).
    package static func generateRSA(bits: Int) throws(CryptoError) -> AsymmetricKey {
        guard generatableRSABits.contains(bits), bits % 8 == 0 else {
            throw CryptoError.invalidInput("RSA key size must be a multiple of 8 from 1024 to 4096 bits")
        }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else {
            throw opensslError("RSA key generation context")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1,
            EVP_PKEY_generate(ctx, &generated) == 1, let generated
        else {
            throw opensslError("RSA key generation")
        }
        return try AsymmetricKey(adopting: generated)
    }

    /// A new EC key pair on P-256, P-384 or P-521 (`bits` 256, 384 or 521); other sizes throw
    /// `.invalidInput`.
    package static func generateEC(bits: Int) throws(CryptoError) -> AsymmetricKey {
        guard let curve = EllipticCurve(bits: bits) else {
            throw CryptoError.invalidInput("EC key size must be 256, 384 or 521 bits")
        }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw opensslError("EC key generation context")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw opensslError("EC key generation") }
        var params = [
            OSSL_PARAM_construct_utf8_string(staticCString("group"), curve.groupName, 0), OSSL_PARAM_construct_end(),
        ]
        guard EVP_PKEY_CTX_set_params(ctx, &params) == 1, EVP_PKEY_generate(ctx, &generated) == 1, let generated else {
            throw opensslError("EC key generation")
        }
        return try AsymmetricKey(adopting: generated)
    }

    // MARK: Public half

    /// The public half of this key (the key itself if it is already public).
    package func publicKey() throws(CryptoError) -> AsymmetricKey {
        guard isPrivate else { return self }
        return try AsymmetricKey(externalRepresentation: publicKeyBytes, algorithm: algorithm, isPrivate: false)
    }

    // MARK: Inspection

    private struct Facts {
        var algorithm: Algorithm
        var bits: Int
        var isPrivate: Bool
        var curve: EllipticCurve?
        var publicBytes: [UInt8]
    }

    /// Reads type, size, class and public bytes, refusing anything but RSA and the three curves.
    private static func inspect(_ pkey: OpaquePointer) throws(CryptoError) -> Facts {
        let bits = Int(EVP_PKEY_get_bits(pkey))
        if EVP_PKEY_is_a(pkey, "RSA") == 1 {
            guard importableRSABits.contains(bits) else {
                throw CryptoError.unsupported("RSA keys of \(bits) bits are not supported")
            }
            let isPrivate = hasParameter(pkey, staticCString("d"))
            let publicBytes = try KeyCodec.encode(
                pkey, selection: KeyCodec.publicSelection, outputType: "DER",
                structure: "type-specific"
            ).unsafeCopyToArray()
            return Facts(algorithm: .rsa, bits: bits, isPrivate: isPrivate, curve: nil, publicBytes: publicBytes)
        }
        if EVP_PKEY_is_a(pkey, "EC") == 1 {
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_utf8_string_param(pkey, "group", &name, name.count, &length) == 1 else {
                ERR_clear_error()
                throw CryptoError.unsupported("EC keys without a named curve are not supported")
            }
            let groupName = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard let curve = EllipticCurve(groupName: groupName) else {
                throw CryptoError.unsupported("the elliptic curve \(groupName) is not supported")
            }
            let isPrivate = hasParameter(pkey, staticCString("priv"))
            let x = try bigEndianParameter(pkey, staticCString("qx"), size: curve.fieldSize)
            let y = try bigEndianParameter(pkey, staticCString("qy"), size: curve.fieldSize)
            return Facts(
                algorithm: .ec, bits: curve.bits, isPrivate: isPrivate, curve: curve, publicBytes: [0x04] + x + y)
        }
        throw CryptoError.unsupported("only RSA and EC keys are supported")
    }

    /// True if the key has the (private) BIGNUM parameter `name`; the copy is cleared at once.
    private static func hasParameter(_ pkey: OpaquePointer, _ name: UnsafeMutablePointer<CChar>) -> Bool {
        var bn: OpaquePointer?
        let found = EVP_PKEY_get_bn_param(pkey, name, &bn) == 1 && bn != nil
        BN_clear_free(bn)
        ERR_clear_error()
        return found
    }

    /// A public BIGNUM parameter as big-endian bytes left-padded to `size`.
    private static func bigEndianParameter(
        _ pkey: OpaquePointer, _ name: UnsafeMutablePointer<CChar>,
        size: Int
    ) throws(CryptoError) -> [UInt8] {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else {
            throw opensslError("reading an EC public key")
        }
        defer { BN_free(bn) }
        var out = [UInt8](repeating: 0, count: size)
        guard BN_bn2binpad(bn, &out, Int32(size)) == Int32(size) else {
            throw opensslError("encoding an EC coordinate")
        }
        return out
    }

    /// The private scalar of an EC key, big-endian and left-padded to the field size, in wiping storage.
    func ecPrivateScalar() throws(CryptoError) -> SecretBytes {
        guard let curve, isPrivate else { throw CryptoError.invalidInput("not an EC private key") }
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, "priv", &bn) == 1, let bn else {
            throw opensslError("reading an EC private key")
        }
        defer { BN_clear_free(bn) }
        let out = SecretBytes(count: curve.fieldSize)
        let written = out.withUnsafeMutableBytes { buffer in
            BN_bn2binpad(bn, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count))
        }
        guard written == Int32(curve.fieldSize) else { throw opensslError("encoding an EC private key") }
        return out
    }
}
