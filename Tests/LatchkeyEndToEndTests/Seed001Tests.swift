import Foundation
import Latchkey
import XCTest

/// seeds/001 ("Accessing Keychain Items with Face ID or Touch ID"): the sample's snippets, as close to
/// verbatim as Swift on Linux allows (`import Latchkey` for Security and LocalAuthentication), against
/// the real agent, Linux-PAM and the stand-in pinentry of `AccessControlTestCase`. The sample's
/// `.userPresence` is the user's password through the PAM service `latchkey` here.
final class Seed001Tests: AccessControlTestCase {
    /// The sample's error type.
    struct KeychainError: Error {
        var status: OSStatus
    }

    /// The sample's credentials.
    struct Credentials {
        var username: String
        var password: String
    }

    let server = "www.example.com"

    /// How many prompts the stand-in pinentry showed (one SETDESC each).
    private var prompts: Int {
        let text = (try? String(contentsOfFile: shown, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("SETDESC") }.count
    }

    /// "Create an Access Control", "Optionally, Provide a Customized Context", "Add the Keychain Item".
    func addCredentials(_ credentials: Credentials, context: LAContext) throws {
        let account = credentials.username
        let password = credentials.password.data(using: String.Encoding.utf8)!

        let access = SecAccessControlCreateWithFlags(
            nil,  // Use the default allocator.
            kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
            .userPresence,
            nil)  // Ignore any error.

        let query: [String: Any] = [
            kSecClass as String: kSecClassInternetPassword,
            kSecAttrAccount as String: account,
            kSecAttrServer as String: server,
            kSecAttrAccessControl as String: access as Any,
            kSecUseAuthenticationContext as String: context,
            kSecValueData as String: password,
        ]

        let status = SecItemAdd(query as CFDictionary, nil)
        guard status == errSecSuccess else { throw KeychainError(status: status) }
    }

    /// "Provide a Prompt When Reading the Item"; `extra` adds the sample's optional settings.
    func readCredentials(_ extra: [String: Any] = [:]) throws -> Credentials {
        var query: [String: Any] = [
            kSecClass as String: kSecClassInternetPassword,
            kSecAttrServer as String: server,
            kSecMatchLimit as String: kSecMatchLimitOne,
            kSecReturnAttributes as String: true,
            kSecUseOperationPrompt as String: "Access your password on the keychain",
            kSecReturnData as String: true,
        ]
        query.merge(extra) { $1 }

        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        guard status == errSecSuccess else { throw KeychainError(status: status) }

        guard let existingItem = item as? [String: Any],
            let passwordData = existingItem[kSecValueData as String] as? Data,
            let password = String(data: passwordData, encoding: String.Encoding.utf8),
            let account = existingItem[kSecAttrAccount as String] as? String
        else {
            throw KeychainError(status: errSecInternalError)
        }

        return Credentials(username: account, password: password)
    }

    /// The sample's delete.
    func deleteCredentials() throws {
        let query: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server]
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError(status: status) }
    }

    private func status(of body: () throws -> Credentials) -> OSStatus? {
        do {
            _ = try body()
            return errSecSuccess
        } catch let error as KeychainError {
            return error.status
        } catch {
            return nil
        }
    }

    func testTheSampleAsItIs() throws {
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 10

        // Adding needs no check: Apple's access control asks on reading and updating only.
        try addCredentials(Credentials(username: "appleseed", password: "s3cr3t"), context: context)
        XCTAssertEqual(prompts, 0)

        // Reading asks, showing the operation prompt (and which program asks).
        try answer("sesame")
        let credentials = try readCredentials()
        XCTAssertEqual(credentials.username, "appleseed")
        XCTAssertEqual(credentials.password, "s3cr3t")
        XCTAssertEqual(prompts, 1)
        let text = try String(contentsOfFile: shown, encoding: .utf8)
        XCTAssertTrue(text.contains("Access your password on the keychain"), text)

        // A broad search that is willing to skip protected items: no prompt, the item is left out.
        XCTAssertEqual(
            status { try readCredentials([kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip]) },
            errSecItemNotFound)
        XCTAssertEqual(prompts, 1)

        // The customised context, given to reads: the first evaluates it, the next is served by it.
        XCTAssertEqual(try readCredentials([kSecUseAuthenticationContext as String: context]).password, "s3cr3t")
        XCTAssertEqual(try readCredentials([kSecUseAuthenticationContext as String: context]).password, "s3cr3t")
        XCTAssertEqual(prompts, 2)

        // A wrong password, a cancelled prompt.
        try answer("wrong")
        XCTAssertEqual(status { try readCredentials() }, errSecAuthFailed)
        try answer()
        XCTAssertEqual(status { try readCredentials() }, errSecUserCanceled)

        // Deleting needs no check.
        try deleteCredentials()
        XCTAssertEqual(status { try readCredentials() }, errSecItemNotFound)
    }

    func testTheAccessControlIsReturnedWithTheItem() throws {
        try addCredentials(Credentials(username: "appleseed", password: "s3cr3t"), context: LAContext())
        var item: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server,
                kSecReturnAttributes as String: true,
            ] as CFDictionary, &item)
        XCTAssertEqual(status, errSecSuccess)
        let attributes = try XCTUnwrap(item as? [String: Any])
        let access = try XCTUnwrap(attributes[kSecAttrAccessControl as String] as? SecAccessControl)
        XCTAssertEqual(access.flags, .userPresence)
        XCTAssertEqual(attributes[kSecAttrAccessible as String] as? String, "akpu")
        XCTAssertEqual(prompts, 0, "attributes need no check")
    }
}
