import Foundation
import LatchkeyCrypto
import LatchkeyModel

/// Apple's `SecCertificate`: a parsed X.509 certificate (DER).
public final class SecCertificate: @unchecked Sendable, Hashable, CustomStringConvertible {
    let certificate: X509Certificate
    /// The keychain item it was read from, if any.
    let persistentRef: [UInt8]?

    init(_ certificate: X509Certificate, persistentRef: [UInt8]? = nil) {
        self.certificate = certificate
        self.persistentRef = persistentRef
    }

    convenience init(reference: CertificateReference) throws(SecError) {
        do {
            self.init(try X509Certificate(der: reference.der), persistentRef: reference.persistentRef)
        } catch {
            throw SecError(SecStatus.decode, "the certificate is malformed: \(error)")
        }
    }

    var secValue: SecValue {
        ItemReference.certificate(CertificateReference(der: certificate.der, persistentRef: persistentRef)).secValue
    }

    /// A summary for debugging: the certificate's subject summary.
    public var description: String { "<SecCertificate \(certificate.subjectSummary ?? "(no subject)")>" }

    /// Two certificates are equal when their DER bytes are.
    public static func == (a: SecCertificate, b: SecCertificate) -> Bool { a.certificate.der == b.certificate.der }

    /// Hashes the DER bytes, as `==` compares them.
    public func hash(into hasher: inout Hasher) { hasher.combine(certificate.der) }
}

/// A certificate from its DER bytes (Apple's `SecCertificateCreateWithData`); nil when the bytes do not
/// start with a DER-encoded X.509 certificate. Bytes after the certificate are ignored, as Apple's parser
/// ignores them (`SecCertificateCopyData` then gives the certificate alone).
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    guard let certificate = try? X509Certificate(leadingDER: Array(data as Data)) else { return nil }
    return SecCertificate(certificate)
}

/// The certificate's DER bytes (Apple's `SecCertificateCopyData`).
public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData {
    NSData(data: Data(certificate.certificate.der))
}

/// A human-readable summary of the subject, usually its common name (Apple's
/// `SecCertificateCopySubjectSummary`).
public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    certificate.certificate.subjectSummary.map { NSString(string: $0) }
}

/// The certificate's public key (Apple's `SecCertificateCopyKey`); nil for a key type latchkey does
/// not support (RSA and EC P-256/384/521 are).
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    (try? certificate.certificate.publicKey()).map { SecKey(local: $0) }
}

/// The subject's common name (Apple's `SecCertificateCopyCommonName`).
public func SecCertificateCopyCommonName(_ certificate: SecCertificate, _ commonName: UnsafeMutablePointer<CFString?>)
    -> OSStatus
{
    guard let name = certificate.certificate.commonNames.last else {
        commonName.pointee = nil
        return errSecSuccess
    }
    commonName.pointee = NSString(string: name)
    return errSecSuccess
}

/// The subject's email addresses (Apple's `SecCertificateCopyEmailAddresses`).
public func SecCertificateCopyEmailAddresses(
    _ certificate: SecCertificate, _ emailAddresses: UnsafeMutablePointer<CFArray?>
) -> OSStatus {
    emailAddresses.pointee = NSArray(array: certificate.certificate.emailAddresses.map { NSString(string: $0) })
    return errSecSuccess
}

/// The serial number's bytes (Apple's `SecCertificateCopySerialNumberData`).
public func SecCertificateCopySerialNumberData(
    _ certificate: SecCertificate,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    NSData(data: Data(certificate.certificate.serialNumber))
}

/// The issuer Name, normalised as the keychain stores `kSecAttrIssuer`, with its SEQUENCE
/// (Apple's `SecCertificateCopyNormalizedIssuerSequence`).
public func SecCertificateCopyNormalizedIssuerSequence(_ certificate: SecCertificate) -> CFData? {
    NSData(data: Data(sequence(certificate.certificate.normalizedIssuer)))
}

/// The subject Name, normalised, with its SEQUENCE (Apple's `SecCertificateCopyNormalizedSubjectSequence`).
public func SecCertificateCopyNormalizedSubjectSequence(_ certificate: SecCertificate) -> CFData? {
    NSData(data: Data(sequence(certificate.certificate.normalizedSubject)))
}

/// Wraps DER content in a SEQUENCE header.
private func sequence(_ content: [UInt8]) -> [UInt8] {
    var header: [UInt8] = [0x30]
    if content.count < 0x80 {
        header.append(UInt8(content.count))
    } else {
        var length = content.count
        var bytes: [UInt8] = []
        while length > 0 {
            bytes.insert(UInt8(length & 0xFF), at: 0)
            length >>= 8
        }
        header.append(0x80 | UInt8(bytes.count))
        header += bytes
    }
    return header + content
}

/// Apple's `SecIdentity`: a certificate and the private key that goes with it. Identities are not
/// stored: the keychain forms one wherever a certificate's public key hash equals a private key's
/// application label.
public final class SecIdentity: @unchecked Sendable, Hashable, CustomStringConvertible {
    let certificate: SecCertificate
    let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    var secValue: SecValue {
        ItemReference.identity(
            certificate: CertificateReference(
                der: certificate.certificate.der,
                persistentRef: certificate.persistentRef),
            key: privateKey.wireReference
        ).secValue
    }

    /// A summary for debugging: the certificate's subject summary.
    public var description: String { "<SecIdentity \(certificate.certificate.subjectSummary ?? "(no subject)")>" }

    /// Two identities are equal when their certificates and their private keys are.
    public static func == (a: SecIdentity, b: SecIdentity) -> Bool {
        a.certificate == b.certificate && a.privateKey == b.privateKey
    }

    /// Hashes the certificate, which equal identities share.
    public func hash(into hasher: inout Hasher) { hasher.combine(certificate) }
}

/// An identity made of a certificate and its private key (Apple's `SecIdentityCreate`, a private function
/// there): nil unless `privateKey` is a private key whose public key is the certificate's. With a key this
/// process holds (`SecKeyCreateWithData`, `SecPKCS12Import`), this is how a program builds the identity it
/// adds with `SecItemAdd` and `kSecValueRef`. `allocator` must be nil.
public func SecIdentityCreate(_ allocator: CFAllocator?, _ certificate: SecCertificate, _ privateKey: SecKey)
    -> SecIdentity?
{
    guard privateKey.reference.isPrivate, privateKey.reference.publicKey == certificate.certificate.publicKeyBytes
    else { return nil }
    return SecIdentity(certificate: certificate, privateKey: privateKey)
}

/// The identity's certificate (Apple's `SecIdentityCopyCertificate`).
public func SecIdentityCopyCertificate(
    _ identityRef: SecIdentity, _ certificateRef: UnsafeMutablePointer<SecCertificate?>
) -> OSStatus {
    certificateRef.pointee = identityRef.certificate
    return errSecSuccess
}

/// The identity's private key (Apple's `SecIdentityCopyPrivateKey`); for an identity read from the
/// keychain, a key the agent holds.
public func SecIdentityCopyPrivateKey(_ identityRef: SecIdentity, _ privateKeyRef: UnsafeMutablePointer<SecKey?>)
    -> OSStatus
{
    privateKeyRef.pointee = identityRef.privateKey
    return errSecSuccess
}
