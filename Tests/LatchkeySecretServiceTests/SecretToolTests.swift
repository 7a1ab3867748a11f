import Foundation
import LatchkeyDBus
import XCTest

@testable import Latchkey

/// Debian's `secret-tool` (libsecret, DH session) against the agent, and items crossing between
/// Secret Service and SecItem (docs/SECRET-SERVICE.md §1).
final class SecretToolTests: SecretServiceTestCase {
    func testStoreLookupSearchClearRoundTrip() throws {
        try createKeychain()
        var result = try secretTool(
            ["store", "--label", "Mail password", "service", "mail", "account", "alice"],
            input: "hunter2")
        XCTAssertEqual(result.status, 0, result.err)
        result = try secretTool(
            ["store", "--label", "Other", "service", "mail", "account", "bob", "host", "h1"],
            input: "other secret")
        XCTAssertEqual(result.status, 0, result.err)

        result = try secretTool(["lookup", "service", "mail", "account", "alice"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertEqual(result.out, "hunter2")

        result = try secretTool(["search", "--all", "service", "mail"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertTrue(result.out.contains("label = Mail password"), result.out)
        XCTAssertTrue(result.out.contains("secret = hunter2"), result.out)
        XCTAssertTrue(result.out.contains("label = Other"), result.out)
        // secret-tool prints the attributes on standard error.
        XCTAssertTrue(result.err.contains("attribute.host = h1"), result.err)

        // Storing again replaces (libsecret passes replace = true): still one item, the new secret.
        result = try secretTool(
            ["store", "--label", "Mail password", "service", "mail", "account", "alice"],
            input: "changed")
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertEqual(try secretTool(["lookup", "service", "mail", "account", "alice"]).out, "changed")
        let client = try SecretServiceClient(bus.address)
        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "mail")])])
        XCTAssertEqual(found.first?.elements?.count, 2)

        result = try secretTool(["clear", "service", "mail", "account", "alice"])
        XCTAssertEqual(result.status, 0, result.err)
        result = try secretTool(["lookup", "service", "mail", "account", "alice"])
        XCTAssertNotEqual(result.status, 0, "nothing left to find")
        XCTAssertEqual(result.out, "")
        XCTAssertEqual(try secretTool(["lookup", "host", "h1"]).out, "other secret")
    }

    func testSecretToolItemIsASecItemGenericPassword() throws {
        try createKeychain()
        let result = try secretTool(
            ["store", "--label", "GitHub", "service", "github", "account", "octo"], input: "ghp_x")
        XCTAssertEqual(result.status, 0, result.err)

        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "github",
                    kSecAttrAccount: "octo", kSecReturnData: true,
                ] as NSDictionary, &data),
            errSecSuccess)
        XCTAssertEqual((data as? Data).map { String(decoding: $0, as: UTF8.self) }, "ghp_x")
        var attributes: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "github",
                    kSecReturnAttributes: true,
                ] as NSDictionary, &attributes), errSecSuccess)
        let dictionary = attributes as? NSDictionary
        XCTAssertEqual(dictionary?[kSecAttrLabel as String] as? String, "GitHub")
        XCTAssertEqual(dictionary?[kSecAttrAccessible as String] as? String, kSecAttrAccessibleWhenUnlocked as String)
        // Apple's uniqueness: the same (service, account) cannot be added twice, whichever API made it.
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "github", kSecAttrAccount: "octo",
                    kSecValueData: Data("dup".utf8),
                ] as NSDictionary, nil), errSecDuplicateItem)
        // SecItemUpdate changes what secret-tool reads.
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassGenericPassword, kSecAttrService: "github"] as NSDictionary,
                [kSecValueData: Data("rotated".utf8)] as NSDictionary), errSecSuccess)
        XCTAssertEqual(try secretTool(["lookup", "service", "github", "account", "octo"]).out, "rotated")
        // SecItemDelete removes it for secret-tool too.
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: "github"] as NSDictionary),
            errSecSuccess)
        XCTAssertNotEqual(try secretTool(["lookup", "service", "github", "account", "octo"]).status, 0)
    }

    func testSecItemAddedItemIsFoundBySecretService() throws {
        try createKeychain()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "vpn", kSecAttrAccount: "me",
                    kSecAttrLabel: "VPN", kSecValueData: Data("tunnel".utf8),
                ] as NSDictionary, nil),
            errSecSuccess)
        var result = try secretTool(["lookup", "service", "vpn", "account", "me"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertEqual(result.out, "tunnel")
        result = try secretTool(["search", "service", "vpn"])
        XCTAssertTrue(result.out.contains("label = VPN"), result.out)
        XCTAssertTrue(result.err.contains("attribute.account = me"), result.err)
        XCTAssertTrue(result.err.contains("attribute.service = vpn"), result.err)
        // secret-tool storing the same (service, account) replaces the SecItem item's secret in place.
        result = try secretTool(["store", "--label", "VPN", "service", "vpn", "account", "me"], input: "new tunnel")
        XCTAssertEqual(result.status, 0, result.err)
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "vpn",
                    kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll,
                ] as NSDictionary, &data),
            errSecSuccess)
        XCTAssertEqual((data as? [Data])?.map { String(decoding: $0, as: UTF8.self) }, ["new tunnel"])
    }

    func testManyItemsStaySearchable() throws {
        try createKeychain()
        let client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let count = 2_000
        for n in 0..<count {
            let properties = BusValue.dictionary(
                keyType: "s", valueType: "v",
                [
                    (.string("org.freedesktop.Secret.Item.Label"), .variant(.string("item \(n)"))),
                    (
                        .string("org.freedesktop.Secret.Item.Attributes"),
                        .variant(
                            SecretServiceClient.attributes([("app", "bulk"), ("n", "\(n)"), ("group", "\(n % 10)")]))
                    ),
                ])
            try client.call(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [properties, SecretServiceClient.plainSecret(session, "secret-\(n)"), .boolean(false)])
        }
        let items = try XCTUnwrap(client.property(SSPath.login, SSPath.collectionInterface, "Items")?.elements)
        XCTAssertEqual(items.count, count)
        func search(_ pairs: [(String, String)]) throws -> [BusValue] {
            try client.call(
                SSPath.service, SSPath.serviceInterface, "SearchItems",
                [SecretServiceClient.attributes(pairs)]
            ).first?.elements ?? []
        }
        XCTAssertEqual(try search([("app", "bulk")]).count, count)
        XCTAssertEqual(try search([("group", "3")]).count, count / 10)
        for n in stride(from: 0, to: count, by: 97) {
            let found = try search([("app", "bulk"), ("n", "\(n)")])
            XCTAssertEqual(found.count, 1, "item \(n)")
            let secrets = try client.call(
                SSPath.service, SSPath.serviceInterface, "GetSecrets",
                [.array(elementType: "o", found), .objectPath(session)])
            let secret = secrets.first?.elements?.first.flatMap { entry -> BusValue? in
                if case .dictEntry(_, let value) = entry { value } else { nil }
            }
            XCTAssertEqual(
                SecretServiceClient.bytes(secret?.fields?[2]).map { String(decoding: $0, as: UTF8.self) },
                "secret-\(n)")
        }
        XCTAssertEqual(try secretTool(["lookup", "app", "bulk", "n", "1234"]).out, "secret-1234")
    }
}
