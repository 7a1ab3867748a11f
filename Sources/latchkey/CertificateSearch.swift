import ArgumentParser
import Foundation
import Latchkey
import LatchkeyCrypto

/// Every item of a class that matches some attributes, with its attributes, its object
/// (`kSecValueRef`) and its persistent reference: what the certificate, identity, key and export
/// verbs list. No match is an empty list, not an error.
enum KeychainList {
    static func items(_ itemClass: CFString, _ filters: [String: Any]) throws(ExitCode) -> [[String: Any]] {
        var query = ItemQuery.make(itemClass, filters)
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        query[kSecReturnAttributes as String] = kCFBooleanTrue
        query[kSecReturnRef as String] = kCFBooleanTrue
        query[kSecReturnPersistentRef as String] = kCFBooleanTrue
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        switch status {
        case errSecSuccess: return (result as? NSArray).map { $0.compactMap(ItemPrinter.dictionary) } ?? []
        case errSecItemNotFound: return []
        default: throw secItemFailure("SecItemCopyMatching", status)
        }
    }

    /// The attributes alone, for printing: without the object and the persistent reference.
    static func attributesOnly(_ item: [String: Any]) -> [String: Any] {
        item.filter { $0.key != kSecValueRef as String && $0.key != kSecValuePersistentRef as String }
    }
}

/// A certificate read from the keychain, with what the certificate verbs print and match on.
struct StoredCertificate {
    /// The item's attributes (without its object and persistent reference).
    var attributes: [String: Any]
    var certificate: SecCertificate
    var persistentRef: Data
    /// The DER encoding.
    var der: [UInt8]
    /// The parsed certificate (for names and dates).
    var x509: X509Certificate?

    init?(item: [String: Any]) {
        // Items of the identity class carry an identity object; its certificate is the one shown.
        var certificate = item[kSecValueRef as String] as? SecCertificate
        if certificate == nil, let identity = item[kSecValueRef as String] as? SecIdentity {
            var copied: SecCertificate?
            guard SecIdentityCopyCertificate(identity, &copied) == errSecSuccess else { return nil }
            certificate = copied
        }
        guard let certificate, let ref = item[kSecValuePersistentRef as String] as? Data else { return nil }
        self.certificate = certificate
        persistentRef = ref
        attributes = KeychainList.attributesOnly(item)
        der = Array(SecCertificateCopyData(certificate) as Data)
        x509 = try? X509Certificate(der: der)
    }

    /// `SecCertificateCopySubjectSummary`, or "" for a certificate without one.
    var summary: String { SecCertificateCopySubjectSummary(certificate).map { $0 as String } ?? "" }

    var label: String? { attributes[kSecAttrLabel as String] as? String }

    /// The subject's and subjectAltName's email addresses.
    var emails: [String] {
        var addresses: CFArray?
        guard SecCertificateCopyEmailAddresses(certificate, &addresses) == errSecSuccess else { return [] }
        return (addresses as? [String]) ?? []
    }

    var sha1: [UInt8] { SHA1.hash(der) }
    var sha256: [UInt8] { SHA256.hash(der) }

    /// `-c NAME`: the subject summary or the label contains NAME, ignoring case.
    func matches(name: String) -> Bool {
        summary.localizedCaseInsensitiveContains(name) || (label?.localizedCaseInsensitiveContains(name) ?? false)
    }

    /// `-e EMAIL`: one of the certificate's addresses is EMAIL, ignoring case.
    func matches(email: String) -> Bool {
        emails.contains { $0.caseInsensitiveCompare(email) == .orderedSame }
    }

    /// "expired" or "not yet valid" when now is outside the validity period; nil inside it.
    var validityProblem: String? {
        guard let x509 else { return "unreadable" }
        let now = Date().timeIntervalSinceReferenceDate
        if now > x509.notValidAfter { return "expired" }
        if now < x509.notValidBefore { return "not yet valid" }
        return nil
    }

    /// The certificate as a PEM block.
    var pem: String { PEM.encode(der, label: "CERTIFICATE") }
}

/// The certificate items of the keychain.
enum CertificateSearch {
    /// Every certificate matching `filters` (keychain attributes), then `name` and `email` (see
    /// `StoredCertificate.matches`), in a stable order: by subject summary, then SHA-1.
    static func find(
        _ filters: [String: Any] = [:], name: String? = nil, email: String? = nil,
        itemClass: CFString = kSecClassCertificate
    ) throws(ExitCode) -> [StoredCertificate] {
        let all = try KeychainList.items(itemClass, filters).compactMap(StoredCertificate.init(item:))
        return all.filter { certificate in
            (name.map(certificate.matches(name:)) ?? true) && (email.map(certificate.matches(email:)) ?? true)
        }.sorted { ($0.summary, hexString($0.sha1)) < ($1.summary, hexString($1.sha1)) }
    }

    /// The certificates among `candidates` that issued `certificate`, nearest first, up to a
    /// self-issued one (matched by the normalised names the keychain compares).
    static func issuers(of certificate: X509Certificate, among candidates: [X509Certificate]) -> [X509Certificate] {
        var chain: [X509Certificate] = []
        var current = certificate
        var remaining = candidates.filter { $0.der != certificate.der }
        while current.normalizedIssuer != current.normalizedSubject,
            let index = remaining.firstIndex(where: { $0.normalizedSubject == current.normalizedIssuer })
        {
            current = remaining.remove(at: index)
            chain.append(current)
        }
        return chain
    }

    /// The SHA-1 hash given to `-Z`: 40 hexadecimal digits, upper or lower case, with optional
    /// colons or spaces between bytes. Nil if it is not one.
    static func parseSHA1(_ text: String) -> [UInt8]? {
        let digits = text.filter { $0 != ":" && $0 != " " }
        guard digits.count == 40, digits.allSatisfy(\.isHexDigit) else { return nil }
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            bytes.append(UInt8(digits[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
}
