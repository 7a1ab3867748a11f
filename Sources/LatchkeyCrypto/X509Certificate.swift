internal import COpenSSL
import LatchkeySecrets

/// An X.509 certificate, read the way Apple's `SecCertificateCreateWithData` reads it
/// (Security, `OSX/sec/Security/SecCertificate.c`, `SecCertificateParse`), with the values the
/// keychain derives from it (`SecCertificateCopyAttributeDictionary`; reference §7.2).
///
/// Parsing is strict: exactly one DER certificate, nothing after it, and OpenSSL's `d2i_X509` must
/// accept it as well. Like Apple, an explicit version must be v2 or v3 (a v1 certificate omits the
/// field), the serial number is 1–37 bytes, and times follow Apple's UTCTime/GeneralizedTime rules.
package struct X509Certificate: Sendable, Equatable {
    /// Largest certificate accepted (a cap before any parsing; real certificates are a few KiB).
    package static let maximumSize = 1 << 20

    /// The certificate's DER encoding (`SecCertificateCopyData`, the item's value data).
    package let der: [UInt8]
    /// 1, 2 or 3: the X.509 version, which Apple stores as `kSecAttrCertificateType` (`ctyp`).
    package let version: Int
    /// The serialNumber INTEGER's content bytes, a leading 0x00 included (`kSecAttrSerialNumber`).
    package let serialNumber: [UInt8]
    /// The issuer Name, a full DER SEQUENCE.
    package let issuerDER: [UInt8]
    /// The subject Name, a full DER SEQUENCE.
    package let subjectDER: [UInt8]
    /// Apple's normalised issuer content, without the outer SEQUENCE (`kSecAttrIssuer`, `issr`).
    package let normalizedIssuer: [UInt8]
    /// Apple's normalised subject content, without the outer SEQUENCE (`kSecAttrSubject`, `subj`).
    package let normalizedSubject: [UInt8]
    /// The SubjectKeyIdentifier extension's key identifier, if present (`kSecAttrSubjectKeyID`, `skid`).
    package let subjectKeyIdentifier: [UInt8]?
    /// The subjectPublicKey BIT STRING contents: the key's Apple external representation for RSA
    /// and EC.
    package let publicKeyBytes: [UInt8]
    /// Start of the validity period as CFAbsoluteTime (seconds since 2001-01-01 UTC).
    package let notValidBefore: Double
    /// End of the validity period as CFAbsoluteTime.
    package let notValidAfter: Double

    /// The SubjectPublicKeyInfo, for building the key.
    private let subjectPublicKeyInfo: [UInt8]
    /// Email addresses and DNS names from the subjectAltName extension.
    private let alternativeEmails: [String]
    private let alternativeDNSNames: [String]

    /// Parses the certificate at the start of `bytes` and ignores what follows it, as Apple's
    /// `SecCertificateCreateWithData` does (its parser keeps the top-level SEQUENCE and drops the rest;
    /// Apple's KeychainAPITests carries such a certificate, with a trailing zero byte). `der` is then the
    /// certificate alone.
    package init(leadingDER bytes: [UInt8]) throws(CryptoError) {
        guard !bytes.isEmpty, bytes.count <= Self.maximumSize else {
            throw CryptoError.invalidInput("certificate size out of range")
        }
        var reader = DER.Reader(bytes)
        let first = try reader.read("certificate")
        try self.init(der: Array(first.encoded))
    }

    /// Parses one DER certificate. Throws `.invalidInput` for anything else (PEM text, a truncated
    /// certificate, trailing bytes, a certificate request, a malformed Name or date).
    package init(der: [UInt8]) throws(CryptoError) {
        guard !der.isEmpty, der.count <= Self.maximumSize else {
            throw CryptoError.invalidInput("certificate size out of range")
        }
        try Self.checkWithOpenSSL(der)
        self.der = der
        let certificate = try DER.single(der[...], "certificate").expect(DER.sequence, "certificate")
        var top = try certificate.contents()
        let tbs = try top.read(DER.sequence, "tbsCertificate")
        _ = try top.read(DER.sequence, "signatureAlgorithm")
        _ = try top.read(DER.bitString, "signature")
        try top.finish("certificate")

        var fields = try tbs.contents()
        if let explicit = try fields.readIfPresent(0xA0) {
            var inner = try explicit.contents()
            let number = try inner.read(DER.integer, "version")
            try inner.finish("version")
            guard number.content.count == 1, let value = number.content.first, value == 1 || value == 2 else {
                throw CryptoError.invalidInput("certificate version must be 2 or 3 when present")
            }
            version = Int(value) + 1
        } else {
            version = 1
        }
        let serial = try fields.read(DER.integer, "serialNumber")
        guard (1...37).contains(serial.content.count) else {
            throw CryptoError.invalidInput("certificate serial number length out of range")
        }
        serialNumber = Array(serial.content)
        _ = try fields.read(DER.sequence, "signature algorithm")
        let issuer = try fields.read(DER.sequence, "issuer")
        var validity = try fields.read(DER.sequence, "validity").contents()
        notValidBefore = try X509Time.absoluteTime(validity.read("notBefore"))
        notValidAfter = try X509Time.absoluteTime(validity.read("notAfter"))
        try validity.finish("validity")
        let subject = try fields.read(DER.sequence, "subject")
        let spki = try fields.read(DER.sequence, "subjectPublicKeyInfo")
        var spkiFields = try spki.contents()
        _ = try spkiFields.read(DER.sequence, "public key algorithm")
        let bits = try spkiFields.read(DER.bitString, "subjectPublicKey")
        try spkiFields.finish("subjectPublicKeyInfo")
        guard let unusedBits = bits.content.first, unusedBits < 8 else {
            throw CryptoError.invalidInput("malformed subjectPublicKey")
        }
        publicKeyBytes = Array(bits.content.dropFirst())
        subjectPublicKeyInfo = Array(spki.encoded)
        _ = try fields.readIfPresent(0x81)  // issuerUniqueID
        _ = try fields.readIfPresent(0x82)  // subjectUniqueID
        let extensions = try Self.readExtensions(try fields.readIfPresent(0xA3))
        try fields.finish("tbsCertificate")

        issuerDER = Array(issuer.encoded)
        subjectDER = Array(subject.encoded)
        normalizedIssuer = try X501Name.normalizedContent(issuer.content)
        normalizedSubject = try X501Name.normalizedContent(subject.content)
        subjectKeyIdentifier = extensions.subjectKeyIdentifier
        alternativeEmails = extensions.emails
        alternativeDNSNames = extensions.dnsNames
    }

    /// SHA-1 of `publicKeyBytes`: Apple's public-key hash (`kSecAttrPublicKeyHash`, `pkhh`), equal to
    /// the matching key's `kSecAttrApplicationLabel`.
    package var publicKeyHash: [UInt8] { SHA1.hash(publicKeyBytes) }

    /// The certificate's public key (`SecCertificateCopyKey`). Throws `.unsupported` for key types
    /// other than RSA and EC on P-256/P-384/P-521.
    package func publicKey() throws(CryptoError) -> AsymmetricKey {
        let pkey: OpaquePointer
        do throws(CryptoError) {
            pkey = try subjectPublicKeyInfo.withUnsafeBytes { buffer in
                Result { () throws(CryptoError) in
                    try KeyCodec.decode(
                        buffer, inputType: "DER", structure: "SubjectPublicKeyInfo", keyType: nil,
                        selection: KeyCodec.publicSelection, password: nil)
                }
            }.get()
        } catch {
            throw CryptoError.unsupported("the certificate's public key type is not supported")
        }
        return try AsymmetricKey(adopting: pkey)
    }

    /// Apple's `SecCertificateCopySubjectSummary`, the default label of a certificate item: the
    /// subject's common names (else organisational units, organisations, any attribute), else the
    /// first email address, else the first DNS name; nil if there is none of these.
    package var subjectSummary: String? {
        let attributes = (try? X501Name.attributes(ofContent: Self.nameContent(subjectDER))) ?? []
        if let summary = X501Name.summary(of: attributes) { return summary }
        return emailAddresses.first ?? alternativeDNSNames.first
    }

    /// The subject's common names in order (`SecCertificateCopyCommonNames`).
    package var commonNames: [String] { subjectStrings(X501Name.commonName) }

    /// Email addresses: the subjectAltName rfc822Names, then the subject's emailAddress attributes
    /// (`SecCertificateCopyRFC822Names`).
    package var emailAddresses: [String] { alternativeEmails + subjectStrings(X501Name.emailAddress) }

    /// Apple's normalised form of a `kSecAttrIssuer`/`kSecAttrSubject` query value: a full DER Name
    /// (starting with a SEQUENCE tag) becomes its normalised content; anything else, or a Name that
    /// does not parse, is returned unchanged (`SecItem.m` does the same before matching).
    package static func normalizedName(fromQueryValue value: [UInt8]) -> [UInt8] {
        // Like Apple's DERDecodeItem, only the first element counts; bytes after it are ignored.
        var reader = DER.Reader(value)
        guard value.first == DER.sequence, let name = try? reader.next(),
            let normalized = try? X501Name.normalizedContent(name.content)
        else { return value }
        return normalized
    }

    // MARK: Parsing helpers

    private func subjectStrings(_ type: [UInt8]) -> [String] {
        let attributes = (try? X501Name.attributes(ofContent: Self.nameContent(subjectDER))) ?? []
        return attributes.filter { Array($0.type) == type }.map { X501Name.displayString($0.value) }
    }

    private static func nameContent(_ name: [UInt8]) throws(CryptoError) -> ArraySlice<UInt8> {
        try DER.single(name[...], "name").content
    }

    private struct Extensions {
        var subjectKeyIdentifier: [UInt8]?
        var emails: [String] = []
        var dnsNames: [String] = []
    }

    private static let subjectKeyIdentifierOID: [UInt8] = [0x55, 0x1D, 0x0E]
    private static let subjectAltNameOID: [UInt8] = [0x55, 0x1D, 0x11]

    /// Reads `[3] EXPLICIT Extensions`. Like Apple, a known extension that does not parse is
    /// ignored unless it is critical, in which case the certificate is refused.
    private static func readExtensions(_ wrapper: DER.Element?) throws(CryptoError) -> Extensions {
        var result = Extensions()
        guard let wrapper else { return result }
        var outer = try wrapper.contents()
        var list = try outer.read(DER.sequence, "extensions").contents()
        try outer.finish("extensions")
        var count = 0
        while let element = try list.next() {
            count += 1
            guard count <= 10_000 else { throw CryptoError.invalidInput("too many certificate extensions") }
            var fields = try element.expect(DER.sequence, "extension").contents()
            let oid = try fields.read(DER.objectIdentifier, "extension id")
            var critical = false
            if let flag = try fields.readIfPresent(DER.boolean) {
                guard flag.content.count == 1 else { throw CryptoError.invalidInput("malformed extension criticality") }
                critical = flag.content.first != 0
            }
            let value = try fields.read(DER.octetString, "extension value")
            try fields.finish("extension")
            let parsed: Bool
            switch Array(oid.content) {
            case subjectKeyIdentifierOID:
                if let identifier = try? DER.single(value.content, "key identifier"), identifier.tag == DER.octetString
                {
                    result.subjectKeyIdentifier = Array(identifier.content)
                    parsed = true
                } else {
                    parsed = false
                }
            case subjectAltNameOID:
                if let names = try? generalNames(value.content) {
                    result.emails = names.emails
                    result.dnsNames = names.dnsNames
                    parsed = true
                } else {
                    parsed = false
                }
            default:
                parsed = true
            }
            guard parsed || !critical else {
                throw CryptoError.invalidInput("a critical certificate extension is malformed")
            }
        }
        guard count > 0 else { throw CryptoError.invalidInput("empty certificate extensions") }
        return result
    }

    /// rfc822Name ([1], ASCII) and dNSName ([2], UTF-8) entries of a GeneralNames SEQUENCE.
    private static func generalNames(_ bytes: ArraySlice<UInt8>) throws(CryptoError) -> (
        emails: [String], dnsNames: [String]
    ) {
        var emails: [String] = [], dnsNames: [String] = []
        var names = try DER.single(bytes, "GeneralNames").expect(DER.sequence, "GeneralNames").contents()
        while let name = try names.next() {
            switch name.tag {
            case 0x81:
                guard name.content.allSatisfy({ $0 < 0x80 }) else {
                    throw CryptoError.invalidInput("non-ASCII rfc822Name")
                }
                emails.append(String(decoding: name.content, as: UTF8.self))
            case 0x82:
                guard let text = String(validating: name.content, as: UTF8.self) else {
                    throw CryptoError.invalidInput("bad dNSName")
                }
                dnsNames.append(text)
            default:
                continue
            }
        }
        return (emails, dnsNames)
    }

    /// OpenSSL must also see exactly one certificate in `der`.
    private static func checkWithOpenSSL(_ der: [UInt8]) throws(CryptoError) {
        let consumed = der.withUnsafeBufferPointer { buffer -> Int in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let x509 = d2i_X509(nil, &cursor, buffer.count) else { return -1 }
            X509_free(x509)
            return cursor.map { $0 - buffer.baseAddress! } ?? -1
        }
        ERR_clear_error()
        guard consumed == der.count else { throw CryptoError.invalidInput("the data is not one DER certificate") }
    }
}
