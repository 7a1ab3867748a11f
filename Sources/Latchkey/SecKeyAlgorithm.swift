import Foundation
import LatchkeyCrypto

/// Apple's `SecKeyAlgorithm`: the name of a signature or encryption scheme, with Apple's string values
/// ("algid:sign:ECDSA:message-X962:SHA256", ...) and Apple's Swift member names, so that
/// `SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256` compiles and means the same as on Apple systems.
/// The list is LatchkeyCrypto's (`SignatureAlgorithm`, `EncryptionAlgorithm`, `KeyExchangeAlgorithm`):
/// every member here is implemented.
public struct SecKeyAlgorithm: RawRepresentable, Hashable, @unchecked Sendable, CustomStringConvertible {
    /// Apple's string value of the algorithm, as a `CFString`.
    public let rawValue: CFString

    /// An algorithm from its string value. Any string is accepted: for one latchkey does not implement,
    /// `SecKeyIsAlgorithmSupported` is false and the other SecKey functions fail with errSecUnimplemented.
    public init(rawValue: CFString) {
        self.rawValue = rawValue
    }

    init(_ name: String) {
        rawValue = NSString(string: name)
    }

    /// The algorithm's string value.
    public var name: String { rawValue as String }

    /// The algorithm's string value.
    public var description: String { name }

    /// Two algorithms are equal when their string values are.
    public static func == (a: SecKeyAlgorithm, b: SecKeyAlgorithm) -> Bool { a.name == b.name }

