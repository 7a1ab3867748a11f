import Foundation
import XCTest

@testable import Latchkey

/// `.applicationPassword` (docs/ACCESS-CONTROL.md §8) against the real agent, Linux-PAM and the
/// stand-in pinentry of `AccessControlTestCase`: the secret is sealed under a key derived from the
/// application's password, which travels with each call (`LAContext.setCredential`) or is asked for.
final class ApplicationPasswordItemTests: AccessControlTestCase {
    private var prompts: [String] {
        let text = (try? String(contentsOfFile: shown, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("SETDESC") }.map(String.init)
    }

    private func context(_ password: String?) -> LAContext {
        let context = LAContext()
        if let password { XCTAssertTrue(context.setCredential(Data(password.utf8), type: .applicationPassword)) }
        return context
    }

    private func add(
        _ account: String, _ flags: SecAccessControlCreateFlags = .applicationPassword,
        password: String? = "open sesame",
        secret: String = "s3cret", _ extra: [CFString: Any] = [:]
    ) -> OSStatus {
        var attributes: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "ap", kSecAttrAccount: account,
            kSecAttrAccessControl: presence(flags), kSecValueData: Data(secret.utf8),
        ]
        if let password { attributes[kSecUseAuthenticationContext] = context(password) }
        for (key, value) in extra { attributes[key] = value }
        return SecItemAdd(attributes as CFDictionary, nil)
    }

    private func read(_ account: String, password: String?, _ extra: [CFString: Any] = [:]) -> (OSStatus, String?) {
        var query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "ap", kSecAttrAccount: account, kSecReturnData: true,
        ]
        if let password { query[kSecUseAuthenticationContext] = context(password) }
        for (key, value) in extra { query[key] = value }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    func testTheCredentialOpensTheItemAndAWrongOneDoesNot() throws {
        XCTAssertEqual(add("app"), errSecSuccess)
        XCTAssertEqual(read("app", password: "open sesame").1, "s3cret")
        XCTAssertEqual(read("app", password: "open sesame!").0, errSecAuthFailed)
        XCTAssertEqual(read("app", password: "").0, errSecAuthFailed)
        // The credential is no UI: it serves under Fail.
        XCTAssertEqual(
            read("app", password: "open sesame", [kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]).1, "s3cret")
        XCTAssertEqual(prompts.count, 0)
        // Attributes need no password.
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "app", kSecReturnAttributes: true]
                    as CFDictionary,
                &result), errSecSuccess)
        let control = try XCTUnwrap((result as? [String: Any])?[kSecAttrAccessControl as String] as? SecAccessControl)
        XCTAssertEqual(control.flags, .applicationPassword)
    }

    func testWithoutTheCredentialThePasswordIsAskedForOrRefused() throws {
        XCTAssertEqual(add("app"), errSecSuccess)
        try answer("open sesame")
        XCTAssertEqual(read("app", password: nil, [kSecUseOperationPrompt: "Open the notes"]).1, "s3cret")
        XCTAssertEqual(prompts.count, 1)
        XCTAssertTrue(prompts[0].contains("application password"), prompts[0])
        XCTAssertTrue(prompts[0].contains("Open the notes"), prompts[0])
        try answer("wrong")
        XCTAssertEqual(read("app", password: nil).0, errSecAuthFailed)
        try answer()
        XCTAssertEqual(read("app", password: nil).0, errSecUserCanceled)
        let asked = prompts.count
        XCTAssertEqual(
            read("app", password: nil, [kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]).0,
            errSecInteractionNotAllowed)
        XCTAssertEqual(
            read("app", password: nil, [kSecUseAuthenticationUI: kSecUseAuthenticationUISkip]).0, errSecItemNotFound)
        let noUI = LAContext()
        noUI.interactionNotAllowed = true
        XCTAssertEqual(read("app", password: nil, [kSecUseAuthenticationContext: noUI]).0, errSecInteractionNotAllowed)
        XCTAssertEqual(prompts.count, asked, "no prompt without UI")
    }

    func testAnAddWithoutTheCredentialAsksForTheNewPassword() throws {
        try answer("chosen")
        XCTAssertEqual(add("asked", password: nil), errSecSuccess)
        XCTAssertEqual(prompts.count, 1)
        XCTAssertEqual(read("asked", password: "chosen").1, "s3cret")
        XCTAssertEqual(
            add("refused", password: nil, [kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]),
            errSecInteractionNotAllowed)
    }

    func testUpdateNeedsThePasswordAndKeepsTheFlag() throws {
        XCTAssertEqual(add("app"), errSecSuccess)
        let query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "app"]
        var withPassword = query
        withPassword[kSecUseAuthenticationContext] = context("open sesame")
        XCTAssertEqual(
            SecItemUpdate(withPassword as CFDictionary, [kSecValueData: Data("new".utf8)] as CFDictionary),
            errSecSuccess)
        XCTAssertEqual(read("app", password: "open sesame").1, "new")
        var wrong = query
        wrong[kSecUseAuthenticationContext] = context("nope")
        XCTAssertEqual(
            SecItemUpdate(wrong as CFDictionary, [kSecAttrLabel: "changed"] as CFDictionary), errSecAuthFailed)
        var noUI = query
        noUI[kSecUseAuthenticationUI] = kSecUseAuthenticationUIFail
        XCTAssertEqual(
            SecItemUpdate(noUI as CFDictionary, [kSecValueData: Data("x".utf8)] as CFDictionary),
            errSecInteractionNotAllowed)
        // The flag can be neither removed nor added by an update.
        XCTAssertEqual(
            SecItemUpdate(
                withPassword as CFDictionary, [kSecAttrAccessControl: presence(.userPresence)] as CFDictionary),
            errSecParam)
        XCTAssertEqual(
            SecItemAdd(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "plain", kSecValueData: Data("p".utf8)]
                    as CFDictionary, nil), errSecSuccess)
        var plain: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "plain"]
        plain[kSecUseAuthenticationContext] = context("open sesame")
        XCTAssertEqual(
            SecItemUpdate(
                plain as CFDictionary, [kSecAttrAccessControl: presence(.applicationPassword)] as CFDictionary),
            errSecParam)
        XCTAssertEqual(read("app", password: "open sesame").1, "new", "nothing changed")
    }

    func testWithUserPresenceBothAreNeeded() throws {
        XCTAssertEqual(add("both", [.userPresence, .applicationPassword]), errSecSuccess)
        try answer("sesame")
        XCTAssertEqual(read("both", password: "open sesame").1, "s3cret")
        XCTAssertEqual(prompts.count, 1, "the PAM check asked; the password came with the call")
        XCTAssertEqual(read("both", password: "wrong").0, errSecAuthFailed)
    }

    func testOneRequestOpensABoundedNumberOfBoxes() throws {
        for index in 0...16 { XCTAssertEqual(add("many-\(index)"), errSecSuccess) }
        var query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "ap", kSecReturnData: true,
            kSecMatchLimit: kSecMatchLimitAll, kSecUseAuthenticationContext: context("open sesame"),
        ]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecParam)
        query[kSecMatchLimit] = 16
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? [Data])?.count, 16)
    }

    func testOnlyPasswordsTakeAnApplicationPassword() {
        var error: Unmanaged<CFError>?
        let control = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlocked, [.privateKeyUsage, .applicationPassword], &error)
        XCTAssertNil(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [kSecAttrIsPermanent: true, kSecAttrAccessControl: control!],
                ] as CFDictionary, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecUnimplemented))
    }
}
