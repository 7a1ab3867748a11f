import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// PKCS#12 files from `openssl pkcs12 -export` read here, and files written here read by
/// `openssl pkcs12`.
final class PKCS12Tests: XCTestCase {
    private let password = SecretBytes(copying: Array("p12 password".utf8))

    /// A CA and a leaf certificate it signed, with their keys, in `workspace`.
    private func makeChain(_ workspace: OpenSSLWorkspace, keyAlgorithm: [String]) throws {
        try workspace.write(
            "ca.cnf",
            """
            [req]
            distinguished_name = dn
            prompt = no
            [dn]
            CN = unused
            [ca]
            basicConstraints = critical, CA:true
            subjectKeyIdentifier = hash
            """)
        try workspace.run([
            "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-config", "ca.cnf", "-extensions", "ca",
            "-subj", "/CN=Test CA", "-days", "2",
        ])
        try workspace.run(
            ["req", "-new", "-newkey"] + keyAlgorithm + [
                "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr",
                "-config", "ca.cnf", "-subj", "/CN=Leaf Identity",
            ])
        try workspace.run([
            "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "7",
            "-days", "1", "-out", "leaf.pem",
        ])
    }

    private func certificate(_ workspace: OpenSSLWorkspace, _ name: String) throws -> X509Certificate {
        try X509Certificate(der: workspace.run(["x509", "-in", name, "-outform", "DER"]))
    }

    func testReadsOpenSSLExport() throws {
        let workspace = try OpenSSLWorkspace()
        for keyAlgorithm in [["rsa:2048"], ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"]] {
            try makeChain(workspace, keyAlgorithm: keyAlgorithm)
            try workspace.run([
                "pkcs12", "-export", "-inkey", "leaf.key", "-in", "leaf.pem", "-certfile", "ca.pem",
                "-name", "My Identity", "-passout", "pass:p12 password", "-out", "identity.p12",
            ])
            let contents = try PKCS12.parse(der: workspace.read("identity.p12"), password: password)
            let leaf = try certificate(workspace, "leaf.pem"), ca = try certificate(workspace, "ca.pem")
            let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("leaf.key")))
            XCTAssertEqual(contents.certificate, leaf)
            XCTAssertEqual(contents.additional, [ca])
            let parsedKey = try XCTUnwrap(contents.key)
            XCTAssertTrue(parsedKey.isPrivate)
            XCTAssertTrue(try parsedKey.externalRepresentation().constantTimeEquals(key.externalRepresentation()))
            XCTAssertEqual(parsedKey.applicationLabel, leaf.publicKeyHash, "the identity join: klbl == pkhh")

