import Foundation
import XCTest

@testable import Latchkey

/// Smart-card tokens as keychain items (docs/TOKENS.md) against the real agent and real SoftHSM2 tokens:
/// items and identities, signatures checked by the openssl tool, the PIN through the prompter, removal
/// and insertion while the agent runs, two tokens at once, and seed 000's flows.
final class TokenTests: TokenTestCase {
    func testTokenItemsCarryTheTokenIDAndApplesAttributesAndFormIdentities() throws {
        let serial = try makeToken("tok1")
        let id = "softhsm2:\(serial)"
        waitForItems(tokens: 1)
        let certificates = tokenItems(kSecClassCertificate)
        XCTAssertEqual(certificates.count, 2)
        for certificate in certificates {
            XCTAssertEqual(certificate[kSecAttrTokenID as String] as? String, id)
            XCTAssertEqual(certificate[kSecAttrAccessGroup as String] as? String, "com.apple.token")
            XCTAssertNotNil(certificate[kSecAttrIssuer as String])
            XCTAssertNotNil(certificate[kSecAttrSerialNumber as String])
        }
        // The private keys (hidden by SoftHSM until the login) are there, with klbl = SHA-1 of the public key.
        let privateKeys = tokenItems(kSecClassKey, [kSecAttrKeyClass: kSecAttrKeyClassPrivate])
        XCTAssertEqual(privateKeys.count, 2)
        let hashes = Set(certificates.compactMap { $0[kSecAttrPublicKeyHash as String] as? Data })
        XCTAssertEqual(hashes.count, 2)
        for key in privateKeys {
            XCTAssertEqual(key[kSecAttrTokenID as String] as? String, id)
            XCTAssertEqual((key[kSecAttrCanSign as String] as? NSNumber)?.intValue, 1)
            XCTAssertEqual((key[kSecAttrIsExtractable as String] as? NSNumber)?.intValue, 0)
            let label = try XCTUnwrap(key[kSecAttrApplicationLabel as String] as? Data)
            XCTAssertTrue(hashes.contains(label), "klbl is the SHA-1 of the public key, as the certificate's pkhh")
        }
        // Each certificate's public key hash names its private key: two identities.
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassIdentity, kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true]
                    as CFDictionary,
                &result), errSecSuccess)
        XCTAssertEqual((result as? [[String: Any]])?.count, 2)
        // A query without the token group sees token items beside the keychain's own.
        XCTAssertEqual(
            SecItemAdd(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "stored", kSecValueData: Data("x".utf8)]
                    as CFDictionary, nil), errSecSuccess)
        result = nil
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassKey, kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true]
                    as CFDictionary,
                &result), errSecSuccess)
        XCTAssertEqual((result as? [[String: Any]])?.count, 4)
        // The key's value never leaves the token.
        result = nil
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecAttrTokenID: id, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                    kSecReturnData: true,
                ]
                    as CFDictionary, &result), errSecDataNotAvailable)
        // A key reference says which token holds it, as Apple's SecKeyCopyAttributes does; a key made in the
        // process says nothing of the kind.
        let key = try XCTUnwrap(identityKey("tok1-ec"))
        let attributes = try XCTUnwrap(SecKeyCopyAttributes(key) as? [String: Any])
        XCTAssertEqual(attributes[kSecAttrTokenID as String] as? String, id)
        XCTAssertEqual(attributes[kSecAttrIsSensitive as String] as? Bool, true)
        XCTAssertEqual(attributes[kSecAttrIsExtractable as String] as? Bool, false)
        let local = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as CFDictionary, nil))
        XCTAssertNil((SecKeyCopyAttributes(local) as? [String: Any])?[kSecAttrTokenID as String])
    }

    func testTokenItemsAreReadOnly() throws {
        let serial = try makeToken("tok1")
        waitForItems(tokens: 1)
        let id = "softhsm2:\(serial)"
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassKey, kSecAttrTokenID: id] as CFDictionary,
                [kSecAttrLabel: "renamed"] as CFDictionary), errSecParam)
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassKey, kSecAttrTokenID: id] as CFDictionary), errSecParam)
        let ref = try XCTUnwrap(tokenItems(kSecClassCertificate).first?[kSecValuePersistentRef as String] as? Data)
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassCertificate, kSecValuePersistentRef: ref] as CFDictionary), errSecParam)
        XCTAssertEqual(tokenItems(kSecClassKey).count, 4)
        XCTAssertEqual(tokenItems(kSecClassKey, [kSecAttrLabel: "renamed"]).count, 0)
        // A query that does not name tokens changes the stored items it matches, and no token item.
        var error: Unmanaged<CFError>?
        XCTAssertNotNil(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [kSecAttrIsPermanent: true, kSecAttrLabel: "stored"],
                ] as CFDictionary, &error))
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate] as CFDictionary,
                [kSecAttrLabel: "renamed"] as CFDictionary), errSecSuccess)
        var found: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecAttrLabel: "renamed", kSecMatchLimit: kSecMatchLimitAll,
                    kSecReturnAttributes: true,
                ] as CFDictionary,
                &found), errSecSuccess)
        XCTAssertEqual((found as? [Any])?.count, 1, "the stored key")
        XCTAssertEqual(tokenItems(kSecClassKey, [kSecAttrLabel: "renamed"]).count, 0)
        // No stored item claims a token's id: it would answer a query naming the token while it is away.
        for tokenID in [id, "softhsm2:elsewhere"] {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrAccount: "claims", kSecAttrTokenID: tokenID,
                        kSecValueData: Data("x".utf8),
                    ] as CFDictionary, nil), errSecParam)
        }
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassKey, kSecAttrLabel: "renamed"] as CFDictionary,
                [kSecAttrTokenID: "softhsm2:elsewhere"] as CFDictionary), errSecParam)
    }

    func testSignaturesAndDecryptionRunOnTheTokenAndTheOpenSSLToolVerifiesThem() throws {
        try makeToken("tok1")
        waitForItems(tokens: 1)
        try answer(Self.pin)
        let message = Data("signed on the token".utf8)
        let ecKey = try XCTUnwrap(identityKey("tok1-ec"))
        var error: Unmanaged<CFError>?
        let ecSignature = try XCTUnwrap(
            SecKeyCreateSignature(ecKey, .ecdsaSignatureMessageX962SHA256, message as CFData, &error) as Data?,
            "\(String(describing: error?.takeRetainedValue()))")
        try verifyWithOpenSSL(ecSignature, of: message, base: "tok1-ec")

        let rsaKey = try XCTUnwrap(identityKey("tok1-rsa"))
        let pkcs1 = try XCTUnwrap(
            SecKeyCreateSignature(rsaKey, .rsaSignatureMessagePKCS1v15SHA256, message as CFData, &error) as Data?)
        try verifyWithOpenSSL(pkcs1, of: message, base: "tok1-rsa")
        let pss = try XCTUnwrap(
            SecKeyCreateSignature(rsaKey, .rsaSignatureMessagePSSSHA256, message as CFData, &error) as Data?)
        try verifyWithOpenSSL(
            pss, of: message, base: "tok1-rsa",
            options: ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"])

        // Decryption: encrypted with the public half here, decrypted on the token. (SoftHSM 2.6 takes OAEP
        // with SHA-1 only; it refuses SHA-256 with CKR_ARGUMENTS_BAD.)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(rsaKey))
        for algorithm in [SecKeyAlgorithm.rsaEncryptionOAEPSHA1, .rsaEncryptionPKCS1] {
            let sealed = try XCTUnwrap(
                SecKeyCreateEncryptedData(publicKey, algorithm, Data("secret".utf8) as CFData, &error))
            let opened = SecKeyCreateDecryptedData(rsaKey, algorithm, sealed, &error) as Data?
            XCTAssertEqual(opened, Data("secret".utf8), "\(algorithm)")
        }
        // One PIN for the token session, shown with who asked and for which token.
        XCTAssertEqual(promptsShown(), 1)
        let text = try String(contentsOfFile: shown, encoding: .utf8)
        XCTAssertTrue(text.contains("tok1"), text)
        XCTAssertTrue(text.contains("LatchkeyPackageTests") || text.contains("xctest"), text)

        // Locking the keychain logs the token out: the next operation asks again.
        try KeychainControl.lock(all: false)
        XCTAssertNotNil(SecKeyCreateSignature(ecKey, .ecdsaSignatureMessageX962SHA256, message as CFData, &error))
        XCTAssertEqual(promptsShown(), 2)
    }

    func testWrongPINCancelAndRightPINAreToldApart() throws {
        try makeToken("tok1")
        waitForItems(tokens: 1)
        let key = try XCTUnwrap(identityKey("tok1-ec"))
        let message = Data("m".utf8) as CFData
        var error: Unmanaged<CFError>?
        try answer("9999")
        XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecAuthFailed))
        try answer()  // cancel
        try? FileManager.default.removeItem(atPath: shown)
        error = nil
        XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecUserCanceled))
        try answer(Self.pin)
        try? FileManager.default.removeItem(atPath: shown)
        error = nil
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
    }

    func testRemovalDropsTheItemsAndInsertionBringsThemBack() throws {
        let first = try makeToken("tok1")
        waitForItems(tokens: 1)
        try answer(Self.pin, Self.pin)
        let key = try XCTUnwrap(identityKey("tok1-ec"))
        let ref = try XCTUnwrap(
            tokenItems(kSecClassKey, [kSecAttrKeyClass: kSecAttrKeyClassPrivate]).first?[
                kSecValuePersistentRef as String]
                as? Data)
        var error: Unmanaged<CFError>?
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("a".utf8) as CFData, &error))

        try deleteToken("tok1")
        waitFor("the token's removal") { tokenItems(kSecClassKey).isEmpty }
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching([kSecValuePersistentRef: ref, kSecReturnAttributes: true] as CFDictionary, &result),
            errSecItemNotFound)
        error = nil
        XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("a".utf8) as CFData, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecItemNotFound))

        // A new token in its place: a new id, its own items, and a new login (the PIN is asked again).
        let second = try makeToken("tok1")
        XCTAssertNotEqual(first, second)
        waitForItems(tokens: 1)
        XCTAssertEqual(tokenItems(kSecClassKey, [kSecAttrTokenID: "softhsm2:\(second)"]).count, 4)
        let newKey = try XCTUnwrap(identityKey("tok1-ec"))
        XCTAssertNotNil(
            SecKeyCreateSignature(newKey, .ecdsaSignatureMessageX962SHA256, Data("b".utf8) as CFData, &error))
        XCTAssertEqual(promptsShown(), 2)
    }

    func testTwoTokensAtOnce() throws {
        let one = try makeToken("tok1")
        let two = try makeToken("tok2")
        waitForItems(tokens: 2)
        XCTAssertEqual(tokenItems(kSecClassKey, [kSecAttrTokenID: "softhsm2:\(one)"]).count, 4)
        XCTAssertEqual(tokenItems(kSecClassKey, [kSecAttrTokenID: "softhsm2:\(two)"]).count, 4)
        try answer(Self.pin, Self.pin)
        var error: Unmanaged<CFError>?
        for name in ["tok1-ec", "tok2-ec"] {
            let key = try XCTUnwrap(identityKey(name))
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("both".utf8) as CFData, &error)
                    as Data?)
            try verifyWithOpenSSL(signature, of: Data("both".utf8), base: name)
        }
        // One login per token.
        XCTAssertEqual(promptsShown(), 2)
    }

    /// Seed 000: a key found by its token id, and a persistent reference that is valid while the token is
    /// present and errSecItemNotFound once it is gone.
    func testSeedFlowsTokenIDQueryAndPersistentReference() throws {
        let serial = try makeToken("tok1")
        let tokenID = "softhsm2:\(serial)"
        waitForItems(tokens: 1)
        let getquery: [String: Any] = [
            kSecClass as String: kSecClassKey, kSecAttrTokenID as String: tokenID, kSecReturnRef as String: true,
        ]
        var item: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(getquery as CFDictionary, &item), errSecSuccess)
        XCTAssertNotNil(item as? SecKey)

        let refQuery: [String: Any] = [
            kSecClass as String: kSecClassKey, kSecAttrTokenID as String: tokenID,
            kSecReturnPersistentRef as String: true,
        ]
        var persistent: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(refQuery as CFDictionary, &persistent), errSecSuccess)
        let ref = try XCTUnwrap(persistent as? Data)
        var again: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching([kSecValuePersistentRef: ref, kSecReturnRef: true] as CFDictionary, &again),
            errSecSuccess)
        try deleteToken("tok1")
        waitFor("the token's removal") { tokenItems(kSecClassKey).isEmpty }
        XCTAssertEqual(
            SecItemCopyMatching([kSecValuePersistentRef: ref, kSecReturnRef: true] as CFDictionary, &again),
            errSecItemNotFound)
    }

    /// A public key with the CKA_ID of the user's certificate and key (another program wrote it on the
    /// token) does not become the public half of the user's private key: the first object wins.
    func testALaterPublicKeyWithTheSameIDDoesNotTakeOverTheKey() throws {
        _ = try makeToken("tok1")
        let base = "\(tokens)/other"
        try tool(
            "/usr/bin/openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", base + ".key"])
        try tool("/usr/bin/openssl", ["pkey", "-in", base + ".key", "-pubout", "-out", base + ".pub"])
        // The user's card holds a certificate and its private key, as many do, without a public key object.
        let login = ["--module", Self.module, "--token-label", "tok1", "--login", "--pin", Self.pin]
        try tool("/usr/bin/pkcs11-tool", login + ["--delete-object", "--type", "pubkey", "--id", "01"])
        try tool(
            "/usr/bin/pkcs11-tool",
            login + ["--write-object", base + ".pub", "--type", "pubkey", "--id", "01", "--label", "other"])
        waitForItems(tokens: 1)
        let hashes = Set(tokenItems(kSecClassCertificate).compactMap { $0[kSecAttrPublicKeyHash as String] as? Data })
        let privateKeys = tokenItems(kSecClassKey, [kSecAttrKeyClass: kSecAttrKeyClassPrivate])
        XCTAssertEqual(privateKeys.count, 2)
        XCTAssertEqual(
            Set(privateKeys.compactMap { $0[kSecAttrApplicationLabel as String] as? Data }), hashes,
            "each private key is its certificate's")
    }

    /// SecKeyCreateRandomKey with kSecAttrTokenID makes the pair on the token (C_GenerateKeyPair): the key
    /// is a token item at once, signs on the token, and its public half verifies the signature.
    func testKeysGeneratedOnTheToken() throws {
        let serial = try makeToken("tok1")
        waitForItems(tokens: 1)
        // The login's PIN for the first key; a confirmation for the second, the token being logged in.
        try answer(Self.pin, "yes")
        let tokenID = "softhsm2:\(serial)"
        for (type, bits, algorithm) in [
            (kSecAttrKeyTypeECSECPrimeRandom, 256, SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256),
            (kSecAttrKeyTypeRSA, 2048, .rsaSignatureMessagePSSSHA256),
        ] {
            var error: Unmanaged<CFError>?
            let key = try XCTUnwrap(
                SecKeyCreateRandomKey(
                    [
                        kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits, kSecAttrTokenID: tokenID,
                        kSecPrivateKeyAttrs: [
                            kSecAttrLabel: "made-\(bits)", kSecAttrApplicationTag: Data("t\(bits)".utf8),
                        ],
                    ] as CFDictionary, &error), "\(String(describing: error?.takeRetainedValue()))")
            let message = Data("made on the token".utf8) as CFData
            let signature = try XCTUnwrap(SecKeyCreateSignature(key, algorithm, message, &error))
            let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
            XCTAssertTrue(SecKeyVerifySignature(publicKey, algorithm, message, signature, &error))
            let found = tokenItems(
                kSecClassKey, [kSecAttrLabel: "made-\(bits)", kSecAttrKeyClass: kSecAttrKeyClassPrivate])
            XCTAssertEqual(found.count, 1)
            XCTAssertEqual(found.first?[kSecAttrTokenID as String] as? String, tokenID)
        }
        XCTAssertEqual(promptsShown(), 2, "one login for both keys, and a confirmation for the second")
        var error: Unmanaged<CFError>?
        let keys = tokenItems(kSecClassKey, [kSecAttrKeyClass: kSecAttrKeyClassPrivate]).count
        // Not a second key with the CKA_ID (application tag) of one the token has, nor an RSA key the
        // token would take minutes to make.
        for (type, bits, tag, status) in [
            (kSecAttrKeyTypeECSECPrimeRandom, 256, "t2048", errSecDuplicateItem),
            (kSecAttrKeyTypeRSA, 8192, "big", errSecParam),
        ] {
            XCTAssertNil(
                SecKeyCreateRandomKey(
                    [
                        kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits, kSecAttrTokenID: tokenID,
                        kSecPrivateKeyAttrs: [kSecAttrApplicationTag: Data(tag.utf8)],
                    ] as CFDictionary, &error))
            XCTAssertEqual(error?.takeRetainedValue().code, Int(status), "\(bits) bits, tag \(tag)")
            error = nil
        }
        XCTAssertEqual(tokenItems(kSecClassKey, [kSecAttrKeyClass: kSecAttrKeyClassPrivate]).count, keys)
        // Not on a token that is not there.
        XCTAssertNil(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecAttrTokenID: "softhsm2:none",
                ]
                    as CFDictionary, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecItemNotFound))
        // Nor in a Secure Enclave, which a PC does not have.
        error = nil
        XCTAssertNil(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecAttrTokenID: kSecAttrTokenIDSecureEnclave,
                ] as CFDictionary, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecUnimplemented))
    }
}
