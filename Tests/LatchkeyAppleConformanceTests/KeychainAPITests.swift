import Foundation
import Latchkey
import XCTest

/// secdxctests/KeychainAPITests.m (class KeychainAPITests), ported to the public library against the real
/// agent. Where Apple's test has an iOS and a macOS branch, the iOS one (data-protection keychain).
///
/// Not ported, and why:
/// - testCorruptionHandler, testRecoverFromCorruption, testContinuedProcessingKeychainItemsIfLowerRowIDsAreCorrupt,
///   testBatchingOfRowIDs, testKeychainItemUpgradePhase3, testDSItemMergeWithPersistentRefs,
///   testSecItemFetchDigestsWithUUIDPrefs, testCopyAccessGroupForPersistentRef: securityd's SQLite file, its
///   corruption handler and row ids, and SPI (digests, CKKS) that latchkey's store has no counterpart of.
/// - testInetBinaryFields: the entitled SPI fields `binn`/`bini`/`bin0`…`bin3`.
/// - testBadDateCausesDERDecodeValidationError and the other DER date tests: securityd's DER plist coder.
/// - testDurableWriteAPI, testSecItemRateLimit*: entitled SPI (SecItemPersistKeychainWritesAtHighPerformanceCost,
///   rate limiting of platform binaries).
/// - testSecItemUUIDPersistentRef: `_SecItemCreateUUIDBasedPersistentRef` is SPI; the format it checks (class
///   tag, 16-byte UUID) is checked on a real item in testSecItemAddAndCopyMatchingWithUUIDPersistentRefs.
/// - testSecItemUpdateUpgradesPersistentReference's first half: 12-byte row-id references are never issued
///   here (the feature flag is SPI); the half that says an update keeps the reference is ported.
/// - testDeleteItemsOnSignOut: iCloud sign-out.
final class KeychainAPITests: ConformanceTestCase {
    // Apple: secdxctests/KeychainAPITests.m, testReturnValuesInSecItemUpdate (iOS branch)
    func testReturnValuesInSecItemUpdate() {
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrAccount: "TestAccount", kSecAttrService: "TestService",
            kSecUseDataProtectionKeychain: true,
        ]
        var addQuery = query
        addQuery[kSecValueData] = Data("password".utf8)
        addQuery[kSecReturnAttributes] = true
        let (status, result) = add(addQuery)
        XCTAssertEqual(status, errSecSuccess, "Should have succeeded in adding test item to keychain")
        XCTAssertNotNil(result, "Should have received a dictionary back from SecItemAdd")
        XCTAssertEqual(
            update(query, [kSecValueData: Data("otherpassword".utf8)]), errSecSuccess,
            "failed to update item with clean update query")
        for key in [kSecReturnAttributes, kSecReturnData, kSecReturnRef, kSecReturnPersistentRef] {
            var withReturn = query
            withReturn[key] = true
            XCTAssertEqual(
                update(withReturn, [kSecValueData: Data("return".utf8)]), errSecParam,
                "failed to generate error updating item with \(key) in the query")
        }
    }

    // Apple: secdxctests/KeychainAPITests.m, testBadTypeInParams
    func testBadTypeInParams() {
        var attrs: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecUseDataProtectionKeychain: true, kSecAttrLabel: "testentry",
        ]
        _ = delete(attrs)
        XCTAssertEqual(add(attrs).status, errSecSuccess)
        XCTAssertEqual(delete(attrs), errSecSuccess)
        // A string where a SecAccessControl belongs is a bad parameter, not a crash or "unimplemented".
        attrs[kSecAttrAccessControl] = "string, no SecAccessControlRef!"
        XCTAssertEqual(add(attrs).status, errSecParam)
        XCTAssertEqual(delete(attrs), errSecParam)
    }

    // Apple: secdxctests/KeychainAPITests.m, testServerUsingDataType
    func testServerUsingDataType() throws {
        let attrs: [CFString: Any] = [
            kSecClass: kSecClassInternetPassword, kSecUseDataProtectionKeychain: true, kSecAttrLabel: "testentry",
        ]
        _ = delete(attrs)
        var addParams = attrs
        addParams[kSecAttrServer] = Data("string".utf8)
        XCTAssertEqual(add(addParams).status, errSecSuccess)
        var query = attrs
        query[kSecReturnAttributes] = true
        let (status, result) = copy(query)
        XCTAssertEqual(status, errSecSuccess)
        let server = try dictionary(result)[kSecAttrServer as String]
        XCTAssertTrue(server is Data, "Should have received a CFData")
        XCTAssertEqual(server as? Data, Data("string".utf8))
        _ = delete(attrs)
    }

    // Apple: secdxctests/KeychainAPITests.m, passInternalAttributeToKeychainAPIsWithKey:value:
    private func assertInternalAttributeRefused(
        _ key: CFString, _ value: Any, file: StaticString = #filePath, line: UInt = #line
    ) {
        let okQuery: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "AppClipTestService",
            kSecUseDataProtectionKeychain: true, kSecValueData: Data("password".utf8),
        ]
        var badQuery = okQuery
        badQuery[key] = value
        let badUpdate: [CFString: Any] = [key: value]
        let okUpdate: [CFString: Any] = [kSecAttrService: "DifferentService"]
        XCTAssertEqual(
            add(badQuery).status, errSecParam, "SecItemAdd did not return errSecParam", file: file, line: line)
        XCTAssertEqual(
            SecItemCopyMatching(badQuery as NSDictionary, nil), errSecParam,
            "SecItemCopyMatching did not return errSecParam", file: file, line: line)
        XCTAssertEqual(
            update(badQuery, okUpdate), errSecParam, "SecItemUpdate with bad query did not return errSecParam",
            file: file, line: line)
        XCTAssertEqual(
            update(okQuery, badUpdate), errSecParam, "SecItemUpdate with bad update did not return errSecParam",
            file: file, line: line)
        XCTAssertEqual(
            delete(badQuery), errSecParam, "SecItemDelete did not return errSecParam", file: file, line: line)
    }

    // Apple: secdxctests/KeychainAPITests.m, testNotAllowedToPassInternalAttributes
    func testNotAllowedToPassInternalAttributes() {
        assertInternalAttributeRefused("clip" as CFString, true)  // kSecAttrAppClipItem
    }

    // Apple: secdxctests/KeychainAPITests.m, testGenpReturnRef and testInetReturnRef (iOS branches: a
    // password has no object form, so a ref asked for is nil)
    func testGenpAndInetReturnRef() {
        let items: [[CFString: Any]] = [
            [kSecClass: kSecClassGenericPassword, kSecAttrService: "TestService"],
            [kSecClass: kSecClassInternetPassword, kSecAttrServer: "www.example.com"],
        ]
        for base in items {
            var addQuery = base
            addQuery[kSecValueData] = Data("password".utf8)
            addQuery[kSecAttrAccount] = "TestAccount"
            addQuery[kSecUseDataProtectionKeychain] = true
            addQuery[kSecReturnRef] = true
            let added = add(addQuery)
            XCTAssertEqual(added.status, errSecSuccess, "Should have succeeded in adding item")
            XCTAssertNil(added.result, "Should have received nil from SecItemAdd when asking for ref")
            var query = addQuery
            query[kSecValueData] = nil
            let found = copy(query)
            XCTAssertEqual(found.status, errSecSuccess, "Should have succeeded in finding item")
            XCTAssertNil(found.result, "Should have received nil from SecItemCopyMatching when asking for ref")
            XCTAssertEqual(delete(query), errSecSuccess, "Should have succeeded in deleting item")
        }
    }

    // Apple: secdxctests/KeychainAPITests.m, testSecItemAddAndCopyMatchingWithUUIDPersistentRefs
    func testSecItemAddAndCopyMatchingWithUUIDPersistentRefs() throws {
        var addQuery: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecValueData: Data("uuid".utf8),
            kSecAttrAccount: "TestUUIDPersistentRefAccount", kSecAttrService: "TestUUIDPersistentRefService",
            kSecUseDataProtectionKeychain: true, kSecReturnAttributes: true,
        ]
        let added = add(addQuery)
        XCTAssertEqual(added.status, errSecSuccess, "Should have succeeded in adding test item to keychain")
        XCTAssertTrue(added.result is [String: Any], "result should be a dictionary")

        addQuery[kSecValueData] = nil
        addQuery[kSecReturnPersistentRef] = true
        let (status, result) = copy(addQuery)
        XCTAssertEqual(status, errSecSuccess, "Should have found item in keychain")
        let found = try dictionary(result)
        XCTAssertNil(found["persistref"], "uuid should be nil")  // v10itempersistentref, an internal column
        let ref = try XCTUnwrap(found[kSecValuePersistentRef as String] as? Data, "classAndUUIDPersistentRef")
        // _SecItemParsePersistentRef: the class, then the item's 16-byte UUID.
        XCTAssertEqual(ref.count, 20, "a class and UUID persistent reference")
        XCTAssertEqual(String(decoding: ref.prefix(4), as: UTF8.self), kSecClassGenericPassword as String, "classes")

        let byRef = copy([kSecValuePersistentRef: ref, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitOne])
        XCTAssertEqual(byRef.status, errSecSuccess, "Should have found persistent reference in keychain")
        XCTAssertNil(try dictionary(byRef.result)["persistref"], "uuid should be nil")
    }

    // Apple: secdxctests/KeychainAPITests.m, testSecItemCopyMatchingHostorSubdomain
    func testSecItemCopyMatchingHostOrSubdomain() throws {
        let baseURL = "origin.example.com"
        XCTAssertEqual(
            add([
                kSecClass: kSecClassInternetPassword, kSecValueData: Data("password".utf8),
                kSecAttrAccount: "TestAccount", kSecAttrServer: baseURL, kSecUseDataProtectionKeychain: true,
            ]).status, errSecSuccess, "Should insert item to find")
        for host in ["example.com", baseURL] {
            let (status, result) = copy([
                kSecClass: kSecClassInternetPassword, kSecMatchHostOrSubdomainOfHost: host,
                kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitOne,
            ])
            XCTAssertEqual(status, errSecSuccess, "Should have found item in keychain (\(host))")
            XCTAssertEqual(
                try dictionary(result)[kSecAttrServer as String] as? String, baseURL, "server should our input server")
        }
        XCTAssertEqual(
            copy([
                kSecClass: kSecClassInternetPassword, kSecMatchHostOrSubdomainOfHost: "foobar.com",
                kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitOne,
            ]).status, errSecItemNotFound, "expecting no matching items found")
    }

    // Apple: secdxctests/KeychainAPITests.m, testSecItemCopyMatchingDoesNotReturnPersistRefs
    func testSecItemCopyMatchingDoesNotReturnPersistRefs() throws {
        let (status, result) = add([
            kSecClass: kSecClassGenericPassword, kSecValueData: Data("uuid".utf8),
            kSecAttrAccount: "TestUUIDPersistentRefAccount", kSecAttrService: "TestUUIDPersistentRefService",
            kSecUseDataProtectionKeychain: true, kSecReturnAttributes: true, kSecReturnPersistentRef: true,
        ])
        XCTAssertEqual(status, errSecSuccess, "Should have succeeded in adding test item to keychain")
        let ref = try XCTUnwrap(
            try dictionary(result)[kSecValuePersistentRef as String], "persistRef should not be nil")
        let found = copy([kSecValuePersistentRef: ref, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitOne])
        XCTAssertEqual(found.status, errSecSuccess, "Should have found item in keychain")
        XCTAssertNil(try dictionary(found.result)["persistref"], "uuid should be nil")
    }

    // Apple: secdxctests/KeychainAPITests.m, testSecItemUpdateUpgradesPersistentReference (the second half:
    // an item's persistent reference survives updates)
    func testSecItemUpdateKeepsPersistentReference() throws {
        var updateQuery: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecValueData: Data("uuid".utf8),
            kSecAttrAccount: "testKeychainItemUpgradePhase3Account1", kSecAttrService: "TestUUIDPersistentRefService",
            kSecUseDataProtectionKeychain: true,
        ]
        var addQuery = updateQuery
        addQuery[kSecReturnAttributes] = true
        addQuery[kSecReturnPersistentRef] = true
        let added = add(addQuery)
        XCTAssertEqual(added.status, errSecSuccess, "Should have succeeded in adding test item to keychain")
        let original = try XCTUnwrap(try dictionary(added.result)[kSecValuePersistentRef as String] as? Data)

        var attributesToUpdate = updateQuery
        attributesToUpdate[kSecClass] = nil
        attributesToUpdate[kSecAttrService] = "am_a_service"
        attributesToUpdate[kSecValueData] = Data("updated uuid".utf8)
        XCTAssertEqual(update(updateQuery, attributesToUpdate), errSecSuccess, "SecItemUpdate should have succeeded")

        var findQuery = attributesToUpdate
        findQuery[kSecClass] = kSecClassGenericPassword
        findQuery[kSecReturnAttributes] = true
        findQuery[kSecReturnPersistentRef] = true
        var found = copy(findQuery)
        XCTAssertEqual(found.status, errSecSuccess, "SecItemCopyMatching should have succeeded")
        let first = try XCTUnwrap(try dictionary(found.result)[kSecValuePersistentRef as String] as? Data)
        XCTAssertEqual(first.count, 20, "persistent ref length should be 20")
        XCTAssertEqual(first, original)

        updateQuery[kSecAttrService] = findQuery[kSecAttrService]
        attributesToUpdate[kSecAttrService] = "service"
        attributesToUpdate[kSecValueData] = Data("replaced uuid".utf8)
        XCTAssertEqual(update(updateQuery, attributesToUpdate), errSecSuccess, "SecItemUpdate should have succeeded")
        findQuery[kSecAttrService] = attributesToUpdate[kSecAttrService]
        found = copy(findQuery)
        XCTAssertEqual(found.status, errSecSuccess, "SecItemCopyMatching should have succeeded")
        let second = try XCTUnwrap(try dictionary(found.result)[kSecValuePersistentRef as String] as? Data)
        XCTAssertEqual(second.count, 20, "persistent ref length should be 20")
        XCTAssertEqual(first, second, "these persistent refs should be equal")
    }

    // Apple: secdxctests/KeychainAPITests.m, CreateTestIdentity()
    private func createTestIdentity() throws -> SecIdentity {
        let cert = try certificate("apple/KeychainAPITests-identity-cert.der")
        let key = try XCTUnwrap(
            SecKeyCreateWithData(
                try resource("apple/KeychainAPITests-identity-key.pkcs1.der") as CFData,
                [
                    kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 2048,
                    kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                ]
                    as NSDictionary, nil), "privateKey should not be nil")
        return try XCTUnwrap(SecIdentityCreate(nil, cert, key), "identity should not be nil")
    }

    // Apple: secdxctests/KeychainAPITests.m, CheckIdentityItem()
    private func checkIdentityItem(
        _ group: String, _ expected: OSStatus, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassIdentity, kSecAttrAccessGroup: group, kSecAttrLabel: "item-delete-me",
                    kSecUseDataProtectionKeychain: true,
                ] as NSDictionary, nil), expected, "identity in \(group)", file: file, line: line)
    }

    // Apple: secdxctests/KeychainAPITests.m, testSecIdentityRefWithNewUUIDPersistentRefs
    func testSecIdentityRefWithNewUUIDPersistentRefs() throws {
        try entitle(["com.apple.security.ckks", "com.apple.lakitu"])
        let identity = try createTestIdentity()
        let (status, ref) = add([
            kSecValueRef: identity, kSecAttrAccessGroup: "com.apple.security.ckks", kSecAttrLabel: "item-delete-me",
            kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock, kSecUseDataProtectionKeychain: true,
            kSecReturnPersistentRef: true,
        ])
        XCTAssertNotNil(ref, "ref should not be nil")
        XCTAssertEqual(status, errSecSuccess, "status should equal errSecSuccess")
        XCTAssertEqual(
            copy([kSecValuePersistentRef: ref as Any, kSecUseDataProtectionKeychain: true]).status, errSecSuccess)
        checkIdentityItem("com.apple.security.ckks", errSecSuccess)
        checkIdentityItem("com.apple.lakitu", errSecItemNotFound)

        // Moving the identity to another access group moves both halves.
        XCTAssertEqual(
            update(
                [
                    kSecClass: kSecClassIdentity, kSecAttrAccessGroup: "com.apple.security.ckks",
                    kSecAttrLabel: "item-delete-me", kSecUseDataProtectionKeychain: true,
                ], [kSecAttrAccessGroup: "com.apple.lakitu"]), errSecSuccess, "status should equal errSecSuccess")
        checkIdentityItem("com.apple.security.ckks", errSecItemNotFound)
        checkIdentityItem("com.apple.lakitu", errSecSuccess)

        let (prefStatus, pref) = copy([
            kSecClass: kSecClassIdentity, kSecAttrAccessGroup: "com.apple.lakitu", kSecAttrLabel: "item-delete-me",
            kSecUseDataProtectionKeychain: true, kSecReturnPersistentRef: true,
        ])
        XCTAssertEqual(prefStatus, errSecSuccess, "status should equal errSecSuccess")
        XCTAssertEqual(
            copy([kSecValuePersistentRef: pref as Any, kSecUseDataProtectionKeychain: true]).status, errSecSuccess)
        // Apple answers an update through the identity's persistent reference with errSecInternal; latchkey
        // updates both halves, as for the query by attributes above (README, differences).
        XCTAssertEqual(
            update(
                [kSecValuePersistentRef: pref as Any, kSecUseDataProtectionKeychain: true],
                [kSecAttrAccessGroup: "com.apple.security.ckks"]), errSecSuccess, "latchkey: the identity is updated")
        checkIdentityItem("com.apple.security.ckks", errSecSuccess)
        checkIdentityItem("com.apple.lakitu", errSecItemNotFound)

        _ = delete([kSecClass: kSecClassIdentity, kSecAttrAccessGroup: "com.apple.security.ckks"])
        _ = delete([kSecClass: kSecClassIdentity, kSecAttrAccessGroup: "com.apple.lakitu"])
        checkIdentityItem("com.apple.security.ckks", errSecItemNotFound)
        checkIdentityItem("com.apple.lakitu", errSecItemNotFound)
    }
}
