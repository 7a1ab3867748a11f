import Foundation
import Latchkey
import LatchkeyCrypto
import XCTest

/// OSX/sec/Security/Regressions/secitem/si-40-seckey.c (RSA keys), ported to the public library against
/// the real agent. Apple's test calls the legacy functions (SecKeyGeneratePair, SecKeyRawSign/RawVerify,
/// SecKeyEncrypt/Decrypt, SecKeyDigestAndSign/Verify, SecKeyGetSize); each is ported to the SecKeyAlgorithm
/// function Apple's SecKey.m maps it to (a padding to its algorithm, an OID to the message algorithm).
///
/// Not ported, and why:
/// - testkeygen(768) and the 768-bit runs of the other tests: latchkey generates RSA keys of 1024 to 4096
///   bits (README, differences); those tests run at 1024 bits instead.
/// - kSecPaddingPKCS1MD2/MD5 signatures: MD2 and MD5 algorithms are not implemented (Apple refuses them too).
/// - testsupportedalgos' "privKey doesn't support encrypt" and "pubKey supports decrypt", and testsignverify's
///   "SecKeyVerifySignature fails with the private key": latchkey verifies and encrypts with a private key's
///   public half, and a public key never decrypts (README, differences).
/// - si-40-seckey's legacy error codes (errSSLCrypto for a failed verification): the SecKeyAlgorithm
///   functions report errSecVerifyFailed, which is what is checked.
/// - testspki: SecKeyCopySubjectPublicKeyInfo and SecKeyCreateFromSubjectPublicKeyInfoData are SPI.
/// - si-40-seckey-custom.c: custom SecKey classes (SecKeyCreate with a descriptor) are SPI.
final class SecKeyRSATests: ConformanceTestCase {
    private func sizeInBits(_ key: SecKey) -> Int? {
        (SecKeyCopyAttributes(key) as? [String: Any])?[kSecAttrKeySizeInBits as String] as? Int
    }

    private func sign(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data) -> (Data?, Int?) {
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(key, algorithm, data as CFData, &error) as Data?
        return (signature, code(&error))
    }

