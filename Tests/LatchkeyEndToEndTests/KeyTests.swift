import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Keys in the keychain through the public API, against the real agent: the seed's "store a key with
/// a tag, find it by tag and type" flow (seeds/002), keys generated straight into the keychain, the
/// lock states, `kSecAttrIsExtractable`, the attributes Apple derives, and the pitfalls from seeds/003.
final class KeyTests: AgentTestCase {
    private func randomKey(_ type: CFString, _ bits: Int, _ extra: [CFString: Any] = [:]) throws -> SecKey {
        var parameters: [CFString: Any] = [kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits]
        for (name, value) in extra { parameters[name] = value }
        var error: Unmanaged<CFError>?
        guard let key = SecKeyCreateRandomKey(parameters as NSDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return key
    }

    private func status(of error: Unmanaged<CFError>?) -> Int? {
        error?.takeRetainedValue().code
    }

    /// seeds/002: add a key with an application tag, get it back by tag and key type, use it.
    func testSeedStoreKeyWithTagThenFindItByTagAndType() throws {
        try createKeychain()
        for (type, bits) in [(kSecAttrKeyTypeECSECPrimeRandom, 256), (kSecAttrKeyTypeRSA, 2048)] {
            let key = try randomKey(type, bits)
            let tag = "com.example.keys.mykey-\(bits)".data(using: .utf8)!
            let addquery: [String: Any] = [
                kSecClass as String: kSecClassKey,
                kSecAttrApplicationTag as String: tag,
                kSecValueRef as String: key,
            ]
            XCTAssertEqual(SecItemAdd(addquery as CFDictionary, nil), errSecSuccess)

            let getquery: [String: Any] = [
                kSecClass as String: kSecClassKey,
                kSecAttrApplicationTag as String: tag,
                kSecAttrKeyType as String: type,
                kSecReturnRef as String: true,
            ]
            var item: CFTypeRef?
            XCTAssertEqual(SecItemCopyMatching(getquery as CFDictionary, &item), errSecSuccess)
            let found = item as! SecKey
            XCTAssertNil(found.local, "a private key read from the keychain stays in the agent")

            // The stored key signs (in the agent); the original's public key verifies.
            let algorithm: SecKeyAlgorithm =
                bits == 256 ? .ecdsaSignatureMessageX962SHA256 : .rsaSignatureMessagePKCS1v15SHA256
            let message = Data("sign me".utf8) as CFData
            var error: Unmanaged<CFError>?
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(found, algorithm, message, &error), "\(String(describing: error))")
            XCTAssertTrue(SecKeyVerifySignature(SecKeyCopyPublicKey(key)!, algorithm, message, signature, &error))
            XCTAssertFalse(SecKeyVerifySignature(key, algorithm, Data("other".utf8) as CFData, signature, &error))
            XCTAssertEqual(status(of: error), Int(errSecVerifyFailed))
        }
    }

