import Foundation
import LatchkeyDBus
import LatchkeyEngineTestSupport
import LatchkeyModel
import XCTest

@testable import LatchkeyEngine
@testable import LatchkeySecretService

/// The in-memory `session` collection on the engine, without D-Bus (docs/SECRET-SERVICE.md §4a).
final class SessionCollectionUnitTests: XCTestCase {
    private func attrs(_ pairs: [(String, String)]) -> SecretAttributes {
        SecretAttributes(pairs.map { SecretAttributes.Pair($0.0, $0.1) })!
    }

    private func text(_ s: String) -> SecretServiceSecret {
        SecretServiceSecret(value: Array(s.utf8), contentType: "text/plain")
    }

    /// The merge in `includes` answers as `contains` does, for maps that share some pairs, names or values.
    func testIncludesIsContains() {
        var generator = SystemRandomNumberGenerator()
        let names = ["a", "b", "c", "d", "e", "\u{E9}", "e\u{301}", "z"]
        let values = ["1", "2", ""]
        func random(_ count: Int) -> SecretAttributes {
            var pairs: [String: String] = [:]
            for _ in 0..<count {
                pairs[names.randomElement(using: &generator)!] = values.randomElement(using: &generator)!
            }
            return attrs(pairs.map { ($0.key, $0.value) })
        }
        for _ in 0..<5_000 {
            let item = random(Int.random(in: 0...6, using: &generator))
            let query = random(Int.random(in: 0...4, using: &generator))
            XCTAssertEqual(
                SessionCollection.includes(item, query), item.contains(query), "\(item.pairs) ⊇ \(query.pairs)")
        }
    }

    func testSecretsAreSealedUnderTheWhenUnlockedClassAndLockWithIt() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let collection = try SessionCollection()
        let made = try collection.create(
            label: "L", attributes: attrs([("k", "v")]), secret: text("in memory"), replace: false, ss)
        XCTAssertTrue(made.created)
        let item = try XCTUnwrap(collection.item(made.id))
        XCTAssertNil(
            item.sealed.firstRange(of: Array("in memory".utf8)), "the secret is kept sealed, never in the clear")
        XCTAssertEqual(try collection.secret(made.id, ss).value, Array("in memory".utf8))

        kc.lock(all: false)
        XCTAssertEqual(status { _ = try collection.secret(made.id, ss) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { try collection.update(made.id, label: "x", ss) }, SecStatus.interactionNotAllowed)
        XCTAssertEqual(
            status {
                _ = try collection.create(label: "", attributes: attrs([]), secret: text(""), replace: false, ss)
            },
            SecStatus.interactionNotAllowed)
        XCTAssertEqual(collection.search(attrs([("k", "v")])), [made.id], "found while locked, by its attributes")

        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(try collection.secret(made.id, ss).value, Array("in memory".utf8))
        // Another agent cannot open it: the salt is this collection's, drawn when it was made.
        let otherSalt = (0..<32).map { _ in UInt8.random(in: 0...255) }
        XCTAssertEqual(status { _ = try ss.openInMemory(item.sealed, salt: otherSalt, aad: made.id) }, SecStatus.decode)
        try collection.delete(made.id)
        XCTAssertNil(collection.item(made.id))
        XCTAssertEqual(status { _ = try collection.secret(made.id, ss) }, SecStatus.itemNotFound)
    }

    func testReplaceAndCaps() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        let collection = try SessionCollection()
        let first = try collection.create(
            label: "1", attributes: attrs([("a", "1"), ("b", "2")]), secret: text("one"), replace: true, ss)
        let again = try collection.create(
            label: "2", attributes: attrs([("b", "2"), ("a", "1")]), secret: text("two"), replace: true, ss)
        XCTAssertEqual(again.id, first.id)
        XCTAssertFalse(again.created)
        XCTAssertEqual(try collection.secret(first.id, ss).value, Array("two".utf8))
        XCTAssertEqual(collection.item(first.id)?.label, "2")
        let other = try collection.create(
            label: "3", attributes: attrs([("a", "1")]), secret: text("three"), replace: true, ss)
        XCTAssertTrue(other.created, "a subset of the attributes is another item")

        let big = SecretServiceSecret(value: [UInt8](repeating: 7, count: 1 << 20), contentType: "")
        var refused: Error?
        for n in 0..<20 {
            do {
                _ = try collection.create(
                    label: "", attributes: attrs([("n", "\(n)")]), secret: big, replace: false, ss)
            } catch {
                refused = error
                break
            }
        }
        XCTAssertEqual((refused as? BusError)?.name, "org.freedesktop.DBus.Error.LimitsExceeded")
        XCTAssertLessThanOrEqual(collection.items.reduce(0) { $0 + $1.size }, SessionCollection.maxBytes)
    }
}
