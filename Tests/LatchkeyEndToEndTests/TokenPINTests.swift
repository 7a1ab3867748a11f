import Foundation
import XCTest

@testable import Latchkey

/// The PIN from an `LAContext`, the user's consent to keys made on a token, and which identities token
/// items form (docs/TOKENS.md §3 and §5), against the real agent and real SoftHSM2 tokens.
final class TokenPINTests: TokenTestCase {
    /// The private key `label` of the token, found with `context` (so that operations carry it).
    private func tokenKey(_ label: String, context: LAContext) throws -> SecKey {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassKey, kSecAttrAccessGroup: kSecAttrAccessGroupToken, kSecAttrLabel: label,
                kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecReturnRef: true, kSecUseAuthenticationContext: context,
            ] as CFDictionary, &result)
        XCTAssertEqual(status, errSecSuccess)
        return try XCTUnwrap(result as! SecKey?)
    }

    private func sign(_ key: SecKey) -> (Data?, Int) {
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, &error)
        return (signature as Data?, error?.takeRetainedValue().code ?? 0)
    }

    func testAContextsSmartCardPINLogsInWithoutAskingAndAWrongOneIsAuthFailed() throws {
        try makeToken("tok1")
        waitForItems(tokens: 1)
        let context = LAContext()
        XCTAssertFalse(context.isCredentialSet(.smartCardPIN))
        XCTAssertFalse(context.setCredential(Data(), type: .smartCardPIN), "an empty PIN")
        XCTAssertFalse(context.setCredential(Data(count: 257), type: .smartCardPIN), "a PIN over 256 bytes")
        XCTAssertTrue(context.setCredential(Data("9999".utf8), type: .smartCardPIN))
        XCTAssertTrue(context.isCredentialSet(.smartCardPIN))
        let key = try tokenKey("tok1-ec", context: context)
        try answer(Self.pin)  // were anyone asked, the right PIN would be given
        XCTAssertEqual(sign(key).1, Int(errSecAuthFailed), "the context's wrong PIN")
        XCTAssertEqual(promptsShown(), 0, "nobody is asked when the program gave the PIN")

        // One wrong PIN was entered since the token's last good login (CKF_USER_PIN_COUNT_LOW): a program's
        // PIN, even the right one, is no longer tried, so that no program can use up the card's tries.
        XCTAssertTrue(context.setCredential(Data(Self.pin.utf8), type: .smartCardPIN))
        XCTAssertEqual(sign(key).1, Int(errSecAuthFailed), "held back until the user logs in")
        XCTAssertEqual(promptsShown(), 0)
        // The user logs in (through the prompt), which restores the count; a lock logs the token out.
        XCTAssertEqual(sign(try XCTUnwrap(identityKey("tok1-ec"))).1, 0)
        XCTAssertEqual(promptsShown(), 1)
        try KeychainControl.lock(all: false)
        try? FileManager.default.removeItem(atPath: shown)
        let (signature, status) = sign(key)
        XCTAssertEqual(status, 0)
        try verifyWithOpenSSL(try XCTUnwrap(signature), of: Data("m".utf8), base: "tok1-ec")
        XCTAssertEqual(promptsShown(), 0, "the program's PIN logged in")

        // Removed again, the credential is no longer sent: the token is logged in now, so nothing is asked.
        XCTAssertTrue(context.setCredential(nil, type: .smartCardPIN))
        XCTAssertFalse(context.isCredentialSet(.smartCardPIN))
        XCTAssertEqual(sign(key).1, 0)
        XCTAssertEqual(promptsShown(), 0)
    }

    /// A context's PIN goes to the token it first logged in to, and no other: a program that uses keys of
    /// two cards with one context does not hand one card's PIN to the other.
    func testTheContextsPINStaysWithTheTokenItLoggedInTo() throws {
        try makeToken("tok1")
        try makeToken("tok2")
        waitForItems(tokens: 2)
        let context = LAContext()
        XCTAssertTrue(context.setCredential(Data(Self.pin.utf8), type: .smartCardPIN))
        XCTAssertEqual(sign(try tokenKey("tok1-ec", context: context)).1, 0)
        try answer()  // the user is asked for tok2's PIN, and cancels
        XCTAssertEqual(sign(try tokenKey("tok2-ec", context: context)).1, Int(errSecUserCanceled))
        XCTAssertEqual(promptsShown(), 1)
        // Set again, it may serve another token.
        XCTAssertTrue(context.setCredential(Data(Self.pin.utf8), type: .smartCardPIN))
        XCTAssertEqual(sign(try tokenKey("tok2-ec", context: context)).1, 0)
        XCTAssertEqual(promptsShown(), 1)
    }

    func testAContextThatMayNotInteractFailsWhereThePINWouldBeAsked() throws {
        try makeToken("tok1")
        waitForItems(tokens: 1)
        let context = LAContext()
        context.interactionNotAllowed = true
        let key = try tokenKey("tok1-ec", context: context)
        try answer(Self.pin)
        XCTAssertEqual(sign(key).1, Int(errSecInteractionNotAllowed))
        XCTAssertEqual(promptsShown(), 0)
        // With the PIN, no interaction is needed.
        XCTAssertTrue(context.setCredential(Data(Self.pin.utf8), type: .smartCardPIN))
        XCTAssertEqual(sign(key).1, 0)
    }

    private func makeKey(_ tokenID: String, label: String, context: LAContext? = nil) -> (SecKey?, Int) {
        var parameters: [CFString: Any] = [
            kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256, kSecAttrTokenID: tokenID,
            kSecPrivateKeyAttrs: [kSecAttrLabel: label],
        ]
        if let context { parameters[kSecUseAuthenticationContext] = context }
        var error: Unmanaged<CFError>?
        let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error)
        return (key, error?.takeRetainedValue().code ?? 0)
    }

    private func privateKeys(labelled label: String) -> Int {
        tokenItems(kSecClassKey, [kSecAttrLabel: label, kSecAttrKeyClass: kSecAttrKeyClassPrivate]).count
    }

    func testAKeyMadeOnALoggedInTokenNeedsTheUsersConsent() throws {
        let serial = try makeToken("tok1")
        waitForItems(tokens: 1)
        let tokenID = "softhsm2:\(serial)"
        // Logged in by a signature.
        try answer(Self.pin)
        XCTAssertEqual(sign(try XCTUnwrap(identityKey("tok1-ec"))).1, 0)

        try answer()  // cancel
        try? FileManager.default.removeItem(atPath: shown)
        XCTAssertEqual(makeKey(tokenID, label: "refused").1, Int(errSecUserCanceled))
        XCTAssertEqual(privateKeys(labelled: "refused"), 0, "nothing was made")
        let text = try String(contentsOfFile: shown, encoding: .utf8)
        XCTAssertTrue(text.contains("CONFIRM"), text)
        XCTAssertTrue(text.contains("wants to make a new EC P-256 key"), text)
        XCTAssertTrue(text.contains("on the token"), text)

        let context = LAContext()
        context.interactionNotAllowed = true
        try answer("yes")
        XCTAssertEqual(makeKey(tokenID, label: "silent", context: context).1, Int(errSecInteractionNotAllowed))
        XCTAssertEqual(privateKeys(labelled: "silent"), 0)

        try answer("yes")
        try? FileManager.default.removeItem(atPath: shown)
        let (made, status) = makeKey(tokenID, label: "agreed")
        XCTAssertEqual(status, 0)
        XCTAssertNotNil(made)
        XCTAssertEqual(privateKeys(labelled: "agreed"), 1)
        XCTAssertEqual(promptsShown(), 1)
    }

    func testAKeyMadeWithTheContextsPINOnATokenNotLoggedInAsksNobody() throws {
        let serial = try makeToken("tok1")
        waitForItems(tokens: 1)
        let context = LAContext()
        XCTAssertTrue(context.setCredential(Data(Self.pin.utf8), type: .smartCardPIN))
        try answer("yes", "yes")
        let (made, status) = makeKey("softhsm2:\(serial)", label: "by-pin", context: context)
        XCTAssertEqual(status, 0)
        XCTAssertNotNil(made)
        XCTAssertEqual(promptsShown(), 0, "the program's own login stands for the user's consent")
        XCTAssertEqual(privateKeys(labelled: "by-pin"), 1)
        // Logged out by a lock: a wrong PIN fails, and then the right one is held back until the user logs in.
        try KeychainControl.lock(all: false)
        XCTAssertTrue(context.setCredential(Data("0000".utf8), type: .smartCardPIN))
        XCTAssertEqual(makeKey("softhsm2:\(serial)", label: "wrong", context: context).1, Int(errSecAuthFailed))
        XCTAssertTrue(context.setCredential(Data(Self.pin.utf8), type: .smartCardPIN))
        XCTAssertEqual(makeKey("softhsm2:\(serial)", label: "held", context: context).1, Int(errSecAuthFailed))
        XCTAssertEqual(promptsShown(), 0)
        XCTAssertEqual(privateKeys(labelled: "wrong") + privateKeys(labelled: "held"), 0)
    }

    /// An identity's two halves come from one place: a stored certificate never joins a token's key (any
    /// program could store one for the card's public key, under a name of its choosing), nor a token's
    /// certificate a stored key.
    func testIdentitiesFormWithinOneTokenOrWithinTheStoreOnly() throws {
        let serial = try makeToken("tok1")
        waitForItems(tokens: 1)
        let openssl = "/usr/bin/openssl"
        let base = tokens + "/x-"
        // A certificate somebody made for the token key's public key, signed by a key of their own.
        try tool(
            openssl, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", base + "ca.key"])
        try tool(
            openssl,
            [
                "x509", "-new", "-subj", "/CN=imposter", "-key", base + "ca.key", "-force_pubkey",
                tokens + "/tok1-ec.pub", "-days", "30", "-outform", "DER", "-out", base + "imposter.der",
            ])
        let imposter = try Data(contentsOf: URL(fileURLWithPath: base + "imposter.der"))
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, imposter as CFData))
        XCTAssertEqual(SecItemAdd([kSecValueRef: certificate] as CFDictionary, nil), errSecSuccess)
        // A stored identity (from a PKCS#12 file), whose certificate is also written onto the token.
        try tool(
            openssl,
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                base + "own.key", "-out", base + "own.crt", "-subj", "/CN=stored-id", "-days", "30",
            ])
        try tool(
            openssl,
            [
                "pkcs12", "-export", "-inkey", base + "own.key", "-in", base + "own.crt", "-passout", "pass:x",
                "-out", base + "own.p12",
            ])
        var imported: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(
                try Data(contentsOf: URL(fileURLWithPath: base + "own.p12")) as CFData,
                [kSecImportExportPassphrase: "x"] as CFDictionary, &imported), errSecSuccess)
        let identity = try XCTUnwrap((imported as? [[String: Any]])?.first?[kSecImportItemIdentity as String])
        XCTAssertEqual(SecItemAdd([kSecValueRef: identity] as CFDictionary, nil), errSecSuccess)
        try tool(
            "/usr/bin/pkcs11-tool",
            [
                "--module", Self.module, "--token-label", "tok1", "--login", "--pin", Self.pin, "--write-object",
                base + "own.crt", "--type", "cert", "--id", "07", "--label", "foreign",
            ])
        waitFor("the certificate written onto the token") { tokenItems(kSecClassCertificate).count == 3 }

        func identities(_ label: String? = nil) -> Int {
            var query: [CFString: Any] = [
                kSecClass: kSecClassIdentity, kSecMatchLimit: kSecMatchLimitAll, kSecReturnRef: true,
            ]
            // A label filters both halves, an identity's certificate and its key.
            if let label { query[kSecAttrLabel] = label }
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &result)
            return status == errSecSuccess ? ((result as? [Any])?.count ?? 0) : 0
        }
        // stored-id, tok1-ec, tok1-rsa and foreign; not the imposter certificate with the token's key.
        XCTAssertEqual(identities(), 4, "a stored certificate with the token key's public key")
        // The token's certificate stands for a private key of the token with its CKA_ID (hidden until a
        // login, §3): its identity is that one, never the stored key.
        XCTAssertEqual(identities("foreign"), 1)
        var found: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassIdentity, kSecAttrLabel: "foreign", kSecReturnRef: true] as CFDictionary, &found),
            errSecSuccess)
        var foreignKey: SecKey?
        XCTAssertEqual(SecIdentityCopyPrivateKey(try XCTUnwrap(found) as! SecIdentity, &foreignKey), errSecSuccess)
        // Used, it is looked for on the token after the login, and the token has no such key: were it the
        // stored key, the signature would be made.
        try answer(Self.pin)
        XCTAssertEqual(
            sign(try XCTUnwrap(foreignKey)).1, Int(errSecItemNotFound), "a token certificate with a stored key")
        XCTAssertEqual(promptsShown(), 1, "the token's PIN was asked")
        XCTAssertEqual(identities("stored-id"), 1)
        XCTAssertEqual(identities("tok1-ec"), 1)
        XCTAssertEqual(identities("tok1-rsa"), 1)

        // An update of every identity changes the stored ones and leaves the token's alone; naming the
        // token is refused, as any change to its items.
        XCTAssertEqual(
            SecItemUpdate([kSecClass: kSecClassIdentity] as CFDictionary, [kSecAttrLabel: "renamed"] as CFDictionary),
            errSecSuccess)
        XCTAssertEqual(identities("renamed"), 1)
        XCTAssertEqual(identities("tok1-ec"), 1)
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassIdentity, kSecAttrTokenID: "softhsm2:\(serial)"] as CFDictionary,
                [kSecAttrLabel: "renamed"] as CFDictionary), errSecParam)
    }
}
