import COpenSSL
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// PKCS#12 files that ask for more key-derivation work than accepted are refused before any derivation.
/// The files here ask for 2^31−1 iterations: before the cap, opening one ran for minutes (245 s measured
/// for the MAC alone) before failing, far beyond any CI run's patience, so a regression hangs this test.
final class PKCS12WorkTests: XCTestCase {
    /// `0x00800000` as a DER INTEGER: the smallest count OpenSSL writes in four content bytes, so that
    /// patching it to 0x7fffffff keeps every length in the file.
    private static let exported: [UInt8] = [0x02, 0x04, 0x00, 0x80, 0x00, 0x00]

    func testHugeIterationCountsAreRefusedWithoutDeriving() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "key.pem",
            "-out", "cert.pem", "-subj", "/CN=Work", "-days", "2",
        ])
        // -iter sets the MAC's, the certificates' PBKDF2 and the key's PBKDF2 counts alike.
        try workspace.run([
            "pkcs12", "-export", "-in", "cert.pem", "-inkey", "key.pem", "-iter", "8388608", "-passout", "pass:work",
            "-out", "work.p12",
        ])
        let file = try workspace.read("work.p12")
        let offsets = (0...(file.count - Self.exported.count)).filter {
            Array(file[$0..<$0 + Self.exported.count]) == Self.exported
        }
        // The encrypted certificate safe, the shrouded key and the MAC (last).
        XCTAssertEqual(offsets.count, 3, "\(offsets)")
        for offset in offsets {
            var patched = file
            patched.replaceSubrange(offset + 2..<offset + 6, with: [0x7f, 0xff, 0xff, 0xff])
            for guess in ["work", "wrong", ""] {
                XCTAssertThrowsError(try PKCS12.parse(der: patched, password: SecretBytes(copying: Array(guess.utf8))))
                {
                    guard case .unsupported(let why)? = $0 as? CryptoError else { return XCTFail("\($0)") }
                    XCTAssertTrue(why.contains("2147483647") && why.contains("at most 10000000"), why)
                }
            }
        }
        // The unpatched file, 8,388,608 iterations for each of three derivations, is within the caps.
        XCTAssertNotNil(try PKCS12.parse(der: file, password: SecretBytes(copying: Array("work".utf8))).key)
    }

    /// One import derives each key once: OpenSSL's own count of the PKCS#12 key derivations of the safes and
    /// the shrouded key (a keygen registered with EVP_PBE_alg_add_type, which OpenSSL looks up before its
    /// built-in table, counts and forwards), for a 3DES file and for an RC2-40 one read through the legacy
    /// provider; a wrong passphrase derives nothing but the MAC.
    func testOneImportDerivesEachKeyOnce() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "key.pem",
            "-out", "cert.pem", "-subj", "/CN=Once", "-days", "2",
        ])
        try workspace.run([
            "pkcs12", "-export", "-certpbe", "PBE-SHA1-3DES", "-keypbe", "PBE-SHA1-3DES", "-macalg", "sha1",
            "-in", "cert.pem", "-inkey", "key.pem", "-passout", "pass:once", "-out", "3des.p12",
        ])
        try workspace.run([
            "pkcs12", "-export", "-provider", "legacy", "-provider", "default", "-certpbe", "PBE-SHA1-RC2-40",
            "-keypbe", "PBE-SHA1-3DES", "-macalg", "sha1", "-in", "cert.pem", "-inkey", "key.pem",
            "-passout", "pass:once", "-out", "rc2.p12",
        ])
        guard
            EVP_PBE_alg_add_type(
                EVP_PBE_TYPE_OUTER, NID_pbe_WithSHA1And3_Key_TripleDES_CBC, NID_des_ede3_cbc, NID_sha1,
                countingTripleDES) == 1,
            EVP_PBE_alg_add_type(
                EVP_PBE_TYPE_OUTER, NID_pbe_WithSHA1And40BitRC2_CBC, NID_rc2_40_cbc, NID_sha1, countingRC2) == 1
        else { return XCTFail("EVP_PBE_alg_add_type") }
        // Back to OpenSSL's built-in table for the rest of the process.
        defer { EVP_PBE_cleanup() }
        let once = SecretBytes(copying: Array("once".utf8))

        (tripleDESKeygens, rc2Keygens) = (0, 0)
        var contents = try PKCS12.parse(der: workspace.read("3des.p12"), password: once)
        XCTAssertNotNil(contents.key)
        XCTAssertEqual(tripleDESKeygens, 2, "the certificate safe and the shrouded key, once each")
        XCTAssertEqual(rc2Keygens, 0)
        // The import's own count of what it derived, OpenSSL's two and the MAC: the MAC once.
        XCTAssertEqual(contents.derivations, 3)

        (tripleDESKeygens, rc2Keygens) = (0, 0)
        contents = try PKCS12.parse(der: workspace.read("rc2.p12"), password: once)
        XCTAssertNotNil(contents.key)
        XCTAssertEqual(rc2Keygens, 1, "the certificate safe, once, in the legacy context only")
        XCTAssertEqual(tripleDESKeygens, 1, "the shrouded key")
        XCTAssertEqual(contents.derivations, 3)

        (tripleDESKeygens, rc2Keygens) = (0, 0)
        XCTAssertThrowsError(
            try PKCS12.parse(der: workspace.read("3des.p12"), password: SecretBytes(copying: Array("no".utf8))))
        XCTAssertEqual(tripleDESKeygens + rc2Keygens, 0, "nothing is decrypted before the MAC verifies")
    }

    /// A shrouded key inside an encrypted safe (as Apple's and Windows' files keep it) shows its iteration
    /// count only once the safe is decrypted: a key asking for 2^31−1 there is refused when the walk
    /// reaches it, before its derivation (OpenSSL derived the safe's key, not the shrouded key's); the same
    /// file with a count within the cap opens, the MAC, the safe and the key derived once each.
    func testAKeyInsideAnEncryptedSafeIsRefusedBeforeItsDerivation() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "key.pem",
            "-out", "cert.pem", "-subj", "/CN=Inside", "-days", "2",
        ])
        let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("key.pem")))
        let certificate = try workspace.run(["x509", "-in", "cert.pem", "-outform", "DER"])
        guard
            EVP_PBE_alg_add_type(
                EVP_PBE_TYPE_OUTER, NID_pbe_WithSHA1And3_Key_TripleDES_CBC, NID_des_ede3_cbc, NID_sha1,
                countingTripleDES) == 1
        else { return XCTFail("EVP_PBE_alg_add_type") }
        defer { EVP_PBE_cleanup() }
        let password = SecretBytes(copying: Array("inside".utf8))

        let plain = try Self.keyInsideAnEncryptedSafe(key, certificate, keyIterations: nil)
        tripleDESKeygens = 0
        let contents = try PKCS12.parse(der: plain, password: password)
        XCTAssertNotNil(contents.key)
        XCTAssertEqual(contents.certificate, try X509Certificate(der: certificate))
        XCTAssertEqual(contents.derivations, 3, "the MAC, the safe and the key")
        XCTAssertEqual(tripleDESKeygens, 2, "the safe and the key")

        let hostile = try Self.keyInsideAnEncryptedSafe(key, certificate, keyIterations: Int32.max)
        tripleDESKeygens = 0
        XCTAssertThrowsError(try PKCS12.parse(der: hostile, password: password)) {
            guard case .unsupported(let why)? = $0 as? CryptoError else { return XCTFail("\($0)") }
            XCTAssertTrue(why.contains("2147483647") && why.contains("at most 10000000"), why)
        }
        XCTAssertEqual(tripleDESKeygens, 1, "the safe only: the key's derivation never ran")
    }

    /// A PKCS#12 file (passphrase "inside", 2048 iterations, 3DES, SHA-1 MAC) with one encrypted safe that
    /// holds the certificate and the shrouded key; the key's algorithm then says `keyIterations`, when
    /// given, although it was encrypted with 2048.
    private static func keyInsideAnEncryptedSafe(
        _ key: AsymmetricKey, _ certificate: [UInt8], keyIterations: Int32?
    ) throws -> [UInt8] {
        let x509 = try XCTUnwrap(
            certificate.withUnsafeBufferPointer { buffer -> OpaquePointer? in
                var cursor = buffer.baseAddress
                return d2i_X509(nil, &cursor, buffer.count)
            })
        defer { X509_free(x509) }
        var bags: OpaquePointer?
        defer { OPENSSL_sk_pop_free(bags, freeBag) }
        XCTAssertNotNil(PKCS12_add_cert(&bags, x509))
        let bag = try XCTUnwrap(
            PKCS12_add_key(&bags, key.pkey, 0, 2048, NID_pbe_WithSHA1And3_Key_TripleDES_CBC, "inside"))
        if let keyIterations {
            var algorithm: UnsafeMutablePointer<X509_ALGOR>?
            X509_SIG_getm(PKCS12_SAFEBAG_get0_pkcs8(bag), &algorithm, nil)
            let patched = try XCTUnwrap(PKCS5_pbe_set(NID_pbe_WithSHA1And3_Key_TripleDES_CBC, keyIterations, nil, 0))
            swap(&algorithm!.pointee.parameter, &patched.pointee.parameter)
            X509_ALGOR_free(patched)
        }
        let safe = try XCTUnwrap(
            PKCS12_pack_p7encdata(NID_pbe_WithSHA1And3_Key_TripleDES_CBC, "inside", -1, nil, 0, 2048, bags))
        let safes = try XCTUnwrap(OPENSSL_sk_new_null())
        defer { OPENSSL_sk_pop_free(safes, freeSafe) }
        XCTAssertGreaterThan(OPENSSL_sk_push(safes, UnsafeRawPointer(safe)), 0)
        let p12 = try XCTUnwrap(PKCS12_add_safes(safes, 0))
        defer { PKCS12_free(p12) }
        XCTAssertEqual(PKCS12_set_mac(p12, "inside", -1, nil, 0, 2048, EVP_sha1()), 1)
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS12(p12, &out)
        defer { CRYPTO_free(out, nil, 0) }
        return Array(UnsafeBufferPointer(start: try XCTUnwrap(out), count: Int(length)))
    }
}

