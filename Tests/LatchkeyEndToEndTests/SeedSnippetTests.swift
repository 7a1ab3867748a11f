import Foundation
import Latchkey
import LatchkeySecrets
import XCTest

/// The Swift snippets from the seeds, compiled against `import Latchkey` instead of `import Security`,
/// run against the real agent.
final class SeedSnippetTests: AgentTestCase {
    enum PwdKeychainError: Error {
        case notFound
        case unhandledError(status: OSStatus)
    }

    /// seeds/004 (SecurityBox README): add, read with attributes and data, update, delete.
    func testSecurityBoxReadme() throws {
        try createKeychain()
        let service = "SecurityBox", account = "alice", accessGroup = "com.example.shared", password = "hunter2"
        // The README's app is entitled to its shared group; an unlisted program (this test) is not, and
        // gets errSecMissingEntitlement until it proves the keychain password for that group.
        var denied = [String: AnyObject]()
        denied[kSecClass as String] = kSecClassGenericPassword
        denied[kSecAttrService as String] = service as AnyObject?
        denied[kSecAttrAccessGroup as String] = accessGroup as AnyObject?
        XCTAssertEqual(SecItemAdd(denied as CFDictionary, nil), errSecMissingEntitlement)
        try KeychainControl.authorizeAccessGroups([accessGroup], password: SecretBytes(copying: Array("pw".utf8)))

        var item = [String: AnyObject]()
        item[kSecClass as String] = kSecClassGenericPassword
        item[kSecAttrService as String] = service as AnyObject?
        item[kSecAttrAccount as String] = account as AnyObject?
        item[kSecAttrAccessGroup as String] = accessGroup as AnyObject?
        let encodedPassword = password.data(using: String.Encoding.utf8)!
        item[kSecValueData as String] = encodedPassword as AnyObject?
        var status = SecItemAdd(item as CFDictionary, nil)
        XCTAssertEqual(status, noErr)

        var query = [String: AnyObject]()
        query[kSecClass as String] = kSecClassGenericPassword
        query[kSecAttrService as String] = service as AnyObject?
        query[kSecAttrAccount as String] = account as AnyObject?
        query[kSecAttrAccessGroup as String] = accessGroup as AnyObject?
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        query[kSecReturnAttributes as String] = kCFBooleanTrue
        query[kSecReturnData as String] = kCFBooleanTrue
        var queryResult: AnyObject?
        status = withUnsafeMutablePointer(to: &queryResult) {
            SecItemCopyMatching(query as CFDictionary, UnsafeMutablePointer($0))
        }
        XCTAssertEqual(status, noErr)
        guard let existingItem = queryResult as? [String: AnyObject],
            let passwordData = existingItem[kSecValueData as String] as? Data,
            let readBack = String(data: passwordData, encoding: String.Encoding.utf8)
        else {
            return XCTFail("unexpected result \(String(describing: queryResult))")
        }
        XCTAssertEqual(readBack, password)
        XCTAssertEqual(existingItem[kSecAttrAccount as String] as? String, account)

        var attributesToUpdate = [String: AnyObject]()
        attributesToUpdate[kSecValueData as String] = "correct horse".data(using: .utf8)! as AnyObject?
        var updateQuery = item
        updateQuery.removeValue(forKey: kSecValueData as String)
        status = SecItemUpdate(updateQuery as CFDictionary, attributesToUpdate as CFDictionary)
        XCTAssertEqual(status, noErr)

        status = SecItemDelete(updateQuery as CFDictionary)
        XCTAssertEqual(status, noErr)
        status = SecItemDelete(updateQuery as CFDictionary)
        XCTAssertThrowsError(
            try {
                guard status != errSecItemNotFound else { throw PwdKeychainError.notFound }
                guard status == noErr else { throw PwdKeychainError.unhandledError(status: status) }
            }())
    }