    /// Hashes the string value, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// Apple's `kSecKeyAlgorithmRSASignatureRaw` ("algid:sign:RSA:raw").
    public static let rsaSignatureRaw = SecKeyAlgorithm(SignatureAlgorithm.rsaSignatureRaw.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPKCS1v15Raw` ("algid:sign:RSA:digest-PKCS1v15").
    public static let rsaSignatureDigestPKCS1v15Raw = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPKCS1v15Raw.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA1` ("algid:sign:RSA:digest-PKCS1v15:SHA1").
    public static let rsaSignatureDigestPKCS1v15SHA1 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPKCS1v15SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA224` ("algid:sign:RSA:digest-PKCS1v15:SHA224").
    public static let rsaSignatureDigestPKCS1v15SHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPKCS1v15SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA256` ("algid:sign:RSA:digest-PKCS1v15:SHA256").
    public static let rsaSignatureDigestPKCS1v15SHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPKCS1v15SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA384` ("algid:sign:RSA:digest-PKCS1v15:SHA384").
    public static let rsaSignatureDigestPKCS1v15SHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPKCS1v15SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPKCS1v15SHA512` ("algid:sign:RSA:digest-PKCS1v15:SHA512").
    public static let rsaSignatureDigestPKCS1v15SHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPKCS1v15SHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA1` ("algid:sign:RSA:message-PKCS1v15:SHA1").
    public static let rsaSignatureMessagePKCS1v15SHA1 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePKCS1v15SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA224` ("algid:sign:RSA:message-PKCS1v15:SHA224").
    public static let rsaSignatureMessagePKCS1v15SHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePKCS1v15SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA256` ("algid:sign:RSA:message-PKCS1v15:SHA256").
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePKCS1v15SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA384` ("algid:sign:RSA:message-PKCS1v15:SHA384").
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePKCS1v15SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA512` ("algid:sign:RSA:message-PKCS1v15:SHA512").
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePKCS1v15SHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPSSSHA1` ("algid:sign:RSA:digest-PSS:SHA1:SHA1:20").
    public static let rsaSignatureDigestPSSSHA1 = SecKeyAlgorithm(SignatureAlgorithm.rsaSignatureDigestPSSSHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPSSSHA224` ("algid:sign:RSA:digest-PSS:SHA224:SHA224:24").
    public static let rsaSignatureDigestPSSSHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPSSSHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPSSSHA256` ("algid:sign:RSA:digest-PSS:SHA256:SHA256:32").
    public static let rsaSignatureDigestPSSSHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPSSSHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPSSSHA384` ("algid:sign:RSA:digest-PSS:SHA384:SHA384:48").
    public static let rsaSignatureDigestPSSSHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPSSSHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureDigestPSSSHA512` ("algid:sign:RSA:digest-PSS:SHA512:SHA512:64").
    public static let rsaSignatureDigestPSSSHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureDigestPSSSHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePSSSHA1` ("algid:sign:RSA:message-PSS:SHA1:SHA1:20").
    public static let rsaSignatureMessagePSSSHA1 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePSSSHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePSSSHA224` ("algid:sign:RSA:message-PSS:SHA224:SHA224:24").
    public static let rsaSignatureMessagePSSSHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePSSSHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePSSSHA256` ("algid:sign:RSA:message-PSS:SHA256:SHA256:32").
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePSSSHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePSSSHA384` ("algid:sign:RSA:message-PSS:SHA384:SHA384:48").
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePSSSHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmRSASignatureMessagePSSSHA512` ("algid:sign:RSA:message-PSS:SHA512:SHA512:64").
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.rsaSignatureMessagePSSSHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureRFC4754` ("algid:sign:ECDSA:RFC4754").
    public static let ecdsaSignatureRFC4754 = SecKeyAlgorithm(SignatureAlgorithm.ecdsaSignatureRFC4754.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestRFC4754` ("algid:sign:ECDSA:digest-RFC4754"): `r ‖ s`
    /// over a digest of any length.
    public static let ecdsaSignatureDigestRFC4754 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestRFC4754.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA1` ("algid:sign:ECDSA:digest-RFC4754:SHA1").
    public static let ecdsaSignatureDigestRFC4754SHA1 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestRFC4754SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA224` ("algid:sign:ECDSA:digest-RFC4754:SHA224").
    public static let ecdsaSignatureDigestRFC4754SHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestRFC4754SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA256` ("algid:sign:ECDSA:digest-RFC4754:SHA256").
    public static let ecdsaSignatureDigestRFC4754SHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestRFC4754SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA384` ("algid:sign:ECDSA:digest-RFC4754:SHA384").
    public static let ecdsaSignatureDigestRFC4754SHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestRFC4754SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestRFC4754SHA512` ("algid:sign:ECDSA:digest-RFC4754:SHA512").
    public static let ecdsaSignatureDigestRFC4754SHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestRFC4754SHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA1` ("algid:sign:ECDSA:message-RFC4754:SHA1").
    public static let ecdsaSignatureMessageRFC4754SHA1 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageRFC4754SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA224` ("algid:sign:ECDSA:message-RFC4754:SHA224").
    public static let ecdsaSignatureMessageRFC4754SHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageRFC4754SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA256` ("algid:sign:ECDSA:message-RFC4754:SHA256").
    public static let ecdsaSignatureMessageRFC4754SHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageRFC4754SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA384` ("algid:sign:ECDSA:message-RFC4754:SHA384").
    public static let ecdsaSignatureMessageRFC4754SHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageRFC4754SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA512` ("algid:sign:ECDSA:message-RFC4754:SHA512").
    public static let ecdsaSignatureMessageRFC4754SHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageRFC4754SHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestX962` ("algid:sign:ECDSA:digest-X962").
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm(SignatureAlgorithm.ecdsaSignatureDigestX962.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestX962SHA1` ("algid:sign:ECDSA:digest-X962:SHA1").
    public static let ecdsaSignatureDigestX962SHA1 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestX962SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestX962SHA224` ("algid:sign:ECDSA:digest-X962:SHA224").
    public static let ecdsaSignatureDigestX962SHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestX962SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestX962SHA256` ("algid:sign:ECDSA:digest-X962:SHA256").
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestX962SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestX962SHA384` ("algid:sign:ECDSA:digest-X962:SHA384").
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestX962SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureDigestX962SHA512` ("algid:sign:ECDSA:digest-X962:SHA512").
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureDigestX962SHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageX962SHA1` ("algid:sign:ECDSA:message-X962:SHA1").
    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageX962SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageX962SHA224` ("algid:sign:ECDSA:message-X962:SHA224").
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageX962SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageX962SHA256` ("algid:sign:ECDSA:message-X962:SHA256").
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageX962SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageX962SHA384` ("algid:sign:ECDSA:message-X962:SHA384").
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageX962SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmECDSASignatureMessageX962SHA512` ("algid:sign:ECDSA:message-X962:SHA512").
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm(
        SignatureAlgorithm.ecdsaSignatureMessageX962SHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionRaw` ("algid:encrypt:RSA:raw").
    public static let rsaEncryptionRaw = SecKeyAlgorithm(EncryptionAlgorithm.rsaEncryptionRaw.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionPKCS1` ("algid:encrypt:RSA:PKCS1").
    public static let rsaEncryptionPKCS1 = SecKeyAlgorithm(EncryptionAlgorithm.rsaEncryptionPKCS1.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA1` ("algid:encrypt:RSA:OAEP:SHA1").
    public static let rsaEncryptionOAEPSHA1 = SecKeyAlgorithm(EncryptionAlgorithm.rsaEncryptionOAEPSHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA224` ("algid:encrypt:RSA:OAEP:SHA224").
    public static let rsaEncryptionOAEPSHA224 = SecKeyAlgorithm(EncryptionAlgorithm.rsaEncryptionOAEPSHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA256` ("algid:encrypt:RSA:OAEP:SHA256").
    public static let rsaEncryptionOAEPSHA256 = SecKeyAlgorithm(EncryptionAlgorithm.rsaEncryptionOAEPSHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA384` ("algid:encrypt:RSA:OAEP:SHA384").
    public static let rsaEncryptionOAEPSHA384 = SecKeyAlgorithm(EncryptionAlgorithm.rsaEncryptionOAEPSHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA512` ("algid:encrypt:RSA:OAEP:SHA512").
    public static let rsaEncryptionOAEPSHA512 = SecKeyAlgorithm(EncryptionAlgorithm.rsaEncryptionOAEPSHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA1AESGCM` ("algid:encrypt:RSA:OAEP:SHA1:AESGCM").
    public static let rsaEncryptionOAEPSHA1AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.rsaEncryptionOAEPSHA1AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA224AESGCM` ("algid:encrypt:RSA:OAEP:SHA224:AESGCM").
    public static let rsaEncryptionOAEPSHA224AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.rsaEncryptionOAEPSHA224AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA256AESGCM` ("algid:encrypt:RSA:OAEP:SHA256:AESGCM").
    public static let rsaEncryptionOAEPSHA256AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.rsaEncryptionOAEPSHA256AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA384AESGCM` ("algid:encrypt:RSA:OAEP:SHA384:AESGCM").
    public static let rsaEncryptionOAEPSHA384AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.rsaEncryptionOAEPSHA384AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmRSAEncryptionOAEPSHA512AESGCM` ("algid:encrypt:RSA:OAEP:SHA512:AESGCM").
    public static let rsaEncryptionOAEPSHA512AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.rsaEncryptionOAEPSHA512AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardX963SHA1AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM").
    public static let eciesEncryptionStandardX963SHA1AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardX963SHA1AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardX963SHA224AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM").
    public static let eciesEncryptionStandardX963SHA224AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardX963SHA224AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardX963SHA256AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM").
    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardX963SHA256AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardX963SHA384AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM").
    public static let eciesEncryptionStandardX963SHA384AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardX963SHA384AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardX963SHA512AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM").
    public static let eciesEncryptionStandardX963SHA512AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardX963SHA512AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA1AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM").
    public static let eciesEncryptionCofactorX963SHA1AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorX963SHA1AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA224AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM").
    public static let eciesEncryptionCofactorX963SHA224AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorX963SHA224AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA256AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM").
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorX963SHA256AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA384AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM").
    public static let eciesEncryptionCofactorX963SHA384AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorX963SHA384AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorX963SHA512AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM").
    public static let eciesEncryptionCofactorX963SHA512AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorX963SHA512AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA224AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV").
    public static let eciesEncryptionStandardVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA224AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA256AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV").
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA256AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA384AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV").
    public static let eciesEncryptionStandardVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA384AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionStandardVariableIVX963SHA512AESGCM` ("algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV").
    public static let eciesEncryptionStandardVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA512AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA224AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV").
    public static let eciesEncryptionCofactorVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorVariableIVX963SHA224AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA256AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV").
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorVariableIVX963SHA256AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA384AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV").
    public static let eciesEncryptionCofactorVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorVariableIVX963SHA384AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECIESEncryptionCofactorVariableIVX963SHA512AESGCM` ("algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV").
    public static let eciesEncryptionCofactorVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        EncryptionAlgorithm.eciesEncryptionCofactorVariableIVX963SHA512AESGCM.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeStandard` ("algid:keyexchange:ECDH").
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm(KeyExchangeAlgorithm.ecdhKeyExchangeStandard.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA1` ("algid:keyexchange:ECDH:KDFX963:SHA1").
    public static let ecdhKeyExchangeStandardX963SHA1 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeStandardX963SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA224` ("algid:keyexchange:ECDH:KDFX963:SHA224").
    public static let ecdhKeyExchangeStandardX963SHA224 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeStandardX963SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA256` ("algid:keyexchange:ECDH:KDFX963:SHA256").
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeStandardX963SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA384` ("algid:keyexchange:ECDH:KDFX963:SHA384").
    public static let ecdhKeyExchangeStandardX963SHA384 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeStandardX963SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeStandardX963SHA512` ("algid:keyexchange:ECDH:KDFX963:SHA512").
    public static let ecdhKeyExchangeStandardX963SHA512 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeStandardX963SHA512.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeCofactor` ("algid:keyexchange:ECDHC").
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm(KeyExchangeAlgorithm.ecdhKeyExchangeCofactor.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA1` ("algid:keyexchange:ECDHC:KDFX963:SHA1").
    public static let ecdhKeyExchangeCofactorX963SHA1 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeCofactorX963SHA1.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA224` ("algid:keyexchange:ECDHC:KDFX963:SHA224").
    public static let ecdhKeyExchangeCofactorX963SHA224 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeCofactorX963SHA224.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA256` ("algid:keyexchange:ECDHC:KDFX963:SHA256").
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeCofactorX963SHA256.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA384` ("algid:keyexchange:ECDHC:KDFX963:SHA384").
    public static let ecdhKeyExchangeCofactorX963SHA384 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeCofactorX963SHA384.rawValue)
    /// Apple's `kSecKeyAlgorithmECDHKeyExchangeCofactorX963SHA512` ("algid:keyexchange:ECDHC:KDFX963:SHA512").
    public static let ecdhKeyExchangeCofactorX963SHA512 = SecKeyAlgorithm(
        KeyExchangeAlgorithm.ecdhKeyExchangeCofactorX963SHA512.rawValue)
}
