import COpenSSL
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// PKCS#12 files with the legacy ciphers of Keychain Access, older macOS and Windows (RC2-40, 3DES), made
/// by `openssl pkcs12 -export` with its legacy provider: read through PKCS12's own legacy context, which
/// the process's default context never sees. (A cipher no provider can read: LatchkeyAppleConformanceTests,
/// PKCS12ImportTests.)
final class PKCS12LegacyTests: XCTestCase {
    private let password = SecretBytes(copying: Array("legacy".utf8))

    /// A self-signed RSA identity in `workspace`, exported with RC2-40 for the certificates and 3DES for
    /// the key; `extra` adds options (`-nomac`).
    private func export(_ workspace: OpenSSLWorkspace, _ extra: [String] = []) throws -> [UInt8] {
        try workspace.run([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "cert.pem",
            "-subj", "/CN=Legacy", "-days", "2",
        ])
        try workspace.run(
            [
                "pkcs12", "-export", "-provider", "legacy", "-provider", "default", "-certpbe", "PBE-SHA1-RC2-40",
                "-keypbe", "PBE-SHA1-3DES", "-in", "cert.pem", "-inkey", "key.pem", "-name", "Legacy Identity",
                "-passout", "pass:legacy", "-out", "legacy.p12",
            ] + extra)
        return try workspace.read("legacy.p12")
    }

    func testRC2And3DESFilesAreRead() throws {
        let workspace = try OpenSSLWorkspace()
        let file = try export(workspace)
        let contents = try PKCS12.parse(der: file, password: password)
        let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("key.pem")))
        XCTAssertTrue(
            try XCTUnwrap(contents.key).externalRepresentation().constantTimeEquals(key.externalRepresentation()))
        XCTAssertEqual(
            contents.certificate,
            try X509Certificate(der: workspace.run(["x509", "-in", "cert.pem", "-outform", "DER"])))
        XCTAssertEqual(contents.friendlyName, "Legacy Identity")
        // The key works in the process's default context (it was re-made there).
        let signature = try XCTUnwrap(contents.key).sign(.rsaSignatureMessagePKCS1v15SHA256, Array("m".utf8))
        let publicKey = try AsymmetricKey(externalRepresentation: key.publicKeyBytes, algorithm: .rsa, isPrivate: false)
        XCTAssertTrue(try publicKey.verify(.rsaSignatureMessagePKCS1v15SHA256, Array("m".utf8), signature: signature))

        XCTAssertThrowsError(try PKCS12.parse(der: file, password: SecretBytes(copying: Array("wrong".utf8)))) {
            XCTAssertEqual($0 as? CryptoError, .wrongPassword)
        }
        // The legacy algorithms stay in PKCS12's own context: the process's default context cannot fetch them.
        XCTAssertNil(EVP_CIPHER_fetch(nil, "RC2-40-CBC", nil))
        ERR_clear_error()
    }

    /// OpenSSL 3.0 reads a file without a MAC only without a passphrase: with one, that is said, and it is
    /// not called a wrong passphrase.
    func testAFileWithoutAMACIsNotAWrongPassword() throws {
        let workspace = try OpenSSLWorkspace()
        let file = try export(workspace, ["-nomac"])
        for guess in ["legacy", "wrong"] {
            XCTAssertThrowsError(try PKCS12.parse(der: file, password: SecretBytes(copying: Array(guess.utf8)))) {
                guard case .unsupported(let why)? = $0 as? CryptoError else { return XCTFail("\($0)") }
                XCTAssertTrue(why.contains("MAC"), why)
            }
        }
    }
}
