import Foundation
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine
@testable import LatchkeySecretService

/// `importSecretServiceItem` on the engine (`latchkey migrate`, docs/MIGRATING.md §1): the outcome table,
/// the dry run, the target collections and the caller's group, without D-Bus or the socket.
final class SecretServiceImportTests: XCTestCase {
    private let caller = Caller(uid: getuid(), pid: 1)

    private func request(
        _ label: String = "L", secret: [UInt8] = [0xFF, 0x00], attributes: [String] = ["service", "s", "k", "ü"],
        collection: String? = nil, type: String = "application/octet-stream", conflict: String? = nil,
        dryRun: Bool = false
    ) throws -> SecretServiceImportItem {
        var d: SecDictionary = [
            "label": .string(label), "attributes": .array(attributes.map { .string($0) }), "secret": .data(secret),
            "contentType": .string(type), "dryRun": .bool(dryRun),
        ]
        if let collection { d["collection"] = .string(collection) }
        if let conflict { d["onConflict"] = .string(conflict) }
        return try SecretServiceImportItem(decoding: d)
    }

    private func outcome(_ kc: Keychain, _ item: SecretServiceImportItem) throws -> String {
        try kc.secretService(for: caller).importItem(item).outcome.rawValue
    }

    private func secrets(_ kc: Keychain, in collection: String = SecretServiceKeychain.login) throws -> [[UInt8]] {
        let ss = kc.secretService
        return try ss.items(in: collection).map { try ss.secret($0.id, in: collection).value }
    }

    func testOutcomes() throws {
        let (kc, _) = try makeKeychain()
        XCTAssertEqual(try outcome(kc, try request(dryRun: true)), "added")
        XCTAssertEqual(try secrets(kc), [], "a dry run writes nothing")
        XCTAssertEqual(try outcome(kc, try request()), "added")
        XCTAssertEqual(try outcome(kc, try request()), "unchanged")
        // gnome-keyring reports the same item with the schema it synthesises after a reload.
        XCTAssertEqual(
            try outcome(
                kc, try request(attributes: ["service", "s", "k", "ü", "xdg:schema", "org.freedesktop.Secret.Generic"])),
            "unchanged")
        // Another secret, label or content type: kept by default, and in a dry run with any option.
        XCTAssertEqual(try outcome(kc, try request(secret: [1])), "kept")
        XCTAssertEqual(try outcome(kc, try request("other")), "kept")
        XCTAssertEqual(try outcome(kc, try request(type: "text/plain")), "kept")
        XCTAssertEqual(try outcome(kc, try request(secret: [1], conflict: "replace", dryRun: true)), "replaced")
        XCTAssertEqual(try secrets(kc), [[0xFF, 0x00]])
        XCTAssertEqual(try outcome(kc, try request(secret: [1], conflict: "duplicate")), "duplicated")
        XCTAssertEqual(Set(try secrets(kc)), [[0xFF, 0x00], [1]])
        // Either of the two holding it is enough; then replace changes the first that differs.
        XCTAssertEqual(try outcome(kc, try request(secret: [1])), "unchanged")
        XCTAssertEqual(try outcome(kc, try request(secret: [2], conflict: "replace")), "replaced")
        XCTAssertEqual(try secrets(kc).count, 2)
        XCTAssertTrue(try secrets(kc).contains([2]))
        // Other attributes are another item.
        XCTAssertEqual(try outcome(kc, try request(attributes: ["service", "s"])), "added")
    }

    func testCollectionsByLabelAndTheDefault() throws {
        let (kc, _) = try makeKeychain()
        XCTAssertEqual(
            try kc.secretService(for: caller).importItem(try request(collection: "Work ✓", dryRun: true)).collection,
            "Work ✓")
        XCTAssertEqual(try kc.secretService.state().collections.count, 1, "a dry run creates no collection")
        let made = try kc.secretService(for: caller).importItem(try request(collection: "Work ✓"))
        XCTAssertEqual(made.outcome, .added)
        XCTAssertEqual(try kc.secretService.state().collection(made.collection)?.label, "Work ✓")
        // The same label finds the same collection; the default is login, and they are apart.
        XCTAssertEqual(
            try kc.secretService(for: caller).importItem(try request(collection: "Work ✓")).outcome, .unchanged)
        XCTAssertEqual(
            try kc.secretService(for: caller).importItem(try request()).collection, SecretServiceKeychain.login)
        XCTAssertEqual(try secrets(kc, in: made.collection).count, 1)
        XCTAssertEqual(try secrets(kc).count, 1)
    }

    /// The items land in the caller's first group, as CreateItem's do; another group's item of the same
    /// attributes is not seen, so it is neither reported unchanged nor replaced.
    func testTheCallersGroup() throws {
        let (kc, _) = try makeKeychain()
        let app = Caller(uid: getuid(), pid: 2, accessGroups: ["com.example.app"], mayUseAnyGroup: false)
        XCTAssertEqual(try kc.secretService(for: app).importItem(try request()).outcome, .added)
        XCTAssertEqual(try secrets(kc), [], "an unlisted program does not see the application's item")
        XCTAssertEqual(try outcome(kc, try request(secret: [9], conflict: "replace")), "added")
        XCTAssertEqual(try secrets(kc), [[9]])
    }

    func testMalformedRequestsAreRefused() throws {
        let (kc, _) = try makeKeychain()
        let bad: [SecDictionary] = [
            [:],
            ["label": .string("L"), "attributes": .array([.string("odd")]), "secret": .data([])],
            [
                "label": .string("L"), "attributes": .array([.string("a"), .string("1"), .string("a"), .string("2")]),
                "secret": .data([]),
            ],
            ["label": .string("L"), "attributes": .array([]), "secret": .string("not data")],
            ["label": .string("L"), "attributes": .array([]), "secret": .data([]), "onConflict": .string("merge")],
            ["label": .string("L"), "attributes": .array([]), "secret": .data([]), "surprise": .bool(true)],
        ]
        for d in bad {
            XCTAssertThrowsError(try SecretServiceImportItem(decoding: d), "\(d)")
        }
        let big = try request(secret: [UInt8](repeating: 1, count: SecretServiceLimits.maxSecretBytes + 1))
        XCTAssertThrowsError(try kc.secretService(for: caller).importItem(big)) { error in
            XCTAssertEqual((error as? SecError)?.status, SecStatus.param)
        }
        XCTAssertEqual(try secrets(kc), [])
    }
}
