import Foundation
import Latchkey
import XCTest

/// OSX/sec/Security/Regressions/secitem/si-61-pkcs12.c, ported to the public library with Apple's own
/// PKCS#12 files, all of which encrypt with pbeWithSHA1And40BitRC2-CBC and pbeWithSHA1And3-KeyTripleDES-CBC;
/// and the same legacy ciphers in files OpenSSL made (Resources/README.md). Where macOS and iOS differ
/// (macOS's SecPKCS12Import also adds to the keychain), iOS.
///
/// Not ported, and why:
/// - "import privkey without pub" (`ECDSA_fails_import_priv_only`): SecKeyCreateECPrivateKey with a bare SEC1
///   scalar and no curve is SPI; SecKeyCreateWithData takes the X9.63 form.
/// - test_cert_decode_error's expectation that the file fails: Apple's certificate parser refuses the file's
///   client certificate, whose extensions encode booleans in BER (0x01 for TRUE, an explicit FALSE); OpenSSL
///   reads it, so latchkey imports the file (README, differences).
/// - test_data_protection_kc: macOS only (SecPKCS12Import adding to the keychain).
final class PKCS12ImportTests: ConformanceTestCase {
    private func importFile(_ path: String, _ passphrase: String?) throws -> (OSStatus, [[String: Any]]) {
        var items: CFArray?
        var options: [CFString: Any] = [:]
        if let passphrase { options[kSecImportExportPassphrase] = passphrase }
        let status = SecPKCS12Import(try resource(path) as CFData, options as NSDictionary, &items)
        return (status, (items as? [[String: Any]]) ?? [])
    }

