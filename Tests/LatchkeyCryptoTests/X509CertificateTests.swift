import Foundation
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// Certificates made by `openssl req -x509`, read here and compared with what OpenSSL's own parser
/// (`asn1parse`, `x509 -text`) says about them.
final class X509CertificateTests: XCTestCase {
    /// `string_mask = default` makes OpenSSL encode plain ASCII values as PrintableString;
    /// `utf8only` makes every value a UTF8String.
    private func config(stringMask: String) -> String {
        """
        [req]
        distinguished_name = dn
        string_mask = \(stringMask)
        prompt = no
        [dn]
        CN = unused
        [skid]
        subjectKeyIdentifier = hash
        basicConstraints = CA:false
        subjectAltName = email:alt@example.org, DNS:host.example.org
        [nokid]
        basicConstraints = CA:false
        subjectKeyIdentifier = none
        authorityKeyIdentifier = none
        [dnsonly]
        subjectKeyIdentifier = hash
        subjectAltName = DNS:only.example.org
        [none]

        """
    }

    /// Makes a self-signed certificate with `subject`; returns its DER. `extensions` names a section
    /// of `config` ("none" gives a v1 certificate).
    @discardableResult
    private func makeCertificate(
        _ workspace: OpenSSLWorkspace, subject: String, name: String = "cert",
        extensions: String = "skid", stringMask: String = "default", key: String = "ec",
        extra: [String] = []
    ) throws -> [UInt8] {
        try workspace.write("req.cnf", config(stringMask: stringMask))
        let keyOptions =
            key == "ec"
            ? ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
            : ["-newkey", "rsa:2048"]
        try workspace.run(
            ["req", "-x509", "-new"] + keyOptions + [
                "-nodes", "-keyout", "\(name).key", "-out", "\(name).pem",
                "-config", "req.cnf", "-extensions", extensions, "-subj", subject, "-days", "1",
            ] + extra)
        try workspace.run(["x509", "-in", "\(name).pem", "-outform", "DER", "-out", "\(name).der"])
        return try workspace.read("\(name).der")
    }

    /// The issuer and subject Names as OpenSSL's `asn1parse` delimits them: the depth-2 elements
    /// before and after the validity SEQUENCE (the one whose first child is a time).
    private func namesByOpenSSL(_ workspace: OpenSSLWorkspace, _ name: String) throws -> (
        issuer: [UInt8], subject: [UInt8]
    ) {
        let der = try workspace.read("\(name).der")
        let lines = try workspace.text(["asn1parse", "-inform", "DER", "-in", "\(name).der"]).split(separator: "\n")
            .map(String.init)
        struct Item { var offset: Int, depth: Int, length: Int, text: String }
        let items: [Item] = lines.compactMap { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let offset = Int(parts[0].trimmingCharacters(in: .whitespaces)) else { return nil }
            let fields = parts[1].split(separator: " ", omittingEmptySubsequences: true)
            func value(_ prefix: String) -> Int? {
                guard let index = fields.firstIndex(where: { $0.hasPrefix(prefix) }) else { return nil }
                let inline = fields[index].dropFirst(prefix.count)
                return Int(inline.isEmpty ? fields[index + 1] : inline)
            }
            guard let depth = value("d="), let header = value("hl="), let length = value("l=") else { return nil }
            return Item(offset: offset, depth: depth, length: header + length, text: line)
        }
        let validity = items.indices.first { index in
            items[index].depth == 2 && index + 1 < items.count && items[index + 1].depth == 3
                && (items[index + 1].text.contains("UTCTIME") || items[index + 1].text.contains("GENERALIZEDTIME"))
        }!
        let issuer = items[..<validity].last { $0.depth == 2 }!
        let subject = items[(validity + 1)...].first { $0.depth == 2 }!
        return (
            Array(der[issuer.offset..<(issuer.offset + issuer.length)]),
            Array(der[subject.offset..<(subject.offset + subject.length)])
        )
    }

