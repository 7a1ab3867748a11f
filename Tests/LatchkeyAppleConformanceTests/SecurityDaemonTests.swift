import Foundation
import Latchkey
import LatchkeySecrets
import XCTest

/// securityd's own tests: keychain/securityd/Regressions/secd-*.m and tests/secdmockaks/mockaksKeychain.m
/// (class mockaksKeychain), ported to the public library against the real agent. Where Apple's tests lock
/// a mock keybag, these lock the agent (`latchkey lock`, `latchkey unlock`).
///
/// Ported: secd-01-items, secd-82-persistent-ref; from mockaksKeychain: testAddDeleteItem,
/// testAddKeyByReference, testBindObjectIntParsing, and testSecItemServerDeleteAll's adds and lookups.
/// Not ported, and why:
/// - secd-02, -20, -21, -30, -35 and mockaksKeychain's testUpgrade*, testClassAUpgrade*, testSecKeychainForceUpgrade*,
///   testPersonaBasic, testSecKeychainDeleteMultiUserBadUUID: securityd's schema migrations and multi-user
///   keychains, which latchkey's store does not have.
/// - secd-03/-04/-05-corrupted-items: securityd skips a damaged item and deletes it; latchkey reports it with
///   errSecDecode and deletes nothing (README, differences).
/// - secd-31-keychain-unreadable, -32/-33/-34 backups, -36-ks-encrypt, mockaksKeychain's testBackupRestore*,
///   testCreateSampleDatabase, testTestAKSGenerationCount, testMetadataKeyRaceConditionFixed,
///   testReadOnlyConnection, testSecdTransactionThreading, testUpgradeWithBadACLKey,
///   testKeychainPathWithEntitlement: AppleKeyStore, iTunes backups and securityd's database handles.
/// - secd-37, -39, -49 … -68, -70 … -80, -90, -100 … -232 (SOS, OTR, views, accounts, coders, key
///   interests): iCloud Keychain sync and its circle.
/// - secd-81-item-acl(-stress), mockaksKeychain's testLAContext, testInteractionFailuresFromReferenceKeys,
///   testAddDeleteItemWithBiometryCurrentSet: SecAccessControl and LocalAuthentication, not implemented
///   (README, differences).
/// - secd-83-item-match-policy/-trusted/-valid-on-date: kSecMatchPolicy, kSecMatchTrustedOnly and
///   kSecMatchValidOnDate need SecPolicy and SecTrust (errSecUnimplemented here; README).
/// - mockaksKeychain's testSecItemIsSystemBoundMatchAnyString: `SecItemIsSystemBound`, securityd's list of
///   Apple system items; testSecItemServerDeleteAll's `SecServerItemDeleteAll` (SPI).
final class SecurityDaemonTests: ConformanceTestCase {
    private func lock() throws { try KeychainControl.lock(all: false) }
    private func unlock() throws { try KeychainControl.unlock(password: SecretBytes(copying: Array("pw".utf8))) }

    // Apple: keychain/securityd/Regressions/secd-01-items.m, secd_01_items()
    func testSecd01Items() throws {
        let query: [CFString: Any] = [
            kSecClass: kSecClassInternetPassword, kSecAttrServer: "members.spamcop.net", kSecAttrAccount: "smith",
            kSecAttrPort: 80, kSecAttrProtocol: "http", kSecAttrAuthenticationType: "dflt", kSecReturnData: true,
        ]
        var item = query
        item[kSecValueData] = Data("test".utf8)
        try lock()
        XCTAssertEqual(
            SecItemAdd(item as NSDictionary, nil), errSecInteractionNotAllowed, "add internet password while locked")
        try unlock()
        XCTAssertEqual(SecItemAdd(item as NSDictionary, nil), errSecSuccess, "add internet password, while unlocked")
        try lock()
        XCTAssertEqual(
            SecItemAdd(item as NSDictionary, nil), errSecInteractionNotAllowed,
            "add internet password again, while locked")
        try unlock()
        XCTAssertEqual(
            SecItemAdd(item as NSDictionary, nil), errSecDuplicateItem, "add internet password again, while unlocked")
        XCTAssertEqual(copy(query).status, errSecSuccess, "find internet password, while unlocked")
        try lock()
        XCTAssertEqual(copy(query).status, errSecInteractionNotAllowed, "find internet password, while locked")
    }

    // Apple: keychain/securityd/Regressions/secd-82-persistent-ref.m, secd_82_persistent_ref()
    func testSecd82PersistentRef() throws {
        XCTAssertEqual(
            add([
                kSecClass: kSecClassGenericPassword, kSecAttrAccessible: kSecAttrAccessibleAlways,
                kSecAttrLabel: "TestLabel", kSecAttrDescription: "TestDescription", kSecAttrAccount: "TestAccount",
                kSecAttrService: "TestService", kSecValueData: Data([0, 1, 2]),
            ]).status, errSecSuccess)
        let (status, result) = copy([
            kSecClass: kSecClassGenericPassword, kSecAttrSynchronizable: kSecAttrSynchronizableAny,
            kSecAttrAccount: "TestAccount", kSecReturnAttributes: true, kSecReturnPersistentRef: true,
            kSecMatchLimit: kSecMatchLimitAll,
        ])
        XCTAssertEqual(status, errSecSuccess)
        let rows = try XCTUnwrap(result as? [[String: Any]], "No results from SecItemCopyMatching")
        XCTAssertEqual(rows.count, 1)
        for row in rows { XCTAssertTrue(row[kSecValuePersistentRef as String] is Data) }
    }

