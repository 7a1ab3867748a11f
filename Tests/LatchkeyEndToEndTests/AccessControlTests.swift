import Foundation
import LatchkeySecrets
import XCTest

@testable import Latchkey

/// Items with kSecAttrAccessControl against the real agent, real Linux-PAM (service files in a private
/// directory, `LATCHKEY_PAM_DIR`, honoured because the tests' agent runs as root) and a stand-in pinentry
/// that answers from a file, cancels, or never answers, and records what it was shown.
final class AccessControlTests: AccessControlTestCase {
    private func read(_ account: String = "guarded", _ extra: [CFString: Any] = [:]) -> (OSStatus, String?) {
        Self.readItem(account, extra)
    }

    private static func readItem(_ account: String, _ extra: [CFString: Any] = [:]) -> (OSStatus, String?) {
        var query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: account,
            kSecReturnData: true,
        ]
        for (key, value) in extra { query[key] = value }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    func testReadNeedsThePasswordAndShowsWhoAsksAndWhy() throws {
        addProtected()
        try answer("sesame")
        let (status, secret) = read("guarded", [kSecUseOperationPrompt: "Sign in to the example"])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(secret, "s3cret")
        let text = try String(contentsOfFile: shown, encoding: .utf8)
        XCTAssertTrue(text.contains("Sign in to the example"), text)
        XCTAssertTrue(text.contains("LatchkeyPackageTests") || text.contains("xctest"), text)
    }

    func testWrongPasswordCancelAndNoUI() throws {
        addProtected()
        try answer("wrong")
        XCTAssertEqual(read().0, errSecAuthFailed)
        try answer()  // no line: the prompter cancels
        XCTAssertEqual(read().0, errSecUserCanceled)
        try answer("sesame")
        try FileManager.default.removeItem(atPath: shown)
        XCTAssertEqual(
            read("guarded", [kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]).0, errSecInteractionNotAllowed)
        XCTAssertEqual(read("guarded", [kSecUseNoAuthenticationUI: true]).0, errSecInteractionNotAllowed)
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationUI: kSecUseAuthenticationUISkip]).0, errSecItemNotFound)
        XCTAssertFalse(FileManager.default.fileExists(atPath: shown), "no prompt was shown without UI")
    }

    func testSkipLeavesOutOnlyProtectedItemsAndAttributesNeedNoCheck() throws {
        addProtected()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: "open",
                    kSecValueData: Data("plain".utf8),
                ] as CFDictionary, nil), errSecSuccess)
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecMatchLimit: kSecMatchLimitAll,
                kSecReturnData: true, kSecReturnAttributes: true,
                kSecUseAuthenticationUI: kSecUseAuthenticationUISkip,
            ] as CFDictionary, &result)
        XCTAssertEqual(status, errSecSuccess)
        let items = try XCTUnwrap(result as? [[String: Any]])
        XCTAssertEqual(items.map { $0[kSecAttrAccount as String] as? String }, ["open"])
        // Attributes (and the access control, as an object) need no check.
        result = nil
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded", kSecReturnAttributes: true]
                    as CFDictionary, &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        let control = try XCTUnwrap(attributes[kSecAttrAccessControl as String] as? SecAccessControl)
        XCTAssertEqual(control.flags, .userPresence)
        XCTAssertEqual(attributes[kSecAttrAccessible as String] as? String, "ak")
        XCTAssertFalse(FileManager.default.fileExists(atPath: shown))
    }

    func testUpdateNeedsTheCheck() throws {
        addProtected()
        try answer()
        let query = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded"] as CFDictionary
        XCTAssertEqual(SecItemUpdate(query, [kSecValueData: Data("new".utf8)] as CFDictionary), errSecUserCanceled)
        try answer("sesame", "sesame")
        XCTAssertEqual(SecItemUpdate(query, [kSecValueData: Data("new".utf8)] as CFDictionary), errSecSuccess)
        XCTAssertEqual(read().1, "new")
    }

    func testPermitAndDenyStacks() throws {
        addProtected()
        try write("auth required pam_deny.so\n", to: pamDirectory + "/latchkey")
        try answer("sesame")
        XCTAssertEqual(read().0, errSecAuthFailed)
        try write("auth required pam_permit.so\n", to: pamDirectory + "/latchkey")
        XCTAssertEqual(read().1, "s3cret")
    }

    func testAPromptNobodyAnswersTimesOutAndBlocksNoOtherCaller() throws {
        addProtected()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: "open",
                    kSecValueData: Data("plain".utf8),
                ] as CFDictionary, nil), errSecSuccess)
        try answer("!wait")
        let waiting = expectation(description: "the waiting read ends")
        let outcome = LockedBox<OSStatus?>(nil)
        Thread.detachNewThread {
            outcome.set(AccessControlTests.readItem("guarded").0)
            waiting.fulfill()
        }
        // Meanwhile another program's ordinary read is answered (bounded waits, not a timing claim: the
        // prompt waits up to LATCHKEY_PRESENCE_TIMEOUT for an answer that never comes).
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: shown) && Date() < deadline { usleep(20_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: shown), "the prompt was shown")
        let other = try cli(["find-generic-password", "-s", "ac", "-a", "open", "-w"])
        XCTAssertEqual(other.out, "plain\n", other.err)
        XCTAssertNil(outcome.get(), "the protected read still waits for its prompt")
        wait(for: [waiting], timeout: 30)
        XCTAssertEqual(outcome.get(), errSecUserCanceled)
    }

    func testKeySigningWithPrivateKeyUsage() throws {
        var error: Unmanaged<CFError>?
        let control = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .userPresence], &error)
        let key = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [kSecAttrIsPermanent: true, kSecAttrAccessControl: control!],
                ]
                    as CFDictionary, &error), "\(String(describing: error))")
        let message = Data("hello".utf8) as CFData
        try answer()
        XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecUserCanceled))
        try answer("sesame")
        error = nil
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
    }

    func testParameterChecks() {
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.or, .and, .devicePasscode], &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
        XCTAssertNil(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.userPresence, .devicePasscode], nil))
        XCTAssertNil(SecAccessControlCreateWithFlags(nil, "nonsense" as CFString, [], nil))
        let base: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "p"]
        func add(_ extra: [CFString: Any]) -> OSStatus {
            SecItemAdd(base.merging(extra) { $1 } as CFDictionary, nil)
        }
        XCTAssertEqual(add([kSecAttrAccessControl: Data([1, 2, 3])]), errSecParam)
        XCTAssertEqual(
            add([kSecAttrAccessControl: presence(), kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock]),
            errSecParam)
        XCTAssertEqual(add([kSecAttrAccessControl: presence(), kSecAttrSynchronizable: true]), errSecParam)
        XCTAssertEqual(
            add([kSecAttrAccessControl: presence(), kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked]), errSecSuccess)
    }
}

/// A value shared with a test's helper thread.
final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func get() -> T { lock.withLock { value } }
    func set(_ new: T) { lock.withLock { value = new } }
}