            XCTAssertThrowsError(
                try PKCS12.parse(
                    der: workspace.read("identity.p12"), password: SecretBytes(copying: Array("nope".utf8)))
            ) {
                XCTAssertEqual($0 as? CryptoError, .wrongPassword)
            }
        }
    }

    func testMalformedInputIsNotAWrongPassword() throws {
        let workspace = try OpenSSLWorkspace()
        try makeChain(workspace, keyAlgorithm: ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
        try workspace.run([
            "pkcs12", "-export", "-inkey", "leaf.key", "-in", "leaf.pem", "-passout", "pass:p12 password", "-out",
            "i.p12",
        ])
        let der = try workspace.read("i.p12")
        for bad in [
            [], Array(der.prefix(der.count / 2)), der + [0], Array("not a pkcs12 file".utf8),
            try workspace.read("leaf.pem"),
        ] {
            XCTAssertThrowsError(try PKCS12.parse(der: bad, password: password)) {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
            }
        }
        // Certificate-only files (no key) are fine.
        try workspace.run([
            "pkcs12", "-export", "-nokeys", "-in", "ca.pem", "-passout", "pass:p12 password", "-out", "certs.p12",
        ])
        let certsOnly = try PKCS12.parse(der: workspace.read("certs.p12"), password: password)
        XCTAssertNil(certsOnly.key)
        XCTAssertEqual(certsOnly.certificate, try certificate(workspace, "ca.pem"))
        XCTAssertEqual(certsOnly.additional, [])
        // An empty password works for files exported with one.
        try workspace.run([
            "pkcs12", "-export", "-inkey", "leaf.key", "-in", "leaf.pem", "-passout", "pass:", "-out", "empty.p12",
        ])
        XCTAssertNotNil(try PKCS12.parse(der: workspace.read("empty.p12"), password: SecretBytes(count: 0)).key)
    }

    /// OpenSSL's PKCS#12 calls take the passphrase as a C string: one holding a NUL would be cut there ("ab\0cd"
    /// would open and write files whose passphrase is "ab"), so it is refused for reading and for writing.
    func testPassphraseWithANULIsRefused() throws {
        let workspace = try OpenSSLWorkspace()
        try makeChain(workspace, keyAlgorithm: ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
        try workspace.run([
            "pkcs12", "-export", "-inkey", "leaf.key", "-in", "leaf.pem", "-passout", "pass:ab", "-out", "ab.p12",
        ])
        let file = try workspace.read("ab.p12")
        XCTAssertNotNil(try PKCS12.parse(der: file, password: SecretBytes(copying: Array("ab".utf8))).key)
        for cut in [Array("ab\u{0}cd".utf8), Array("ab\u{0}".utf8), [0]] {
            XCTAssertThrowsError(try PKCS12.parse(der: file, password: SecretBytes(copying: cut)), "\(cut)") {
                guard case .invalidInput(let why)? = $0 as? CryptoError else { return XCTFail("\($0)") }
                XCTAssertTrue(why.contains("NUL"), why)
            }
        }
        let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("leaf.key")))
        XCTAssertThrowsError(
            try PKCS12.make(
                key: key, certificate: certificate(workspace, "leaf.pem"),
                password: SecretBytes(copying: Array("ab\u{0}cd".utf8)))
        ) {
            guard case .invalidInput(let why)? = $0 as? CryptoError else { return XCTFail("\($0)") }
            XCTAssertTrue(why.contains("NUL"), why)
        }
    }

    func testExportIsReadByOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        try makeChain(workspace, keyAlgorithm: ["rsa:2048"])
        let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("leaf.key")))
        let leaf = try certificate(workspace, "leaf.pem"), ca = try certificate(workspace, "ca.pem")
        let exported = try PKCS12.make(
            key: key, certificate: leaf, chain: [ca], password: password, name: "Exported Identity")
        try workspace.write("ours.p12", exported)

        let info = try workspace.status([
            "pkcs12", "-in", "ours.p12", "-info", "-noout", "-passin", "pass:p12 password",
        ])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertTrue(info.stderr.contains("PBES2") && info.stderr.contains("AES-256-CBC"), info.stderr)
        XCTAssertTrue(info.stderr.contains("MAC: sha256"), info.stderr)
        let keyOut = try workspace.run([
            "pkcs12", "-in", "ours.p12", "-nocerts", "-nodes", "-passin", "pass:p12 password",
        ])
        XCTAssertEqual(try AsymmetricKey(pem: SecretBytes(copying: keyOut)).publicKeyBytes, key.publicKeyBytes)
        let clientCert = try workspace.text([
            "pkcs12", "-in", "ours.p12", "-clcerts", "-nokeys", "-passin", "pass:p12 password",
        ])
        XCTAssertTrue(clientCert.contains("friendlyName: Exported Identity"), clientCert)
        XCTAssertEqual(try PEM.blocks(in: Array(clientCert.utf8)).map { $0.publicBytes() }, [leaf.der])
        let caCerts = try workspace.text([
            "pkcs12", "-in", "ours.p12", "-cacerts", "-nokeys", "-passin", "pass:p12 password",
        ])
        XCTAssertEqual(try PEM.blocks(in: Array(caCerts.utf8)).map { $0.publicBytes() }, [ca.der])
        XCTAssertNotEqual(
            try workspace.status(["pkcs12", "-in", "ours.p12", "-noout", "-passin", "pass:wrong"]).status, 0)

        // Round trip here too, and refusal of mismatched parts.
        let back = try PKCS12.parse(der: exported, password: password)
        XCTAssertEqual(back.certificate, leaf)
        XCTAssertEqual(back.additional, [ca])
        XCTAssertThrowsError(try PKCS12.make(key: TestKeys.p256, certificate: leaf, password: password))
        XCTAssertThrowsError(try PKCS12.make(key: key.publicKey(), certificate: leaf, password: password))
    }
}
