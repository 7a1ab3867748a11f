import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// Keys shared by the asymmetric tests, generated once per test process (RSA generation is slow).
enum TestKeys {
    static let rsa2048 = try! AsymmetricKey.generateRSA(bits: 2048)
    static let p256 = try! AsymmetricKey.generateEC(bits: 256)
    static let p384 = try! AsymmetricKey.generateEC(bits: 384)
    static let p521 = try! AsymmetricKey.generateEC(bits: 521)
    static var ecKeys: [AsymmetricKey] { [p256, p384, p521] }
}

/// Key generation and Apple's external representation, checked against keys and encodings the
/// `openssl` tool made.
final class AsymmetricKeyTests: XCTestCase {
    func testGeneratedKeysHaveAppleSizesAndRoundTrip() throws {
        for (key, bits, block) in [
            (TestKeys.rsa2048, 2048, 256), (TestKeys.p256, 256, 32), (TestKeys.p384, 384, 48),
            (TestKeys.p521, 521, 66),
        ] {
            XCTAssertTrue(key.isPrivate)
            XCTAssertEqual(key.sizeInBits, bits)
            XCTAssertEqual(key.blockSize, block)
            let external = try key.externalRepresentation()
            let again = try AsymmetricKey(externalRepresentation: external, algorithm: key.algorithm, isPrivate: true)
            XCTAssertTrue(try again.externalRepresentation().constantTimeEquals(external))
            XCTAssertEqual(again.publicKeyBytes, key.publicKeyBytes)

            let publicKey = try key.publicKey()
            XCTAssertFalse(publicKey.isPrivate)
            XCTAssertEqual(publicKey.sizeInBits, bits)
            XCTAssertEqual(try publicKey.externalRepresentation().unsafeCopyToArray(), key.publicKeyBytes)
            let reimported = try AsymmetricKey(
                externalRepresentation: key.publicKeyBytes, algorithm: key.algorithm, isPrivate: false)
            XCTAssertEqual(reimported.publicKeyBytes, key.publicKeyBytes)
            XCTAssertEqual(reimported.applicationLabel, SHA1.hash(key.publicKeyBytes))
        }
        for key in TestKeys.ecKeys {
            // 04 ‖ X ‖ Y ‖ K, each field-size long.
            XCTAssertEqual(key.publicKeyBytes.count, 1 + 2 * key.blockSize)
            XCTAssertEqual(key.publicKeyBytes.first, 0x04)
            XCTAssertEqual(try key.externalRepresentation().count, 1 + 3 * key.blockSize)
        }
    }