    private func verify(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data, _ signature: Data) -> Bool {
        var error: Unmanaged<CFError>?
        defer { _ = code(&error) }
        return SecKeyVerifySignature(key, algorithm, data as CFData, signature as CFData, &error)
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, test_encrypt_decrypt()
    private func encryptDecrypt(_ publicKey: SecKey, _ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, bytes: Int)
        throws
    {
        let maxLength: Int
        switch algorithm {
        case .rsaEncryptionRaw: maxLength = bytes
        case .rsaEncryptionOAEPSHA1: maxLength = bytes - 2 - 2 * 20
        default: maxLength = bytes - 11
        }
        var secret = Data((0..<maxLength + 2).map { _ in UInt8.random(in: 0...255) })
        if algorithm == .rsaEncryptionRaw {
            secret[0] = 0  // below the modulus
            secret[1] = 128
        }
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecKeyCreateEncryptedData(publicKey, algorithm, secret as CFData, &error), "encrypt secret (overflow)")
        XCTAssertEqual(code(&error), Int(errSecParam), "encrypt secret (overflow)")
        let message = secret.prefix(maxLength)
        let encrypted = try XCTUnwrap(
            SecKeyCreateEncryptedData(publicKey, algorithm, message as CFData, &error), "encrypt secret")
        let decrypted =
            try XCTUnwrap(
                SecKeyCreateDecryptedData(privateKey, algorithm, encrypted, &error), "decrypt secret") as Data
        // Apple's legacy SecKeyDecrypt drops a raw block's leading zero; kSecKeyAlgorithmRSAEncryptionRaw keeps
        // the block's size.
        XCTAssertEqual(decrypted.count, message.count, "correct length")
        XCTAssertEqual(decrypted, message, "verify secret")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testdigestandsignalg() and testdigestandsign()
    private func digestAndSign(_ privateKey: SecKey, _ publicKey: SecKey) {
        let algorithms: [SecKeyAlgorithm] = [
            .rsaSignatureMessagePKCS1v15SHA1, .rsaSignatureMessagePKCS1v15SHA224, .rsaSignatureMessagePKCS1v15SHA256,
            .rsaSignatureMessagePKCS1v15SHA384, .rsaSignatureMessagePKCS1v15SHA512,
        ]
        for algorithm in algorithms {
            var data = Data(count: 256)
            let (made, _) = sign(privateKey, algorithm, data)
            guard var signature = made else {
                XCTFail("digest and sign \(algorithm)")
                continue
            }
            XCTAssertTrue(verify(publicKey, algorithm, data, signature), "digest and verify \(algorithm)")
            signature[signature.count - 1] ^= 1
            XCTAssertFalse(verify(publicKey, algorithm, data, signature), "digest and verify bad sig \(algorithm)")
            signature[signature.count - 1] ^= 1
            data[0] ^= 0xff
            XCTAssertFalse(verify(publicKey, algorithm, data, signature), "digest and verify bad digest \(algorithm)")
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testkeygen()
    private func keygen(_ bits: Int) throws {
        let bytes = (bits + 7) / 8
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeRSA, bits)
        XCTAssertEqual(sizeInBits(publicKey), bits, "public key size is ok")
        XCTAssertEqual(sizeInBits(privateKey), bits, "private key size is ok")

        // SecKeyRawSign with kSecPaddingPKCS1: PKCS#1 v1.5 padding around the input, at most k - 11 bytes.
        let something = Data((0..<bytes - 11).map { _ in UInt8.random(in: 0...255) })
        var (signature, status) = sign(privateKey, .rsaSignatureDigestPKCS1v15Raw, something + Data([0]))
        XCTAssertNil(signature, "sign overflow")
        XCTAssertEqual(status, Int(errSecParam), "sign overflow")
        (signature, _) = sign(privateKey, .rsaSignatureDigestPKCS1v15Raw, something)
        XCTAssertNotNil(signature, "sign something")
        XCTAssertTrue(
            verify(publicKey, .rsaSignatureDigestPKCS1v15Raw, something, signature ?? Data()), "verify sig on something"
        )

        // kSecPaddingPKCS1SHA1 over a digest whose high bits are set (the ASN.1 encoder's torture test).
        let digest = Data((0..<64).map { UInt8(0x80 | $0) })
        let sha1 = digest.prefix(20)
        (signature, _) = sign(privateKey, .rsaSignatureDigestPKCS1v15SHA1, sha1)
        let sha1Signature = try XCTUnwrap(signature, "sign sha1 digest")
        XCTAssertTrue(
            verify(publicKey, .rsaSignatureDigestPKCS1v15SHA1, sha1, sha1Signature), "verify sig on sha1 digest")

        // "Inspect signature": the public operation on the signature gives 00 01 FF…FF 00 DigestInfo.
        var error: Unmanaged<CFError>?
        let block = try XCTUnwrap(
            SecKeyCreateEncryptedData(publicKey, .rsaEncryptionRaw, sha1Signature as CFData, &error) as Data?,
            "inspect signature")
        let encoded = block.drop { $0 == 0 }
        XCTAssertEqual(encoded.count, bytes - 1, "got signature")
        let afterPadding = encoded.drop { $0 != 0 }
        XCTAssertEqual(afterPadding.count, 16 + 20, "successful decode")  // 00 ‖ SHA-1 DigestInfo prefix ‖ digest

        let pkcs1Overhead = 232
        let sizes: [(SecKeyAlgorithm, Int)] = [
            (.rsaSignatureDigestPKCS1v15SHA224, 28), (.rsaSignatureDigestPKCS1v15SHA256, 32),
            (.rsaSignatureDigestPKCS1v15SHA384, 48), (.rsaSignatureDigestPKCS1v15SHA512, 64),
        ]
        for (algorithm, length) in sizes where bits > length * 8 + pkcs1Overhead {
            (signature, _) = sign(privateKey, algorithm, digest.prefix(length))
            XCTAssertNotNil(signature, "sign \(algorithm)")
            XCTAssertTrue(
                verify(publicKey, algorithm, digest.prefix(length), signature ?? Data()), "verify \(algorithm)")
        }

        try encryptDecrypt(publicKey, privateKey, .rsaEncryptionRaw, bytes: bytes)
        try encryptDecrypt(publicKey, privateKey, .rsaEncryptionPKCS1, bytes: bytes)
        try encryptDecrypt(publicKey, privateKey, .rsaEncryptionOAEPSHA1, bytes: bytes)
        digestAndSign(privateKey, publicKey)

        for key in [privateKey, publicKey] {
            XCTAssertEqual(add([kSecValueRef: key]).status, errSecSuccess, "add key")
            XCTAssertEqual(delete([kSecValueRef: key]), errSecSuccess, "delete key")
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, tests(): testkeygen(1024), testkeygen(2056)
    func testKeygen() throws {
        try keygen(1024)
        try keygen(2056)  // a strange size, for the edge cases of padding
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testkeygen2()
    func testKeygen2() throws {
        let name = UUID().uuidString
        var publicAttributes: [CFString: Any] = [kSecAttrLabel: name + "-Public-40"]
        var privateAttributes: [CFString: Any] = [kSecAttrLabel: name + "-Private-40"]
        let (privateKey, publicKey) = try generatePair(
            kSecAttrKeyTypeRSA, 1024,
            [kSecAttrIsPermanent: true, kSecPublicKeyAttrs: publicAttributes, kSecPrivateKeyAttrs: privateAttributes])
        XCTAssertEqual(sizeInBits(publicKey), 1024, "public key size is ok")
        XCTAssertEqual(sizeInBits(privateKey), 1024, "private key size is ok")

        publicAttributes[kSecClass] = kSecClassKey
        publicAttributes[kSecReturnRef] = true
        privateAttributes[kSecClass] = kSecClassKey
        privateAttributes[kSecReturnRef] = true
        privateAttributes[kSecAttrCanSign] = true
        let (publicStatus, publicItem) = copy(publicAttributes)
        XCTAssertEqual(publicStatus, errSecSuccess, "retrieve pub key by label")
        let (privateStatus, privateItem) = copy(privateAttributes)
        XCTAssertEqual(privateStatus, errSecSuccess, "retrieve priv key by label and kSecAttrCanSign")
        let publicKey2 = try XCTUnwrap(publicItem as? SecKey)
        let privateKey2 = try XCTUnwrap(privateItem as? SecKey)

        let something = Data("something".utf8)
        let (signature, _) = sign(privateKey2, .rsaSignatureDigestPKCS1v15Raw, something)
        XCTAssertNotNil(signature, "sign something")
        XCTAssertTrue(
            verify(publicKey2, .rsaSignatureDigestPKCS1v15Raw, something, signature ?? Data()),
            "verify sig on something")
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecKeyCreateEncryptedData(publicKey2, .rsaSignatureDigestPKCS1v15SHA1, something as CFData, &error),
            "encrypt something with invalid padding")
        _ = code(&error)

        XCTAssertEqual(delete(publicAttributes), errSecSuccess, "delete generated pub key")
        XCTAssertEqual(delete(privateAttributes), errSecSuccess, "delete generated priv key")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testsupportedalgos() (see the list above)
    func testSupportedAlgorithms() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeRSA, 1024)
        XCTAssertEqual(sizeInBits(publicKey), 1024, "public key size is ok")
        XCTAssertEqual(sizeInBits(privateKey), 1024, "private key size is ok")
        let sign: [SecKeyAlgorithm] = [
            .rsaSignatureRaw, .rsaSignatureDigestPKCS1v15SHA1, .rsaSignatureMessagePKCS1v15SHA1,
            .rsaSignatureDigestPKCS1v15SHA224, .rsaSignatureMessagePKCS1v15SHA224, .rsaSignatureDigestPKCS1v15SHA256,
            .rsaSignatureMessagePKCS1v15SHA256, .rsaSignatureDigestPKCS1v15SHA384, .rsaSignatureMessagePKCS1v15SHA384,
            .rsaSignatureDigestPKCS1v15SHA512, .rsaSignatureMessagePKCS1v15SHA512,
        ]
        for algorithm in sign {
            XCTAssertTrue(
                SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm), "privKey supports sign \(algorithm)")
            XCTAssertTrue(
                SecKeyIsAlgorithmSupported(publicKey, .verify, algorithm), "pubKey supports verify \(algorithm)")
            XCTAssertTrue(
                SecKeyIsAlgorithmSupported(privateKey, .verify, algorithm), "privKey supports verify \(algorithm)")
            XCTAssertFalse(SecKeyIsAlgorithmSupported(publicKey, .sign, algorithm), "pubKey doesn't sign \(algorithm)")
        }
        XCTAssertFalse(SecKeyIsAlgorithmSupported(privateKey, .sign, .ecdsaSignatureDigestX962), "no ECDSA")
        XCTAssertFalse(SecKeyIsAlgorithmSupported(privateKey, .verify, .ecdsaSignatureDigestX962), "no ECDSA")
        let crypt: [SecKeyAlgorithm] = [
            .rsaEncryptionRaw, .rsaEncryptionPKCS1, .rsaEncryptionOAEPSHA1, .rsaEncryptionOAEPSHA224,
            .rsaEncryptionOAEPSHA256,
        ]
        for algorithm in crypt {
            XCTAssertTrue(SecKeyIsAlgorithmSupported(privateKey, .decrypt, algorithm), "privKey decrypts \(algorithm)")
            XCTAssertTrue(SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm), "pubKey encrypts \(algorithm)")
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testcreatewithdata()
    func testCreateWithData() throws {
        try KeyCreationChecks.run(self, type: kSecAttrKeyTypeRSA, bits: 1024)
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testcopyattributes()
    func testCopyAttributes() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeRSA, 1024)
        let privateAttributes = try XCTUnwrap(SecKeyCopyAttributes(privateKey) as? [String: Any])
        let publicAttributes = try XCTUnwrap(SecKeyCopyAttributes(publicKey) as? [String: Any])
        let expected: [(CFString, CFBoolean, CFBoolean)] = [  // attribute, private key, public key
            (kSecAttrCanEncrypt, kCFBooleanFalse, kCFBooleanTrue),
            (kSecAttrCanDecrypt, kCFBooleanTrue, kCFBooleanTrue),  // "our RSA public key can even decrypt"
            (kSecAttrCanDerive, kCFBooleanFalse, kCFBooleanFalse),
            (kSecAttrCanSign, kCFBooleanTrue, kCFBooleanFalse),
            (kSecAttrCanVerify, kCFBooleanFalse, kCFBooleanTrue),
        ]
        for (name, forPrivate, forPublic) in expected {
            XCTAssertTrue(privateAttributes[name as String] as AnyObject === forPrivate, "priv key \(name)")
            XCTAssertTrue(publicAttributes[name as String] as AnyObject === forPublic, "pub key \(name)")
        }
        XCTAssertEqual(privateAttributes[kSecAttrKeyClass as String] as? String, kSecAttrKeyClassPrivate as String)
        XCTAssertEqual(publicAttributes[kSecAttrKeyClass as String] as? String, kSecAttrKeyClassPublic as String)
        XCTAssertEqual(privateAttributes[kSecAttrKeyType as String] as? String, kSecAttrKeyTypeRSA as String)
        XCTAssertEqual(publicAttributes[kSecAttrKeyType as String] as? String, kSecAttrKeyTypeRSA as String)
        XCTAssertEqual(privateAttributes[kSecAttrKeySizeInBits as String] as? NSNumber, 1024)
        XCTAssertEqual(publicAttributes[kSecAttrKeySizeInBits as String] as? NSNumber, 1024)
        XCTAssertEqual(
            privateAttributes[kSecAttrApplicationLabel as String] as? Data,
            publicAttributes[kSecAttrApplicationLabel as String] as? Data,
            "priv key and pub key kSecAttrApplicationLabel differ")
        KeyAttributeChecks.assertApplesDictionary(privateAttributes, isPrivate: true)
        KeyAttributeChecks.assertApplesDictionary(publicAttributes, isPrivate: false)
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testcopypublickey()
    func testCopyPublicKey() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeRSA, 1024)
        XCTAssertEqual(SecKeyCopyPublicKey(privateKey), publicKey, "pub key from priv key and pub key differ")
        XCTAssertEqual(SecKeyCopyPublicKey(publicKey), publicKey, "pub key from pub key and pub key differ")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-40-seckey.c, testsignverify() (see the list above)
    func testSignVerify() throws {
        let (privateKey, publicKey) = try generatePair(kSecAttrKeyTypeRSA, 1024)
        let testData = Data("test".utf8)
        let algorithms: [(SecKeyAlgorithm, DigestAlgorithm?)] = [
            (.rsaSignatureRaw, nil), (.rsaSignatureDigestPKCS1v15SHA1, .sha1),
            (.rsaSignatureDigestPKCS1v15SHA224, .sha224),
            (.rsaSignatureDigestPKCS1v15SHA256, .sha256), (.rsaSignatureDigestPKCS1v15SHA384, .sha384),
            (.rsaSignatureDigestPKCS1v15SHA512, .sha512), (.rsaSignatureMessagePKCS1v15SHA1, nil),
            (.rsaSignatureMessagePKCS1v15SHA224, nil), (.rsaSignatureMessagePKCS1v15SHA256, nil),
            (.rsaSignatureMessagePKCS1v15SHA384, nil), (.rsaSignatureMessagePKCS1v15SHA512, nil),
        ]
        for (algorithm, hash) in algorithms {
            let incompatible: SecKeyAlgorithm =
                algorithm == .rsaSignatureRaw ? .rsaSignatureDigestPKCS1v15SHA1 : .rsaSignatureRaw
            let dataToSign = try hash.map { try digest($0, testData) } ?? testData
            XCTAssertNil(sign(publicKey, algorithm, dataToSign).0, "SecKeyCreateSignature with pub key \(algorithm)")
            let signature = try XCTUnwrap(
                sign(privateKey, algorithm, dataToSign).0, "SecKeyCreateSignature \(algorithm)")
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
}
