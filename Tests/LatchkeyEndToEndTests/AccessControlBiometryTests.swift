import Foundation
import XCTest

@testable import Latchkey

/// The biometry flags through their own PAM service, `latchkey-biometry` (test stacks in the private
/// PAM directory), beside the password stack `latchkey` of AccessControlTestCase (pam_exec checking
/// "sesame"); and what the prompt says.
final class AccessControlBiometryTests: AccessControlTestCase {
    private var biometryRan: String { work + "/biometry-ran" }

    /// A biometry stack that records that it ran, then passes (`pass`) or fails.
    private func biometryStack(pass: Bool) throws {
        try write(
            "auth required pam_exec.so quiet /usr/bin/touch \(biometryRan)\n"
                + "auth required \(pass ? "pam_permit.so" : "pam_deny.so")\n",
            to: pamDirectory + "/latchkey-biometry")
    }

    private func add(_ account: String, _ flags: SecAccessControlCreateFlags, label: String? = nil) {
        var attributes: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "bio", kSecAttrAccount: account,
            kSecAttrAccessControl: presence(flags), kSecValueData: Data("secret-\(account)".utf8),
        ]
        if let label { attributes[kSecAttrLabel] = label }
        XCTAssertEqual(SecItemAdd(attributes as CFDictionary, nil), errSecSuccess)
    }

    private func read(_ account: String) -> (OSStatus, String?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "bio", kSecAttrAccount: account,
                kSecReturnData: true,
            ] as CFDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    private func reset() {
        for path in [shown, biometryRan] { try? FileManager.default.removeItem(atPath: path) }
    }

    func testBiometryWithoutItsServiceFailsAndNeverFallsBackToAnotherStack() throws {
        add("any", .biometryAny)
        add("current", .biometryCurrentSet)
        // Linux-PAM runs "other" for a service without a file: it must not stand for biometry.
        try write("auth required pam_permit.so\n", to: pamDirectory + "/other")
        try answer("sesame")
        XCTAssertEqual(read("any").0, errSecAuthFailed)
        XCTAssertEqual(read("current").0, errSecAuthFailed)
        XCTAssertFalse(FileManager.default.fileExists(atPath: shown), "no password was asked for biometry")
        // A denying stack fails the same way.
        try biometryStack(pass: false)
        XCTAssertEqual(read("any").0, errSecAuthFailed)
        XCTAssertTrue(FileManager.default.fileExists(atPath: biometryRan))
        // A passing one opens both, and the password stack is not run.
        reset()
        try biometryStack(pass: true)
        XCTAssertEqual(read("any").1, "secret-any")
        XCTAssertEqual(read("current").1, "secret-current")
        XCTAssertFalse(FileManager.default.fileExists(atPath: shown), "the password was not asked")
    }

    func testOrLetsThePasswordSatisfyIt() throws {
        add("either", [.biometryAny, .or, .devicePasscode])
        try answer("sesame")
        XCTAssertEqual(read("either").1, "secret-either", "no biometry stack: the password suffices")
        reset()
        try biometryStack(pass: false)
        try answer("wrong")
        XCTAssertEqual(read("either").0, errSecAuthFailed)
    }

    func testAndNeedsBothTransactions() throws {
        add("both", [.biometryCurrentSet, .and, .devicePasscode])
        try answer("sesame")
        XCTAssertEqual(read("both").0, errSecAuthFailed, "no biometry stack")
        XCTAssertFalse(FileManager.default.fileExists(atPath: shown), "nothing was asked in vain")
        try biometryStack(pass: false)
        XCTAssertEqual(read("both").0, errSecAuthFailed)
        XCTAssertFalse(FileManager.default.fileExists(atPath: shown), "a failed biometry ends the check")
        reset()
        try biometryStack(pass: true)
        try answer("wrong")
        XCTAssertEqual(read("both").0, errSecAuthFailed, "biometry alone is not enough")
        XCTAssertTrue(FileManager.default.fileExists(atPath: biometryRan))
        XCTAssertTrue(FileManager.default.fileExists(atPath: shown), "the password was asked too")
        reset()
        try answer("sesame")
        XCTAssertEqual(read("both").1, "secret-both")
        XCTAssertTrue(FileManager.default.fileExists(atPath: biometryRan))
    }

    /// The prompt says which program asks, what it wants to do and with which item: the label, else
    /// service and account; sanitised and capped like the rest.
    func testThePromptNamesTheOperationAndTheItem() throws {
        add("plain", .devicePasscode, label: "Mail \u{202E}account\u{200B}")
        add("unlabelled", .devicePasscode)
        func description() throws -> String {
            let text = try String(contentsOfFile: shown, encoding: .utf8)
            return text.split(separator: "\n").first { $0.hasPrefix("SETDESC ") }.map(String.init) ?? text
        }
        try answer("sesame")
        XCTAssertEqual(read("plain").0, errSecSuccess)
        var text = try description()
        XCTAssertTrue(text.contains("wants to read the password \u{201C}Mail account\u{201D}"), text)
        reset()
        try answer("sesame")
        XCTAssertEqual(read("unlabelled").0, errSecSuccess)
        text = try description()
        XCTAssertTrue(text.contains("wants to read the password \u{201C}bio / unlabelled\u{201D}"), text)
        reset()
        try answer("sesame")
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "unlabelled"] as CFDictionary,
                [kSecValueData: Data("n".utf8)] as CFDictionary), errSecSuccess)
        XCTAssertTrue(try description().contains("wants to change the password \u{201C}bio / unlabelled\u{201D}"))
        // A key's use says so; a long label is cut.
        reset()
        var error: Unmanaged<CFError>?
        let control = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlocked, [.privateKeyUsage, .userPresence], &error)!
        let label = String(repeating: "k", count: 400)
        let key = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [
                        kSecAttrIsPermanent: true, kSecAttrAccessControl: control, kSecAttrLabel: label,
                    ],
                ] as CFDictionary, &error))
        try answer("sesame")
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, &error))
        text = try description()
        XCTAssertTrue(
            text.contains("wants to sign with the key \u{201C}" + String(repeating: "k", count: 120) + "\u{201D}"), text
        )
        XCTAssertFalse(text.contains(String(repeating: "k", count: 121)), text)
        // Several items: the first ones by name, the rest counted.
        reset()
        for n in 0..<4 { add("many\(n)", .devicePasscode) }
        try answer("sesame")
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "bio", kSecMatchLimit: kSecMatchLimitAll,
                    kSecReturnData: true,
                ] as CFDictionary, nil), errSecSuccess)
        text = try description()
        XCTAssertTrue(text.contains("wants to read the passwords \u{201C}"), text)
        XCTAssertTrue(text.contains(" and 3 more"), text)
    }
}
