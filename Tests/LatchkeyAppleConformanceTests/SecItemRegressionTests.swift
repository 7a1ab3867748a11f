import Foundation
import Latchkey
import XCTest

/// Apple's SecItem regression tests of OSX/sec/Security/Regressions/secitem/ (si-00 … si-80) for
/// passwords and certificates, ported to the public library against the real agent.
///
/// Ported: si-00-find-nothing, si-05-add, si-10-find-internet, si-11-update-data, si-12-item-stress,
/// si-43-persistent, si-72-syncableitems, si-78-query-attrs, si-80-empty-data.
/// Not ported, and why:
/// - si-12-item-stress's tombstone checks: `kSecUseTombstones` and `kSecAttrTombstone` are SPI for iCloud
///   Keychain sync, which latchkey has no counterpart of (a deleted item is gone; no tombstone is kept).
/// - si-14-dateparse: SecCertificate's internal date parser (SPI), not a SecItem behaviour.
/// - si-15-delete-access-group, si-17-item-system-bluetooth: the access-group entitlement and the system
///   keychain (issue 12's keychain-access-groups work; no system keychain on Linux).
/// - si-30-keychain-upgrade, si-31-keychain-bad/-unreadable, si-33-keychain-backup: securityd's SQLite
///   schema migrations, damaged-file handling and iTunes backup blobs, which are specific to its files.
/// - si-23, si-25 … si-29, si-34, si-35, si-60, si-62 … si-66, si-84, si-89, si-90, si-95, si-96: SecTrust,
///   CMS, CSR and SCEP (no such API here). si-50-secrandom, si-73-secpasswordgenerate: SecRandom and the
///   password generator. si-69-keydesc: the text of a key's description. si_77_SecAccessControl:
///   SecAccessControl objects, not implemented (README, differences). si-76-shared-credentials: Safari's
///   shared web credentials. si-82-token-ag: CryptoTokenKit tokens.
/// - si-68-secmatchissuer: `kSecMatchIssuers` walks trust chains (errSecUnimplemented here; README).
final class SecItemRegressionTests: ConformanceTestCase {
    // Apple: OSX/sec/Security/Regressions/secitem/si-00-find-nothing.c, tests()
    func testSi00FindNothing() {
        let (status, result) = copy([kSecClass: kSecClassInternetPassword])
        XCTAssertEqual(status, errSecItemNotFound, "find nothing")
        XCTAssertNil(result, "results still NULL")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-05-add.c, persistentRefIs()
    private func assertPersistentRef(_ ref: Any?, yields data: Data, file: StaticString = #filePath, line: UInt = #line)
    {
        let (status, result) = copy([kSecValuePersistentRef: ref as Any, kSecReturnData: true])
        XCTAssertEqual(status, errSecSuccess, "lookup item data by persistent ref", file: file, line: line)
        XCTAssertEqual(result as? Data, data, "result equals expected data", file: file, line: line)
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-05-add.c, tests()
    func testSi05Add() throws {
        let certData = try resource("apple/si-05-add-cert.der")
        let cert = try XCTUnwrap(SecCertificateCreateWithData(nil, certData as CFData), "create myCert")
        var dict: [CFString: Any] = [kSecClass: kSecClassCertificate, kSecValueRef: cert]

        // Case 1: no return pointer; a second add is a duplicate.
        XCTAssertEqual(
            SecItemAdd(dict as NSDictionary, nil), errSecSuccess, "Case 1: add certificate NULL return pointer")
        XCTAssertEqual(SecItemAdd(dict as NSDictionary, nil), errSecDuplicateItem, "add certificate again")
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate")

        // Case 1b: nothing asked for, nothing returned.
        var (status, handle) = add(dict)
        XCTAssertEqual(status, errSecSuccess, "Case 1: add certificate dont ask for return type")
        XCTAssertNil(handle, "nothing returned")
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate")

        // Case 2: the persistent reference, which finds the certificate's data again.
        dict[kSecReturnPersistentRef] = true
        (status, handle) = add(dict)
        XCTAssertEqual(status, errSecSuccess, "Case 2: add certificate ask for persistent ref")
        XCTAssertTrue(handle is Data, "persistent ref returned")
        assertPersistentRef(handle, yields: certData)
        dict[kSecReturnPersistentRef] = nil
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate")

        // Case 3: the ref.
        dict[kSecReturnRef] = true
        (status, handle) = add(dict)
        XCTAssertEqual(status, errSecSuccess, "Case 3: add certificate ask for ref to be returned explicitly")
        XCTAssertEqual(handle as? SecCertificate, cert, "certificate ref matches")
        dict[kSecReturnRef] = nil
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate")

        // Case 4: the data.
        dict[kSecReturnData] = true
        (status, handle) = add(dict)
        XCTAssertEqual(status, errSecSuccess, "Case 4: add certificate ask for data to be returned explicitly")
        XCTAssertEqual(handle as? Data, certData, "certificate data matches")
        dict[kSecReturnData] = nil
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate")

        // Case 5: the attributes, without data, ref or persistent ref; type and encoding are numbers.
        dict[kSecReturnAttributes] = true
        (status, handle) = add(dict)
        XCTAssertEqual(status, errSecSuccess, "Case 5: add certificate ask for attributes to be returned explicitly")
        var attributes = try dictionary(handle)
        XCTAssertNil(attributes[kSecValueData as String], "result has no data")
        XCTAssertNil(attributes[kSecValueRef as String], "result has no ref")
        XCTAssertNil(attributes[kSecValuePersistentRef as String], "result has no persistent ref")
        XCTAssertTrue(attributes[kSecAttrCertificateType as String] is NSNumber, "certificate type is a number")
        XCTAssertTrue(attributes[kSecAttrCertificateEncoding as String] is NSNumber, "certificate encoding is a number")
        dict[kSecReturnAttributes] = nil
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate")

        // Case 6: all four return keys.
        for key in [kSecReturnData, kSecReturnAttributes, kSecReturnRef, kSecReturnPersistentRef] { dict[key] = true }
        (status, handle) = add(dict)
        XCTAssertEqual(
            status, errSecSuccess, "Case 6: add certificate ask for attributes, data, ref and persistent ref")
        XCTAssertNotNil(handle, "certificate handle returned")
        attributes = try dictionary(handle)
        XCTAssertEqual(attributes[kSecValueData as String] as? Data, certData, "certificate data in dict matches")
        XCTAssertEqual(attributes[kSecValueRef as String] as? SecCertificate, cert, "certificate ref in dict matches")
        assertPersistentRef(attributes[kSecValuePersistentRef as String], yields: certData)
        XCTAssertEqual(attributes[kSecClass as String] as? String, kSecClassCertificate as String, "class matches")
        XCTAssertTrue(attributes[kSecAttrCertificateType as String] is NSNumber, "certificate type is a number")
        XCTAssertTrue(attributes[kSecAttrCertificateEncoding as String] is NSNumber, "certificate encoding is a number")
        for key in [kSecReturnData, kSecReturnAttributes, kSecReturnRef, kSecReturnPersistentRef] { dict[key] = nil }
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate")

        // Case 7: an attribute certificates do not have.
        dict[kSecAttrApplicationTag] = Data("funnytag".utf8)
        XCTAssertEqual(add(dict).status, errSecNoSuchAttr, "Case 7: add certificate with bogus attribute")
        XCTAssertEqual(delete(dict), errSecNoSuchAttr, "delete certificate with bogus attribute")
        dict[kSecAttrApplicationTag] = nil

        // Case 8: a synchronizable certificate.
        dict[kSecAttrSynchronizable] = true
        XCTAssertEqual(add(dict).status, errSecSuccess, "add certificate with synchronizable attribute works")
        XCTAssertEqual(delete(dict), errSecSuccess, "delete certificate with synchronizable attribute works")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-10-find-internet.c, tests()
    func testSi10FindInternet() throws {
        let query: [CFString: Any] = [
            kSecClass: kSecClassInternetPassword, kSecAttrServer: "members.spamcop.net", kSecAttrAccount: "smith",
            kSecAttrPort: 80, kSecAttrProtocol: "http", kSecAttrAuthenticationType: "dflt",
        ]
        var item = query
        item[kSecValueData] = Data("test".utf8)
        XCTAssertEqual(add(item).status, errSecSuccess, "add internet password")
        XCTAssertEqual(add(item).status, errSecDuplicateItem, "add internet password again")
        XCTAssertEqual(copy(query).status, errSecSuccess, "find internet password")

        var withAttributes = query
        withAttributes[kSecReturnAttributes] = true
        withAttributes[kSecMatchLimit] = kSecMatchLimitOne
        let (status, result) = copy(withAttributes)
        XCTAssertEqual(status, errSecSuccess, "find internet password, return attributes")
        // The returned attributes, as a query, find the item again.
        var fromAttributes: [CFString: Any] = [:]
        for (name, value) in try dictionary(result) { fromAttributes[name as CFString] = value }
        fromAttributes["sha1" as CFString] = nil  // kSecAttrSHA1
        fromAttributes[kSecClass] = kSecClassInternetPassword
        fromAttributes[kSecReturnData] = true
        let found = copy(fromAttributes)
        XCTAssertEqual(found.status, errSecSuccess, "find internet password using returned attributes")
        XCTAssertEqual(found.result as? Data, Data("test".utf8), "retrieved data correctly")

        // Change the server; the old query then finds nothing.
        let changes: [CFString: Any] = [kSecAttrServer: "www.spamcop.net"]
        XCTAssertEqual(update(query, changes), errSecSuccess, "update internet password")
        XCTAssertEqual(update(query, changes), errSecItemNotFound, "update non-existing internet password again")
        XCTAssertEqual(delete(query), errSecItemNotFound, "delete non existing internet password")
        XCTAssertEqual(add(item).status, errSecSuccess, "add unmodified password")
        XCTAssertEqual(delete(query), errSecSuccess, "delete internet password")

        // An update onto an existing item's primary key is a duplicate.
        XCTAssertEqual(add(item).status, errSecSuccess, "add unmodified password")
        XCTAssertEqual(update(query, changes), errSecDuplicateItem, "update internet password causing dupe")
        XCTAssertEqual(delete(query), errSecSuccess, "delete internet password")
        XCTAssertEqual(
            delete([kSecAttrServer: "www.spamcop.net", kSecClass: kSecClassInternetPassword]), errSecSuccess,
            "delete changed internet password")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-11-update-data.c, tests()
    func testSi11UpdateData() {
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrAccount: "dankeen", kSecAttrService: "iTools",
        ]
        var item = query
        item[kSecValueData] = Data("test".utf8)
        XCTAssertEqual(add(item).status, errSecSuccess, "add generic password")
        XCTAssertEqual(copy(query).status, errSecSuccess, "find generic password")
        XCTAssertEqual(
            update(query, [kSecValueData: Data("different password data this time".utf8)]), errSecSuccess,
            "update generic password")
        // Apple sets a NULL value; a Swift caller's nearest is kCFNull.
        XCTAssertEqual(update(query, [kSecValueData: kCFNull]), errSecParam, "update NULL data")
        XCTAssertEqual(update(query, [kSecValueData: "bogus"]), errSecParam, "update string data")
        XCTAssertEqual(delete(query), errSecSuccess, "delete generic password")
    }

    /// si-12's item for `num`: a class chosen by `num % 4` and every primary-key attribute of it, as Bool,
    /// number, string or data values made from `num`.
    private func stressItem(_ num: Int) -> [CFString: Any] {
        let string = "string-\(num)", data = Data("data-\(num)".utf8)
        switch num % 4 {
        case 0:
            return [
                kSecClass: kSecClassInternetPassword, kSecAttrAccount: string, kSecAttrSecurityDomain: string,
                kSecAttrServer: string, kSecAttrProtocol: num, kSecAttrAuthenticationType: num, kSecAttrPort: num,
                kSecAttrPath: string,
            ]
        case 1:
            return [kSecClass: kSecClassGenericPassword, kSecAttrAccount: string, kSecAttrService: string]
        case 2:
            return [
                kSecClass: kSecClassKey, kSecAttrKeyClass: string, kSecAttrApplicationLabel: data,
                kSecAttrApplicationTag: data, kSecAttrKeyType: num, kSecAttrKeySizeInBits: num,
                kSecAttrEffectiveKeySize: num,
            ]
        default:
            return [
                kSecClass: kSecClassCertificate, kSecAttrCertificateType: num, kSecAttrIssuer: data,
                kSecAttrSerialNumber: data,
            ]
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-12-item-stress.c, tests() (without the tombstone
    // checks; see the list at the top)
    func testSi12ItemStress() {
        for num in 0..<8 {
            var item = stressItem(num)
            item[kSecAttrSynchronizable] = true
            XCTAssertEqual(add(item).status, errSecSuccess, "add sync (\(num))")
            XCTAssertEqual(delete(item), errSecSuccess, "delete sync (\(num))")
            XCTAssertEqual(copy(item).status, errSecItemNotFound, "nothing left after delete sync (\(num))")
            XCTAssertEqual(add(item).status, errSecSuccess, "add sync again (\(num))")
            XCTAssertEqual(delete(item), errSecSuccess, "delete sync again (\(num))")

            item[kSecAttrSynchronizable] = nil
            XCTAssertEqual(add(item).status, errSecSuccess, "add local (\(num))")
            XCTAssertEqual(delete(item), errSecSuccess, "delete local (\(num))")
            XCTAssertEqual(copy(item).status, errSecItemNotFound, "do not find after delete local (\(num))")
            XCTAssertEqual(delete(item), errSecItemNotFound, "do not delete after delete local (\(num))")
        }
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-43-persistent.c, tests()
    func testSi43Persistent() throws {
        let base: [CFString: Any] = [
            kSecClass: kSecClassInternetPassword, kSecAttrServer: "zuigt.nl", kSecAttrAccount: "frtnbf",
            kSecAttrPort: 80, kSecAttrProtocol: "http", kSecAttrAuthenticationType: "dflt",
        ]
        var item = base
        item[kSecReturnPersistentRef] = true
        item[kSecValueData] = Data("test".utf8)
        var (status, persist) = add(item)
        XCTAssertEqual(status, errSecSuccess, "add internet password")
        XCTAssertNotNil(persist, "got back persistent ref")

        var query = base
        query[kSecReturnAttributes] = true
        let byAttributes = copy(query)
        XCTAssertEqual(byAttributes.status, errSecSuccess, "find internet password by attr")
        let byRefQuery: [CFString: Any] = [kSecReturnAttributes: true, kSecValuePersistentRef: persist as Any]
        let byRef = copy(byRefQuery)
        XCTAssertEqual(byRef.status, errSecSuccess, "find internet password by persistent ref")
        XCTAssertEqual(byAttributes.result as? NSDictionary, byRef.result as? NSDictionary, "same item (attributes)")

        XCTAssertEqual(delete(query), errSecSuccess, "delete internet password")
        let gone = copy(query)
        XCTAssertNotEqual(gone.status, errSecSuccess, "don't find internet password by attributes")
        XCTAssertNil(gone.result, "no results")
        let goneByRef = copy(byRefQuery)
        XCTAssertNotEqual(goneByRef.status, errSecSuccess, "don't find internet password by persistent ref anymore")
        XCTAssertNil(goneByRef.result, "no results")

        // A new item and a second one; update the first through its persistent reference.
        (status, persist) = add(item)
        XCTAssertEqual(status, errSecSuccess, "add internet password")
        var item2 = item
        item2[kSecAttrAccount] = "johndoe"
        let (status2, persist2) = add(item2)
        XCTAssertEqual(status2, errSecSuccess, "add second internet password")
        XCTAssertTrue(persist is Data, "result is a CFData")
        var query3: [CFString: Any] = [kSecValuePersistentRef: persist as Any]
        XCTAssertEqual(update(query3, [kSecAttrServer: "zuigt.com"]), errSecSuccess, "update via persistent ref")

        query3[kSecReturnAttributes] = true
        let updated = copy(query3)
        XCTAssertEqual(updated.status, errSecSuccess, "find updated internet password by persistent ref")
        XCTAssertEqual(
            try dictionary(updated.result)[kSecAttrServer as String] as? String, "zuigt.com",
            "verify attribute was modified by update")
        query3[kSecReturnAttributes] = nil

        let query4: [CFString: Any] = [kSecValuePersistentRef: persist2 as Any, kSecReturnAttributes: true]
        let other = copy(query4)
        XCTAssertEqual(other.status, errSecSuccess, "find non updated internet password by persistent ref")
        XCTAssertEqual(
            try dictionary(other.result)[kSecAttrServer as String] as? String, "zuigt.nl",
            "verify second items attribute was not modified by update")

        XCTAssertEqual(delete(query3), errSecSuccess, "delete via persistent ref")
        XCTAssertEqual(
            copy(query3).status, errSecItemNotFound, "don't find deleted internet password by persistent ref")
        XCTAssertEqual(copy(query4).status, errSecSuccess, "find non deleted internet password by persistent ref")
        XCTAssertEqual(delete(query4), errSecSuccess, "delete internet password by persistent ref")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-72-syncableitems.c, tests()
    func testSi72SyncableItems() {
        let account = "Test Account \(UUID().uuidString)", service = "Test Service"
        XCTAssertEqual(
            add([
                kSecClass: kSecClassGenericPassword, kSecAttrLabel: "Test Synchronizable Item",
                kSecAttrComment: "Test Comment", kSecAttrAccount: account, kSecAttrService: service,
                kSecAttrSynchronizable: true, kSecValueData: Data("Test\0".utf8), kSecReturnAttributes: true,
            ]).status, errSecSuccess, "SecItemAdd sync=true")
        let unique: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrAccount: account, kSecAttrService: service,
        ]
        var query = unique
        query[kSecAttrSynchronizable] = true
        query[kSecReturnAttributes] = true
        XCTAssertEqual(copy(query).status, errSecSuccess, "SecItemCopyMatching sync=true")
        query[kSecAttrSynchronizable] = kSecAttrSynchronizableAny
        XCTAssertEqual(copy(query).status, errSecSuccess, "SecItemCopyMatching sync=any")

        var syncQuery = unique
        syncQuery[kSecAttrSynchronizable] = true
        XCTAssertEqual(
            update(syncQuery, [kSecAttrComment: "Updated Comment"]), errSecSuccess, "SecItemUpdate sync=true")
        syncQuery[kSecAttrComment] = "Updated Comment"
        XCTAssertEqual(copy(syncQuery).status, errSecSuccess, "SecItemCopyMatching post-update")
        XCTAssertEqual(delete(syncQuery), errSecSuccess, "SecItemDelete sync=true")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-78-query-attrs.c, tests()
    func testSi78QueryAttrs() throws {
        let data = try resource("apple/si-78-query-attrs-vdata.bin")
        let service = "SafariCreditCardEntries-test"
        XCTAssertEqual(
            add([
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "3B1ED3EC-A558-43F0-B337-6E891000466B-test",
                kSecAttrService: service, kSecValueData: data,
            ]).status, errSecSuccess, "add generic password")

        // Data and persistent ref without attributes: dictionaries that hold exactly those two.
        var query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecMatchLimit: kSecMatchLimitAll,
            kSecReturnData: true, kSecReturnPersistentRef: true,
        ]
        var (status, result) = copy(query)
        XCTAssertEqual(status, errSecSuccess, "query generic password")
        var rows = try XCTUnwrap(result as? [Any], "return 1-sized array of results")
        XCTAssertEqual(rows.count, 1, "return 1-sized array of results")
        let row = try dictionary(rows.first as CFTypeRef?)
        XCTAssertTrue(row[kSecValuePersistentRef as String] is Data, "result contains valid persistentref")
        XCTAssertTrue(row[kSecValueData as String] is Data, "result contains data")
        XCTAssertEqual(row[kSecValueData as String] as? Data, data, "returned data are correct")

        // Data alone: an array of data.
        query[kSecReturnPersistentRef] = nil
        (status, result) = copy(query)
        XCTAssertEqual(status, errSecSuccess, "query generic password")
        rows = try XCTUnwrap(result as? [Any], "return 1-sized array of results")
        XCTAssertEqual(rows.count, 1, "return 1-sized array of results")
        XCTAssertTrue(rows.first is Data, "result contains data")
        XCTAssertEqual(rows.first as? Data, data, "returned data are correct")

        // The persistent reference alone: an array of data too.
        query[kSecReturnData] = nil
        query[kSecReturnPersistentRef] = true
        (status, result) = copy(query)
        XCTAssertEqual(status, errSecSuccess, "query generic password")
        rows = try XCTUnwrap(result as? [Any], "return 1-sized array of results")
        XCTAssertEqual(rows.count, 1, "return 1-sized array of results")
        XCTAssertTrue(rows.first is Data, "result contains data")

        XCTAssertEqual(
            delete([kSecClass: kSecClassGenericPassword, kSecAttrService: service]), errSecSuccess,
            "delete testing item")
    }

    // Apple: OSX/sec/Security/Regressions/secitem/si-80-empty-data.c, tests()
    func testSi80EmptyData() throws {
        XCTAssertEqual(
            add([
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "empty-data-account-test",
                kSecAttrService: "empty-data-svce-test",
            ]).status, errSecSuccess, "add generic password")
        let (status, result) = copy([
            kSecClass: kSecClassGenericPassword, kSecAttrService: "empty-data-svce-test",
            kSecMatchLimit: kSecMatchLimitAll, kSecReturnData: true, kSecReturnAttributes: true,
        ])
        XCTAssertEqual(status, errSecSuccess, "query generic password")
        let rows = try XCTUnwrap(result as? [Any], "return 1-sized array of results")
        XCTAssertEqual(rows.count, 1, "return 1-sized array of results")
        let row = try dictionary(rows.first as CFTypeRef?)
        XCTAssertNil(row[kSecValueData as String], "result contains no data")
        XCTAssertEqual(row[kSecAttrService as String] as? String, "empty-data-svce-test", "svce attribute is returned")
        XCTAssertEqual(
            row[kSecAttrAccount as String] as? String, "empty-data-account-test", "account attribute is returned")
        XCTAssertEqual(
            delete([kSecClass: kSecClassGenericPassword, kSecAttrService: "empty-data-svce-test"]), errSecSuccess,
            "delete testing item")
    }
}
