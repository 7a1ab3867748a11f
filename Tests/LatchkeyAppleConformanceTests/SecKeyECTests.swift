import Foundation
import Latchkey
import LatchkeyCrypto
import XCTest

/// OSX/sec/Security/Regressions/secitem/si-41-sececkey.c (elliptic-curve keys), ported to the public library
/// against the real agent. The legacy functions Apple's test calls are ported to the SecKeyAlgorithm functions
/// Apple's SecKey.m maps them to (kSecPaddingPKCS1 and kSecPaddingNone: ECDSA X9.62 over a digest;
/// kSecPaddingSigRaw: RFC 4754; SecKeyDigestAndSign with ECDSA-with-SHA1: the SHA-1 message algorithm;
/// SecKeyCreateECPrivateKey: SecKeyCreateWithData with the X9.63 form of the same key).
///
/// Not ported, and why:
/// - the P-192 and P-224 runs (testkeygen(192), testkeygen2(224), testkeyexchange(192), …): latchkey's keys
///   are P-256, P-384 and P-521 (README, differences); the tests that ran at 192 bits run at 256.
/// - testkeywrap: `_SecKeyCopyWrapKey` / `_SecKeyCopyUnwrapKey` (RFC 6637 PGP key wrapping) are SPI.
/// - testsupportedalgos' "privKey doesn't support verify" and testsignverify's "SecKeyVerifySignature fails
///   with the private key": latchkey verifies with a private key's public half (README, differences).
final class SecKeyECTests: ConformanceTestCase {
    private func sign(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data) -> Data? {
        var error: Unmanaged<CFError>?
        defer { _ = code(&error) }
        return SecKeyCreateSignature(key, algorithm, data as CFData, &error) as Data?
    }

    private func verify(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data, _ signature: Data) -> Bool {
        var error: Unmanaged<CFError>?
        defer { _ = code(&error) }
        return SecKeyVerifySignature(key, algorithm, data as CFData, signature as CFData, &error)
    }

    private func sizeInBits(_ key: SecKey) -> Int? {
        (SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrKeySizeInBits as String] as? Int
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testsignformat()
    func testSignFormat() throws {
        // EC_P256_KeyDER is a SEC1 ECPrivateKey: version, the scalar (7..<39), then [1] with the point (44…).
        let sec1 = try resource("apple/si-41-ec-p256-key.sec1.der")
        XCTAssertEqual(sec1.count, 109)
        let x963 = sec1[44..<109] + sec1[7..<39]
        var error: Unmanaged<CFError>?
        let privateKey = try XCTUnwrap(
            SecKeyCreateWithData(
                x963 as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeEC, kSecAttrKeyClass: kSecAttrKeyClassPrivate] as NSDictionary,
                &error), "import privkey")
        let publicData = try XCTUnwrap(
            SecKeyCopyExternalRepresentation(try XCTUnwrap(SecKeyCopyPublicKey(privateKey)), &error) as Data?,
            "pub key from priv key")
        let publicKey = try XCTUnwrap(
            SecKeyCreateWithData(
                publicData as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeEC, kSecAttrKeyClass: kSecAttrKeyClassPublic] as NSDictionary, &error),
            "recreate seckey")

        let digest = Data("012345678912345678901234".utf8)
        let derSignature = try resource("apple/si-41-ec-p256-signature.der")
        let rawSignature = try resource("apple/si-41-ec-p256-signature.raw.hex")
        XCTAssertTrue(verify(publicKey, .ecdsaSignatureDigestX962, digest, derSignature), "verify DER sig on something")
        XCTAssertTrue(verify(publicKey, .ecdsaSignatureRFC4754, digest, rawSignature), "verify RAW sig on something")
        XCTAssertFalse(
            verify(publicKey, .ecdsaSignatureRFC4754, digest, derSignature), "verify DER sig with RAW option")
        XCTAssertFalse(
            verify(publicKey, .ecdsaSignatureDigestX962, digest, rawSignature), "verify RAW sig with DER option")