    /// The content of a DER SEQUENCE (short or long length form).
    private func content(ofSequence der: [UInt8]) -> [UInt8] {
        let lengthBytes = der[1] < 0x80 ? 0 : Int(der[1] & 0x7F)
        return Array(der.dropFirst(2 + lengthBytes))
    }

    func testFieldsMatchOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        let der = try makeCertificate(
            workspace, subject: "/CN=  my  test   cert /O=acme corp/OU=unit one/OU=unit two",
            extra: ["-set_serial", "0x80112233"])
        let certificate = try X509Certificate(der: der)
        XCTAssertEqual(certificate.der, der)
        XCTAssertEqual(certificate.version, 3)
        // The INTEGER is 00 80 11 22 33: the sign byte stays, as in Apple's slnr.
        let serialHex = try workspace.text(["x509", "-in", "cert.pem", "-noout", "-serial"])
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "serial=", with: "")
        XCTAssertEqual(serialHex, "80112233")
        XCTAssertEqual(certificate.serialNumber, [0x00] + hex(serialHex.lowercased()))

        let names = try namesByOpenSSL(workspace, "cert")
        XCTAssertEqual(certificate.issuerDER, names.issuer)
        XCTAssertEqual(certificate.subjectDER, names.subject)

        // SubjectKeyIdentifier "hash" is SHA-1 of the subjectPublicKey bits: Apple's pkhh and klbl.
        let skidText = try workspace.text(["x509", "-in", "cert.pem", "-noout", "-ext", "subjectKeyIdentifier"])
        let skid = bytes(fromColonHex: skidText.components(separatedBy: "Identifier:")[1])
        XCTAssertEqual(skid.count, 20)
        XCTAssertEqual(certificate.subjectKeyIdentifier, skid)
        XCTAssertEqual(certificate.publicKeyHash, skid)
        let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("cert.key")))
        XCTAssertEqual(certificate.publicKeyBytes, key.publicKeyBytes)
        XCTAssertEqual(key.applicationLabel, certificate.publicKeyHash)
        XCTAssertEqual(try certificate.publicKey().publicKeyBytes, key.publicKeyBytes)

        // Validity as CFAbsoluteTime, against OpenSSL's ISO 8601 rendering.
        let dates = try workspace.text([
            "x509", "-in", "cert.pem", "-noout", "-startdate", "-enddate", "-dateopt", "iso_8601",
        ])
        func absolute(_ field: String) -> Double {
            let text = dates.components(separatedBy: "\(field)=")[1].components(separatedBy: "\n")[0]
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss'Z'"
            return formatter.date(from: text)!.timeIntervalSinceReferenceDate
        }
        XCTAssertEqual(certificate.notValidBefore, absolute("notBefore"))
        XCTAssertEqual(certificate.notValidAfter, absolute("notAfter"))
        XCTAssertEqual(certificate.notValidAfter - certificate.notValidBefore, 86400)
        XCTAssertEqual(certificate.notValidBefore, Date().timeIntervalSinceReferenceDate, accuracy: 300)

        XCTAssertEqual(certificate.commonNames, ["  my  test   cert "])
        XCTAssertEqual(certificate.emailAddresses, ["alt@example.org"])
        XCTAssertEqual(certificate.subjectSummary, "  my  test   cert ")
    }

    func testRSACertificateKeyVerifiesOpenSSLSignature() throws {
        let workspace = try OpenSSLWorkspace()
        let certificate = try X509Certificate(der: makeCertificate(workspace, subject: "/CN=rsa", key: "rsa"))
        let message = Array("signed by the certificate's key".utf8)
        try workspace.write("message", message)
        try workspace.run(["dgst", "-sha256", "-sign", "cert.key", "-out", "sig", "message"])
        let key = try certificate.publicKey()
        XCTAssertEqual(key.algorithm, .rsa)
        XCTAssertEqual(key.sizeInBits, 2048)
        XCTAssertTrue(try key.verify(.rsaSignatureMessagePKCS1v15SHA256, message, signature: workspace.read("sig")))
        XCTAssertEqual(SHA1.hash(key.publicKeyBytes), certificate.publicKeyHash)
    }

    func testPrintableStringNamesAreNormalisedLikeApple() throws {
        let workspace = try OpenSSLWorkspace()
        let words = String(repeating: "word  ", count: 25)  // 150 characters: long-form lengths
        try makeCertificate(workspace, subject: "/CN=  my  test   cert /description=\(words)/O=acme corp", name: "raw")
        // The same Name, written by OpenSSL with the values already in Apple's normal form.
        let normalWords = Array(repeating: "WORD", count: 25).joined(separator: " ")  // 124 characters: short form
        try makeCertificate(
            workspace, subject: "/CN=MY TEST CERT/description=\(normalWords)/O=ACME CORP", name: "normal")
        let raw = try X509Certificate(der: workspace.read("raw.der"))
        let normal = try X509Certificate(der: workspace.read("normal.der"))
        let expected = content(ofSequence: try namesByOpenSSL(workspace, "normal").subject)
        XCTAssertEqual(raw.normalizedSubject, expected)
        XCTAssertEqual(raw.normalizedIssuer, expected)
        XCTAssertEqual(normal.normalizedSubject, expected, "normal form is a fixed point")
        XCTAssertEqual(X509Certificate.normalizedName(fromQueryValue: raw.subjectDER), expected)
        // Summary: common name, then the description in parentheses, as Apple formats it.
        XCTAssertEqual(raw.subjectSummary, "  my  test   cert  (\(words))")
    }

    func testUTF8StringNamesAreLeftAlone() throws {
        let workspace = try OpenSSLWorkspace()
        let der = try makeCertificate(
            workspace, subject: "/CN=  lower  case  /O=Ünïcode  Org", stringMask: "utf8only",
            extra: ["-utf8"])
        let certificate = try X509Certificate(der: der)
        let subject = try namesByOpenSSL(workspace, "cert").subject
        XCTAssertTrue(try workspace.text(["asn1parse", "-in", "cert.pem"]).contains("UTF8STRING"))
        XCTAssertEqual(certificate.normalizedSubject, content(ofSequence: subject))
        XCTAssertEqual(certificate.commonNames, ["  lower  case  "])
        XCTAssertEqual(certificate.subjectSummary, "  lower  case  ")
        XCTAssertTrue(
            try workspace.text(["x509", "-in", "cert.pem", "-noout", "-subject", "-nameopt", "utf8"]).contains(
                "Ünïcode  Org"))
    }

    func testVersionOneWithoutExtensions() throws {
        let workspace = try OpenSSLWorkspace()
        let certificate = try X509Certificate(der: makeCertificate(workspace, subject: "/CN=old", extensions: "none"))
        XCTAssertTrue(try workspace.text(["x509", "-in", "cert.pem", "-noout", "-text"]).contains("Version: 1 (0x0)"))
        XCTAssertEqual(certificate.version, 1)
        XCTAssertNil(certificate.subjectKeyIdentifier)
        let v3 = try X509Certificate(der: makeCertificate(workspace, subject: "/CN=no skid", extensions: "nokid"))
        XCTAssertEqual(v3.version, 3)
        XCTAssertNil(v3.subjectKeyIdentifier)
    }

    func testGeneralizedTimeAfter2049() throws {
        let workspace = try OpenSSLWorkspace()
        let certificate = try X509Certificate(
            der: makeCertificate(workspace, subject: "/CN=long lived", extra: ["-days", "10000"]))
        XCTAssertTrue(try workspace.text(["asn1parse", "-in", "cert.pem"]).contains("GENERALIZEDTIME"))
        let end = try workspace.text(["x509", "-in", "cert.pem", "-noout", "-enddate", "-dateopt", "iso_8601"])
            .components(separatedBy: "notAfter=")[1].trimmingCharacters(in: .whitespacesAndNewlines)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss'Z'"
        XCTAssertEqual(certificate.notValidAfter, formatter.date(from: end)!.timeIntervalSinceReferenceDate)
    }

    func testSubjectSummaryFollowsApplesOrder() throws {
        let workspace = try OpenSSLWorkspace()
        let cases: [(subject: String, extensions: String, summary: String?)] = [
            ("/O=org/OU=unit one/OU=unit two/C=US", "skid", "unit two, unit one"),  // OU beats O; reverse order
            ("/C=US/O=first org/O=second org", "skid", "second org, first org"),
            ("/C=US/L=Springfield", "skid", "Springfield, US"),  // any attribute, last first
            ("/emailAddress=me@example.org", "skid", "me@example.org"),
            ("/", "skid", "alt@example.org"),  // no subject: SAN email
            ("/", "dnsonly", "only.example.org"),  // then SAN DNS name
            ("/", "none", nil),
        ]
        for (index, test) in cases.enumerated() {
            let certificate = try X509Certificate(
                der: makeCertificate(
                    workspace, subject: test.subject, name: "c\(index)",
                    extensions: test.extensions))
            XCTAssertEqual(certificate.subjectSummary, test.summary, test.subject)
        }
        let withEmail = try X509Certificate(der: workspace.read("c3.der"))
        XCTAssertEqual(withEmail.emailAddresses, ["alt@example.org", "me@example.org"])
        XCTAssertEqual(withEmail.commonNames, [])
    }

    func testQueryValuesThatAreNotNamesStayAsTheyAre() {
        XCTAssertEqual(X509Certificate.normalizedName(fromQueryValue: []), [])
        XCTAssertEqual(
            X509Certificate.normalizedName(fromQueryValue: [0x31, 0x00]), [0x31, 0x00], "content form already")
        XCTAssertEqual(
            X509Certificate.normalizedName(fromQueryValue: [0x30, 0x05, 0x31]), [0x30, 0x05, 0x31], "truncated")
        XCTAssertEqual(
            X509Certificate.normalizedName(fromQueryValue: [0x30, 0x02, 0x31, 0x00]), [0x30, 0x02, 0x31, 0x00],
            "empty RDN")
        XCTAssertEqual(X509Certificate.normalizedName(fromQueryValue: [0x30, 0x00]), [], "empty Name")
        // A hand-made Name: SET { SEQUENCE { OID 2.5.4.3, PrintableString " a  b " } }.
        let name: [UInt8] = [
            0x30, 0x11, 0x31, 0x0F, 0x30, 0x0D, 0x06, 0x03, 0x55, 0x04, 0x03, 0x13, 0x06,
            0x20, 0x61, 0x20, 0x20, 0x62, 0x20,
        ]
        XCTAssertEqual(
            X509Certificate.normalizedName(fromQueryValue: name),
            [0x31, 0x0C, 0x30, 0x0A, 0x06, 0x03, 0x55, 0x04, 0x03, 0x13, 0x03, 0x41, 0x20, 0x42])
    }

    func testMalformedCertificatesAreRejected() throws {
        let workspace = try OpenSSLWorkspace()
        let der = try makeCertificate(workspace, subject: "/CN=victim")
        try workspace.run([
            "req", "-new", "-key", "cert.key", "-subj", "/CN=request", "-config", "req.cnf", "-outform", "DER", "-out",
            "req.der",
        ])
        let rejected: [(String, [UInt8])] = [
            ("empty", []),
            ("trailing byte", der + [0]),
            ("two certificates", der + der),
            ("PEM text", try workspace.read("cert.pem")),
            ("certificate request", try workspace.read("req.der")),
            ("garbage", Array("certainly not a certificate".utf8)),
        ]
        for (name, bytes) in rejected {
            XCTAssertThrowsError(try X509Certificate(der: bytes), name) {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\(name): \($0)") }
            }
        }
        for length in 0..<der.count {
            XCTAssertThrowsError(try X509Certificate(der: Array(der.prefix(length))), "truncated to \(length)")
        }
        // Flipping bytes never crashes; whatever still parses must still be a certificate OpenSSL reads.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            var damaged = der
            damaged[Int.random(in: 0..<der.count, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator)
            if let parsed = try? X509Certificate(der: damaged) {
                XCTAssertEqual(parsed.der, damaged)
                _ = parsed.subjectSummary
                _ = parsed.commonNames
            }
        }
    }
}