    /// Apple's checks on one imported identity: one entry, an identity, its key and its certificate.
    private func identity(
        _ items: [[String: Any]], file: StaticString = #filePath, line: UInt = #line
    ) throws -> (SecIdentity, SecKey, SecCertificate) {
        XCTAssertEqual(
            items.filter { $0[kSecImportItemIdentity as String] != nil }.count, 1, "one identity", file: file,
            line: line)
        let identity = try XCTUnwrap(
            items.first?[kSecImportItemIdentity as String] as? SecIdentity, "pull identity from imported data",
            file: file, line: line)
        var key: SecKey?
        var cert: SecCertificate?
        XCTAssertEqual(
            SecIdentityCopyPrivateKey(identity, &key), errSecSuccess, "get private key", file: file, line: line)
        XCTAssertEqual(
            SecIdentityCopyCertificate(identity, &cert), errSecSuccess, "get certificate", file: file, line: line)
        return (identity, try XCTUnwrap(key, file: file, line: line), try XCTUnwrap(cert, file: file, line: line))
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-61-pkcs12.c, tests()
    func testSi61PKCS12() throws {
        // No passphrase for a file that has one: errSecAuthFailed (the iOS code; legacy macOS said
        // errSecPassphraseRequired).
        XCTAssertEqual(try importFile("apple/si-61-user-one.p12", nil).0, errSecAuthFailed, "try null password")

        for (file, passphrase) in [("apple/si-61-user-one.p12", "user-one"), ("apple/si-61-user-two.p12", "user-two")] {
            let (status, items) = try importFile(file, passphrase)
            XCTAssertEqual(status, errSecSuccess, "import \(file) (\(LatchkeyDiagnostics.lastErrorDetail ?? ""))")
            _ = try identity(items)
        }

        var (status, items) = try importFile("apple/si-61-ecdsa-fails-import.p12", "test")
        XCTAssertEqual(
            status, errSecSuccess, "import ECDSA_fails_import_p12 (\(LatchkeyDiagnostics.lastErrorDetail ?? ""))")
        let (_, key, _) = try identity(items)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key), "get public key from private key")
        let message = Data([0x80, 0xbe, 0xef, 0xba, 0xd0] + [UInt8](repeating: 0, count: 15))
        var error: Unmanaged<CFError>?
        let signature = try XCTUnwrap(
            SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error), "sign something")
        XCTAssertTrue(
            SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature, &error),
            "verify sig on something")

        (status, items) = try importFile("apple/si-61-ec521-host.p12", "test!123")
        XCTAssertEqual(status, errSecSuccess, "Import p521 PKCS12 cert (\(LatchkeyDiagnostics.lastErrorDetail ?? ""))")
        _ = try identity(items)
    }

    // latchkey: legacy ciphers in files OpenSSL made (RC2-40 and 3DES; 3DES alone; OpenSSL's -legacy set), each
    // imported, its identity added to the keychain and used; a wrong passphrase is still errSecAuthFailed.
    func testLegacyCiphersImport() throws {
        for file in ["legacy/rc2-40-3des.p12", "legacy/ec-3des.p12", "legacy/openssl-legacy.p12"] {
            let (status, items) = try importFile(file, "legacy")
            XCTAssertEqual(status, errSecSuccess, "\(file): \(LatchkeyDiagnostics.lastErrorDetail ?? "")")
            let (identity, key, _) = try identity(items)
            XCTAssertEqual(add([kSecValueRef: identity]).status, errSecSuccess, file)
            let (found, stored) = copy([kSecClass: kSecClassIdentity, kSecReturnRef: true])
            XCTAssertEqual(found, errSecSuccess, file)
            var storedKey: SecKey?
            XCTAssertEqual(SecIdentityCopyPrivateKey(try XCTUnwrap(stored as? SecIdentity), &storedKey), errSecSuccess)
            let algorithm: SecKeyAlgorithm =
                SecKeyIsAlgorithmSupported(key, .sign, .ecdsaSignatureMessageX962SHA256)
                ? .ecdsaSignatureMessageX962SHA256 : .rsaSignatureMessagePKCS1v15SHA256
            var error: Unmanaged<CFError>?
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(try XCTUnwrap(storedKey), algorithm, Data("m".utf8) as CFData, &error), file)
            XCTAssertTrue(
                SecKeyVerifySignature(
                    try XCTUnwrap(SecKeyCopyPublicKey(key)), algorithm, Data("m".utf8) as CFData, signature, &error),
                file)
            XCTAssertEqual(delete([kSecClass: kSecClassIdentity]), errSecSuccess, file)

            XCTAssertEqual(try importFile(file, "wrong").0, errSecAuthFailed, "\(file): wrong passphrase")
        }
    }

    // latchkey: PKCS#12's empty password has two forms, absent (no password bytes in the key derivation) and the
    // empty BMPString (its two zero bytes); files without a MAC are written in both (Resources/README.md), and
    // an empty passphrase (or none) opens either, whatever the cipher. A wrong non-empty passphrase on such a
    // file is still refused as a file without a MAC opened with a passphrase, not as a wrong passphrase.
    func testEmptyPassphraseOpensFilesWithoutAMACInBothForms() throws {
        for file in [
            "empty-rc2-40-3des", "empty-3des", "empty-aes", "absent-rc2-40-3des", "absent-3des",
        ] {
            let path = "empty-passphrase/\(file).p12"
            for passphrase in ["", nil] {
                let (status, items) = try importFile(path, passphrase)
                XCTAssertEqual(
                    status, errSecSuccess,
                    "\(file), \(passphrase ?? "none"): \(LatchkeyDiagnostics.lastErrorDetail ?? "")")
                guard status == errSecSuccess else { continue }
                let (_, key, certificate) = try identity(items)
                XCTAssertEqual(items.first?[kSecImportItemLabel as String] as? String, file)
                XCTAssertEqual(
                    SecCertificateCopySubjectSummary(certificate) as String?, "Latchkey Empty Passphrase PKCS12 Test")
                var error: Unmanaged<CFError>?
                let signature = try XCTUnwrap(
                    SecKeyCreateSignature(key, .rsaSignatureMessagePKCS1v15SHA256, Data("m".utf8) as CFData, &error))
                XCTAssertTrue(
                    SecKeyVerifySignature(
                        try XCTUnwrap(SecKeyCopyPublicKey(key)), .rsaSignatureMessagePKCS1v15SHA256,
                        Data("m".utf8) as CFData, signature, &error))
            }
            let (status, items) = try importFile(path, "wrong")
            XCTAssertEqual(status, errSecDecode, file)
            XCTAssertTrue(items.isEmpty)
            let detail = LatchkeyDiagnostics.lastErrorDetail ?? ""
            XCTAssertTrue(detail.contains("without an integrity MAC"), detail)
        }
    }

    // latchkey: a passphrase holding a NUL is refused (errSecParam), as a string or as data, rather than cut
    // at the NUL: OpenSSL takes the passphrase as a C string, so "legacy\0x" would open a file whose passphrase
    // is "legacy".
    func testPassphraseWithANULIsAParameterError() throws {
        let data = try resource("legacy/rc2-40-3des.p12") as CFData
        for passphrase: Any in ["legacy\u{0}x", Data("legacy\u{0}x".utf8), "\u{0}", Data([0])] {
            var items: CFArray?
            XCTAssertEqual(
                SecPKCS12Import(data, [kSecImportExportPassphrase: passphrase] as NSDictionary, &items), errSecParam,
                "\(passphrase)")
            XCTAssertNil(items)
            let detail = LatchkeyDiagnostics.lastErrorDetail ?? ""
            XCTAssertTrue(detail.contains("NUL"), detail)
        }
        XCTAssertEqual(try importFile("legacy/rc2-40-3des.p12", "legacy").0, errSecSuccess)
    }

    // latchkey: a file whose passphrase is right (its MAC verifies) but whose cipher no OpenSSL provider can
    // read is reported as undecodable, as Apple's p12 decoder reports it (p12_decodeErr: errSecDecode), never
    // as a wrong passphrase.
    func testUnreadableCipherIsNotAWrongPassphrase() throws {
        let (status, items) = try importFile("legacy/unknown-cipher.p12", "legacy")
        XCTAssertEqual(status, errSecDecode)
        XCTAssertTrue(items.isEmpty)
        let detail = LatchkeyDiagnostics.lastErrorDetail ?? ""
        XCTAssertTrue(detail.contains("cipher"), detail)
        XCTAssertFalse(detail.contains("passphrase is wrong"), detail)
        XCTAssertEqual(try importFile("legacy/unknown-cipher.p12", "wrong").0, errSecAuthFailed, "wrong passphrase")
    }
}
