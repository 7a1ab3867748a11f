import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The key, certificate and identity verbs of `latchkey` (import, export, find-certificate,
/// find-identity, find-key, delete-certificate, generate-key) and `SecPKCS12Import`, against the real
/// agent. Certificates, keys and PKCS#12 files are made by the `openssl` command, and what export
/// writes is read back by it.
final class CLIKeyTests: AgentTestCase {
    private var work = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        try XCTSkipUnless(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"),
            "the openssl command is needed to make test certificates (apt-get install openssl)")
        work = NSTemporaryDirectory() + "lk-clikey-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: work)
        super.tearDown()
    }

    // MARK: - Import

    /// PEM certificate, PEM EC key (PKCS#8) and PEM RSA key (traditional) and a DER certificate: each
    /// is added, the certificate and its key form an identity, and the hashes are openssl's.
    func testImportPEMAndDERCertificatesAndKeys() throws {
        try createKeychain()
        let ec = try makeIdentity("ec", subject: "/CN=Alice EC/emailAddress=alice@example.com")
        var r = try cli(["import", ec.certificate])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "imported certificate \"Alice EC\"\n")
        r = try cli(["find-identity"])
        XCTAssertTrue(r.out.contains("0 identities found"), "a certificate alone is no identity: \(r.out)")

        r = try cli(["import", ec.key, "--tag", "com.example.alice", "-l", "Alice's key"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "imported EC 256-bit private key\n")

        let fingerprint = try sha1Fingerprint(ec.certificate)
        r = try cli(["find-identity"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("1) \(fingerprint) \"Alice EC\" (EC 256-bit)"), r.out)
        XCTAssertTrue(r.out.contains("1 identity found"), r.out)

        r = try cli(["find-certificate", "-c", "alice", "-Z", "-m"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("SHA-1 hash: \(fingerprint)\n"), r.out)
        XCTAssertTrue(
            r.out.contains(
                "SHA-256 hash: \(try openssl(["x509", "-in", ec.certificate, "-noout", "-fingerprint", "-sha256"]).hexAfterEquals)"
            ),
            r.out)
        XCTAssertTrue(r.out.contains("email addresses: alice@example.com"), r.out)
        XCTAssertTrue(r.out.contains("\"labl\"<blob>=\"Alice EC\""), r.out)
        XCTAssertTrue(r.out.contains("\"pdmn\"<blob>=\"dk\""), "certificates default to always: \(r.out)")

        r = try cli(["find-key", "--tag", "com.example.alice"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("\"labl\"<blob>=\"Alice's key\""), r.out)
        XCTAssertTrue(r.out.contains("\"kcls\"<int>=1"), r.out)
        XCTAssertTrue(r.out.contains("\"type\"<int>=73"), r.out)
        XCTAssertFalse(r.out.contains("v_Data"), "find-key never prints key bytes")

        // RSA: a traditional ("RSA PRIVATE KEY") key file and a DER certificate.
        let rsa = try makeIdentity("rsa", subject: "/CN=Bob RSA", rsa: true)
        let traditional = "\(work)/rsa-traditional.key", der = "\(work)/rsa.der"
        try openssl(["rsa", "-in", rsa.key, "-traditional", "-out", traditional])
        XCTAssertTrue(
            try String(contentsOfFile: traditional, encoding: .utf8).hasPrefix("-----BEGIN RSA PRIVATE KEY-----"))
        try openssl(["x509", "-in", rsa.certificate, "-outform", "DER", "-out", der])
        r = try cli(["import", traditional, "--accessible", "after-first-unlock"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "imported RSA 2048-bit private key\n")
        r = try cli(["import", der])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "imported certificate \"Bob RSA\"\n")
        r = try cli(["find-identity"])
        XCTAssertTrue(r.out.contains("\(try sha1Fingerprint(rsa.certificate)) \"Bob RSA\" (RSA 2048-bit)"), r.out)
        XCTAssertTrue(r.out.contains("2 identities found"), r.out)
        r = try cli(["find-key", "--type", "rsa", "--class", "private"])
        XCTAssertTrue(r.out.contains("\"pdmn\"<blob>=\"ck\""), "--accessible applies: \(r.out)")
        XCTAssertTrue(r.out.contains("\"bsiz\"<int>=2048"), r.out)
        XCTAssertEqual(try cli(["find-key", "--type", "rsa", "--size", "4096"]).status, 44)

        // The same certificate again: errSecDuplicateItem, reported like the other verbs, status 1.
        r = try cli(["import", der])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(
            r.err.contains("latchkey: SecItemAdd: The specified item already exists in the keychain. (-25299)"), r.err)
        XCTAssertTrue(r.err.contains("certificate \"Bob RSA\" is already in the keychain"), r.err)
        // In a PEM bundle the new items are still added; the exit status reports the duplicate.
        let other = try makeIdentity("other", subject: "/CN=Carol")
        let bundle = "\(work)/bundle.pem"
        try
            (String(contentsOfFile: ec.certificate, encoding: .utf8)
            + String(contentsOfFile: other.certificate, encoding: .utf8))
            .write(toFile: bundle, atomically: true, encoding: .utf8)
        r = try cli(["import", bundle])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.out, "imported certificate \"Carol\"\n")
        XCTAssertTrue(r.err.contains("certificate \"Alice EC\" is already in the keychain"), r.err)
    }

    /// Encrypted key files: PKCS#8 ("ENCRYPTED PRIVATE KEY") and OpenSSL's traditional encryption.
    func testImportEncryptedKeys() throws {
        try createKeychain()
        let pair = try makeIdentity("enc", subject: "/CN=Encrypted", rsa: true)
        let pkcs8 = "\(work)/pkcs8.key", legacy = "\(work)/legacy.key"
        try openssl(["pkey", "-in", pair.key, "-aes256", "-passout", "pass:key pass", "-out", pkcs8])
        try openssl(["rsa", "-in", pair.key, "-traditional", "-aes128", "-passout", "pass:key pass", "-out", legacy])
        XCTAssertTrue(try String(contentsOfFile: legacy, encoding: .utf8).contains("Proc-Type: 4,ENCRYPTED"))

        var r = try cli(["import", pkcs8, "--passphrase-stdin"], input: "wrong\n")
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("the passphrase is wrong"), r.err)
        r = try cli(["import", pkcs8, "--passphrase-stdin", "--tag", "pkcs8"], input: "key pass\n")
        XCTAssertEqual(r.status, 0, r.err)
        r = try cli(["import", legacy, "-P", "key pass", "--tag", "legacy"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "imported RSA 2048-bit private key\n")
        // Both are the same key: the same application label under two tags.
        let first = try cli(["find-key", "--tag", "pkcs8"]).out, second = try cli(["find-key", "--tag", "legacy"]).out
        let label = first.split(separator: "\n").first { $0.contains("\"klbl\"") }
        XCTAssertNotNil(label)
        XCTAssertEqual(label, second.split(separator: "\n").first { $0.contains("\"klbl\"") })
    }

    /// A PKCS#12 file made by `openssl pkcs12 -export`: the wrong passphrase is errSecAuthFailed and
    /// adds nothing; the right one adds the identity and its CA certificate.
    func testImportPKCS12() throws {
        try createKeychain()
        let p12 = try makePKCS12(passphrase: "p12 secret")
        var r = try cli(["import", p12.path, "--passphrase-stdin"], input: "not it\n")
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(
            r.err.contains(
                "latchkey: SecPKCS12Import: The user name or passphrase you entered is not correct. (-25293)"),
            r.err)
        XCTAssertEqual(try cli(["find-certificate", "-a"]).status, 44, "nothing was added")

        r = try cli(["import", p12.path, "--passphrase-stdin", "--tag", "com.example.leaf"], input: "p12 secret\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(
            r.out,
            """
            imported identity "Leaf" (certificate and EC 384-bit private key)
            imported certificate "Test CA"

            """)
        r = try cli(["find-identity"])
        XCTAssertTrue(r.out.contains("1) \(try sha1Fingerprint(p12.leaf)) \"Leaf\" (EC 384-bit)"), r.out)
        XCTAssertTrue(r.out.contains("1 identity found"), "the CA's key is not in the file: \(r.out)")
        XCTAssertEqual(try cli(["find-key", "--tag", "com.example.leaf", "--class", "private"]).status, 0)
        XCTAssertEqual(try cli(["find-certificate", "-c", "Test CA"]).status, 0)

        // Again, with the same tag (the tag is part of a key's identity in the keychain): the identity
        // is a duplicate (status 1); the CA certificate is skipped with a note.
        r = try cli(["import", p12.path, "-P", "p12 secret", "--tag", "com.example.leaf"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("(-25299)"), r.err)
        XCTAssertTrue(r.out.contains("already in the keychain, skipped: certificate \"Test CA\""), r.out)

        // Exported again as PKCS#12, the identity takes its issuer from the keychain along.
        let exported = "\(work)/exported.p12"
        r = try cli(["export", "--type", "identities", "-c", "Leaf", "-o", exported, "-P", "again"])
        XCTAssertEqual(r.status, 0, r.err)
        let opened = try openssl(["pkcs12", "-in", exported, "-passin", "pass:again", "-nokeys"])
        XCTAssertTrue(opened.contains("subject=CN = Leaf"), opened)
        XCTAssertTrue(opened.contains("subject=CN = Test CA"), opened)
    }

    /// A passphrase read from standard input may hold a NUL byte, which a PKCS#12 passphrase cannot (OpenSSL
    /// would stop at it): import and export refuse it with a message that says so, and add or write nothing.
    func testPKCS12PassphraseWithANULIsRefused() throws {
        try createKeychain()
        let p12 = try makePKCS12(passphrase: "p12 secret")
        var r = try cli(["import", p12.path, "--passphrase-stdin"], input: "p12 secret\u{0}junk\n")
        XCTAssertEqual(r.status, 1, r.out)
        XCTAssertTrue(r.err.contains("NUL"), r.err)
        XCTAssertEqual(try cli(["find-certificate", "-a"]).status, 44, "nothing was added")

        r = try cli(["import", p12.path, "--passphrase-stdin"], input: "p12 secret\n")
        XCTAssertEqual(r.status, 0, r.err)
        let exported = "\(work)/nul.p12"
        r = try cli(
            ["export", "--type", "identities", "-c", "Leaf", "-o", exported, "--passphrase-stdin"],
            input: "ab\u{0}cd\n")
        XCTAssertEqual(r.status, 1, r.out)
        XCTAssertTrue(r.err.contains("NUL"), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: exported), "nothing was written")
    }

    // MARK: - Export

    /// Everything export writes is read back by openssl and is what went in.
    func testExportRoundTripsThroughOpenSSL() throws {
        try createKeychain()
        let pair = try makeIdentity("round", subject: "/CN=Round Trip")
        XCTAssertEqual(try cli(["import", pair.certificate]).status, 0)
        XCTAssertEqual(try cli(["import", pair.key, "--tag", "round"]).status, 0)
        let publicPEM = "\(work)/round.pub"
        try openssl(["pkey", "-in", pair.key, "-pubout", "-out", publicPEM])
        let expectedPublic = try String(contentsOfFile: publicPEM, encoding: .utf8)

        // Certificate, PEM on standard output and DER to a file.
        var r = try cli(["export", "--type", "certificates", "-c", "round"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, try String(contentsOfFile: pair.certificate, encoding: .utf8))
        let der = "\(work)/out.der"
        r = try cli(["export", "--type", "certificates", "-c", "round", "--format", "der", "-o", der])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "exported 1 certificate to \(der)\n")
        XCTAssertEqual(
            try openssl(["x509", "-inform", "DER", "-in", der, "-noout", "-fingerprint", "-sha1"]).hexAfterEquals,
            try sha1Fingerprint(pair.certificate))
        XCTAssertEqual(try mode(der), 0o644 & ~currentUmask(), "a certificate is not secret")

        // Private key: PKCS#8, to a 0600 file; openssl derives the same public key from it.
        let keyOut = "\(work)/out.key"
        r = try cli(["export", "--type", "keys", "--tag", "round", "-o", keyOut])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "exported 1 private key to \(keyOut)\n")
        XCTAssertEqual(try mode(keyOut), 0o600)
        XCTAssertTrue(try String(contentsOfFile: keyOut, encoding: .utf8).hasPrefix("-----BEGIN PRIVATE KEY-----"))
        XCTAssertEqual(try openssl(["pkey", "-in", keyOut, "-pubout"]), expectedPublic)
        // An existing, world-readable file is made private before the key is written into it.
        let existing = "\(work)/existing.key"
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: existing, contents: Data("old".utf8),
                attributes: [.posixPermissions: 0o644]))
        XCTAssertEqual(try cli(["export", "--type", "keys", "--tag", "round", "-o", existing]).status, 0)
        XCTAssertEqual(try mode(existing), 0o600)
        // With a passphrase: encrypted PKCS#8, which openssl opens with it.
        r = try cli(["export", "--type", "keys", "--tag", "round", "--passphrase-stdin"], input: "export pass\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"), r.out)
        let encrypted = "\(work)/encrypted.key"
        try r.out.write(toFile: encrypted, atomically: true, encoding: .utf8)
        XCTAssertEqual(
            try openssl(["pkey", "-in", encrypted, "-passin", "pass:export pass", "-pubout"]), expectedPublic)

        // A public key imported on its own comes back as SubjectPublicKeyInfo, PEM and DER.
        let other = try makeIdentity("pub", subject: "/CN=Public Only", rsa: true)
        let otherPublic = "\(work)/other.pub"
        try openssl(["pkey", "-in", other.key, "-pubout", "-out", otherPublic])
        r = try cli(["import", otherPublic, "--tag", "pub"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "imported RSA 2048-bit public key\n")
        r = try cli(["export", "--type", "keys", "--tag", "pub"])
        XCTAssertEqual(r.out, try String(contentsOfFile: otherPublic, encoding: .utf8))
        let publicDER = "\(work)/pub.der"
        XCTAssertEqual(
            try cli(["export", "--type", "keys", "--tag", "pub", "--format", "der", "-o", publicDER]).status, 0)
        XCTAssertEqual(
            try openssl(["pkey", "-pubin", "-inform", "DER", "-in", publicDER, "-pubout"]),
            try String(contentsOfFile: otherPublic, encoding: .utf8))

        // The identity as PKCS#12: openssl opens it with the passphrase and finds the certificate and key.
        let p12 = "\(work)/out.p12"
        r = try cli(
            ["export", "--type", "identities", "-c", "round", "-o", p12, "--passphrase-stdin"], input: "p12 pass\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "exported 1 identity to \(p12)\n")
        XCTAssertEqual(try mode(p12), 0o600)
        let opened = try openssl(["pkcs12", "-in", p12, "-passin", "pass:p12 pass", "-nodes"])
        XCTAssertTrue(opened.contains("friendlyName: Round Trip"), opened)
        XCTAssertTrue(opened.contains("-----BEGIN PRIVATE KEY-----"), opened)
        let certificateOut = "\(work)/from-p12.pem", keyFromP12 = "\(work)/from-p12.key"
        try openssl(["pkcs12", "-in", p12, "-passin", "pass:p12 pass", "-nokeys", "-clcerts", "-out", certificateOut])
        try openssl(["pkcs12", "-in", p12, "-passin", "pass:p12 pass", "-nocerts", "-nodes", "-out", keyFromP12])
        XCTAssertEqual(try sha1Fingerprint(certificateOut), try sha1Fingerprint(pair.certificate))
        XCTAssertEqual(try openssl(["pkey", "-in", keyFromP12, "-pubout"]), expectedPublic)
        XCTAssertNotEqual(
            try TestProcess.run("/usr/bin/openssl", ["pkcs12", "-in", p12, "-passin", "pass:wrong", "-nodes"]).status, 0
        )
        // The identity as PEM: its certificate, then its private key.
        r = try cli(["export", "--type", "identities", "-c", "round", "--format", "pem"])
        XCTAssertEqual(r.status, 0, r.err)
        let certificateEnd = try XCTUnwrap(r.out.range(of: "-----END CERTIFICATE-----\n")).upperBound
        XCTAssertEqual(String(r.out[..<certificateEnd]), try String(contentsOfFile: pair.certificate, encoding: .utf8))
        let identityKey = "\(work)/identity.key"
        try String(r.out[certificateEnd...]).write(toFile: identityKey, atomically: true, encoding: .utf8)
        XCTAssertEqual(try openssl(["pkey", "-in", identityKey, "-pubout"]), expectedPublic)

        // And latchkey reads its own PKCS#12 back (after the original is gone).
        XCTAssertEqual(try cli(["delete-certificate", "-c", "round", "-t"]).status, 0)
        r = try cli(["import", p12, "-P", "p12 pass"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("imported identity \"Round Trip\""), r.out)
    }

    /// A key imported with --non-extractable can be found but not exported: errSecDataNotAvailable,
    /// and no file is written.
    func testNonExtractableKeyIsNotExported() throws {
        try createKeychain()
        let pair = try makeIdentity("locked", subject: "/CN=Kept Inside")
        XCTAssertEqual(try cli(["import", pair.key, "--tag", "inside", "--non-extractable"]).status, 0)
        XCTAssertEqual(try cli(["import", pair.certificate]).status, 0)
        XCTAssertTrue(try cli(["find-key", "--tag", "inside"]).out.contains("\"extr\"<int>=0"))

        let out = "\(work)/should-not-exist.key"
        var r = try cli(["export", "--type", "keys", "--tag", "inside", "-o", out])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(
            r.err.contains(
                "latchkey: SecKeyCopyExternalRepresentation: The contents of this item cannot be retrieved. (-25316)"),
            r.err)
        XCTAssertTrue(r.err.contains("not extractable"), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: out))
        r = try cli(["export", "--type", "identities", "-c", "Kept", "--format", "pkcs12", "-o", out, "-P", "x"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("(-25316)"), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: out))
        // Its certificate and public half are not secret.
        XCTAssertEqual(try cli(["export", "--type", "certificates", "-c", "Kept"]).status, 0)
    }

    // MARK: - generate-key

    /// generate-key makes the key in the agent; the library signs with it and openssl verifies the
    /// signature with the public key that generate-key printed and export wrote.
    func testGenerateKeyThenSignThroughTheLibraryAndVerifyWithOpenSSL() throws {
        try createKeychain()
        for (type, size, algorithm, digest) in [
            ("ec", "384", SecKeyAlgorithm.ecdsaSignatureMessageX962SHA384, "-sha384"),
            ("rsa", "2048", SecKeyAlgorithm.rsaSignatureMessagePKCS1v15SHA256, "-sha256"),
        ] {
            let tag = "com.example.generated.\(type)"
            var r = try cli([
                "generate-key", "--type", type, "--size", size, "--tag", tag, "-l", "Generated \(type)",
                "--public-too", "--non-extractable",
            ])
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertTrue(r.out.contains("\"bsiz\"<int>=\(size)"), r.out)
            XCTAssertTrue(r.out.contains("\"extr\"<int>=0"), r.out)
            XCTAssertTrue(r.out.contains("\"labl\"<blob>=\"Generated \(type)\""), r.out)
            let printed = try XCTUnwrap(r.out.range(of: "-----BEGIN PUBLIC KEY-----")).lowerBound
            let publicPEM = String(r.out[printed...])

            r = try cli(["export", "--type", "keys", "--tag", tag, "--class", "public"])
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertEqual(r.out, publicPEM, "--public-too stored the public key")
            let publicPath = "\(work)/\(type).pub"
            try publicPEM.write(toFile: publicPath, atomically: true, encoding: .utf8)

            var found: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass: kSecClassKey, kSecAttrApplicationTag: Data(tag.utf8),
                        kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecReturnRef: true,
                    ] as NSDictionary, &found),
                errSecSuccess)
            let key = try XCTUnwrap(found as? SecKey)
            XCTAssertNil(key.local, "the generated private key stays in the agent")
            let message = Data("signed by a generated \(type) key".utf8)
            var error: Unmanaged<CFError>?
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(key, algorithm, message as CFData, &error) as Data?,
                "\(String(describing: error?.takeRetainedValue()))")
            let messagePath = "\(work)/\(type).msg", signaturePath = "\(work)/\(type).sig"
            try message.write(to: URL(fileURLWithPath: messagePath))
            try signature.write(to: URL(fileURLWithPath: signaturePath))
            let verified = try openssl([
                "dgst", digest, "-verify", publicPath, "-signature", signaturePath, messagePath,
            ])
            XCTAssertEqual(verified, "Verified OK\n")
            // A signature over other data does not verify: the check above can fail.
            try Data("other".utf8).write(to: URL(fileURLWithPath: messagePath))
            XCTAssertNotEqual(
                try TestProcess.run(
                    "/usr/bin/openssl",
                    [
                        "dgst", digest, "-verify", publicPath, "-signature",
                        signaturePath, messagePath,
                    ]
                ).status, 0)

            r = try cli(["export", "--type", "keys", "--tag", tag, "--class", "private"])
            XCTAssertEqual(r.status, 1, "generated with --non-extractable")
            XCTAssertTrue(r.err.contains("(-25316)"), r.err)
        }
        XCTAssertEqual(try cli(["generate-key", "--type", "ec", "--size", "2048"]).status, 64)
        XCTAssertEqual(try cli(["generate-key", "--type", "rsa", "--size", "1000"]).status, 64)
        XCTAssertEqual(try cli(["generate-key", "--type", "dsa"]).status, 64)
        // Without --public-too only the private key is stored.
        XCTAssertEqual(try cli(["generate-key", "--type", "ec", "--tag", "solo"]).status, 0)
        XCTAssertEqual(try cli(["find-key", "--tag", "solo", "--class", "public"]).status, 44)
        XCTAssertEqual(try cli(["find-key", "--tag", "solo", "--class", "private"]).status, 0)
    }

    // MARK: - find-identity and find-certificate

    /// An expired identity is marked, and -v leaves it out; -e finds certificates by email address.
    func testFindIdentityMarksExpiredCertificatesAndFindCertificateByEmail() throws {
        try createKeychain()
        // `openssl ca` is the one openssl 3.0 command that sets an arbitrary validity period.
        try "".write(toFile: "\(work)/index.txt", atomically: true, encoding: .utf8)
        try "01\n".write(toFile: "\(work)/serial.txt", atomically: true, encoding: .utf8)
        try """
        [ca]
        default_ca = ca_section
        [ca_section]
        database = \(work)/index.txt
        new_certs_dir = \(work)
        serial = \(work)/serial.txt
        default_md = sha256
        policy = any
        [any]
        commonName = supplied
        """.write(toFile: "\(work)/ca.cnf", atomically: true, encoding: .utf8)
        let oldKey = "\(work)/old.key", request = "\(work)/old.csr", old = "\(work)/old.pem"
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", oldKey])
        try openssl(["req", "-new", "-key", oldKey, "-subj", "/CN=Expired One", "-out", request])
        try openssl([
            "ca", "-batch", "-config", "\(work)/ca.cnf", "-selfsign", "-keyfile", oldKey, "-in", request,
            "-startdate", "20200101000000Z", "-enddate", "20200201000000Z", "-out", old,
        ])
        let current = try makeIdentity("current", subject: "/CN=Current One/emailAddress=Dana@Example.com")
        for file in [old, oldKey, current.certificate, current.key] {
            XCTAssertEqual(try cli(["import", file]).status, 0, file)
        }

        var r = try cli(["find-identity"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(
            r.out.contains("1) \(try sha1Fingerprint(current.certificate)) \"Current One\" (EC 256-bit)\n"), r.out)
        XCTAssertTrue(r.out.contains("2) \(try sha1Fingerprint(old)) \"Expired One\" (EC 256-bit) (expired)\n"), r.out)
        XCTAssertTrue(r.out.hasSuffix("     2 identities found\n"), r.out)
        r = try cli(["find-identity", "-v"])
        XCTAssertFalse(r.out.contains("Expired One"), r.out)
        XCTAssertTrue(r.out.hasSuffix("     1 valid identity found\n"), r.out)
        XCTAssertTrue(try cli(["find-identity", "-c", "expired"]).out.contains("1 identity found"))

        r = try cli(["find-certificate", "-e", "dana@example.com", "-p"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, try String(contentsOfFile: current.certificate, encoding: .utf8))
        XCTAssertEqual(try cli(["find-certificate", "-e", "erin@example.com"]).status, 44)
        r = try cli(["find-certificate", "-a", "-p"])
        XCTAssertEqual(r.out.components(separatedBy: "-----BEGIN CERTIFICATE-----").count - 1, 2, r.out)
        r = try cli(["find-certificate", "-c", "one"])
        XCTAssertEqual(
            r.out.components(separatedBy: "class: \"cert\"").count - 1, 1, "without -a only the first: \(r.out)")
    }

    // MARK: - delete-certificate

    func testDeleteCertificateWithAndWithoutItsKey() throws {
        try createKeychain()
        // Two certificates for one key, and a third identity of its own.
        let shared = try makeIdentity("shared", subject: "/CN=Shared One", rsa: true)
        let second = "\(work)/shared-two.pem"
        try openssl([
            "req", "-new", "-x509", "-key", shared.key, "-subj", "/CN=Shared Two", "-days", "30", "-out", second,
        ])
        let single = try makeIdentity("single", subject: "/CN=Single")
        for file in [shared.certificate, second, shared.key, single.certificate, single.key] {
            XCTAssertEqual(try cli(["import", file]).status, 0, file)
        }
        XCTAssertTrue(try cli(["find-identity"]).out.contains("3 identities found"))

        // -c that matches two certificates deletes nothing and lists their hashes.
        var r = try cli(["delete-certificate", "-c", "shared"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("2 certificates match \"shared\"; nothing was deleted"), r.err)
        XCTAssertTrue(r.err.contains(try sha1Fingerprint(second)), r.err)

        // -t on a certificate whose key another certificate uses: the key stays.
        r = try cli(["delete-certificate", "-Z", try sha1Fingerprint(second).lowercased(), "-t"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(
            r.out, "deleted certificate \"Shared Two\"; its private key is kept: another certificate uses it\n")
        XCTAssertTrue(try cli(["find-identity"]).out.contains("2 identities found"))

        // Without -t: the certificate goes, its key stays (and the identity is gone).
        r = try cli(["delete-certificate", "-c", "single"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(
            r.out, "deleted certificate \"Single\"\nits private key stays in the keychain (-t deletes it too)\n")
        XCTAssertEqual(try cli(["find-key", "--type", "ec", "--class", "private"]).status, 0)
        XCTAssertTrue(try cli(["find-identity"]).out.contains("1 identity found"))

        // -t on the last certificate of the RSA key: both go.
        r = try cli(["delete-certificate", "-c", "Shared One", "-t"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "deleted certificate \"Shared One\" and its private key\n")
        XCTAssertEqual(try cli(["find-key", "--type", "rsa"]).status, 44)
        XCTAssertTrue(try cli(["find-identity"]).out.contains("0 identities found"))

        r = try cli(["delete-certificate", "-c", "Shared One"])
        XCTAssertEqual(r.status, 44, r.err)
        XCTAssertEqual(try cli(["delete-certificate"]).status, 64)
        XCTAssertEqual(try cli(["delete-certificate", "-c", "x", "-Z", String(repeating: "0", count: 40)]).status, 64)
        XCTAssertEqual(try cli(["delete-certificate", "-Z", "abc"]).status, 64)
    }

    // MARK: - Bad input

    /// Garbage, missing files, wrong formats and unsupported keys give a clear message and a
    /// non-zero status, never a crash (a crash would be a signal: status > 128 or a trap message).
    func testBadInputGivesAClearErrorAndNonZeroStatus() throws {
        try createKeychain()
        let garbage = "\(work)/garbage.bin"
        var bytes = [UInt8](repeating: 0, count: 700)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 7919 &+ 13) }
        try Data(bytes).write(to: URL(fileURLWithPath: garbage))
        let pair = try makeIdentity("bad", subject: "/CN=Bad Input")
        let der = "\(work)/bad.der"
        try openssl(["x509", "-in", pair.certificate, "-outform", "DER", "-out", der])
        let truncated = "\(work)/truncated.pem"
        try String(try String(contentsOfFile: pair.certificate, encoding: .utf8).dropLast(30))
            .write(toFile: truncated, atomically: true, encoding: .utf8)
        let csr = "\(work)/request.pem"
        try openssl(["req", "-new", "-key", pair.key, "-subj", "/CN=Request", "-out", csr])
        let ed25519 = "\(work)/ed25519.key"
        try openssl(["genpkey", "-algorithm", "ED25519", "-out", ed25519])
        let empty = "\(work)/empty.pem"
        XCTAssertTrue(FileManager.default.createFile(atPath: empty, contents: Data()))

        let cases: [(arguments: [String], status: Int32, message: String)] = [
            (["import", garbage], 1, "garbage.bin is not a certificate, key or PKCS#12 file"),
            (["import", "\(work)/missing.pem"], 1, "cannot open \(work)/missing.pem: No such file or directory"),
            (["import", work], 1, "is a directory"),
            (["import", empty], 1, "empty.pem is empty"),
            (["import", der, "--format", "pem"], 1, "bad.der is not PEM"),
            (["import", pair.certificate, "--format", "der"], 1, "is not a DER certificate or key"),
            (
                ["import", der, "--format", "pkcs12", "-P", "x"], 1,
                "SecPKCS12Import: Unable to decode the provided data. (-26275)"
            ),
            (["import", garbage, "--format", "pkcs12", "-P", "x"], 1, "(-26275)"),
            (["import", der, "--format", "jpeg"], 64, "--format"),
            (["import", truncated], 1, "truncated.pem is not valid PEM"),
            (["import", csr], 1, "holds no certificate or key"),
            (["import", ed25519], 1, "is not a usable key"),
            (["import", pair.certificate, "--tag", "t"], 1, "--tag and --non-extractable apply to keys"),
            (["import", pair.key, "-P", "a", "--passphrase-stdin"], 64, "give the passphrase only one way"),
            (["import"], 64, "Missing expected argument"),
            (["find-certificate", "-c", "nobody"], 44, "(-25300)"),
            (["export", "--type", "certificates", "-c", "nobody"], 44, "(-25300)"),
            (["export", "--type", "certificates", "--format", "pkcs12"], 64, "PKCS#12 holds identities"),
            (["export", "--type", "certificates", "--tag", "x"], 64, "certificates have none"),
            (["export", "--type", "identities", "--format", "der"], 64, "DER holds one object"),
            (["find-key", "--class", "secret"], 64, "--class"),
        ]
        for (arguments, status, message) in cases {
            let r = try cli(arguments)
            XCTAssertEqual(r.status, status, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(arguments) should say \"\(message)\": \(r.err)")
            XCTAssertFalse(r.err.contains("Fatal error"), "\(arguments) crashed: \(r.err)")
        }

        // Two certificates cannot both be one DER file: nothing is written, and the items are named.
        XCTAssertEqual(try cli(["import", pair.certificate]).status, 0)
        let other = try makeIdentity("bad2", subject: "/CN=Bad Two")
        XCTAssertEqual(try cli(["import", other.certificate]).status, 0)
        let out = "\(work)/two.der"
        let r = try cli(["export", "--type", "certificates", "--format", "der", "-o", out])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("DER holds one object, and 2 items match"), r.err)
        XCTAssertTrue(r.err.contains("certificate \"Bad Two\""), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: out))
    }

    /// Every new verb documents its options and has an example; the root help lists them.
    func testHelpOfTheKeyVerbs() throws {
        let verbs: [(String, [String])] = [
            (
                "import",
                [
                    "--format", "--passphrase-stdin", "-P <passphrase>", "/proc", "--accessible", "--label", "--tag",
                    "--non-extractable", "SecPKCS12Import",
                ]
            ),
            (
                "export",
                [
                    "--type", "--format", "--output", "-c <name>", "--label", "--tag", "--class", "--size",
                    "--key-type",
                    "--passphrase-stdin", "0600", "-25316",
                ]
            ),
            ("find-certificate", ["-c <name>", "-e <email>", "-a", "-p", "-Z", "-m"]),
            ("find-identity", ["-v", "-c <name>"]),
            ("find-key", ["--label", "--tag", "--type", "--class", "--size", "-a"]),
            ("delete-certificate", ["-c <name>", "-Z <hash>", "-t"]),
            (
                "generate-key",
                ["--type", "--size", "--label", "--tag", "--accessible", "--non-extractable", "--public-too"]
            ),
        ]
        let root = try cli(["--help"])
        for (verb, mentions) in verbs {
            XCTAssertTrue(root.out.contains(verb), "root help lacks \(verb)")
            let r = try cli([verb, "--help"])
            XCTAssertEqual(r.status, 0, verb)
            XCTAssertTrue(r.out.contains("Example"), "\(verb) --help has no example")
            for text in mentions { XCTAssertTrue(r.out.contains(text), "\(verb) --help does not mention \(text)") }
        }
    }

    // MARK: - SecPKCS12Import

    /// SecPKCS12Import as Apple defines it: one dictionary per identity (identity, chain leaf first,
    /// key ID), certificates outside every chain in a dictionary of their own, Apple's statuses, and
    /// nothing added to the keychain.
    func testSecPKCS12ImportDirectly() throws {
        try createKeychain()
        XCTAssertEqual(kSecImportExportPassphrase as String, "passphrase")
        XCTAssertEqual(kSecImportItemIdentity as String, "identity")
        XCTAssertEqual(kSecImportItemCertChain as String, "chain")
        XCTAssertEqual(kSecImportItemKeyID as String, "keyid")
        XCTAssertEqual(kSecImportItemLabel as String, "label")
        XCTAssertEqual(kSecImportItemTrust as String, "trust")

        let p12 = try makePKCS12(passphrase: "pkcs12", extraCertificate: true)
        let data = try Data(contentsOf: URL(fileURLWithPath: p12.path)) as CFData
        var items: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(data, [kSecImportExportPassphrase: "wrong"] as NSDictionary, &items), errSecAuthFailed)
        XCTAssertNil(items)
        XCTAssertEqual(
            SecPKCS12Import(data, [:] as NSDictionary, &items), errSecAuthFailed, "no passphrase is the empty one")
        XCTAssertEqual(
            SecPKCS12Import(
                Data("not pkcs12".utf8) as CFData, [kSecImportExportPassphrase: "pkcs12"] as NSDictionary,
                &items), errSecDecode)
        XCTAssertEqual(SecPKCS12Import(data, [kSecImportExportPassphrase: 12] as NSDictionary, &items), errSecParam)

        XCTAssertEqual(
            SecPKCS12Import(data, [kSecImportExportPassphrase: "pkcs12"] as NSDictionary, &items), errSecSuccess)
        let entries = (items ?? NSArray()).compactMap { $0 as? NSDictionary }
        XCTAssertEqual(entries.count, 2, "the identity, then the certificate outside its chain")
        let first = entries[0]
        let identity = try XCTUnwrap(first[kSecImportItemIdentity as String] as? SecIdentity)
        let chain = try XCTUnwrap(first[kSecImportItemCertChain as String] as? NSArray).compactMap {
            $0 as? SecCertificate
        }
        XCTAssertEqual(
            chain.map { SecCertificateCopySubjectSummary($0) as String? }, ["Leaf", "Test CA"], "leaf first")
        var certificate: SecCertificate?
        XCTAssertEqual(SecIdentityCopyCertificate(identity, &certificate), errSecSuccess)
        XCTAssertEqual(certificate, chain[0])
        XCTAssertEqual(
            Data(SecCertificateCopyData(chain[0]) as Data), try Data(contentsOf: URL(fileURLWithPath: p12.leafDER)))
        // The key ID is the SHA-1 of the public key bytes: the last 97 bytes (the P-384 point) of
        // the SubjectPublicKeyInfo that openssl writes for the leaf's key.
        let spki = "\(work)/leaf.spki"
        try openssl(["pkey", "-in", p12.leafKey, "-pubout", "-outform", "DER", "-out", spki])
        let point = try Data(contentsOf: URL(fileURLWithPath: spki)).suffix(97)
        XCTAssertEqual(point.first, 0x04)
        XCTAssertEqual(first[kSecImportItemKeyID as String] as? Data, try sha1(Data(point)))
        XCTAssertNil(first[kSecImportItemTrust as String], "latchkey has no SecTrust")
        XCTAssertEqual(first[kSecImportItemLabel as String] as? String, "Leaf friendly name", "the bag's friendlyName")

        let rest = entries[1]
        XCTAssertNil(rest[kSecImportItemIdentity as String])
        let unrelated = try XCTUnwrap(rest[kSecImportItemCertChain as String] as? NSArray).compactMap {
            $0 as? SecCertificate
        }
        XCTAssertEqual(unrelated.map { SecCertificateCopySubjectSummary($0) as String? }, ["Unrelated"])

        // The private key is held by the caller and signs; openssl verifies with the certificate.
        var key: SecKey?
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &key), errSecSuccess)
        let privateKey = try XCTUnwrap(key)
        XCTAssertNotNil(privateKey.local, "an imported key is the caller's until it is added")
        let message = Data("pkcs12 identity".utf8)
        let signature = try XCTUnwrap(
            SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, nil) as Data?)
        let messagePath = "\(work)/p12.msg", signaturePath = "\(work)/p12.sig", leafPublic = "\(work)/leaf.pub"
        try message.write(to: URL(fileURLWithPath: messagePath))
        try signature.write(to: URL(fileURLWithPath: signaturePath))
        try openssl(["x509", "-in", p12.leaf, "-pubkey", "-noout", "-out", leafPublic])
        XCTAssertEqual(
            try openssl(["dgst", "-sha256", "-verify", leafPublic, "-signature", signaturePath, messagePath]),
            "Verified OK\n")

        // Nothing was added ("Import, Then Add"); adding the identity makes it appear.
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassIdentity] as NSDictionary, nil), errSecItemNotFound)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassCertificate] as NSDictionary, nil), errSecItemNotFound)
        XCTAssertEqual(SecItemAdd([kSecValueRef: identity] as NSDictionary, nil), errSecSuccess)
        var found: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassIdentity, kSecReturnRef: true] as NSDictionary, &found),
            errSecSuccess)
        XCTAssertEqual(
            (found as? SecIdentity).flatMap { identity -> SecCertificate? in
                var copied: SecCertificate?
                _ = SecIdentityCopyCertificate(identity, &copied)
                return copied
            }, chain[0])

        // The passphrase may also be given as data (a latchkey extension, so that it can be wiped).
        XCTAssertEqual(
            SecPKCS12Import(
                data, [kSecImportExportPassphrase: NSMutableData(data: Data("pkcs12".utf8))] as NSDictionary,
                &items), errSecSuccess)

        // A key type latchkey cannot use is errSecDecode, with the reason in the diagnostics.
        let edKey = "\(work)/ed.key", edCertificate = "\(work)/ed.pem", edP12 = "\(work)/ed.p12"
        try openssl(["genpkey", "-algorithm", "ED25519", "-out", edKey])
        try openssl([
            "req", "-new", "-x509", "-key", edKey, "-subj", "/CN=Edwards", "-days", "1", "-out", edCertificate,
        ])
        try openssl(["pkcs12", "-export", "-inkey", edKey, "-in", edCertificate, "-passout", "pass:e", "-out", edP12])
        XCTAssertEqual(
            SecPKCS12Import(
                try Data(contentsOf: URL(fileURLWithPath: edP12)) as CFData,
                [kSecImportExportPassphrase: "e"] as NSDictionary, &items), errSecDecode)
        XCTAssertTrue(
            LatchkeyDiagnostics.lastErrorDetail?.contains("cannot use") ?? false,
            String(describing: LatchkeyDiagnostics.lastErrorDetail))

        // A file of certificates only: one dictionary with the chain, no identity.
        let certificatesOnly = "\(work)/certs.p12"
        try openssl(["pkcs12", "-export", "-nokeys", "-in", p12.leaf, "-passout", "pass:c", "-out", certificatesOnly])
        XCTAssertEqual(
            SecPKCS12Import(
                try Data(contentsOf: URL(fileURLWithPath: certificatesOnly)) as CFData,
                [kSecImportExportPassphrase: "c"] as NSDictionary, &items), errSecSuccess)
        let only = (items ?? NSArray()).compactMap { $0 as? NSDictionary }
        XCTAssertEqual(only.count, 1)
        XCTAssertNil(only[0][kSecImportItemIdentity as String])
        XCTAssertEqual((only[0][kSecImportItemCertChain as String] as? NSArray)?.count, 1)
    }

    // MARK: - Helpers

    @discardableResult
    private func openssl(_ arguments: [String]) throws -> String {
        let result = try TestProcess.run("/usr/bin/openssl", arguments)
        XCTAssertEqual(result.status, 0, "openssl \(arguments.joined(separator: " ")): \(result.err)")
        return result.out
    }

    /// A private key (EC P-256, or RSA 2048) and a self-signed certificate for it, as PEM files.
    private func makeIdentity(_ name: String, subject: String, rsa: Bool = false) throws -> (
        certificate: String, key: String
    ) {
        let key = "\(work)/\(name).key", certificate = "\(work)/\(name).pem"
        if rsa {
            try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key])
        } else {
            try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        }
        try openssl(["req", "-new", "-x509", "-key", key, "-subj", subject, "-days", "30", "-out", certificate])
        return (certificate, key)
    }

    /// A CA, a leaf (EC P-384) it signed, and `openssl pkcs12 -export` of the leaf's identity with the
    /// CA certificate (and, with `extraCertificate`, a certificate unrelated to both).
    private func makePKCS12(passphrase: String, extraCertificate: Bool = false)
        throws -> (path: String, leaf: String, leafDER: String, leafKey: String)
    {
        let ca = try makeIdentity("ca", subject: "/CN=Test CA", rsa: true)
        let leafKey = "\(work)/leaf.key", request = "\(work)/leaf.csr", leaf = "\(work)/leaf.pem",
            leafDER = "\(work)/leaf.der"
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", leafKey])
        try openssl(["req", "-new", "-key", leafKey, "-subj", "/CN=Leaf", "-out", request])
        try openssl([
            "x509", "-req", "-in", request, "-CA", ca.certificate, "-CAkey", ca.key, "-set_serial", "7", "-days", "30",
            "-out", leaf,
        ])
        try openssl(["x509", "-in", leaf, "-outform", "DER", "-out", leafDER])
        var others = try String(contentsOfFile: ca.certificate, encoding: .utf8)
        if extraCertificate {
            others += try String(
                contentsOfFile: try makeIdentity("unrelated", subject: "/CN=Unrelated").certificate, encoding: .utf8)
        }
        let chainFile = "\(work)/chain.pem", path = "\(work)/leaf.p12"
        try others.write(toFile: chainFile, atomically: true, encoding: .utf8)
        try openssl([
            "pkcs12", "-export", "-inkey", leafKey, "-in", leaf, "-certfile", chainFile, "-name", "Leaf friendly name",
            "-passout", "pass:\(passphrase)", "-out", path,
        ])
        return (path, leaf, leafDER, leafKey)
    }

    /// The certificate's SHA-1 fingerprint as openssl computes it, as latchkey prints it.
    private func sha1Fingerprint(_ certificatePEM: String) throws -> String {
        try openssl(["x509", "-in", certificatePEM, "-noout", "-fingerprint", "-sha1"]).hexAfterEquals
    }

    private func sha1(_ data: Data) throws -> Data {
        let path = "\(work)/sha1-input"
        try data.write(to: URL(fileURLWithPath: path))
        return Data(hex: String(try TestProcess.run("/usr/bin/sha1sum", [path]).out.prefix(40)))
    }

    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    private func currentUmask() -> Int {
        let mask = umask(0o022)
        umask(mask)
        return Int(mask)
    }
}

private extension String {
    /// "SHA1 Fingerprint=AB:CD:…\n" → "ABCD…".
    var hexAfterEquals: String {
        guard let equals = firstIndex(of: "=") else { return "" }
        return self[index(after: equals)...].filter { $0.isHexDigit }.uppercased()
    }
}
