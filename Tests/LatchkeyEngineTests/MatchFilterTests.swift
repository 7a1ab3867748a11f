import LatchkeyEngineTestSupport
import LatchkeyModel
import XCTest

@testable import LatchkeyEngine

/// The search keys securityd answers on the opened item (SecItemServer.c, `SecServerMatch_Item` and
/// `isHostOrSubdomainOfHost`): kSecMatchHostOrSubdomainOfHost for internet passwords.
final class MatchFilterTests: XCTestCase {
    private func inet(_ server: SecValue, _ account: String) -> SecDictionary {
        ["class": .string("inet"), "srvr": server, "acct": .string(account), "v_Data": bytes("pw")]
    }

    private func servers(_ kc: Keychain, host: String, limit: SecValue = .string("m_LimitAll")) throws -> [String] {
        let found = try kc.copy([
            "class": .string("inet"), "m_HostOrSubdomainOfHost": .string(host), "r_Attributes": .bool(true),
            "m_Limit": limit,
        ])
        let rows: [SecValue]
        switch found {
        case .array(let values)?: rows = values
        case let value?: rows = [value]
        case nil: rows = []
        }
        return rows.compactMap { row in
            guard case .dictionary(let attributes) = row, case .string(let server)? = attributes["srvr"] else {
                return nil
            }
            return server
        }.sorted()
    }

    func testHostOrSubdomainMatchesTheHostAndItsSubdomainsOnly() throws {
        let (kc, _) = try makeKeychain()
        for (index, server) in ["example.com", "a.example.com", "b.a.example.com", "notexample.com", "Example.com"]
            .enumerated()
        {
            XCTAssertNil(try kc.add(inet(.string(server), "u\(index)")))
        }
        // A server stored as data never matches, as in securityd (it compares strings only).
        XCTAssertNil(try kc.add(inet(bytes("data.example.com"), "d")))

        XCTAssertEqual(try servers(kc, host: "example.com"), ["a.example.com", "b.a.example.com", "example.com"])
        XCTAssertEqual(try servers(kc, host: "a.example.com"), ["a.example.com", "b.a.example.com"])
        // Compared as CFEqual and CFStringHasSuffix compare: exactly, without case folding.
        XCTAssertEqual(try servers(kc, host: "Example.com"), ["Example.com"])
        XCTAssertEqual(
            status { _ = try kc.copy(["class": .string("inet"), "m_HostOrSubdomainOfHost": .string("ample.com")]) },
            SecStatus.itemNotFound)
        // The default limit of one applies to what matches, not to the first rows the index finds.
        XCTAssertEqual(try servers(kc, host: "b.a.example.com", limit: .string("m_LimitOne")), ["b.a.example.com"])
    }

    func testHostOrSubdomainIsAStringForInternetPasswordsInCopyMatchingOnly() throws {
        let (kc, _) = try makeKeychain()
        XCTAssertNil(try kc.add(inet(.string("example.com"), "u")))
        XCTAssertNil(try kc.add(genp("example.com", "u", ["v_Data": bytes("pw")])))
        // securityd: errSecUnsupportedOperation (-4) for another class, errSecParam for a value that is not
        // a string; and no kSecMatch key in SecItemUpdate or SecItemDelete.
        XCTAssertEqual(
            status { _ = try kc.copy(["class": .string("genp"), "m_HostOrSubdomainOfHost": .string("example.com")]) },
            SecStatus.unimplemented)
        XCTAssertEqual(
            status { _ = try kc.copy(["class": .string("inet"), "m_HostOrSubdomainOfHost": bytes("example.com")]) },
            SecStatus.param)
        let query: SecDictionary = ["class": .string("inet"), "m_HostOrSubdomainOfHost": .string("example.com")]
        XCTAssertEqual(status { try kc.update(query, ["labl": .string("x")]) }, SecStatus.param)
        XCTAssertEqual(status { try kc.delete(query) }, SecStatus.param)
        XCTAssertEqual(status { _ = try kc.copy(query) }, 0)
    }
}