    /// seeds/003, "Queries and Uniqueness Constraints": the fatal error IS reachable.
    func testPitfallsUniquenessExample() throws {
        try createKeychain()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword,
                    kSecAttrService: "AYS",
                    kSecAttrAccount: "mrgumby",
                    kSecAttrGeneric: Data("OtherHints".utf8),
                    kSecValueData: Data("x".utf8),
                ] as NSDictionary, nil), errSecSuccess)

        var copyResult: CFTypeRef? = nil
        let query =
            [
                kSecClass: kSecClassGenericPassword,
                kSecAttrService: "AYS",
                kSecAttrAccount: "mrgumby",
                kSecAttrGeneric: Data("SecItemHints".utf8),
            ] as NSMutableDictionary
        let err = SecItemCopyMatching(query, &copyResult)
        XCTAssertEqual(err, errSecItemNotFound)
        var reachedFatalError = false
        if err == errSecItemNotFound {
            query[kSecValueData] = Data("opendoor".utf8)
            let err2 = SecItemAdd(query, nil)
            if err2 == errSecDuplicateItem { reachedFatalError = true }
        }
        XCTAssertTrue(reachedFatalError)
    }

    /// seeds/003, "Erroneous Attributes": kSecAttrApplicationTag is not a generic-password attribute.
    func testErroneousAttribute() throws {
        try createKeychain()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword,
                    kSecAttrApplicationTag: Data("alice".utf8),
                    kSecValueData: Data("x".utf8),
                ] as NSDictionary, nil), errSecNoSuchAttr)
    }

    /// seeds/003, "Less Painful Dictionaries" and "Avoid Reusing Dictionaries".
    func testLessPainfulDictionariesAndMakeDict() throws {
        try createKeychain()
        func makeDict() -> NSMutableDictionary {
            [kSecClass: kSecClassGenericPassword, kSecAttrService: "AYS", kSecAttrAccount: "mrgumby"]
                as NSMutableDictionary
        }
        var copyResult: CFTypeRef? = nil
        let query = makeDict()
        query[kSecReturnData] = true
        var err = SecItemCopyMatching(query, &copyResult)
        XCTAssertEqual(err, errSecItemNotFound)
        if err == errSecItemNotFound {
            let add = makeDict()
            add[kSecValueData] = Data("opendoor".utf8)
            err = SecItemAdd(add, nil)
        }
        XCTAssertEqual(err, errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(query, &copyResult), errSecSuccess)
        XCTAssertEqual(copyResult as? Data, Data("opendoor".utf8))

        let ten =
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "AYS", kSecMatchLimit: 10,
                kSecReturnAttributes: true,
            ] as NSDictionary
        XCTAssertEqual(SecItemCopyMatching(ten, &copyResult), errSecSuccess)
        XCTAssertEqual((copyResult as? [[String: Any]])?.count, 1, "a numeric limit other than 1 gives an array")
    }

    /// seeds/003, "Lost Keychain Items, Redux": dumpGenericPasswords() with secCall.
    func testDumpGenericPasswords() throws {
        try createKeychain()
        for account in ["a", "b"] {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrService: "AYS",
                        kSecAttrAccount: account,
                    ] as NSDictionary, nil), errSecSuccess)
        }
        var printed: [[String: Any]] = []
        func dumpGenericPasswords() throws {
            let itemDicts =
                try secCall {
                    SecItemCopyMatching(
                        [
                            kSecClass: kSecClassGenericPassword,
                            kSecMatchLimit: kSecMatchLimitAll,
                            kSecReturnAttributes: true,
                        ] as NSDictionary, $0)
                } as! [[String: Any]]
            print(itemDicts)
            printed = itemDicts
        }
        try dumpGenericPasswords()
        XCTAssertEqual(printed.compactMap { $0[kSecAttrAccount as String] as? String }.sorted(), ["a", "b"])
        XCTAssertTrue(printed.allSatisfy { $0[kSecAttrModificationDate as String] is Date })
        XCTAssertEqual(
            SecCopyErrorMessageString(errSecItemNotFound, nil) as String?,
            "The specified item could not be found in the keychain.")
    }
}