    func testRSAExternalRepresentationIsPKCS1AsOpenSSLWritesIt() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem"])
        try workspace.run(["rsa", "-in", "key.pem", "-traditional", "-outform", "DER", "-out", "pkcs1.der"])
        try workspace.run(["rsa", "-in", "key.pem", "-RSAPublicKey_out", "-outform", "DER", "-out", "public.der"])
        let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("key.pem")))
        XCTAssertEqual(key.algorithm, .rsa)
        XCTAssertEqual(try key.externalRepresentation().unsafeCopyToArray(), try workspace.read("pkcs1.der"))
        XCTAssertEqual(key.publicKeyBytes, try workspace.read("public.der"))

        // And the other way round: OpenSSL reads and checks what latchkey exports.
        try workspace.write("ours.der", try TestKeys.rsa2048.externalRepresentation())
        let check = try workspace.text(["rsa", "-inform", "DER", "-in", "ours.der", "-check", "-noout"])
        XCTAssertTrue(check.contains("RSA key ok"), check)
        try workspace.write("ours-public.der", TestKeys.rsa2048.publicKeyBytes)
        XCTAssertEqual(
            try workspace.run([
                "rsa", "-RSAPublicKey_in", "-inform", "DER", "-in", "ours-public.der",
                "-RSAPublicKey_out", "-outform", "DER",
            ]), TestKeys.rsa2048.publicKeyBytes)
    }

    func testECExternalRepresentationMatchesOpenSSLKeyDump() throws {
        let workspace = try OpenSSLWorkspace()
        for (curve, size) in [("P-256", 32), ("P-384", 48), ("P-521", 66)] {
            try workspace.run([
                "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\(curve)", "-out", "ec.pem",
            ])
            let dump = try workspace.text(["ec", "-in", "ec.pem", "-text", "-noout"])
            // "priv:" hex block, then "pub:" hex block, then "ASN1 OID".
            let privText = dump.components(separatedBy: "priv:")[1].components(separatedBy: "pub:")[0]
            let pubText = dump.components(separatedBy: "pub:")[1].components(separatedBy: "ASN1 OID")[0]
            var k = Array(bytes(fromColonHex: privText).drop { $0 == 0 })
            k = [UInt8](repeating: 0, count: size - k.count) + k
            let point = bytes(fromColonHex: pubText)
            XCTAssertEqual(point.count, 1 + 2 * size)

            let key = try AsymmetricKey(pem: SecretBytes(copying: workspace.read("ec.pem")))
            XCTAssertEqual(key.publicKeyBytes, point, curve)
            XCTAssertEqual(try key.externalRepresentation().unsafeCopyToArray(), point + k, curve)
            // Apple infers the curve from the length alone.
            let imported = try AsymmetricKey(externalRepresentation: point + k, algorithm: .ec, isPrivate: true)
            XCTAssertEqual(imported.sizeInBits, size == 66 ? 521 : size * 8)
        }
    }

    func testExternalRepresentationRejectsBadInput() throws {
        let p256 = TestKeys.p256, other = try AsymmetricKey.generateEC(bits: 256)
        let point = p256.publicKeyBytes
        let scalar = Array(try p256.externalRepresentation().unsafeCopyToArray().suffix(32))
        let otherScalar = Array(try other.externalRepresentation().unsafeCopyToArray().suffix(32))
        var offCurve = point
        offCurve[64] ^= 0x01
        var compressed = point
        compressed[0] = 0x02
        let rsaPrivate = try TestKeys.rsa2048.externalRepresentation().unsafeCopyToArray()
        var damagedRSA = rsaPrivate
        damagedRSA[rsaPrivate.count / 2] ^= 0x01  // a byte of the private exponent or a prime
        let cases: [(String, [UInt8], AsymmetricKey.Algorithm, Bool)] = [
            ("empty", [], .ec, false),
            ("garbage", Array("not a key at all".utf8), .rsa, false),
            ("EC wrong length", Array(point.dropLast()), .ec, false),
            ("EC point not on the curve", offCurve, .ec, false),
            ("EC compressed prefix", compressed, .ec, false),
            ("EC scalar of another key", point + otherScalar, .ec, true),
            ("EC zero scalar", point + [UInt8](repeating: 0, count: 32), .ec, true),
            ("EC private blob as public", point + scalar, .ec, false),
            ("EC public blob as private", point, .ec, true),
            ("RSA truncated", Array(rsaPrivate.dropLast(7)), .rsa, true),
            ("RSA trailing byte", rsaPrivate + [0], .rsa, true),
            ("RSA inconsistent", damagedRSA, .rsa, true),
            ("RSA private blob as public", rsaPrivate, .rsa, false),
            ("RSA public blob as private", TestKeys.rsa2048.publicKeyBytes, .rsa, true),
            ("EC bytes as RSA", point, .rsa, false),
        ]
        for (name, data, algorithm, isPrivate) in cases {
            XCTAssertThrowsError(
                try AsymmetricKey(externalRepresentation: data, algorithm: algorithm, isPrivate: isPrivate), name
            ) {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\(name): \($0)") }
            }
        }
        // Sanity: the pieces themselves are fine.
        XCTAssertNoThrow(try AsymmetricKey(externalRepresentation: point + scalar, algorithm: .ec, isPrivate: true))
    }

    func testGenerationRejectsUnsupportedSizes() {
        for bits in [0, 512, 1000, 1023, 4104, 8192] {
            XCTAssertThrowsError(try AsymmetricKey.generateRSA(bits: bits)) {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
            }
        }
        for bits in [192, 224, 255, 512] {
            XCTAssertThrowsError(try AsymmetricKey.generateEC(bits: bits)) {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
            }
        }
    }

    func testAlgorithmSupportFollowsApple() throws {
        let rsa = TestKeys.rsa2048, rsaPublic = try TestKeys.rsa2048.publicKey()
        let ec = TestKeys.p256, ecPublic = try TestKeys.p256.publicKey()
        let pss512 = SignatureAlgorithm.rsaSignatureMessagePSSSHA512.rawValue
        XCTAssertTrue(rsa.isSupported(.sign, algorithm: pss512))
        XCTAssertFalse(rsa.isSupported(.verify, algorithm: pss512))
        XCTAssertTrue(rsaPublic.isSupported(.verify, algorithm: pss512))
        XCTAssertFalse(rsaPublic.isSupported(.sign, algorithm: pss512))
        XCTAssertFalse(ec.isSupported(.sign, algorithm: pss512))
        XCTAssertTrue(ec.isSupported(.sign, algorithm: SignatureAlgorithm.ecdsaSignatureMessageX962SHA256.rawValue))
        XCTAssertTrue(
            ecPublic.isSupported(
                .encrypt, algorithm: EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA256AESGCM.rawValue))
        XCTAssertFalse(
            ec.isSupported(
                .encrypt, algorithm: EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA256AESGCM.rawValue))
        XCTAssertTrue(
            ec.isSupported(
                .decrypt, algorithm: EncryptionAlgorithm.eciesEncryptionStandardVariableIVX963SHA256AESGCM.rawValue))
        XCTAssertTrue(ec.isSupported(.keyExchange, algorithm: KeyExchangeAlgorithm.ecdhKeyExchangeStandard.rawValue))
        XCTAssertFalse(
            ecPublic.isSupported(.keyExchange, algorithm: KeyExchangeAlgorithm.ecdhKeyExchangeStandard.rawValue))
        XCTAssertFalse(rsa.isSupported(.keyExchange, algorithm: KeyExchangeAlgorithm.ecdhKeyExchangeStandard.rawValue))
        XCTAssertFalse(rsa.isSupported(.sign, algorithm: "algid:sign:RSA:no-such-thing"))
        // Padding must fit the modulus: 1024-bit RSA (128 bytes) cannot do OAEP-SHA512 (130) or
        // PSS-SHA512 signing, but can do OAEP-SHA384 (98).
        let oaep512 = EncryptionAlgorithm.rsaEncryptionOAEPSHA512.rawValue
        XCTAssertFalse(
            AsymmetricKey.isSupported(
                .encrypt, algorithm: oaep512, keyAlgorithm: .rsa, isPrivate: false, sizeInBits: 1024))
        XCTAssertFalse(
            AsymmetricKey.isSupported(.sign, algorithm: pss512, keyAlgorithm: .rsa, isPrivate: true, sizeInBits: 1024))
        XCTAssertTrue(
            AsymmetricKey.isSupported(
                .decrypt, algorithm: EncryptionAlgorithm.rsaEncryptionOAEPSHA384.rawValue,
                keyAlgorithm: .rsa, isPrivate: true, sizeInBits: 1024))
        XCTAssertTrue(
            AsymmetricKey.isSupported(
                .encrypt, algorithm: oaep512, keyAlgorithm: .rsa, isPrivate: false, sizeInBits: 2048))
    }

    func testAlgorithmStringsAreApples() {
        // A few spelled out here, as they appear in Apple's SecKeyAdaptors.m, so a typo in the enum fails.
        XCTAssertEqual(
            SignatureAlgorithm.ecdsaSignatureMessageX962SHA256.rawValue, "algid:sign:ECDSA:message-X962:SHA256")
        XCTAssertEqual(
            SignatureAlgorithm.rsaSignatureDigestPSSSHA384.rawValue, "algid:sign:RSA:digest-PSS:SHA384:SHA384:48")
        XCTAssertEqual(EncryptionAlgorithm.rsaEncryptionOAEPSHA256.rawValue, "algid:encrypt:RSA:OAEP:SHA256")
        XCTAssertEqual(
            EncryptionAlgorithm.eciesEncryptionCofactorVariableIVX963SHA256AESGCM.rawValue,
            "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV")
        XCTAssertEqual(
            KeyExchangeAlgorithm.ecdhKeyExchangeStandardX963SHA256.rawValue, "algid:keyexchange:ECDH:KDFX963:SHA256")
        XCTAssertEqual(
            SignatureAlgorithm.ecdsaSignatureDigestRFC4754SHA384.rawValue, "algid:sign:ECDSA:digest-RFC4754:SHA384")
        XCTAssertEqual(
            SignatureAlgorithm.ecdsaSignatureMessageRFC4754SHA1.rawValue, "algid:sign:ECDSA:message-RFC4754:SHA1")
        // RSA (22), ECDSA X9.62 (11) and RFC 4754 (12): Apple's RSA and ECDSA ones but the two MD5 ones and
        // the SPI "algid:sign:RSA:raw-cc" (SecKeyAdaptors.m).
        XCTAssertEqual(SignatureAlgorithm.allCases.count, 45)
        XCTAssertEqual(EncryptionAlgorithm.allCases.count, 30)
        XCTAssertEqual(Set(SignatureAlgorithm.allCases.map(\.rawValue)).count, 45)
        for algorithm in SignatureAlgorithm.allCases where algorithm.rawValue.contains("SHA") {
            XCTAssertNotNil(algorithm.digest, algorithm.rawValue)
        }
    }
}
