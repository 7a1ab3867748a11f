import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Certificates and identities through the public API against the real agent, with certificates and
/// keys made by the `openssl` command inside the test (seeds/003: "Import, Then Add", "Investigating
/// Complex Attributes", "Digital Identities Aren't Real", the kSecAttrApplicationTag pitfall).
final class CertificateTests: AgentTestCase {
    private var work = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        try XCTSkipUnless(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"),
            "the openssl command is needed to make test certificates (apt-get install openssl)")
        work = NSTemporaryDirectory() + "lk-cert-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: work)
        super.tearDown()
    }

    @discardableResult
    private func openssl(_ arguments: [String]) throws -> String {
        let result = try TestProcess.run("/usr/bin/openssl", arguments)
        XCTAssertEqual(result.status, 0, "openssl \(arguments.joined(separator: " ")): \(result.err)")
        return result.out
    }

    /// A key (EC P-256 or RSA) and a self-signed certificate for it, as files in `work`.
    private func makeCertificate(
        _ name: String, subject: String, rsa: Bool = false, serial: String = "0x80",
        extensions: [String] = []
    ) throws -> (certificate: Data, keyPEM: String) {
        let key = "\(work)/\(name).key", cert = "\(work)/\(name).der"
        if rsa {
            try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key])
        } else {
            try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        }
        var arguments = [
            "req", "-new", "-x509", "-key", key, "-subj", subject, "-days", "30", "-set_serial", serial,
            "-outform", "DER", "-out", cert,
        ]
        for ext in extensions { arguments += ["-addext", ext] }
        try openssl(arguments)
        return (try Data(contentsOf: URL(fileURLWithPath: cert)), key)
    }

    /// The private key of a PEM file as a SecKey (its external representation via openssl: the
    /// traditional "EC PRIVATE KEY"/PKCS#1 DER is parsed by SecKeyCreateWithData's RSA path, and for
    /// EC the X9.63 form is assembled from openssl's text output).
    private func privateKey(_ pemPath: String, rsa: Bool) throws -> SecKey {
        var error: Unmanaged<CFError>?
        if rsa {
            let der = "\(pemPath).pkcs1"
            try openssl(["rsa", "-in", pemPath, "-traditional", "-outform", "DER", "-out", der])
            let bytes = try Data(contentsOf: URL(fileURLWithPath: der))
            return try XCTUnwrap(
                SecKeyCreateWithData(
                    bytes as CFData,
                    [
                        kSecAttrKeyType: kSecAttrKeyTypeRSA,
                        kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                    ] as NSDictionary, &error))
        }
        let text = try openssl(["ec", "-in", pemPath, "-noout", "-text"])
        func hexBlock(after label: String) -> [UInt8] {
            guard let range = text.range(of: label) else { return [] }
            var bytes: [UInt8] = []
            for line in text[range.upperBound...].split(separator: "\n") {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard trimmed.first?.isHexDigit == true, trimmed.contains(":") || trimmed.count == 2 else { break }
                bytes += trimmed.split(separator: ":").compactMap { UInt8($0, radix: 16) }
            }
            return bytes
        }
        var scalar = hexBlock(after: "priv:")
        while scalar.count > 32, scalar.first == 0 { scalar.removeFirst() }
        scalar = [UInt8](repeating: 0, count: 32 - scalar.count) + scalar
        let point = hexBlock(after: "pub:")
        XCTAssertEqual(point.count, 65)
        return try XCTUnwrap(
            SecKeyCreateWithData(
                Data(point + scalar) as CFData,
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
                    kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                ] as NSDictionary, &error))
    }

    /// "Investigating Complex Attributes": the derived attributes, with the seed's own issuer bytes.
    func testAddedCertificateHasApplesDerivedAttributes() throws {
        try createKeychain()
        let (der, _) = try makeCertificate(
            "mouse", subject: "/CN=MouseCA/C=GB", serial: "0x80",
            extensions: ["subjectKeyIdentifier=hash"])
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
        XCTAssertEqual(SecCertificateCopySubjectSummary(certificate) as String?, "MouseCA")
        XCTAssertEqual(SecCertificateCopyData(certificate) as Data, der)

        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemAdd([kSecValueRef: certificate, kSecReturnAttributes: true] as NSDictionary, &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        // seeds/003 prints exactly these bytes for this name: the Name's content without its SEQUENCE.
        let seedIssuer = Data(hex: "3110300e06035504030c074d6f7573654341310b3009060355040613024742")
        XCTAssertEqual(attributes[kSecAttrIssuer as String] as? Data, seedIssuer)
        XCTAssertEqual(attributes[kSecAttrSubject as String] as? Data, seedIssuer)
        XCTAssertEqual(
            attributes[kSecAttrSerialNumber as String] as? Data, Data([0x00, 0x80]), "INTEGER contents, leading 0 kept")
        XCTAssertEqual(attributes[kSecAttrCertificateType as String] as? Int, 3)
        XCTAssertEqual(attributes[kSecAttrCertificateEncoding as String] as? Int, 3)
        XCTAssertEqual(attributes[kSecAttrLabel as String] as? String, "MouseCA")
        XCTAssertEqual(attributes[kSecAttrAccessible as String] as? String, "dk", "certificates default to Always")
        XCTAssertEqual((attributes[kSecAttrSubjectKeyID as String] as? Data)?.count, 20)
        let publicKey = try XCTUnwrap(SecCertificateCopyKey(certificate))
        let publicBytes = try XCTUnwrap(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)
        var keyAttributes: CFTypeRef?
        XCTAssertEqual(
            SecItemAdd([kSecValueRef: publicKey, kSecReturnAttributes: true] as NSDictionary, &keyAttributes),
            errSecSuccess)
        XCTAssertEqual(
            attributes[kSecAttrPublicKeyHash as String] as? Data,
            (keyAttributes as? [String: Any])?[kSecAttrApplicationLabel as String] as? Data)
        XCTAssertEqual(publicBytes.count, 65)

        // A query may give the issuer as a full DER Name (with its SEQUENCE): it is normalised first.
        var seq = Data([0x30, UInt8(seedIssuer.count)])
        seq.append(seedIssuer)
        var found: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassCertificate, kSecAttrIssuer: seq,
                    kSecAttrSerialNumber: Data([0x00, 0x80]), kSecReturnRef: true,
                ] as NSDictionary, &found),
            errSecSuccess)
        XCTAssertEqual(found as? SecCertificate, certificate)

        // Same issuer and serial: a duplicate, whatever the label.
        XCTAssertEqual(
            SecItemAdd([kSecValueRef: certificate, kSecAttrLabel: "other"] as NSDictionary, nil), errSecDuplicateItem)
        // Certificates stay readable when every password class is locked.
        try KeychainControl.lock(all: true)
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecReturnData: true] as NSDictionary, &found),
            errSecSuccess)
        XCTAssertEqual(found as? Data, der)
    }

    /// Without a SubjectKeyIdentifier extension the item has no `skid`; the RSA key's hash still joins.
    func testCertificateWithoutSubjectKeyIdentifier() throws {
        try createKeychain()
        let (der, _) = try makeCertificate(
            "noskid", subject: "/CN=No SKID", rsa: true, serial: "7",
            extensions: ["subjectKeyIdentifier=none", "authorityKeyIdentifier=none"])
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemAdd([kSecValueRef: certificate, kSecReturnAttributes: true] as NSDictionary, &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        XCTAssertNil(attributes[kSecAttrSubjectKeyID as String])
        XCTAssertEqual(attributes[kSecAttrSerialNumber as String] as? Data, Data([7]))
        let key = try XCTUnwrap(SecCertificateCopyKey(certificate))
        XCTAssertEqual((SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrKeySizeInBits as String] as? Int, 2048)
        XCTAssertEqual(
            (SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrApplicationLabel as String] as? Data,
            attributes[kSecAttrPublicKeyHash as String] as? Data)
    }

    /// PrintableString values are normalised (upper case, blanks collapsed); UTF8String values are not.
    func testPrintableStringNamesAreNormalised() throws {
        try createKeychain()
        let config = "\(work)/printable.cnf"
        try """
        [req]
        distinguished_name = dn
        string_mask = default
        prompt = no
        [dn]
        C = gb
        O = mouse   house
        CN = Mouse Server
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let key = "\(work)/p.key", cert = "\(work)/p.der"
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        try openssl([
            "req", "-new", "-x509", "-key", key, "-config", config, "-days", "1", "-outform", "DER", "-out", cert,
        ])
        let der = try Data(contentsOf: URL(fileURLWithPath: cert))
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemAdd([kSecValueRef: certificate, kSecReturnAttributes: true] as NSDictionary, &result), errSecSuccess)
        let issuer = try XCTUnwrap((result as? [String: Any])?[kSecAttrIssuer as String] as? Data)
        let text = String(decoding: issuer, as: UTF8.self)
        XCTAssertTrue(text.contains("GB"), "PrintableString upper-cased")
        XCTAssertTrue(text.contains("MOUSE HOUSE"), "blanks collapsed: \(issuer as NSData)")
        XCTAssertFalse(text.contains("mouse"))
        // Searching by the certificate's own issuer Name (full DER, lower case, double blanks) finds it.
        let rawIssuer = Data(certificate.certificate.issuerDER)
        XCTAssertTrue(String(decoding: rawIssuer, as: UTF8.self).contains("mouse   house"))
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecAttrIssuer: rawIssuer] as NSDictionary, nil),
            errSecSuccess)
    }

    /// The pitfall from seeds/003: kSecAttrApplicationTag is not a certificate attribute.
    func testApplicationTagOnACertificateIsNoSuchAttribute() throws {
        try createKeychain()
        let (der, _) = try makeCertificate("tag", subject: "/CN=Tagged")
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassCertificate, kSecAttrApplicationTag: Data("alice".utf8),
                    kSecValueRef: certificate,
                ] as NSDictionary, nil), errSecNoSuchAttr)
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassCertificate, kSecAttrApplicationTag: Data("alice".utf8),
                    kSecReturnRef: true,
                ] as NSDictionary, nil), errSecNoSuchAttr)
        XCTAssertNil(
            SecCertificateCreateWithData(nil, Data(der.prefix(100)) as CFData), "a truncated certificate is refused")
    }

    /// "Digital Identities Aren't Real": a certificate plus its private key make an identity; deleting
    /// either undoes it; the identity's key signs in the agent and openssl verifies the signature.
    func testIdentityIsTheJoinOfCertificateAndKey() throws {
        try createKeychain()
        for rsa in [false, true] {
            let name = rsa ? "rsa" : "ec"
            let (der, keyPath) = try makeCertificate(name, subject: "/CN=Identity \(name)", rsa: rsa)
            let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
            let key = try privateKey(keyPath, rsa: rsa)
            let identityQuery: NSDictionary = [
                kSecClass: kSecClassIdentity, kSecAttrLabel: "Identity \(name)", kSecReturnRef: true,
            ]

            XCTAssertEqual(SecItemAdd([kSecValueRef: certificate] as NSDictionary, nil), errSecSuccess)
            XCTAssertEqual(SecItemCopyMatching(identityQuery, nil), errSecItemNotFound, "no key yet: no identity")
            XCTAssertEqual(
                SecItemAdd([kSecValueRef: key, kSecAttrLabel: "key \(name)"] as NSDictionary, nil), errSecSuccess)

            var found: CFTypeRef?
            XCTAssertEqual(SecItemCopyMatching(identityQuery, &found), errSecSuccess)
            let identity = try XCTUnwrap(found as? SecIdentity)
            var identityCertificate: SecCertificate?
            var identityKey: SecKey?
            XCTAssertEqual(SecIdentityCopyCertificate(identity, &identityCertificate), errSecSuccess)
            XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &identityKey), errSecSuccess)
            XCTAssertEqual(identityCertificate, certificate)
            XCTAssertNil(identityKey?.local, "the identity's private key stays in the agent")

            // Sign with the identity's key; openssl verifies with the certificate.
            let message = Data("identity \(name)".utf8)
            let algorithm: SecKeyAlgorithm = rsa ? .rsaSignatureMessagePKCS1v15SHA256 : .ecdsaSignatureMessageX962SHA256
            var error: Unmanaged<CFError>?
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(identityKey!, algorithm, message as CFData, &error) as Data?)
            try message.write(to: URL(fileURLWithPath: "\(work)/msg"))
            try signature.write(to: URL(fileURLWithPath: "\(work)/sig"))
            try openssl([
                "x509", "-inform", "DER", "-in", "\(work)/\(name).der", "-pubkey", "-noout", "-out", "\(work)/pub.pem",
            ])
            let verify = try TestProcess.run(
                "/usr/bin/openssl",
                [
                    "dgst", "-sha256", "-verify", "\(work)/pub.pem",
                    "-signature", "\(work)/sig", "\(work)/msg",
                ])
            XCTAssertEqual(verify.status, 0, verify.out + verify.err)

            // Attributes: the certificate's win on shared names (the label here).
            var attributes: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass: kSecClassIdentity, kSecAttrLabel: "Identity \(name)",
                        kSecReturnAttributes: true, kSecReturnPersistentRef: true,
                    ] as NSDictionary, &attributes),
                errSecSuccess)
            let dictionary = try XCTUnwrap(attributes as? [String: Any])
            XCTAssertEqual(dictionary[kSecAttrLabel as String] as? String, "Identity \(name)")
            XCTAssertEqual(dictionary[kSecAttrKeyClass as String] as? Int, 1)
            let ref = try XCTUnwrap(dictionary[kSecValuePersistentRef as String] as? Data)
            XCTAssertEqual(String(decoding: ref.prefix(4), as: UTF8.self), "idnt")
            XCTAssertEqual(
                SecItemCopyMatching([kSecValuePersistentRef: ref, kSecReturnRef: true] as NSDictionary, &found),
                errSecSuccess)
            XCTAssertTrue(found is SecIdentity)

            // Deleting the certificate makes the identity disappear; the key stays.
            XCTAssertEqual(SecItemDelete([kSecValueRef: certificate] as NSDictionary), errSecSuccess)
            XCTAssertEqual(SecItemCopyMatching(identityQuery, nil), errSecItemNotFound)
            XCTAssertEqual(
                SecItemCopyMatching([kSecClass: kSecClassKey, kSecAttrLabel: "key \(name)"] as NSDictionary, nil),
                errSecSuccess)

            // Adding the identity ref adds the certificate (the key is a tolerated duplicate)...
            XCTAssertEqual(SecItemAdd([kSecValueRef: identity] as NSDictionary, nil), errSecSuccess)
            XCTAssertEqual(SecItemCopyMatching(identityQuery, nil), errSecSuccess)
            XCTAssertEqual(
                SecItemAdd([kSecValueRef: identity] as NSDictionary, nil), errSecDuplicateItem, "both halves present")
            // ...and deleting by identity removes both halves, even while the key's class is locked.
            try KeychainControl.lock(all: false)
            XCTAssertEqual(SecItemCopyMatching(identityQuery, nil), errSecInteractionNotAllowed)
            XCTAssertEqual(SecItemDelete([kSecValueRef: identity] as NSDictionary), errSecSuccess)
            try KeychainControl.unlock(password: .init(copying: Array("pw".utf8)))
            XCTAssertEqual(
                SecItemCopyMatching([kSecClass: kSecClassKey, kSecAttrLabel: "key \(name)"] as NSDictionary, nil),
                errSecItemNotFound)
            XCTAssertEqual(
                SecItemCopyMatching([kSecClass: kSecClassCertificate] as NSDictionary, nil), errSecItemNotFound)
        }
    }

    /// Signatures made by openssl verify through SecKeyVerifySignature (ECDSA, RSA PKCS#1 v1.5 and PSS).
    func testOpenSSLSignaturesVerifyHere() throws {
        try createKeychain()
        for (name, rsa, algorithm, options) in [
            ("ec", false, SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256, [String]()),
            ("rsa", true, SecKeyAlgorithm.rsaSignatureMessagePKCS1v15SHA256, []),
            (
                "pss", true, SecKeyAlgorithm.rsaSignatureMessagePSSSHA256,
                ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]
            ),
        ] {
            let (der, keyPath) = try makeCertificate(name, subject: "/CN=\(name)", rsa: rsa)
            let message = Data("made by openssl \(name)".utf8)
            try message.write(to: URL(fileURLWithPath: "\(work)/m-\(name)"))
            try openssl(
                ["dgst", "-sha256", "-sign", keyPath] + options + ["-out", "\(work)/s-\(name)", "\(work)/m-\(name)"])
            let signature = try Data(contentsOf: URL(fileURLWithPath: "\(work)/s-\(name)"))
            let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, der as CFData))
            let publicKey = try XCTUnwrap(SecCertificateCopyKey(certificate))
            var error: Unmanaged<CFError>?
            XCTAssertTrue(
                SecKeyVerifySignature(publicKey, algorithm, message as CFData, signature as CFData, &error),
                "\(name): \(String(describing: error?.takeRetainedValue()))")
            var tampered = signature
            tampered[tampered.count / 2] ^= 0x01
            XCTAssertFalse(SecKeyVerifySignature(publicKey, algorithm, message as CFData, tampered as CFData, &error))
        }
    }
}

extension Data {
    init(hex: String) {
        self.init(
            stride(from: 0, to: hex.count - 1, by: 2).map { i in
                let start = hex.index(hex.startIndex, offsetBy: i)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
            })
    }
}