        let newDER = try XCTUnwrap(sign(privateKey, .ecdsaSignatureDigestX962, digest), "sign DER sig on something")
        let newRaw = try XCTUnwrap(sign(privateKey, .ecdsaSignatureRFC4754, digest), "sign RAW sig on something")
        XCTAssertTrue(verify(publicKey, .ecdsaSignatureDigestX962, digest, newDER), "verify DER sig on something")
        XCTAssertTrue(verify(publicKey, .ecdsaSignatureRFC4754, digest, newRaw), "verify RAW sig on something")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testkeygen() with testdigestandsign()
    func testKeygen() throws {
        for bits in [256, 384, 521] {
            let (privateKey, publicKey) = try generatePair(
                kSecAttrKeyTypeEC, bits, [kSecUseDataProtectionKeychain: true])
            XCTAssertEqual(sizeInBits(publicKey), bits, "public key size is ok")
            XCTAssertEqual(sizeInBits(privateKey), bits, "private key size is ok")
            let something = Data("something".utf8)
            let signature = try XCTUnwrap(sign(privateKey, .ecdsaSignatureDigestX962, something), "sign something")
            XCTAssertTrue(verify(publicKey, .ecdsaSignatureDigestX962, something, signature), "verify sig on something")

            var data = Data(count: 256)
            var digestSignature = try XCTUnwrap(
                sign(privateKey, .ecdsaSignatureMessageX962SHA1, data), "digest and sign")
            XCTAssertTrue(verify(publicKey, .ecdsaSignatureMessageX962SHA1, data, digestSignature), "digest and verify")
            digestSignature[0] ^= 0xff
            XCTAssertFalse(verify(publicKey, .ecdsaSignatureMessageX962SHA1, data, digestSignature), "bad sig")
            digestSignature[0] ^= 0xff
            data[0] ^= 0xff
            XCTAssertFalse(verify(publicKey, .ecdsaSignatureMessageX962SHA1, data, digestSignature), "bad digest")

            for key in [privateKey, publicKey] {
                XCTAssertEqual(add([kSecValueRef: key]).status, errSecSuccess, "add key (\(bits))")
                XCTAssertEqual(delete([kSecValueRef: key]), errSecSuccess, "delete key (\(bits))")
            }
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testkeygen2()
    func testKeygen2() throws {
        for bits in [256, 384, 521] {
            let name = UUID().uuidString
            var publicAttributes: [CFString: Any] = [kSecAttrLabel: name + "-Public-41"]
            var privateAttributes: [CFString: Any] = [kSecAttrLabel: name + "-Private-41"]
            let (privateKey, publicKey) = try generatePair(
                kSecAttrKeyTypeEC, bits,
                [
                    kSecUseDataProtectionKeychain: true, kSecAttrIsPermanent: true,
                    kSecPublicKeyAttrs: publicAttributes,
                    kSecPrivateKeyAttrs: privateAttributes,
                ])
            XCTAssertEqual(sizeInBits(publicKey), bits, "public key size is ok")
            XCTAssertEqual(sizeInBits(privateKey), bits, "private key size is ok")
            publicAttributes[kSecClass] = kSecClassKey
            publicAttributes[kSecReturnRef] = true
            privateAttributes[kSecClass] = kSecClassKey
            privateAttributes[kSecReturnRef] = true
            privateAttributes[kSecAttrCanSign] = true
            let (publicStatus, publicItem) = copy(publicAttributes)
            XCTAssertEqual(publicStatus, errSecSuccess, "retrieve pub key by label")
            let publicKey2 = try XCTUnwrap(publicItem as? SecKey, "got valid object")
            let (privateStatus, privateItem) = copy(privateAttributes)
            XCTAssertEqual(privateStatus, errSecSuccess, "retrieve priv key by label and kSecAttrCanSign")
            let privateKey2 = try XCTUnwrap(privateItem as? SecKey, "got valid object")
            let something = Data("something".utf8)
            let signature = try XCTUnwrap(sign(privateKey2, .ecdsaSignatureDigestX962, something), "sign something")
            XCTAssertTrue(
                verify(publicKey2, .ecdsaSignatureDigestX962, something, signature), "verify sig on something")
            XCTAssertEqual(delete(publicAttributes), errSecSuccess, "delete generated pub key")
            XCTAssertEqual(delete(privateAttributes), errSecSuccess, "delete generated priv key")
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testkeyexchange()
    func testKeyExchange() throws {
        let algorithms: [SecKeyAlgorithm] = [
            .ecdhKeyExchangeStandard, .ecdhKeyExchangeStandardX963SHA1, .ecdhKeyExchangeStandardX963SHA224,
            .ecdhKeyExchangeStandardX963SHA256, .ecdhKeyExchangeStandardX963SHA384, .ecdhKeyExchangeStandardX963SHA512,
            .ecdhKeyExchangeCofactor, .ecdhKeyExchangeCofactorX963SHA1, .ecdhKeyExchangeCofactorX963SHA224,
            .ecdhKeyExchangeCofactorX963SHA256, .ecdhKeyExchangeCofactorX963SHA384, .ecdhKeyExchangeCofactorX963SHA512,
        ]
        let parameters =
            [
                kSecKeyKeyExchangeParameterRequestedSize: 273,  // a strange size, to test borderline conditions
                kSecKeyKeyExchangeParameterSharedInfo: Data("sharedInput".utf8),
            ] as NSDictionary
        for bits in [256, 384, 521] {
            let (private1, public1) = try generatePair(kSecAttrKeyTypeEC, bits, [kSecAttrIsPermanent: false])
            let (private2, public2) = try generatePair(kSecAttrKeyTypeEC, bits, [kSecAttrIsPermanent: false])
            for algorithm in algorithms {
                var error: Unmanaged<CFError>?
                let secret1 = SecKeyCopyKeyExchangeResult(private1, algorithm, public2, parameters, &error) as Data?
                XCTAssertNotNil(secret1, "\(algorithm) (\(bits))")
                _ = code(&error)
                let secret2 = SecKeyCopyKeyExchangeResult(private2, algorithm, public1, parameters, &error) as Data?
                XCTAssertNotNil(secret2, "\(algorithm) (\(bits))")
                _ = code(&error)
                XCTAssertEqual(secret1, secret2, "results of key exchange are equal")
                if algorithm != .ecdhKeyExchangeCofactor && algorithm != .ecdhKeyExchangeStandard {
                    XCTAssertEqual(secret1?.count, 273, "generated response has expected length")
                }
            }
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testsupportedalgos() (see the list above)
    func testSupportedAlgorithms() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeEC, 256, [kSecAttrIsPermanent: false])
        let sign: [SecKeyAlgorithm] = [
            .ecdsaSignatureRFC4754, .ecdsaSignatureDigestRFC4754, .ecdsaSignatureDigestRFC4754SHA1,
            .ecdsaSignatureDigestRFC4754SHA224, .ecdsaSignatureDigestRFC4754SHA256, .ecdsaSignatureDigestRFC4754SHA384,
            .ecdsaSignatureDigestRFC4754SHA512, .ecdsaSignatureDigestX962, .ecdsaSignatureDigestX962SHA1,
            .ecdsaSignatureDigestX962SHA224, .ecdsaSignatureDigestX962SHA256, .ecdsaSignatureDigestX962SHA384,
            .ecdsaSignatureDigestX962SHA512, .ecdsaSignatureMessageX962SHA1, .ecdsaSignatureMessageX962SHA224,
            .ecdsaSignatureMessageX962SHA256, .ecdsaSignatureMessageX962SHA384, .ecdsaSignatureMessageX962SHA512,
        ]
        for algorithm in sign {
            XCTAssertTrue(
                SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "privKey supports sign \(algorithm)")
            XCTAssertTrue(
                SecKeyIsAlgorithmSupported(publicKey, .verify, algorithm), "pubKey supports verify \(algorithm)")
            XCTAssertFalse(SecKeyIsAlgorithmSupported(publicKey, .sign, algorithm), "pubKey doesn't sign \(algorithm)")
        }
        let exchange: [SecKeyAlgorithm] = [
            .ecdhKeyExchangeStandard, .ecdhKeyExchangeStandardX963SHA1, .ecdhKeyExchangeStandardX963SHA224,
            .ecdhKeyExchangeStandardX963SHA256, .ecdhKeyExchangeStandardX963SHA384, .ecdhKeyExchangeStandardX963SHA512,
            .ecdhKeyExchangeCofactor, .ecdhKeyExchangeCofactorX963SHA1, .ecdhKeyExchangeCofactorX963SHA224,
            .ecdhKeyExchangeCofactorX963SHA256, .ecdhKeyExchangeCofactorX963SHA384, .ecdhKeyExchangeCofactorX963SHA512,
        ]
        for algorithm in exchange {
            XCTAssertTrue(SecKeyIsAlgorithmSupported(privateKey, .keyExchange, algorithm), "privKey \(algorithm)")
            XCTAssertFalse(SecKeyIsAlgorithmSupported(publicKey, .keyExchange, algorithm), "pubKey \(algorithm)")
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testcreatewithdata()
    func testCreateWithData() throws {
        try KeyCreationChecks.run(self, type: kSecAttrKeyTypeEC, bits: 256)
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testcopyattributes()
    func testCopyAttributes() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeEC, 256, [kSecAttrIsPermanent: false])
        let privateAttributes = try XCTUnwrap(SecKeyCopyAttributes(privateKey) as? [String: Any])
        let publicAttributes = try XCTUnwrap(SecKeyCopyAttributes(publicKey) as? [String: Any])
        let expected: [(CFString, CFBoolean, CFBoolean)] = [  // attribute, private key, public key
            (kSecAttrCanEncrypt, kCFBooleanFalse, kCFBooleanTrue),
            (kSecAttrCanDecrypt, kCFBooleanTrue, kCFBooleanFalse),
            (kSecAttrCanDerive, kCFBooleanTrue, kCFBooleanFalse), (kSecAttrCanSign, kCFBooleanTrue, kCFBooleanFalse),
            (kSecAttrCanVerify, kCFBooleanFalse, kCFBooleanTrue),
        ]
        for (name, forPrivate, forPublic) in expected {
            XCTAssertTrue(privateAttributes[name as String] as AnyObject === forPrivate, "priv key \(name)")
            XCTAssertTrue(publicAttributes[name as String] as AnyObject === forPublic, "pub key \(name)")
        }
        XCTAssertEqual(privateAttributes[kSecAttrKeyClass as String] as? String, kSecAttrKeyClassPrivate as String)
        XCTAssertEqual(publicAttributes[kSecAttrKeyClass as String] as? String, kSecAttrKeyClassPublic as String)
        XCTAssertEqual(privateAttributes[kSecAttrKeyType as String] as? String, kSecAttrKeyTypeEC as String)
        XCTAssertEqual(publicAttributes[kSecAttrKeyType as String] as? String, kSecAttrKeyTypeEC as String)
        XCTAssertEqual(privateAttributes[kSecAttrKeySizeInBits as String] as? NSNumber, 256)
        XCTAssertEqual(publicAttributes[kSecAttrKeySizeInBits as String] as? NSNumber, 256)
        XCTAssertEqual(
            privateAttributes[kSecAttrApplicationLabel as String] as? Data,
            publicAttributes[kSecAttrApplicationLabel as String] as? Data,
            "priv key and pub key kSecAttrApplicationLabel differ")
        KeyAttributeChecks.assertApplesDictionary(privateAttributes, isPrivate: true, rsa: false)
        KeyAttributeChecks.assertApplesDictionary(publicAttributes, isPrivate: false, rsa: false)
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testcopypublickey()
    func testCopyPublicKey() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeEC, 256, [kSecAttrIsPermanent: false])
        XCTAssertEqual(SecKeyCopyPublicKey(privateKey), publicKey, "pub key from priv key and pub key differ")
        XCTAssertEqual(SecKeyCopyPublicKey(publicKey), publicKey, "pub key from pub key and pub key differ")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-41-sececkey.c, testsignverify() (see the list above)
    func testSignVerify() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeEC, 256, [kSecAttrIsPermanent: false])
        let testData = Data("test".utf8)
        let algorithms: [(SecKeyAlgorithm, Bool)] = [  // algorithm, input is a SHA-256 digest
            (.ecdsaSignatureRFC4754, true), (.ecdsaSignatureDigestRFC4754, true), (.ecdsaSignatureDigestX962, true),
            (.ecdsaSignatureMessageX962SHA1, false), (.ecdsaSignatureMessageX962SHA224, false),
            (.ecdsaSignatureMessageX962SHA256, false), (.ecdsaSignatureMessageX962SHA384, false),
            (.ecdsaSignatureMessageX962SHA512, false),
        ]
        for (index, (algorithm, digested)) in algorithms.enumerated() {
            let incompatible: SecKeyAlgorithm = index < 2 ? .ecdsaSignatureDigestX962 : .ecdsaSignatureDigestRFC4754
            let dataToSign = digested ? try digest(.sha256, testData) : testData
            XCTAssertNil(sign(publicKey, algorithm, dataToSign), "SecKeyCreateSignature with pub key \(algorithm)")
            let signature = try XCTUnwrap(sign(privateKey, algorithm, dataToSign), "SecKeyCreateSignature \(algorithm)")
            XCTAssertFalse(verify(publicKey, incompatible, dataToSign, signature), "wrong algorithm \(algorithm)")
            XCTAssertTrue(verify(publicKey, algorithm, dataToSign, signature), "SecKeyVerifySignature \(algorithm)")
            var modifiedSignature = signature
            modifiedSignature[0] ^= 0xff
            XCTAssertFalse(verify(publicKey, algorithm, dataToSign, modifiedSignature), "bad signature \(algorithm)")
            var modifiedData = dataToSign
            modifiedData[0] ^= 0xff
            XCTAssertFalse(verify(publicKey, algorithm, modifiedData, signature), "bad data \(algorithm)")
        }
    }

    // latchkey: the RFC 4754 algorithms with a key the agent holds (a permanent one, read back from the keychain),
    // for each curve and hash: `r ‖ s`, each half the curve's byte size, verified by the public key under each
    // RFC 4754 name that fits, and as the X9.62 signature it converts to.
    func testRFC4754AlgorithmsWithAKeyTheAgentHolds() throws {
        let message = Data("rfc 4754".utf8)
        let hashes: [(DigestAlgorithm, SecKeyAlgorithm, SecKeyAlgorithm, SecKeyAlgorithm)] = [
            (.sha1, .ecdsaSignatureMessageRFC4754SHA1, .ecdsaSignatureDigestRFC4754SHA1, .ecdsaSignatureDigestX962SHA1),
            (
                .sha224, .ecdsaSignatureMessageRFC4754SHA224, .ecdsaSignatureDigestRFC4754SHA224,
                .ecdsaSignatureDigestX962SHA224
            ),
            (
                .sha256, .ecdsaSignatureMessageRFC4754SHA256, .ecdsaSignatureDigestRFC4754SHA256,
                .ecdsaSignatureDigestX962SHA256
            ),
            (
                .sha384, .ecdsaSignatureMessageRFC4754SHA384, .ecdsaSignatureDigestRFC4754SHA384,
                .ecdsaSignatureDigestX962SHA384
            ),
            (
                .sha512, .ecdsaSignatureMessageRFC4754SHA512, .ecdsaSignatureDigestRFC4754SHA512,
                .ecdsaSignatureDigestX962SHA512
            ),
        ]
        for (bits, width) in [(256, 32), (384, 48), (521, 66)] {
            let label = "rfc4754-\(bits)"
            let (_, publicKey) = try generatePair(
                kSecAttrKeyTypeEC, bits,
                [kSecAttrIsPermanent: true, kSecPrivateKeyAttrs: [kSecAttrLabel: label] as NSDictionary])
            let (status, item) = copy([
                kSecClass: kSecClassKey, kSecAttrLabel: label, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                kSecReturnRef: true,
            ])
            XCTAssertEqual(status, errSecSuccess)
            let privateKey = try XCTUnwrap(item as? SecKey)
            for (hash, messageAlgorithm, digestAlgorithm, x962) in hashes {
                let digest = try self.digest(hash, message)
                for (algorithm, input) in [
                    (messageAlgorithm, message), (digestAlgorithm, digest), (.ecdsaSignatureDigestRFC4754, digest),
                ] {
                    let what = "P-\(bits) \(algorithm)"
                    XCTAssertTrue(SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), what)
                    let signature = try XCTUnwrap(sign(privateKey, algorithm, input), what)
                    XCTAssertEqual(signature.count, 2 * width, what)
                    XCTAssertTrue(verify(publicKey, messageAlgorithm, message, signature), what)
                    XCTAssertTrue(verify(publicKey, digestAlgorithm, digest, signature), what)
                    XCTAssertTrue(verify(publicKey, .ecdsaSignatureRFC4754, digest, signature), what)
                    XCTAssertTrue(verify(publicKey, x962, digest, Self.x962(signature, width)), what)
                    XCTAssertFalse(verify(publicKey, x962, digest, signature), what)
                }
                XCTAssertNil(sign(privateKey, digestAlgorithm, digest + [0]), "bad digest size")
            }
        }
    }

    /// The DER `Ecdsa-Sig-Value` of an `r ‖ s` signature with halves of `width` bytes.
    private static func x962(_ raw: Data, _ width: Int) -> Data {
        func integer(_ half: Data) -> [UInt8] {
            var bytes = Array(half.drop { $0 == 0 })
            if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
            return [0x02, UInt8(bytes.count)] + bytes
        }
        let body = integer(raw.prefix(width)) + integer(raw.suffix(width))
        return Data([0x30] + (body.count < 0x80 ? [UInt8(body.count)] : [0x81, UInt8(body.count)]) + body)
    }
}
