/// Apple's encryption algorithms (`SecKeyAlgorithm` for `SecKeyCreateEncryptedData` and
/// `SecKeyCreateDecryptedData`). Raw values are Apple's exact `kSecKeyAlgorithm…` strings, copied from
/// Security's `OSX/sec/Security/SecKeyAdaptors.m`.
package enum EncryptionAlgorithm: String, Sendable, CaseIterable {
    /// Raw RSA: the input, left-padded to the modulus size, is encrypted as a number.
    case rsaEncryptionRaw = "algid:encrypt:RSA:raw"
    /// RSAES-PKCS1-v1_5.
    case rsaEncryptionPKCS1 = "algid:encrypt:RSA:PKCS1"
    /// RSAES-OAEP with MGF1 using the same hash and an empty label.
    case rsaEncryptionOAEPSHA1 = "algid:encrypt:RSA:OAEP:SHA1"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA224`.
    case rsaEncryptionOAEPSHA224 = "algid:encrypt:RSA:OAEP:SHA224"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA256`.
    case rsaEncryptionOAEPSHA256 = "algid:encrypt:RSA:OAEP:SHA256"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA384`.
    case rsaEncryptionOAEPSHA384 = "algid:encrypt:RSA:OAEP:SHA384"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA512`.
    case rsaEncryptionOAEPSHA512 = "algid:encrypt:RSA:OAEP:SHA512"
    /// A random AES key wrapped with RSA-OAEP, then AES-GCM over the data (see `+Encryption`).
    case rsaEncryptionOAEPSHA1AESGCM = "algid:encrypt:RSA:OAEP:SHA1:AESGCM"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA224AESGCM`.
    case rsaEncryptionOAEPSHA224AESGCM = "algid:encrypt:RSA:OAEP:SHA224:AESGCM"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA256AESGCM`.
    case rsaEncryptionOAEPSHA256AESGCM = "algid:encrypt:RSA:OAEP:SHA256:AESGCM"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA384AESGCM`.
    case rsaEncryptionOAEPSHA384AESGCM = "algid:encrypt:RSA:OAEP:SHA384:AESGCM"
    /// `kSecKeyAlgorithmRSAEncryptionOAEPSHA512AESGCM`.
    case rsaEncryptionOAEPSHA512AESGCM = "algid:encrypt:RSA:OAEP:SHA512:AESGCM"
    /// ECIES with ECDH, the X9.63 KDF and AES-GCM with an all-zero IV (see `ECIES.swift`).
    case eciesEncryptionStandardX963SHA1AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionStandardX963SHA224AESGCM`.
    case eciesEncryptionStandardX963SHA224AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionStandardX963SHA256AESGCM`.
    case eciesEncryptionStandardX963SHA256AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionStandardX963SHA384AESGCM`.
    case eciesEncryptionStandardX963SHA384AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionStandardX963SHA512AESGCM`.
    case eciesEncryptionStandardX963SHA512AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM"
    /// As the Standard variants with cofactor ECDH (identical results on the NIST curves, cofactor 1).
    case eciesEncryptionCofactorX963SHA1AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA224AESGCM`.
    case eciesEncryptionCofactorX963SHA224AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA256AESGCM`.
    case eciesEncryptionCofactorX963SHA256AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA384AESGCM`.
    case eciesEncryptionCofactorX963SHA384AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA512AESGCM`.
    case eciesEncryptionCofactorX963SHA512AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM"
    /// ECIES whose AES-GCM IV is the 16 bytes the KDF produces after the AES key.
    case eciesEncryptionStandardVariableIVX963SHA224AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV"
    /// `kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA256AESGCM`.
    case eciesEncryptionStandardVariableIVX963SHA256AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV"
    /// `kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA384AESGCM`.
    case eciesEncryptionStandardVariableIVX963SHA384AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV"
    /// `kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA512AESGCM`.
    case eciesEncryptionStandardVariableIVX963SHA512AESGCM = "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA224AESGCM`.
    case eciesEncryptionCofactorVariableIVX963SHA224AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA256AESGCM`.
    case eciesEncryptionCofactorVariableIVX963SHA256AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA384AESGCM`.
    case eciesEncryptionCofactorVariableIVX963SHA384AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV"
    /// `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA512AESGCM`.
    case eciesEncryptionCofactorVariableIVX963SHA512AESGCM = "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV"

    /// How the algorithm works, independent of the hash.
    package enum Scheme: Sendable, Equatable {
        case rsaRaw, rsaPKCS1, rsaOAEP, rsaOAEPAESGCM
        case ecies(cofactor: Bool, variableIV: Bool)
    }

    /// The key type the algorithm needs.
    package var keyAlgorithm: AsymmetricKey.Algorithm {
        if case .ecies = scheme { return .ec }
        return .rsa
    }

    /// The hash named by the algorithm (OAEP and MGF1 hash, or the X9.63 KDF hash), if any.
    package var digest: DigestAlgorithm? {
        let name = rawValue
        if name.contains("SHA512") { return .sha512 }
        if name.contains("SHA384") { return .sha384 }
        if name.contains("SHA256") { return .sha256 }
        if name.contains("SHA224") { return .sha224 }
        if name.contains("SHA1") { return .sha1 }
        return nil
    }

    package var scheme: Scheme {
        let name = rawValue
        if name.hasPrefix("algid:encrypt:ECIES:") {
            return .ecies(cofactor: name.contains(":ECDHC:"), variableIV: name.hasSuffix("-KDFIV"))
        }
        if self == .rsaEncryptionRaw { return .rsaRaw }
        if self == .rsaEncryptionPKCS1 { return .rsaPKCS1 }
        return name.hasSuffix(":AESGCM") ? .rsaOAEPAESGCM : .rsaOAEP
    }

    /// The smallest RSA block (modulus bytes) the padding fits in: 2·hLen+2 for OAEP, 11 for PKCS#1
    /// v1.5 (Apple's `SecKeyRSACopyEncryptedWithPadding`); nil when there is no such limit.
    var minimumRSABlockSize: Int? {
        switch scheme {
        case .rsaPKCS1: 11
        case .rsaOAEP, .rsaOAEPAESGCM: digest.map { 2 * $0.size + 2 }
        case .rsaRaw, .ecies: nil
        }
    }
}
