/// Apple's signature algorithms (`SecKeyAlgorithm` for `SecKeyCreateSignature` and
/// `SecKeyVerifySignature`). Raw values are Apple's exact `kSecKeyAlgorithm…` strings, copied from
/// Security's `OSX/sec/Security/SecKeyAdaptors.m`.
///
/// "Digest" algorithms take a precomputed digest, which must have the digest's length (Apple:
/// "bad digest size", errSecParam); "Message" algorithms hash the input first. The RFC 4754 algorithms
/// are the X9.62 ones of the same hash with the DER signature converted to `r ‖ s` (Apple's
/// `SecKeyAlgorithmAdaptorCopyResult_Sign_ECDSASignatureRFC4754Converted`). The RSA-PSS
/// algorithms use MGF1 with the same hash and a salt as long as the digest (the `:20`/`:32`… at the
/// end of the name), as Apple's `SecKeyRSACopyEMSASignature` does.
package enum SignatureAlgorithm: String, Sendable, CaseIterable {
    /// Raw RSA (no padding): the input, left-padded to the modulus size, is signed as a number.
    case rsaSignatureRaw = "algid:sign:RSA:raw"
    /// PKCS#1 v1.5 type-1 padding around the input, with no DigestInfo.
    case rsaSignatureDigestPKCS1v15Raw = "algid:sign:RSA:digest-PKCS1v15"
    /// `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA1`.
    case rsaSignatureDigestPKCS1v15SHA1 = "algid:sign:RSA:digest-PKCS1v15:SHA1"
    /// `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA224`.
    case rsaSignatureDigestPKCS1v15SHA224 = "algid:sign:RSA:digest-PKCS1v15:SHA224"
    /// `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA256`.
    case rsaSignatureDigestPKCS1v15SHA256 = "algid:sign:RSA:digest-PKCS1v15:SHA256"
    /// `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA384`.
    case rsaSignatureDigestPKCS1v15SHA384 = "algid:sign:RSA:digest-PKCS1v15:SHA384"
    /// `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA512`.
    case rsaSignatureDigestPKCS1v15SHA512 = "algid:sign:RSA:digest-PKCS1v15:SHA512"
    /// `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA1`.
    case rsaSignatureMessagePKCS1v15SHA1 = "algid:sign:RSA:message-PKCS1v15:SHA1"
    /// `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA224`.
    case rsaSignatureMessagePKCS1v15SHA224 = "algid:sign:RSA:message-PKCS1v15:SHA224"
    /// `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA256`.
    case rsaSignatureMessagePKCS1v15SHA256 = "algid:sign:RSA:message-PKCS1v15:SHA256"
    /// `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA384`.
    case rsaSignatureMessagePKCS1v15SHA384 = "algid:sign:RSA:message-PKCS1v15:SHA384"
    /// `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA512`.
    case rsaSignatureMessagePKCS1v15SHA512 = "algid:sign:RSA:message-PKCS1v15:SHA512"
    /// `kSecKeyAlgorithmRSASignatureDigestPSSSHA1`.
    case rsaSignatureDigestPSSSHA1 = "algid:sign:RSA:digest-PSS:SHA1:SHA1:20"
    /// `kSecKeyAlgorithmRSASignatureDigestPSSSHA224`.
    case rsaSignatureDigestPSSSHA224 = "algid:sign:RSA:digest-PSS:SHA224:SHA224:24"
    /// `kSecKeyAlgorithmRSASignatureDigestPSSSHA256`.
    case rsaSignatureDigestPSSSHA256 = "algid:sign:RSA:digest-PSS:SHA256:SHA256:32"
    /// `kSecKeyAlgorithmRSASignatureDigestPSSSHA384`.
    case rsaSignatureDigestPSSSHA384 = "algid:sign:RSA:digest-PSS:SHA384:SHA384:48"
    /// `kSecKeyAlgorithmRSASignatureDigestPSSSHA512`.
    case rsaSignatureDigestPSSSHA512 = "algid:sign:RSA:digest-PSS:SHA512:SHA512:64"
    /// `kSecKeyAlgorithmRSASignatureMessagePSSSHA1`.
    case rsaSignatureMessagePSSSHA1 = "algid:sign:RSA:message-PSS:SHA1:SHA1:20"
    /// `kSecKeyAlgorithmRSASignatureMessagePSSSHA224`.
    case rsaSignatureMessagePSSSHA224 = "algid:sign:RSA:message-PSS:SHA224:SHA224:24"
    /// `kSecKeyAlgorithmRSASignatureMessagePSSSHA256`.
    case rsaSignatureMessagePSSSHA256 = "algid:sign:RSA:message-PSS:SHA256:SHA256:32"
    /// `kSecKeyAlgorithmRSASignatureMessagePSSSHA384`.
    case rsaSignatureMessagePSSSHA384 = "algid:sign:RSA:message-PSS:SHA384:SHA384:48"
    /// `kSecKeyAlgorithmRSASignatureMessagePSSSHA512`.
    case rsaSignatureMessagePSSSHA512 = "algid:sign:RSA:message-PSS:SHA512:SHA512:64"
    /// ECDSA with the raw `r ‖ s` signature format of RFC 4754 (each half padded to the field size),
    /// over a digest of any length.
    case ecdsaSignatureRFC4754 = "algid:sign:ECDSA:RFC4754"
    /// `kSecKeyAlgorithmECDSASignatureDigestRFC4754`: `r ‖ s` over a digest of any length, as
    /// `ecdsaSignatureRFC4754` (Apple runs that one through this one).
    case ecdsaSignatureDigestRFC4754 = "algid:sign:ECDSA:digest-RFC4754"
    /// `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA1`.
    case ecdsaSignatureDigestRFC4754SHA1 = "algid:sign:ECDSA:digest-RFC4754:SHA1"
    /// `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA224`.
    case ecdsaSignatureDigestRFC4754SHA224 = "algid:sign:ECDSA:digest-RFC4754:SHA224"
    /// `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA256`.
    case ecdsaSignatureDigestRFC4754SHA256 = "algid:sign:ECDSA:digest-RFC4754:SHA256"
    /// `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA384`.
    case ecdsaSignatureDigestRFC4754SHA384 = "algid:sign:ECDSA:digest-RFC4754:SHA384"
    /// `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA512`.
    case ecdsaSignatureDigestRFC4754SHA512 = "algid:sign:ECDSA:digest-RFC4754:SHA512"
    /// `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA1`.
    case ecdsaSignatureMessageRFC4754SHA1 = "algid:sign:ECDSA:message-RFC4754:SHA1"
    /// `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA224`.
    case ecdsaSignatureMessageRFC4754SHA224 = "algid:sign:ECDSA:message-RFC4754:SHA224"
    /// `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA256`.
    case ecdsaSignatureMessageRFC4754SHA256 = "algid:sign:ECDSA:message-RFC4754:SHA256"
    /// `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA384`.
    case ecdsaSignatureMessageRFC4754SHA384 = "algid:sign:ECDSA:message-RFC4754:SHA384"
    /// `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA512`.
    case ecdsaSignatureMessageRFC4754SHA512 = "algid:sign:ECDSA:message-RFC4754:SHA512"
    /// ECDSA with a DER `Ecdsa-Sig-Value` signature (X9.62) over a digest of any length.
    case ecdsaSignatureDigestX962 = "algid:sign:ECDSA:digest-X962"
    /// `kSecKeyAlgorithmECDSASignatureDigestX962SHA1`.
    case ecdsaSignatureDigestX962SHA1 = "algid:sign:ECDSA:digest-X962:SHA1"
    /// `kSecKeyAlgorithmECDSASignatureDigestX962SHA224`.
    case ecdsaSignatureDigestX962SHA224 = "algid:sign:ECDSA:digest-X962:SHA224"
    /// `kSecKeyAlgorithmECDSASignatureDigestX962SHA256`.
    case ecdsaSignatureDigestX962SHA256 = "algid:sign:ECDSA:digest-X962:SHA256"
    /// `kSecKeyAlgorithmECDSASignatureDigestX962SHA384`.
    case ecdsaSignatureDigestX962SHA384 = "algid:sign:ECDSA:digest-X962:SHA384"
    /// `kSecKeyAlgorithmECDSASignatureDigestX962SHA512`.
    case ecdsaSignatureDigestX962SHA512 = "algid:sign:ECDSA:digest-X962:SHA512"
    /// `kSecKeyAlgorithmECDSASignatureMessageX962SHA1`.
    case ecdsaSignatureMessageX962SHA1 = "algid:sign:ECDSA:message-X962:SHA1"
    /// `kSecKeyAlgorithmECDSASignatureMessageX962SHA224`.
    case ecdsaSignatureMessageX962SHA224 = "algid:sign:ECDSA:message-X962:SHA224"
    /// `kSecKeyAlgorithmECDSASignatureMessageX962SHA256`.
    case ecdsaSignatureMessageX962SHA256 = "algid:sign:ECDSA:message-X962:SHA256"
    /// `kSecKeyAlgorithmECDSASignatureMessageX962SHA384`.
    case ecdsaSignatureMessageX962SHA384 = "algid:sign:ECDSA:message-X962:SHA384"
    /// `kSecKeyAlgorithmECDSASignatureMessageX962SHA512`.
    case ecdsaSignatureMessageX962SHA512 = "algid:sign:ECDSA:message-X962:SHA512"

    /// How the signature is formed, independent of the hash.
    enum Scheme: Sendable {
        case rsaRaw, rsaPKCS1v15, rsaPSS, ecdsaDER, ecdsaRaw
    }

    /// The key type the algorithm needs.
    package var keyAlgorithm: AsymmetricKey.Algorithm {
        switch scheme {
        case .rsaRaw, .rsaPKCS1v15, .rsaPSS: .rsa
        case .ecdsaDER, .ecdsaRaw: .ec
        }
    }

    /// The hash named by the algorithm, if any.
    package var digest: DigestAlgorithm? {
        let name = rawValue
        if name.contains("SHA512") { return .sha512 }
        if name.contains("SHA384") { return .sha384 }
        if name.contains("SHA256") { return .sha256 }
        if name.contains("SHA224") { return .sha224 }
        if name.contains("SHA1") { return .sha1 }
        return nil
    }

    /// True if the input is a message that is hashed first; false if it is a digest (or raw data).
    package var hashesInput: Bool { rawValue.contains(":message-") }

    /// For "Digest" algorithms with a named hash: the length the input must have.
    package var requiredInputLength: Int? { hashesInput ? nil : digest?.size }

    var scheme: Scheme {
        switch self {
        case .rsaSignatureRaw: .rsaRaw
        default:
            if rawValue.contains("RFC4754") {
                .ecdsaRaw
            } else if rawValue.contains("PKCS1v15") {
                .rsaPKCS1v15
            } else if rawValue.contains("PSS") {
                .rsaPSS
            } else {
                .ecdsaDER
            }
        }
    }
}
