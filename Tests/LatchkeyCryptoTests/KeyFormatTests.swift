import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// PKCS#8 (plain and encrypted), SubjectPublicKeyInfo, traditional and legacy-encrypted PEM, as the
/// `openssl` tool writes and reads them.
final class KeyFormatTests: XCTestCase {
    private func secretFile(_ workspace: OpenSSLWorkspace, _ name: String) throws -> SecretBytes {
        SecretBytes(copying: try workspace.read(name))
    }

    private let password = SecretBytes(copying: Array("correct horse".utf8))

    func testEncryptedPKCS8FromOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes-256-cbc",
            "-pass", "pass:correct horse", "-out", "encrypted.pem",
        ])
        XCTAssertTrue(try workspace.readText("encrypted.pem").contains("BEGIN ENCRYPTED PRIVATE KEY"))
        try workspace.run([
            "pkey", "-in", "encrypted.pem", "-passin", "pass:correct horse", "-traditional", "-out", "plain.pem",
        ])
        try workspace.run([
            "pkcs8", "-topk8", "-in", "plain.pem", "-v2", "aes-128-cbc", "-passout", "pass:correct horse",
            "-outform", "DER", "-out", "encrypted.der",
        ])
        let reference = try AsymmetricKey(pem: secretFile(workspace, "plain.pem"))
        let fromPEM = try AsymmetricKey(pem: secretFile(workspace, "encrypted.pem"), password: password)
        let fromDER = try AsymmetricKey(der: secretFile(workspace, "encrypted.der"), password: password)
        for key in [fromPEM, fromDER] {
            XCTAssertTrue(key.isPrivate)
            XCTAssertTrue(try key.externalRepresentation().constantTimeEquals(reference.externalRepresentation()))
        }
        let wrong = SecretBytes(copying: Array("battery staple".utf8))
        for attempt in [wrong, nil] {
            XCTAssertThrowsError(try AsymmetricKey(pem: secretFile(workspace, "encrypted.pem"), password: attempt)) {
                XCTAssertEqual($0 as? CryptoError, .wrongPassword)
            }
            XCTAssertThrowsError(try AsymmetricKey(der: secretFile(workspace, "encrypted.der"), password: attempt)) {
                XCTAssertEqual($0 as? CryptoError, .wrongPassword)
            }
        }
    }

    func testTraditionalAndPublicKeyFiles() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run([
            "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-pkeyopt", "rsa_keygen_pubexp:3",
            "-out", "rsa.pem",
        ])
        try workspace.run(["rsa", "-in", "rsa.pem", "-traditional", "-out", "rsa-traditional.pem"])
        try workspace.run([
            "rsa", "-in", "rsa.pem", "-traditional", "-aes128", "-passout", "pass:correct horse", "-out",
            "rsa-legacy.pem",
        ])
        try workspace.run(["rsa", "-in", "rsa.pem", "-RSAPublicKey_out", "-out", "rsa-pkcs1-public.pem"])
        try workspace.run(["rsa", "-in", "rsa.pem", "-pubout", "-out", "rsa-spki.pem"])
        try workspace.run(["rsa", "-in", "rsa.pem", "-pubout", "-outform", "DER", "-out", "rsa-spki.der"])
        try workspace.run(["ecparam", "-name", "secp384r1", "-genkey", "-out", "ec-with-parameters.pem"])
        XCTAssertTrue(try workspace.readText("rsa-traditional.pem").contains("BEGIN RSA PRIVATE KEY"))
        XCTAssertTrue(try workspace.readText("rsa-legacy.pem").contains("Proc-Type: 4,ENCRYPTED"))
        XCTAssertTrue(try workspace.readText("ec-with-parameters.pem").contains("BEGIN EC PARAMETERS"))

        let rsa = try AsymmetricKey(pem: secretFile(workspace, "rsa.pem"))
        XCTAssertEqual(rsa.sizeInBits, 1024)
        XCTAssertEqual(
            try AsymmetricKey(pem: secretFile(workspace, "rsa-traditional.pem")).publicKeyBytes, rsa.publicKeyBytes)
        let legacy = try AsymmetricKey(pem: secretFile(workspace, "rsa-legacy.pem"), password: password)
        XCTAssertTrue(try legacy.externalRepresentation().constantTimeEquals(rsa.externalRepresentation()))
        XCTAssertThrowsError(
            try AsymmetricKey(pem: secretFile(workspace, "rsa-legacy.pem"), password: SecretBytes(copying: [0x41]))
        ) {
            XCTAssertEqual($0 as? CryptoError, .wrongPassword)
        }
        for name in ["rsa-pkcs1-public.pem", "rsa-spki.pem"] {
            let key = try AsymmetricKey(pem: secretFile(workspace, name))
            XCTAssertFalse(key.isPrivate, name)
            XCTAssertEqual(key.publicKeyBytes, rsa.publicKeyBytes, name)
        }
        XCTAssertEqual(try AsymmetricKey(der: secretFile(workspace, "rsa-spki.der")).publicKeyBytes, rsa.publicKeyBytes)
        XCTAssertEqual(try rsa.subjectPublicKeyInfoDER(), try workspace.read("rsa-spki.der"))
        // Exponent 3 is unusual but valid, and Apple accepts it: the external representation round-trips.
        let external = try rsa.externalRepresentation()
        XCTAssertEqual(
            try AsymmetricKey(externalRepresentation: external, algorithm: .rsa, isPrivate: true).publicKeyBytes,
            rsa.publicKeyBytes)

        let ec = try AsymmetricKey(pem: secretFile(workspace, "ec-with-parameters.pem"))
        XCTAssertEqual(ec.algorithm, .ec)
        XCTAssertEqual(ec.sizeInBits, 384)
        XCTAssertTrue(ec.isPrivate)
    }

    func testExportsReadBackByOpenSSL() throws {
        let workspace = try OpenSSLWorkspace()
        for (index, key) in [TestKeys.rsa2048, TestKeys.p256, TestKeys.p521].enumerated() {
            try workspace.write("plain\(index).pem", try key.pkcs8PEM())
            try workspace.write("encrypted\(index).pem", try key.pkcs8PEM(password: password))
            XCTAssertTrue(try workspace.readText("plain\(index).pem").hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
            XCTAssertTrue(
                try workspace.readText("encrypted\(index).pem").hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"))
            let plainDER = try workspace.run([
                "pkcs8", "-topk8", "-nocrypt", "-in", "plain\(index).pem", "-outform", "DER",
            ])
            let decrypted = try workspace.run([
                "pkcs8", "-topk8", "-nocrypt", "-in", "encrypted\(index).pem",
                "-passin", "pass:correct horse", "-outform", "DER",
            ])
            XCTAssertEqual(plainDER, try key.pkcs8DER().unsafeCopyToArray())
            XCTAssertEqual(decrypted, plainDER)
            let info = try workspace.text(["asn1parse", "-in", "encrypted\(index).pem"])
            XCTAssertTrue(info.contains("PBES2") && info.contains("aes-256-cbc"), info)
            XCTAssertNotEqual(
                try workspace.status(["pkey", "-in", "encrypted\(index).pem", "-passin", "pass:wrong"]).status, 0)
            try workspace.write("public\(index).pem", try key.subjectPublicKeyInfoPEM())
            XCTAssertEqual(
                try workspace.run(["pkey", "-pubin", "-in", "public\(index).pem", "-outform", "DER"]),
                try key.subjectPublicKeyInfoDER())
        }
        XCTAssertThrowsError(try TestKeys.p256.publicKey().pkcs8DER())
    }

    func testUnsupportedKeyTypesAndGarbage() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run(["genpkey", "-algorithm", "ed25519", "-out", "ed25519.pem"])
        try workspace.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp256k1", "-out", "k1.pem"])
        for name in ["ed25519.pem", "k1.pem"] {
            XCTAssertThrowsError(try AsymmetricKey(pem: secretFile(workspace, name)), name) {
                guard case .unsupported = $0 as? CryptoError else { return XCTFail("\(name): \($0)") }
            }
        }
        let garbage: [[UInt8]] = [
            [], [0x30], [0x30, 0x03, 0x02, 0x01], Array("hello".utf8), [UInt8](repeating: 0x30, count: 64),
        ]
        for bytes in garbage {
            XCTAssertThrowsError(try AsymmetricKey(der: SecretBytes(copying: bytes)))
            XCTAssertThrowsError(try AsymmetricKey(pem: SecretBytes(copying: bytes)))
        }
        // Every truncation of a valid PKCS#8 key fails cleanly.
        let der = try TestKeys.p256.pkcs8DER().unsafeCopyToArray()
        for length in 0..<der.count {
            XCTAssertThrowsError(try AsymmetricKey(der: SecretBytes(copying: der.prefix(length))), "length \(length)")
        }
        XCTAssertThrowsError(try AsymmetricKey(der: SecretBytes(copying: der + [0x00])), "trailing byte")
    }

    func testPEMBlocks() throws {
        let der1: [UInt8] = Array(0..<100).map { UInt8($0) }, der2: [UInt8] = [0xFF, 0x00, 0x7F]
        let text =
            "junk before\r\n" + PEM.encode(der1, label: "CERTIFICATE").replacingOccurrences(of: "\n", with: "\r\n")
            + "between\n" + PEM.encode(der2, label: "PRIVATE KEY")
        let blocks = try PEM.blocks(in: Array(text.utf8))
        XCTAssertEqual(blocks.map(\.label), ["CERTIFICATE", "PRIVATE KEY"])
        XCTAssertEqual(blocks[0].publicBytes(), der1)
        XCTAssertEqual(blocks[1].der.unsafeCopyToArray(), der2)
        XCTAssertTrue(PEM.looksLikePEM(Array(text.utf8)))
        XCTAssertFalse(PEM.looksLikePEM(der1))
        // Lines are 64 characters, as RFC 7468 and OpenSSL write them.
        XCTAssertTrue(
            PEM.encode(der1, label: "X").split(separator: "\n").dropFirst().dropLast().allSatisfy { $0.count <= 64 })

        let broken = [
            "-----BEGIN CERTIFICATE-----\nAAAA\n",  // no END
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END PRIVATE KEY-----\n",  // mismatched END
            "-----BEGIN CERTIFICATE-----\nAA*A\n-----END CERTIFICATE-----\n",  // bad character
            "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n",  // bad length
            "-----BEGIN CERTIFICATE-----\nA=AA\n-----END CERTIFICATE-----\n",  // padding in the middle
        ]
        for sample in broken {
            XCTAssertThrowsError(try PEM.blocks(in: Array(sample.utf8)), sample) {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
            }
        }
        XCTAssertEqual(try PEM.blocks(in: Array("no pem here".utf8)).count, 0)
    }
}