/// How many times OpenSSL derived a pbeWithSHA1And3-KeyTripleDES-CBC and a pbeWithSHA1And40BitRC2-CBC key
/// (testOneImportDerivesEachKeyOnce; XCTest runs one test at a time).
nonisolated(unsafe) private var tripleDESKeygens = 0
nonisolated(unsafe) private var rc2Keygens = 0

/// OpenSSL's PKCS#12 key and IV derivation, counted (EVP_PBE_KEYGEN).
private func countingTripleDES(
    _ ctx: OpaquePointer?, _ pass: UnsafePointer<CChar>?, _ passlen: Int32, _ param: UnsafeMutablePointer<ASN1_TYPE>?,
    _ cipher: OpaquePointer?, _ md: OpaquePointer?, _ encrypt: Int32
) -> Int32 {
    tripleDESKeygens += 1
    return PKCS12_PBE_keyivgen(ctx, pass, passlen, param, cipher, md, encrypt)
}

private func countingRC2(
    _ ctx: OpaquePointer?, _ pass: UnsafePointer<CChar>?, _ passlen: Int32, _ param: UnsafeMutablePointer<ASN1_TYPE>?,
    _ cipher: OpaquePointer?, _ md: OpaquePointer?, _ encrypt: Int32
) -> Int32 {
    rc2Keygens += 1
    return PKCS12_PBE_keyivgen(ctx, pass, passlen, param, cipher, md, encrypt)
}

private func freeBag(_ bag: UnsafeMutableRawPointer?) { PKCS12_SAFEBAG_free(bag.map { OpaquePointer($0) }) }
private func freeSafe(_ safe: UnsafeMutableRawPointer?) { PKCS7_free(safe?.assumingMemoryBound(to: PKCS7.self)) }
