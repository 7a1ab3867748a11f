import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Key exchange and the two-step decryptions with token keys (docs/TOKENS.md, "Operations"): ECDH on the
/// real SoftHSM2 token (C_DeriveKey), the KDF and AES-GCM in the agent, checked against the library's
/// software keys and the openssl tool.
final class TokenExchangeTests: TokenTestCase {
    private var error: Unmanaged<CFError>?

    private func softwareKey(_ bits: Int) throws -> SecKey {
        try XCTUnwrap(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: bits] as CFDictionary,
                &error))
    }

    /// The status of the last failed call.
    private func lastStatus() -> Int? {
        defer { error = nil }
        return error?.takeRetainedValue().code
    }

    /// The last failure, described.
    private func lastError() -> String {
        defer { error = nil }
        return String(describing: error?.takeRetainedValue())
    }

    /// Writes a key pair on `curve` that may derive (`CKA_DERIVE`, which pkcs11-tool sets only when asked)
    /// to the token `label` as `label`-`suffix` with CKA_ID `id`, and returns its private key once the agent
    /// shows it. Its public half stays in the test's files (`label`-`suffix`.pub), for the openssl tool.
    private func deriveKey(_ label: String, curve: String = "prime256v1", id: String = "04", suffix: String = "dh")
        throws -> SecKey
    {
        let base = "\(tokens)/\(label)-\(suffix)"
        try tool(
            "/usr/bin/openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\(curve)", "-out", base + ".key"])
        try tool("/usr/bin/openssl", ["pkey", "-in", base + ".key", "-pubout", "-out", base + ".pub"])
        for (file, type) in [(".key", "privkey"), (".pub", "pubkey")] {
            try tool(
                "/usr/bin/pkcs11-tool",
                [
                    "--module", Self.module, "--token-label", label, "--login", "--pin", Self.pin, "--write-object",
                    base + file, "--type", type, "--id", id, "--label", "\(label)-\(suffix)", "--usage-derive",
                ])
        }
        try FileManager.default.removeItem(atPath: base + ".key")
        return try privateKey("\(label)-\(suffix)")
    }

    /// The private key item labelled `label`, once the agent shows it.
    private func privateKey(_ label: String) throws -> SecKey {
        waitFor("the key \(label)") { tokenItems(kSecClassKey, [kSecAttrLabel: label]).count == 2 }
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecAttrLabel: label, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                    kSecReturnRef: true,
                ] as CFDictionary, &result), errSecSuccess)
        return try XCTUnwrap(result as! SecKey?)
    }

    /// A P-256 private key as SEC1 DER (`ECPrivateKey`), from Apple's external representation `04‖X‖Y‖K`.
    private func sec1(_ external: Data) -> Data {
        let point = external.prefix(65)
        let scalar = external.suffix(32)
        let oid: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        var der = Data([0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20]) + scalar
        der += Data([0xA0, 0x0A] + oid) + Data([0xA1, 0x44, 0x03, 0x42, 0x00]) + point
        return der
    }

    func testECDHOnTheTokenMatchesSoftwareKeysAndTheOpenSSLTool() throws {
        try makeToken("tok1")
        let tokenKey = try deriveKey("tok1")
        try answer(Self.pin)
        let tokenPublic = try XCTUnwrap(SecKeyCopyPublicKey(tokenKey))
        let mine = try softwareKey(256)
        let minePublic = try XCTUnwrap(SecKeyCopyPublicKey(mine))

        let raw = try XCTUnwrap(
            SecKeyCopyKeyExchangeResult(tokenKey, .ecdhKeyExchangeStandard, minePublic, [:] as CFDictionary, &error)
                as Data?, lastError())
        XCTAssertEqual(raw.count, 32)
        XCTAssertEqual(
            SecKeyCopyKeyExchangeResult(mine, .ecdhKeyExchangeStandard, tokenPublic, [:] as CFDictionary, &error)
                as Data?, raw)
        // The Cofactor variant is the same secret on P-256 (cofactor 1).
        XCTAssertEqual(
            SecKeyCopyKeyExchangeResult(tokenKey, .ecdhKeyExchangeCofactor, minePublic, [:] as CFDictionary, &error)
                as Data?, raw)

        // The openssl tool, with the software key's private half and the token key's public half.
        let external = try XCTUnwrap(SecKeyCopyExternalRepresentation(mine, &error) as Data?)
        let directory = tokens + "/ecdh"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try sec1(external).write(to: URL(fileURLWithPath: directory + "/mine.der"))
        try tool(
            "/usr/bin/openssl",
            [
                "pkeyutl", "-derive", "-keyform", "DER", "-inkey", directory + "/mine.der", "-peerkey",
                tokens + "/tok1-dh.pub", "-out", directory + "/secret",
            ])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: directory + "/secret")), raw)

        // X9.63 KDF with SHA-256 in the agent, on the token's secret: both sides agree, and so does
        // openssl's X963KDF over the raw secret.
        let sharedInfo = Data("token context".utf8)
        let parameters =
            [
                kSecKeyKeyExchangeParameterRequestedSize: 48, kSecKeyKeyExchangeParameterSharedInfo: sharedInfo,
            ] as CFDictionary
        let derived = try XCTUnwrap(
            SecKeyCopyKeyExchangeResult(tokenKey, .ecdhKeyExchangeStandardX963SHA256, minePublic, parameters, &error)
                as Data?, "\(String(describing: lastStatus()))")
        XCTAssertEqual(derived.count, 48)
        XCTAssertEqual(
            SecKeyCopyKeyExchangeResult(mine, .ecdhKeyExchangeStandardX963SHA256, tokenPublic, parameters, &error)
                as Data?, derived)
        XCTAssertEqual(
            SecKeyCopyKeyExchangeResult(tokenKey, .ecdhKeyExchangeCofactorX963SHA256, minePublic, parameters, &error)
                as Data?, derived)
        let hex = { (data: Data) in data.map { String(format: "%02x", $0) }.joined() }
        let kdf = try tool(
            "/usr/bin/openssl",
            [
                "kdf", "-keylen", "48", "-kdfopt", "digest:SHA256", "-kdfopt", "hexkey:" + hex(raw), "-kdfopt",
                "hexinfo:" + hex(sharedInfo), "X963KDF",
            ])
        XCTAssertEqual(
            kdf.replacingOccurrences(of: ":", with: "").lowercased().trimmingCharacters(in: .whitespacesAndNewlines),
            hex(derived))

        // The KDF variants need the size (as for software keys), and the peer must be on the key's curve.
        XCTAssertNil(
            SecKeyCopyKeyExchangeResult(
                tokenKey, .ecdhKeyExchangeStandardX963SHA256, minePublic, [:] as CFDictionary, &error))
        XCTAssertEqual(lastStatus(), Int(errSecParam))
        let other = try XCTUnwrap(SecKeyCopyPublicKey(try softwareKey(384)))
        XCTAssertNil(
            SecKeyCopyKeyExchangeResult(tokenKey, .ecdhKeyExchangeStandard, other, [:] as CFDictionary, &error))
        XCTAssertEqual(lastStatus(), Int(errSecParam))
        // One PIN for all of it.
        XCTAssertEqual(promptsShown(), 1)
    }

    func testP521SecretsAreTheFullFieldSize() throws {
        try makeToken("tok1")
        let tokenKey = try deriveKey("tok1", curve: "secp521r1", id: "05", suffix: "p521")
        try answer(Self.pin)
        let mine = try softwareKey(521)
        let raw = try XCTUnwrap(
            SecKeyCopyKeyExchangeResult(
                tokenKey, .ecdhKeyExchangeStandard, try XCTUnwrap(SecKeyCopyPublicKey(mine)), [:] as CFDictionary,
                &error) as Data?, lastError())
        XCTAssertEqual(raw.count, 66)
        XCTAssertEqual(
            SecKeyCopyKeyExchangeResult(
                mine, .ecdhKeyExchangeStandard, try XCTUnwrap(SecKeyCopyPublicKey(tokenKey)), [:] as CFDictionary,
                &error) as Data?, raw)
        let plaintext = Data("for the P-521 key".utf8)
        let sealed = try XCTUnwrap(
            SecKeyCreateEncryptedData(
                try XCTUnwrap(SecKeyCopyPublicKey(tokenKey)), .eciesEncryptionStandardVariableIVX963SHA512AESGCM,
                plaintext as CFData, &error) as Data?)
        XCTAssertEqual(
            SecKeyCreateDecryptedData(
                tokenKey, .eciesEncryptionStandardVariableIVX963SHA512AESGCM, sealed as CFData, &error)
                as Data?, plaintext, lastError())
    }

    func testECIESDecryptsThroughTheTokenAndATamperedCiphertextGivesNothing() throws {
        try makeToken("tok1")
        let tokenKey = try deriveKey("tok1")
        try answer(Self.pin)
        let tokenPublic = try XCTUnwrap(SecKeyCopyPublicKey(tokenKey))
        let plaintext = Data("sealed for the card".utf8)
        for algorithm: SecKeyAlgorithm in [
            .eciesEncryptionStandardX963SHA256AESGCM, .eciesEncryptionStandardVariableIVX963SHA256AESGCM,
            .eciesEncryptionCofactorX963SHA256AESGCM, .eciesEncryptionCofactorVariableIVX963SHA384AESGCM,
        ] {
            let sealed = try XCTUnwrap(
                SecKeyCreateEncryptedData(tokenPublic, algorithm, plaintext as CFData, &error) as Data?)
            XCTAssertEqual(
                SecKeyCreateDecryptedData(tokenKey, algorithm, sealed as CFData, &error) as Data?, plaintext,
                "\(algorithm): \(String(describing: lastStatus()))")
            // A changed byte of the data, of the tag, or of the ephemeral key: errSecParam, no plaintext.
            for index in [70, sealed.count - 1, 10] {
                var tampered = sealed
                tampered[index] ^= 0x01
                XCTAssertNil(SecKeyCreateDecryptedData(tokenKey, algorithm, tampered as CFData, &error))
                XCTAssertEqual(lastStatus(), Int(errSecParam), "\(algorithm), byte \(index)")
            }
            XCTAssertNil(SecKeyCreateDecryptedData(tokenKey, algorithm, sealed.prefix(70) as CFData, &error))
            XCTAssertEqual(lastStatus(), Int(errSecParam))
        }
        XCTAssertEqual(promptsShown(), 1)
    }

    func testRSAOAEPAESGCMUnwrapsOnTheTokenAndHashesItLacksAreUnimplemented() throws {
        try makeToken("tok1")
        waitForItems(tokens: 1)
        try answer(Self.pin)
        let rsaKey = try XCTUnwrap(identityKey("tok1-rsa"))
        let rsaPublic = try XCTUnwrap(SecKeyCopyPublicKey(rsaKey))
        let plaintext = Data("wrapped for the card".utf8)
        // SoftHSM 2.6.1 unwraps OAEP with SHA-1 only.
        let sealed = try XCTUnwrap(
            SecKeyCreateEncryptedData(rsaPublic, .rsaEncryptionOAEPSHA1AESGCM, plaintext as CFData, &error) as Data?)
        XCTAssertEqual(
            SecKeyCreateDecryptedData(rsaKey, .rsaEncryptionOAEPSHA1AESGCM, sealed as CFData, &error) as Data?,
            plaintext, "\(String(describing: lastStatus()))")
        for index in [10, 256 + 3, sealed.count - 1] {
            var tampered = sealed
            tampered[index] ^= 0x80
            XCTAssertNil(SecKeyCreateDecryptedData(rsaKey, .rsaEncryptionOAEPSHA1AESGCM, tampered as CFData, &error))
            XCTAssertEqual(lastStatus(), Int(errSecParam), "byte \(index)")
        }
        // It refuses the other hashes (CKR_ARGUMENTS_BAD at C_DecryptInit): errSecUnimplemented, not a
        // wrong answer.
        for algorithm: SecKeyAlgorithm in [.rsaEncryptionOAEPSHA256AESGCM, .rsaEncryptionOAEPSHA512AESGCM] {
            let other = try XCTUnwrap(
                SecKeyCreateEncryptedData(rsaPublic, algorithm, plaintext as CFData, &error) as Data?)
            XCTAssertNil(SecKeyCreateDecryptedData(rsaKey, algorithm, other as CFData, &error))
            XCTAssertEqual(lastStatus(), Int(errSecUnimplemented), "\(algorithm)")
        }
        // ECIES with an RSA key, key exchange with an RSA key: not for this key.
        XCTAssertNil(
            SecKeyCreateDecryptedData(rsaKey, .eciesEncryptionStandardX963SHA256AESGCM, sealed as CFData, &error))
        XCTAssertEqual(lastStatus(), Int(errSecUnimplemented))
        let peer = try XCTUnwrap(SecKeyCopyPublicKey(try softwareKey(256)))
        XCTAssertNil(SecKeyCopyKeyExchangeResult(rsaKey, .ecdhKeyExchangeStandard, peer, [:] as CFDictionary, &error))
        XCTAssertEqual(lastStatus(), Int(errSecUnimplemented))
        XCTAssertEqual(promptsShown(), 1)
    }

    func testTheExchangeAsksForThePINOnceAndACancelledPINIsUserCanceled() throws {
        try makeToken("tok1")
        let tokenKey = try deriveKey("tok1")
        let peer = try XCTUnwrap(SecKeyCopyPublicKey(try softwareKey(256)))
        try answer()  // cancel
        XCTAssertNil(SecKeyCopyKeyExchangeResult(tokenKey, .ecdhKeyExchangeStandard, peer, [:] as CFDictionary, &error))
        XCTAssertEqual(lastStatus(), Int(errSecUserCanceled))
        XCTAssertEqual(promptsShown(), 1)
        try answer(Self.pin)
        try? FileManager.default.removeItem(atPath: shown)
        for _ in 0..<3 {
            XCTAssertNotNil(
                SecKeyCopyKeyExchangeResult(tokenKey, .ecdhKeyExchangeStandard, peer, [:] as CFDictionary, &error))
        }
        XCTAssertEqual(promptsShown(), 1)
    }

    func testAKeyWithoutCKADeriveMayNotExchange() throws {
        try makeToken("tok1")
        // A P-256 key that may sign but not derive (p11tool leaves CKA_DERIVE false), with its public half.
        let base = tokens + "/tok1-nd"
        try tool(
            "/usr/bin/openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", base + ".key"])
        try tool("/usr/bin/openssl", ["pkey", "-in", base + ".key", "-pubout", "-out", base + ".pub"])
        for (option, file) in [("--load-privkey", ".key"), ("--load-pubkey", ".pub")] {
            try tool(
                "/usr/bin/env",
                [
                    "GNUTLS_PIN=\(Self.pin)", "/usr/bin/p11tool", "--provider", Self.module, "--login", "--write",
                    "pkcs11:token=tok1", option, base + file, "--label", "tok1-nd", "--id", "03", "--mark-sign",
                ])
        }
        try FileManager.default.removeItem(atPath: base + ".key")
        let key = try privateKey("tok1-nd")
        try answer(Self.pin)
        let peer = try XCTUnwrap(SecKeyCopyPublicKey(try softwareKey(256)))
        XCTAssertNil(SecKeyCopyKeyExchangeResult(key, .ecdhKeyExchangeStandard, peer, [:] as CFDictionary, &error))
        XCTAssertEqual(lastStatus(), Int(errSecParam))
        // ECIES runs ECDH too: the same answer.
        let sealed = try XCTUnwrap(
            SecKeyCreateEncryptedData(
                try XCTUnwrap(SecKeyCopyPublicKey(key)), .eciesEncryptionStandardX963SHA256AESGCM,
                Data("x".utf8) as CFData, &error) as Data?)
        XCTAssertNil(SecKeyCreateDecryptedData(key, .eciesEncryptionStandardX963SHA256AESGCM, sealed as CFData, &error))
        XCTAssertEqual(lastStatus(), Int(errSecParam))
        // It still signs.
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, &error))
        XCTAssertEqual(promptsShown(), 1)
    }
}
