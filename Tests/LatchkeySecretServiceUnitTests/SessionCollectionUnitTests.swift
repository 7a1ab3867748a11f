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
        let item = try XCTUnwrap(collection.item(made.id, for: ss.caller))
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
        XCTAssertEqual(
            collection.search(attrs([("k", "v")]), for: ss.caller), [made.id], "found while locked, by its attributes")

        try kc.unlock(password: secret("pw"))
        XCTAssertEqual(try collection.secret(made.id, ss).value, Array("in memory".utf8))
        // Another agent cannot open it: the salt is this collection's, drawn when it was made.
        let otherSalt = (0..<32).map { _ in UInt8.random(in: 0...255) }
        XCTAssertEqual(status { _ = try ss.openInMemory(item.sealed, salt: otherSalt, aad: made.id) }, SecStatus.decode)
        try collection.delete(made.id, for: ss.caller)
        XCTAssertNil(collection.item(made.id, for: ss.caller))
        XCTAssertEqual(status { _ = try collection.secret(made.id, ss) }, SecStatus.itemNotFound)
    }

    /// Each item belongs to its maker's first group: a client of other groups neither finds, reads,
    /// changes, replaces nor deletes it; one that may use any group does.
    func testItemsBelongToTheirMakersGroup() throws {
        let (kc, _) = try makeKeychain()
        func client(_ groups: [String], any: Bool = false) -> SecretServiceKeychain {
            SecretServiceKeychain(
                keychain: kc, caller: Caller(uid: getuid(), pid: 1, accessGroups: groups, mayUseAnyGroup: any))
        }
        let mail = client(["mail", "shared"]), chat = client(["chat", "shared"]), admin = client([], any: true)
        let collection = try SessionCollection()
        let made = try collection.create(
            label: "m", attributes: attrs([("k", "v")]), secret: text("mail's"), replace: true, mail)
        XCTAssertEqual(collection.search(attrs([("k", "v")]), for: chat.caller), [])
        XCTAssertNil(collection.item(made.id, for: chat.caller))
        XCTAssertThrowsError(try collection.secret(made.id, chat)) { XCTAssertEqual($0 as? SecError, .notFound) }
        XCTAssertThrowsError(try collection.update(made.id, label: "x", chat)) {
            XCTAssertEqual($0 as? SecError, .notFound)
        }
        XCTAssertThrowsError(try collection.delete(made.id, for: chat.caller)) {
            XCTAssertEqual($0 as? SecError, .notFound)
        }
        // chat's store with the same attributes and replace is a new item of chat's, beside mail's.
        let chats = try collection.create(
            label: "c", attributes: attrs([("k", "v")]), secret: text("chat's"), replace: true, chat)
        XCTAssertTrue(chats.created)
        XCTAssertEqual(try collection.secret(made.id, mail).value, Array("mail's".utf8))
        XCTAssertEqual(collection.search(attrs([("k", "v")]), for: mail.caller), [made.id])
        XCTAssertEqual(collection.search(attrs([("k", "v")]), for: admin.caller), [made.id, chats.id])
        // A caller with no group (another uid) may add nothing.
        XCTAssertThrowsError(
            try collection.create(label: "", attributes: attrs([]), secret: text("x"), replace: false, client([]))
        ) { XCTAssertEqual(($0 as? SecError)?.status, SecStatus.missingEntitlement) }
        try collection.delete(made.id, for: mail.caller)
        XCTAssertEqual(collection.search(attrs([("k", "v")]), for: admin.caller), [chats.id])
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
        XCTAssertEqual(collection.item(first.id, for: ss.caller)?.label, "2")
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

    /// The byte cap bounds what the items take in the agent's memory, not only their payload. Many small
    /// items, each with 256 attributes whose names and values just miss Swift's 15-byte inline strings (a
    /// heap block each, and a 32-byte pair), fill the collection (LimitsExceeded) before the memory they
    /// took (resident pages, measured after malloc_trim returned the free ones) passes the cap by more
    /// than malloc's fragmentation; so do items with 256 inline attributes, and empty items. Real items
    /// (a label, a few attributes, a short secret) still fit by the item cap, 4,096 of them.
    func testCapBoundsWhatItemsTakeInMemory() throws {
        let (kc, _) = try makeKeychain()
        let ss = kc.secretService
        func padded(_ prefix: String, _ n: Int, _ width: Int) -> String {
            let digits = String(n)
            return prefix + String(repeating: "0", count: max(0, width - prefix.utf8.count - digits.utf8.count))
                + digits
        }
        let shapes: [(String, (Int) -> SecretAttributes)] = [
            (
                "256 attributes of 16 bytes",
                { item in
                    self.attrs((0..<256).map { (padded("name-", $0, 16), padded("v\(item)-", $0, 16)) })
                }
            ),
            ("256 inline attributes", { item in self.attrs((0..<256).map { ("\($0)", "\(item)") }) }),
            ("no attributes", { _ in SecretAttributes() }),
        ]
        for (shape, attributes) in shapes {
            let collection = try SessionCollection()
            let before = try residentBytes()
            var made = 0
            var refusal: Error?
            while refusal == nil && made <= SessionCollection.maxItems {
                do {
                    _ = try collection.create(
                        label: "", attributes: attributes(made), secret: text(""), replace: false, ss)
                    made += 1
                } catch {
                    refusal = error
                }
            }
            XCTAssertEqual((refusal as? BusError)?.name, "org.freedesktop.DBus.Error.LimitsExceeded", shape)
            let grown = try withExtendedLifetime(collection) { try residentBytes() - before }
            // Under ThreadSanitizer (scripts/test-tsan) its allocator and shadow memory are resident too.
            guard dlsym(nil, "__tsan_init") == nil, dlsym(nil, "__asan_init") == nil else { continue }
            // What the items hold is within the cap (measured: 16.8 MB counted for 16 MiB of blocks, 18.5 MB
            // resident with the holes malloc keeps between them: the test's own temporaries, freed, were
            // there); before the cap counted all of it, the first shape took 96 MiB, the second 33.
            XCTAssertLessThanOrEqual(
                grown, SessionCollection.maxBytes + SessionCollection.maxBytes / 4,
                "\(shape): \(made) items took \(grown) bytes")
            if shape.hasPrefix("256 attributes") {
                // The measure sees the items: at least their strings' bytes.
                XCTAssertGreaterThanOrEqual(grown, made * 512 * 16, "\(shape): \(made) items took \(grown) bytes")
            }
        }

        let collection = try SessionCollection()
        let secret = SecretServiceSecret(
            value: Array("correct horse battery staple 123".utf8), contentType: "text/plain")
        for n in 0..<SessionCollection.maxItems {
            let attributes = attrs([
                ("xdg:schema", "org.gnome.keyring.NetworkPassword"), ("user", "user\(n)@example.com"),
                ("server", "imap\(n).example.com"), ("protocol", "imap"), ("port", "993"),
            ])
            XCTAssertNoThrow(
                try collection.create(
                    label: "Password for user\(n)@example.com on imap\(n).example.com", attributes: attributes,
                    secret: secret, replace: false, ss), "item \(n)")
        }
        XCTAssertThrowsError(
            try collection.create(label: "one more", attributes: attrs([]), secret: secret, replace: false, ss)
        ) {
            XCTAssertEqual(($0 as? BusError)?.name, "org.freedesktop.DBus.Error.LimitsExceeded")
            XCTAssertTrue("\($0)".contains("items"), "\($0)")
        }
    }

    /// This process's resident memory, after returning malloc's free pages to the system, so that what
    /// a test allocates next shows as growth even where it reuses memory freed before.
    private func residentBytes() throws -> Int {
        // glibc's `int malloc_trim(size_t)`, which <malloc.h> declares and Swift's Glibc module does not import.
        if let trim = dlsym(nil, "malloc_trim") {
            _ = unsafeBitCast(trim, to: (@convention(c) (UInt) -> Int32).self)(0)
        }
        let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
        return try XCTUnwrap(Int(statm[1])) * sysconf(Int32(_SC_PAGESIZE))
    }
}