    /// Adding through kSecValueRef derives Apple's attributes; a second add is a duplicate.
    func testAddedKeyHasApplesDerivedAttributesAndIsUnique() throws {
        try createKeychain()
        let key = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, 384)
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemAdd([kSecValueRef: key, kSecReturnAttributes: true] as NSDictionary, &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        let publicBytes = try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(key)!, nil) as Data?)
        XCTAssertEqual(publicBytes.count, 1 + 2 * 48)
        XCTAssertEqual(attributes[kSecAttrApplicationLabel as String] as? Data, try sha1(publicBytes))
        XCTAssertEqual(attributes[kSecAttrKeyClass as String] as? Int, 1)
        XCTAssertEqual(attributes[kSecAttrKeyType as String] as? Int, 73)
        XCTAssertEqual(attributes[kSecAttrKeySizeInBits as String] as? Int, 384)
        XCTAssertEqual(attributes[kSecAttrEffectiveKeySize as String] as? Int, 384)
        XCTAssertEqual(attributes[kSecAttrCanSign as String] as? Int, 1)
        XCTAssertEqual(attributes[kSecAttrCanVerify as String] as? Int, 0)
        XCTAssertEqual(attributes[kSecAttrCanDecrypt as String] as? Int, 1)
        XCTAssertEqual(attributes[kSecAttrIsExtractable as String] as? Int, 1)
        XCTAssertEqual(attributes[kSecAttrAccessible as String] as? String, "ak")

        XCTAssertEqual(SecItemAdd([kSecValueRef: key] as NSDictionary, nil), errSecDuplicateItem)
        // A different tag is a different item (atag is in the uniqueness constraint).
        XCTAssertEqual(
            SecItemAdd([kSecValueRef: key, kSecAttrApplicationTag: Data("t".utf8)] as NSDictionary, nil), errSecSuccess)
        // The public key is an item of its own class.
        XCTAssertEqual(SecItemAdd([kSecValueRef: SecKeyCopyPublicKey(key)!] as NSDictionary, nil), errSecSuccess)

        // Widening with kSecMatchLimitAll, narrowing by class and size.
        var all: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecMatchLimit: kSecMatchLimitAll,
                    kSecReturnAttributes: true,
                ] as NSDictionary, &all), errSecSuccess)
        XCTAssertEqual((all as? [Any])?.count, 3)
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecMatchLimit: kSecMatchLimitAll,
                    kSecAttrKeyClass: kSecAttrKeyClassPublic, kSecReturnRef: true,
                ] as NSDictionary, &all),
            errSecSuccess)
        let publics = try XCTUnwrap(all as? [SecKey])
        XCTAssertEqual(publics.count, 1)
        XCTAssertNotNil(publics[0].local, "a public key is used in the caller's process")
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassKey, kSecAttrKeySizeInBits: 256] as NSDictionary, nil),
            errSecItemNotFound)

        // Delete by the key object: what it implies (its label, class and type) matches both private
        // items, whatever their tags; the public key is another class of key and stays.
        XCTAssertEqual(SecItemDelete([kSecValueRef: key] as NSDictionary), errSecSuccess)
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate] as NSDictionary, nil),
            errSecItemNotFound)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassKey] as NSDictionary, nil), errSecSuccess)
    }

    /// A key generated with kSecAttrIsPermanent never enters the process; it follows the lock states.
    func testPermanentKeyIsGeneratedInTheAgentAndFollowsTheLock() throws {
        try createKeychain()
        let tag = Data("com.example.permanent".utf8)
        let key = try randomKey(
            kSecAttrKeyTypeECSECPrimeRandom, 256,
            [
                kSecPrivateKeyAttrs: [
                    kSecAttrIsPermanent: true, kSecAttrApplicationTag: tag,
                    kSecAttrLabel: "signing key",
                ]
            ])
        XCTAssertNil(key.local)
        var found: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecAttrApplicationTag: tag,
                    kSecReturnAttributes: true,
                ] as NSDictionary, &found), errSecSuccess)
        XCTAssertEqual((found as? [String: Any])?[kSecAttrLabel as String] as? String, "signing key")
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPublic] as NSDictionary, nil),
            errSecItemNotFound, "only the private key was made permanent")

        let message = Data("hello".utf8) as CFData
        var error: Unmanaged<CFError>?
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))

        try KeychainControl.lock(all: false)
        XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertEqual(status(of: error), Int(errSecInteractionNotAllowed))
        // Verification needs only the public half, which the reference carries.
        try KeychainControl.unlock(password: .init(copying: Array("pw".utf8)))
        let signature = try XCTUnwrap(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        try KeychainControl.lock(all: false)
        XCTAssertTrue(SecKeyVerifySignature(key, .ecdsaSignatureMessageX962SHA256, message, signature, &error))
        // Delete still works while locked.
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassKey, kSecAttrApplicationTag: tag] as NSDictionary), errSecSuccess)
    }

    /// kSecAttrIsExtractable = false: no export, no kSecReturnData, and it cannot be turned back on.
    func testNonExtractableKeyCannotLeave() throws {
        try createKeychain()
        let tag = Data("kept-in".utf8)
        let key = try randomKey(
            kSecAttrKeyTypeRSA, 2048,
            [kSecAttrIsPermanent: true, kSecAttrIsExtractable: false, kSecAttrApplicationTag: tag])
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecKeyCopyExternalRepresentation(key, &error))
        XCTAssertEqual(status(of: error), Int(errSecDataNotAvailable))
        let query: NSDictionary = [
            kSecClass: kSecClassKey, kSecAttrApplicationTag: tag, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
        ]
        var data: CFTypeRef?
        let withData = query.mutableCopy() as! NSMutableDictionary
        withData[kSecReturnData] = true
        XCTAssertEqual(SecItemCopyMatching(withData, &data), errSecDataNotAvailable)
        XCTAssertEqual(SecItemUpdate(query, [kSecAttrIsExtractable: true] as NSDictionary), errSecParam)
        // Nor may it move to a weaker class (Always: its class key is on disk unprotected) or pass for a
        // public key.
        XCTAssertEqual(
            SecItemUpdate(query, [kSecAttrAccessible: kSecAttrAccessibleAlways] as NSDictionary), errSecParam)
        XCTAssertEqual(SecItemUpdate(query, [kSecAttrKeyClass: kSecAttrKeyClassPublic] as NSDictionary), errSecParam)
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecValueRef: key, kSecAttrApplicationTag: Data("moved".utf8),
                    kSecAttrAccessible: kSecAttrAccessibleAlways,
                ] as NSDictionary, nil), errSecParam)
        XCTAssertEqual(
            SecItemUpdate(query, [kSecAttrLabel: "renamed"] as NSDictionary), errSecSuccess,
            "other attributes may change")
        // An add whose result cannot be given adds nothing.
        XCTAssertEqual(
            SecItemAdd(
                [kSecValueRef: key, kSecAttrApplicationTag: Data("copy".utf8), kSecReturnData: true] as NSDictionary,
                &data), errSecDataNotAvailable)
        // Copying it into a new item through its reference keeps the restriction.
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecValueRef: key, kSecAttrApplicationTag: Data("copy".utf8),
                    kSecAttrIsExtractable: true,
                ] as NSDictionary, nil), errSecSuccess)
        let copy =
            [kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("copy".utf8), kSecReturnData: true] as NSDictionary
        XCTAssertEqual(SecItemCopyMatching(copy, &data), errSecDataNotAvailable)
        // It still decrypts what its public key encrypts.
        let secret = Data("for your eyes".utf8) as CFData
        let sealed = try XCTUnwrap(
            SecKeyCreateEncryptedData(SecKeyCopyPublicKey(key)!, .rsaEncryptionOAEPSHA256, secret, &error))
        XCTAssertEqual(
            SecKeyCreateDecryptedData(key, .rsaEncryptionOAEPSHA256, sealed, &error) as Data?, secret as Data)

        // An extractable keychain key exports through the agent, and the bytes are the key.
        let open = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, 256, [kSecAttrIsPermanent: true])
        let exported = try XCTUnwrap(SecKeyCopyExternalRepresentation(open, &error) as Data?)
        XCTAssertEqual(exported.count, 1 + 3 * 32)
        let imported = try XCTUnwrap(
            SecKeyCreateWithData(
                exported as CFData,
                [
                    kSecAttrKeyType: kSecAttrKeyTypeEC,
                    kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                ] as NSDictionary, &error))
        XCTAssertEqual(
            SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(imported)!, nil) as Data?,
            SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(open)!, nil) as Data?)
    }

    /// Bad input: unknown types and sizes, a public key asked to sign, garbage key bytes.
    func testBadInputGivesAppleErrors() throws {
        try createKeychain()
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecKeyCreateRandomKey([kSecAttrKeyType: "99", kSecAttrKeySizeInBits: 256] as NSDictionary, &error))
        XCTAssertEqual(status(of: error), Int(errSecParam))
        XCTAssertNil(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits: 255] as NSDictionary, &error))
        XCTAssertNotNil(error)
        _ = error?.takeRetainedValue()
        error = nil
        let key = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, 256)
        XCTAssertNil(
            SecKeyCreateSignature(SecKeyCopyPublicKey(key)!, .ecdsaSignatureMessageX962SHA256, Data() as CFData, &error)
        )
        XCTAssertEqual(status(of: error), Int(errSecUnimplemented))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(key, .sign, .rsaSignatureMessagePKCS1v15SHA256))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(key, .sign, .ecdsaSignatureMessageX962SHA256))
        XCTAssertNil(
            SecKeyCreateWithData(
                Data([1, 2, 3]) as CFData,
                [
                    kSecAttrKeyType: kSecAttrKeyTypeEC,
                    kSecAttrKeyClass: kSecAttrKeyClassPublic,
                ] as NSDictionary, &error))
        XCTAssertNotNil(error)
        // Garbage stored as a key item's data: the item is kept, a reference to it cannot be made.
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassKey, kSecAttrKeyType: kSecAttrKeyTypeEC,
                    kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                    kSecValueData: Data([9, 9, 9]),
                ] as NSDictionary, nil), errSecSuccess)
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassKey, kSecReturnRef: true] as NSDictionary, nil), errSecDecode)
    }

    /// ECDH between a keychain key (in the agent) and a key in this process agrees both ways, raw and
    /// through the X9.63 KDF; ECIES encrypts to the keychain key.
    func testKeyExchangeAndECIESWithAKeychainKey() throws {
        try createKeychain()
        let stored = try randomKey(
            kSecAttrKeyTypeECSECPrimeRandom, 384, [kSecPrivateKeyAttrs: [kSecAttrIsPermanent: true]])
        let mine = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, 384)
        var error: Unmanaged<CFError>?
        for (algorithm, parameters) in [
            (SecKeyAlgorithm.ecdhKeyExchangeStandard, [:] as NSDictionary),
            (
                .ecdhKeyExchangeStandardX963SHA256,
                [
                    kSecKeyKeyExchangeParameterRequestedSize: 48,
                    kSecKeyKeyExchangeParameterSharedInfo: Data("context".utf8),
                ] as NSDictionary
            ),
        ] {
            let fromAgent =
                SecKeyCopyKeyExchangeResult(stored, algorithm, SecKeyCopyPublicKey(mine)!, parameters, &error) as Data?
            let fromHere =
                SecKeyCopyKeyExchangeResult(mine, algorithm, SecKeyCopyPublicKey(stored)!, parameters, &error) as Data?
            XCTAssertNotNil(fromAgent, "\(algorithm): \(String(describing: error?.takeRetainedValue()))")
            XCTAssertEqual(fromAgent, fromHere)
            XCTAssertEqual(fromAgent?.count, 48, "P-384 shared secret, or the 48 bytes asked for")
        }
        let plaintext = Data("sealed for the keychain key".utf8) as CFData
        let sealed = try XCTUnwrap(
            SecKeyCreateEncryptedData(
                SecKeyCopyPublicKey(stored)!,
                .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, plaintext, &error))
        XCTAssertEqual(
            SecKeyCreateDecryptedData(stored, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, sealed, &error)
                as Data?,
            plaintext as Data)
        var tampered = sealed as Data
        tampered[tampered.count - 1] ^= 1
        XCTAssertNil(
            SecKeyCreateDecryptedData(
                stored, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, tampered as CFData, &error))
        XCTAssertEqual(status(of: error), Int(errSecParam))
        // Support follows the key: PSS-SHA512 needs more than a 1024-bit modulus; no ECDH for RSA.
        let small = try randomKey(kSecAttrKeyTypeRSA, 1024)
        XCTAssertFalse(SecKeyIsAlgorithmSupported(small, .sign, .rsaSignatureMessagePSSSHA512))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(small, .sign, .rsaSignatureMessagePSSSHA256))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(small, .keyExchange, .ecdhKeyExchangeStandard))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(stored, .keyExchange, .ecdhKeyExchangeStandard))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(stored, .verify, .ecdsaSignatureMessageX962SHA384))
    }

    /// CryptoKit-style keys are stored as generic passwords holding the raw key bytes (Apple's guidance).
    func testRawKeyBytesAsGenericPassword() throws {
        try createKeychain()
        let raw = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "com.example.symmetric",
                    kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked, kSecUseDataProtectionKeychain: true,
                    kSecValueData: raw,
                ] as NSDictionary, nil), errSecSuccess)
        var out: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "com.example.symmetric",
                    kSecUseDataProtectionKeychain: true, kSecReturnData: true,
                ] as NSDictionary, &out),
            errSecSuccess)
        XCTAssertEqual(out as? Data, raw)
    }

    private func sha1(_ data: Data) throws -> Data {
        let path = NSTemporaryDirectory() + "lk-sha1-\(UUID().uuidString)"
        try data.write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let out = try TestProcess.run("/usr/bin/sha1sum", [path]).out
        let hex = Array(out.prefix(40))
        return Data(stride(from: 0, to: 40, by: 2).map { UInt8(String(hex[$0..<$0 + 2]), radix: 16)! })
    }
}
