import COpenSSL
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// Crafted PKCS#12 files and keys (issue 11, the attacker's review of the PKCS#12 walk): keys other than
/// RSA and EC are refused before a decoder runs, key-derivation work is weighed by what one iteration
/// costs, certificates are capped, failures say what failed, and a key must match its certificate.
/// Every file here has no MAC, so the empty passphrase opens it without a prompt, as an attacker's would.
final class PKCS12CraftedTests: XCTestCase {
    private typealias D = CraftedDER
    private let empty = SecretBytes(count: 0)

    private func refusal(_ der: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> CryptoError? {
        do {
            _ = try PKCS12.parse(der: der, password: empty)
            XCTFail("the file opened", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    private func assertUnsupported(
        _ error: CryptoError?, _ expected: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        guard case .unsupported(let why)? = error else {
            return XCTFail("\(String(describing: error)), not .unsupported(\(expected))", file: file, line: line)
        }
        XCTAssertTrue(why.contains(expected), why, file: file, line: line)
    }

    private func assertInvalid(
        _ error: CryptoError?, _ expected: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        guard case .invalidInput(let why)? = error else {
            return XCTFail("\(String(describing: error)), not .invalidInput(\(expected))", file: file, line: line)
        }
        XCTAssertTrue(why.contains(expected), why, file: file, line: line)
    }

    /// A DSA key is refused by its algorithm OID, undecoded: OpenSSL's DSA decoder computes g^x mod p with
    /// p uncapped (a 32768-bit key held an import 8 s, a larger one for hours). The key here would fail
    /// to decode (its x is negative), so a refusal that names the key type shows no decoder ran.
    func testAKeyOtherThanRSAOrECIsRefusedUndecoded() {
        let file = D.pfx([D.plainSafe([D.keyBag(D.dsaPrivateKeyInfo)])])
        assertUnsupported(refusal(file), "only RSA and EC keys are supported")
    }

    /// The same in PEM and DER key files: a PrivateKeyInfo, an EncryptedPrivateKeyInfo (decrypted, then
    /// refused undecoded) and a SubjectPublicKeyInfo of DSA are refused by their OID. An RSA key of
    /// 1,048,576 bits decodes in milliseconds (OpenSSL does no arithmetic on it) and is refused by size.
    func testPEMAndDERKeysOtherThanRSAOrECAreRefusedUndecoded() throws {
        func assertRefused(_ der: [UInt8], password: SecretBytes? = nil, line: UInt = #line) {
            XCTAssertThrowsError(try AsymmetricKey(der: SecretBytes(copying: der), password: password)) {
                assertUnsupported($0 as? CryptoError, "only RSA and EC keys are supported", line: line)
            }
        }
        assertRefused(D.dsaPrivateKeyInfo)
        let pem = PEM.encode(D.dsaPrivateKeyInfo, label: "PRIVATE KEY")
        XCTAssertThrowsError(try AsymmetricKey(pem: SecretBytes(copying: Array(pem.utf8)))) {
            assertUnsupported($0 as? CryptoError, "only RSA and EC keys are supported")
        }
        // A public key: its BIT STRING is no DSA key at all; only the OID is read.
        assertRefused(D.sequence(D.algorithm(D.dsa, D.sequence()), D.tlv(DER.bitString, [0, 1, 2, 3])))

        let password = SecretBytes(copying: Array("crafted".utf8))
        let p8 = try XCTUnwrap(
            D.dsaPrivateKeyInfo.withUnsafeBufferPointer { buffer -> OpaquePointer? in
                var cursor = buffer.baseAddress
                return d2i_PKCS8_PRIV_KEY_INFO(nil, &cursor, buffer.count)
            })
        defer { PKCS8_PRIV_KEY_INFO_free(p8) }
        let sig = try XCTUnwrap(PKCS8_encrypt(-1, EVP_aes_256_cbc(), "crafted", 7, nil, 0, 2048, p8))
        defer { X509_SIG_free(sig) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_SIG(sig, &out)
        defer { CRYPTO_free(out, nil, 0) }
        assertRefused(Array(UnsafeBufferPointer(start: try XCTUnwrap(out), count: Int(length))), password: password)

        // An encrypted key's derivation is charged as a PKCS#12 one (it is decrypted with the empty
        // passphrase before any prompt): a PRF no exporter uses is refused before deriving.
        let sha224 = D.sequence(D.pbes2(iterations: 2048, prf: "sha224"), D.octets([UInt8](repeating: 0, count: 32)))
        XCTAssertThrowsError(try AsymmetricKey(der: SecretBytes(copying: sha224))) {
            assertUnsupported($0 as? CryptoError, "SHA-1, SHA-256, SHA-384 or SHA-512")
        }

        var modulus = try SecureRandom.bytes(131_072)
        modulus[0] |= 0x80
        let huge = D.sequence(
            D.integer(0), D.algorithm(D.rsaEncryption),
            D.octets(
                D.sequence(
                    D.integer(0), D.unsigned(modulus), D.integer(65537), D.unsigned(modulus), D.integer(3),
                    D.integer(5), D.integer(7), D.integer(11), D.integer(13))))
        XCTAssertThrowsError(try AsymmetricKey(der: SecretBytes(copying: huge))) {
            assertUnsupported($0 as? CryptoError, "RSA keys of 1048576 bits are not supported")
        }
    }

    /// Work is iterations x output blocks x the PRF's weight: PBKDF2-HMAC-SHA512 for AES-256 at 4,000,000
    /// iterations (12,000,000 units) and the PKCS#12 KDF for 3DES (two key blocks and one IV block) at the
    /// same count are refused before deriving, though their counts are below the 10,000,000 cap; a PRF no
    /// exporter uses (HMAC-SHA224, HMAC-SHA512/224) is refused at any count. At 2048 iterations, SHA-256
    /// and 3DES derive (and fail: the ciphertext is zeros), as a wrong passphrase.
    func testKeyDerivationWorkIsWeighedByItsDigestAndOutput() {
        let zeros = [UInt8](repeating: 0, count: 32)
        for algorithm in [
            D.pbes2(iterations: 4_000_000, prf: "sha512"), D.pkcs12PBE(D.pbeSHA1TripleDES, iterations: 4_000_000),
        ] {
            assertUnsupported(refusal(D.pfx([D.encryptedSafe(algorithm, zeros)])), "12000000")
        }
        for prf in ["sha224", "sha512-224"] {
            assertUnsupported(
                refusal(D.pfx([D.encryptedSafe(D.pbes2(iterations: 2048, prf: prf), zeros)])),
                "SHA-1, SHA-256, SHA-384 or SHA-512")
        }
        for algorithm in [
            D.pbes2(iterations: 2048, prf: "sha256"), D.pbes2(iterations: 2048, prf: nil),
            D.pkcs12PBE(D.pbeSHA1TripleDES, iterations: 2048),
        ] {
            XCTAssertEqual(refusal(D.pfx([D.encryptedSafe(algorithm, zeros)])), .wrongPassword)
        }
    }

    /// At most 1024 certificates: 1025 tiny ones (16 MiB of them took 40 s and 0.5 GB) are refused;
    /// 1024 are read, in file order.
    func testCertificatesAreCapped() throws {
        let certificates = (1...1025).map { D.tinyCertificate(serial: Int64($0)) }
        let refused = refusal(D.pfx([D.plainSafe(certificates.map(D.certificateBag))]))
        assertUnsupported(refused, "more than 1024 certificates")

        let kept = Array(certificates.prefix(1024))
        let contents = try PKCS12.parse(der: D.pfx([D.plainSafe(kept.map(D.certificateBag))]), password: empty)
        XCTAssertEqual(contents.certificate?.der, kept[0])
        XCTAssertEqual(contents.additional.map(\.der), Array(kept.dropFirst()))
    }

    /// A key that does not decode is said to be one (not a cipher no provider has, nor a wrong
    /// passphrase); a file without a MAC that fails before any decryption (a certificate that does not
    /// decode) is not readable, not protected by a passphrase the user should be asked for.
    func testFailuresSayWhatFailed() {
        let badRSA = D.sequence(D.integer(0), D.algorithm(D.rsaEncryption), D.octets([0x30, 0x03, 0x02, 0x01, 0x00]))
        assertInvalid(refusal(D.pfx([D.plainSafe([D.keyBag(badRSA)])])), "private key does not decode")
        assertInvalid(
            refusal(D.pfx([D.plainSafe([D.certificateBag([0x30, 0x03, 0x02, 0x01, 0x00])])])),
            "not a readable PKCS#12 file")
    }

    /// An EC private key carrying another key's public point (the certificate's) is refused: OpenSSL pairs
    /// a key and a certificate by the public part alone, so the identity would hold the victim's
    /// certificate with the attacker's scalar. The honest pair opens.
    func testAKeyWhosePartsDoNotBelongTogetherIsRefused() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "victim.pem",
            "-out", "victim.crt", "-outform", "DER", "-subj", "/CN=Victim", "-days", "2",
        ])
        let victim = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("victim.pem")))
        let certificate = try workspace.read("victim.crt")
        func file(scalarOf key: AsymmetricKey) throws -> [UInt8] {
            let ecPrivateKey = D.sequence(
                D.integer(1), D.octets(try key.ecPrivateScalar().unsafeCopyToArray()),
                D.tlv(0xA1, D.tlv(DER.bitString, [0] + victim.publicKeyBytes)))
            let p8 = D.sequence(
                D.integer(0), D.sequence(D.oid(D.ecPublicKey), D.oid(D.prime256v1)), D.octets(ecPrivateKey))
            return D.pfx([D.plainSafe([D.keyBag(p8), D.certificateBag(certificate)])])
        }
        let honest = try PKCS12.parse(der: try file(scalarOf: victim), password: empty)
        XCTAssertEqual(honest.certificate?.der, certificate)
        XCTAssertNotNil(honest.key)

        let attacker = try AsymmetricKey.generateEC(bits: 256)
        assertInvalid(refusal(try file(scalarOf: attacker)), "does not belong to its certificate")
    }
}