    // Apple: tests/secdmockaks/mockaksKeychain.m, testAddDeleteItem
    func testMockAKSAddDeleteItem() {
        let item: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecValueData: Data("password".utf8), kSecAttrAccount: "TestAccount",
            kSecAttrService: "TestService", kSecUseDataProtectionKeychain: true,
        ]
        XCTAssertEqual(add(item).status, errSecSuccess, "failed to add test item to keychain")
        var dataQuery = item
        dataQuery[kSecValueData] = nil
        dataQuery[kSecReturnData] = true
        XCTAssertEqual(copy(dataQuery).status, errSecSuccess, "failed to find the data for the item we just added")
        XCTAssertEqual(delete(dataQuery), errSecSuccess, "failed to delete item")
    }

    // Apple: tests/secdmockaks/mockaksKeychain.m, testAddKeyByReference
    func testMockAKSAddKeyByReference() throws {
        let (key, _) = try generatePair(kSecAttrKeyTypeRSA, 1024)
        let item: [CFString: Any] = [
            kSecClass: kSecClassKey, kSecValueRef: key, kSecAttrLabel: "TestLabel", kSecUseDataProtectionKeychain: true,
        ]
        XCTAssertEqual(add(item).status, errSecSuccess, "failed to add test item to keychain")
        var refQuery = item
        refQuery[kSecValueData] = nil
        refQuery[kSecReturnRef] = true
        let (status, found) = copy(refQuery)
        XCTAssertEqual(status, errSecSuccess, "failed to find the reference for the item we just added")
        let foundKey = try XCTUnwrap(found as? SecKey)
        XCTAssertEqual(
            SecKeyCopyExternalRepresentation(foundKey, nil) as Data?,
            SecKeyCopyExternalRepresentation(key, nil) as Data?,
            "found key does not match the key we put in the keychain")
        XCTAssertEqual(delete(refQuery), errSecSuccess, "failed to delete key")
    }

    // Apple: tests/secdmockaks/mockaksKeychain.m, testBindObjectIntParsing
    func testMockAKSBindObjectIntParsing() throws {
        let keyType = NSNumber(value: UInt32(0x8000_0001))
        var query: [CFString: Any] = [
            kSecClass: kSecClassKey, kSecAttrCanEncrypt: true, kSecAttrCanDecrypt: true, kSecAttrCanDerive: false,
            kSecAttrCanSign: false, kSecAttrCanVerify: false, kSecAttrCanWrap: false, kSecAttrCanUnwrap: false,
            kSecAttrKeySizeInBits: 256, kSecAttrEffectiveKeySize: 256, kSecValueData: Data("a".utf8),
            kSecAttrKeyType: keyType,
        ]
        XCTAssertEqual(add(query).status, errSecSuccess, "Succeeded in adding key to keychain")
        query[kSecValueData] = nil
        XCTAssertEqual(update(query, [kSecValueData: Data("b".utf8)]), errSecSuccess, "Successfully updated key")
        query[kSecReturnAttributes] = true
        let (status, output) = copy(query)
        XCTAssertEqual(status, errSecSuccess, "Found key in keychain")
        let attributes = try dictionary(output)
        XCTAssertEqual(attributes[kSecAttrKeyType as String] as? NSNumber, keyType, "keytype is unchanged")
    }

    // Apple: tests/secdmockaks/mockaksKeychain.m, testSecItemServerDeleteAll (the adds and lookups; the
    // deletion itself is SPI)
    func testMockAKSItemsOfEveryKindAreAddedAndFound() throws {
        try entitle(["com.apple.bluetooth", "lockdown-identities"])
        var items: [[CFString: Any]] = [
            [
                kSecClass: kSecClassGenericPassword, kSecAttrAccessGroup: "com.apple.bluetooth",
                kSecAttrService: "BluetoothGlobal", kSecAttrAccessible: kSecAttrAccessibleAlwaysThisDeviceOnly,
                kSecAttrSynchronizable: false, kSecValueData: Data("btkey".utf8),
            ],
            [
                kSecClass: kSecClassKey, kSecAttrAccessGroup: "lockdown-identities",
                kSecAttrLabel: "com.apple.lockdown.identity.activation",
                kSecAttrAccessible: kSecAttrAccessibleAlwaysThisDeviceOnly, kSecAttrSynchronizable: false,
                kSecValueData: Data("ldkey".utf8),
            ],
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "NonsyncableService",
                kSecAttrSynchronizable: false, kSecValueData: Data("s0pwd".utf8),
            ],
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "SyncableService", kSecAttrSynchronizable: true,
                kSecValueData: Data("s0pwd".utf8),
            ],
        ]
        for item in items { XCTAssertEqual(add(item).status, errSecSuccess, "failed to add \(item)") }
        for index in items.indices { items[index][kSecValueData] = nil }
        for item in items { XCTAssertEqual(copy(item).status, errSecSuccess, "failed to find \(item)") }
    }
}
