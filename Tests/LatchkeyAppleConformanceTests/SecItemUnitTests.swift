import Foundation
import Latchkey
import XCTest

/// keychain/SecurityUnitTests/SecItemTests.m (class SecItemTests), ported to the public library against
/// the real agent; where Apple's test has an iOS and a macOS branch, the iOS one. Every test is ported.
final class SecItemUnitTests: ConformanceTestCase {
    // Apple: keychain/SecurityUnitTests/SecItemTests.m, addGenericPassword:service:
    private func addGenericPassword(_ account: String, _ service: String) -> (OSStatus, [String: Any]?) {
        let (status, result) = add([
            kSecClass: kSecClassGenericPassword, kSecValueData: Data("password".utf8), kSecAttrAccount: account,
            kSecAttrService: service, kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
            kSecUseDataProtectionKeychain: true, kSecReturnAttributes: true,
        ])
        return (status, result as? [String: Any])
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, moveGenericPassword:service:newAccount:newService:
    private func moveGenericPassword(_ account: String, _ service: String, to newAccount: String, _ newService: String)
        -> OSStatus
    {
        update(
            [
                kSecClass: kSecClassGenericPassword, kSecValueData: Data("password".utf8), kSecAttrAccount: account,
                kSecAttrService: service, kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
                kSecUseDataProtectionKeychain: true,
            ], [kSecAttrAccount: newAccount, kSecAttrService: newService])
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, testAddGenericPassword
    func testAddGenericPassword() {
        let (status, attrs) = addGenericPassword("delete-me", "delete-me")
        XCTAssertNotNil(attrs, "should create genp")
        XCTAssertEqual(status, errSecSuccess, "should have no error")
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, testAddTwoGenericPassword
    func testAddTwoGenericPassword() {
        var (status, attrs) = addGenericPassword("delete-me", "delete-me")
        XCTAssertNotNil(attrs, "should create genp")
        XCTAssertEqual(status, errSecSuccess, "should have no error")
        (status, attrs) = addGenericPassword("delete-me2s", "delete-me")
        XCTAssertNotNil(attrs, "should create genp")
        XCTAssertEqual(status, errSecSuccess, "should have no error")
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, testAddCollidingGenericPassword
    func testAddCollidingGenericPassword() {
        XCTAssertNotNil(addGenericPassword("delete-me", "delete-me").1, "should create genp")
        XCTAssertEqual(
            addGenericPassword("delete-me", "delete-me").0, errSecDuplicateItem, "should have duplicate item")
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, testMoveGenericPassword
    func testMoveGenericPassword() {
        XCTAssertNotNil(addGenericPassword("delete-me", "delete-me").1, "should create genp")
        XCTAssertEqual(
            addGenericPassword("delete-me", "delete-me").0, errSecDuplicateItem, "should have duplicate item")
        XCTAssertEqual(moveGenericPassword("delete-me", "delete-me", to: "delete-me2", "delete-me2"), errSecSuccess)
        XCTAssertEqual(
            moveGenericPassword("delete-me", "delete-me", to: "delete-me2", "delete-me2"), errSecItemNotFound)
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, testBadPort (iOS: an empty string as the port is
    // accepted, as before)
    func testBadPort() {
        XCTAssertEqual(
            add([
                kSecClass: kSecClassInternetPassword, kSecValueData: Data("password".utf8),
                kSecAttrAccount: "SecItemTests testBadPort Account", kSecAttrPort: "",
            ]).status, errSecSuccess)
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, CertificatesFoundForEmail()
    private func certificatesFound(forEmail address: String?) -> Int {
        guard let address else { return 0 }  // Apple's helper does not ask without an address
        let (status, result) = copy([
            kSecClass: kSecClassCertificate, kSecReturnRef: true, kSecMatchEmailAddressIfPresent: address,
            kSecMatchLimit: kSecMatchLimitAll,
        ])
        if status == errSecItemNotFound { return 0 }
        return (result as? [Any])?.count ?? -1
    }

    // Apple: keychain/SecurityUnitTests/SecItemTests.m, test_data_protection_kc_no_email
    func testDataProtectionKeychainNoEmail() throws {
        let message = try resource("apple/SecItemTests-sign-no-email.p12")
        var items: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(
                message as CFData,
                [kSecImportExportPassphrase: "nick", kSecUseDataProtectionKeychain: true] as NSDictionary, &items),
            errSecSuccess, "import to data protection kc")
        XCTAssertEqual(items?.count, 1, "one identity")
        let item = try XCTUnwrap((items as? [Any])?.first as? [String: Any])
        let identity = try XCTUnwrap(item[kSecImportItemIdentity as String] as? SecIdentity, "pull identity")
        var key: SecKey?
        var cert: SecCertificate?
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &key), errSecSuccess, "get private key")
        XCTAssertEqual(SecIdentityCopyCertificate(identity, &cert), errSecSuccess, "get certificate")

        XCTAssertEqual(certificatesFound(forEmail: "hazmatteam6@apple.com"), 0, "match email address")
        XCTAssertEqual(certificatesFound(forEmail: ""), 0, "match empty string")
        XCTAssertEqual(certificatesFound(forEmail: nil), 0, "match NULL string")

        // latchkey: the case Apple's comment describes, with the identity in the keychain; and a certificate
        // that has an address (si-61's ec521 host: in its subject), found whatever the case of the query.
        XCTAssertEqual(add([kSecValueRef: identity]).status, errSecSuccess)
        XCTAssertEqual(certificatesFound(forEmail: "hazmatteam6@apple.com"), 0, "match email address")
        var hostItems: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(
                try resource("apple/si-61-ec521-host.p12") as CFData,
                [kSecImportExportPassphrase: "test!123"] as NSDictionary, &hostItems), errSecSuccess)
        let host = try XCTUnwrap(
            (hostItems as? [[String: Any]])?.first?[kSecImportItemIdentity as String] as? SecIdentity)
        var hostCertificate: SecCertificate?
        XCTAssertEqual(SecIdentityCopyCertificate(host, &hostCertificate), errSecSuccess)
        XCTAssertEqual(add([kSecValueRef: hostCertificate as Any]).status, errSecSuccess)
        XCTAssertEqual(certificatesFound(forEmail: "Alice-EC521-wifi@apple.com"), 1, "match email address")
        XCTAssertEqual(certificatesFound(forEmail: "alice-ec521-wifi@apple.co"), 0, "no partial match")

        _ = delete([kSecUseDataProtectionKeychain: true, kSecClass: kSecClassCertificate, kSecValueRef: cert as Any])
        _ = delete([kSecUseDataProtectionKeychain: true, kSecClass: kSecClassKey, kSecValueRef: key as Any])
    }
}
