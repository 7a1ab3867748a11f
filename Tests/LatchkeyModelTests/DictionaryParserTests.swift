import LatchkeyModel
import XCTest

/// securityd's dictionary rules, without an engine.
final class DictionaryParserTests: XCTestCase {
    private func parseStatus(_ body: () throws -> Void) -> Int32 {
        do {
            try body()
            return 0
        } catch let e as SecError { return e.status } catch { return -1 }
    }

    func testDefaultsPerOperation() throws {
        let query: SecDictionary = ["class": .string("genp")]
        XCTAssertEqual(try DictionaryParser.parseQuery(query, for: .copyMatching).limit, .one)
        XCTAssertEqual(try DictionaryParser.parseQuery(query, for: .update).limit, .all)
        XCTAssertEqual(try DictionaryParser.parseQuery(query, for: .delete).limit, .all)
        XCTAssertEqual(try DictionaryParser.parseQuery(query, for: .copyMatching).synchronizable, false)
    }

    func testCoercion() throws {
        let add = try DictionaryParser.parseAdd([
            "class": .string("inet"), "port": .string("443"), "ptcl": .string("htps"),
            "acct": .data(Array("a".utf8)), "invi": .bool(true),
        ])
        XCTAssertEqual(add.attributes["port"], .int(443), "a string that round-trips becomes a number")
        XCTAssertEqual(add.attributes["ptcl"], .string("htps"), "one that does not stays a string")
        XCTAssertEqual(add.attributes["acct"], .data(Array("a".utf8)), "blobs keep the caller's type")
        XCTAssertEqual(add.attributes["invi"], .int(1), "booleans become 0/1")
        XCTAssertEqual(
            parseStatus { _ = try DictionaryParser.parseAdd(["class": .string("genp"), "cdat": .int(3)]) },
            SecStatus.param)
    }

    func testCanonicalBytesMatchStringAndDataButNotNumbers() {
        let acct = ItemClass.genericPassword.attribute("acct")!
        XCTAssertEqual(
            AttributeValue.canonicalBytes(acct, .string("x")), AttributeValue.canonicalBytes(acct, .data([0x78])))
        let port = ItemClass.internetPassword.attribute("port")!
        XCTAssertNotEqual(
            AttributeValue.canonicalBytes(port, .int(0x78)), AttributeValue.canonicalBytes(port, .string("x")))
        let svce = ItemClass.genericPassword.attribute("svce")!
        XCTAssertNotEqual(
            AttributeValue.canonicalBytes(acct, .string("x")), AttributeValue.canonicalBytes(svce, .string("x")),
            "the attribute name is part of the canonical bytes")
    }

    func testResultShapeRules() {
        var flags = ReturnFlags()
        flags.data = true
        XCTAssertFalse(flags.wantsDictionary)
        flags.persistentRef = true
        XCTAssertTrue(flags.wantsDictionary)
        XCTAssertFalse(MatchLimit.count(1).returnsArray)
        XCTAssertTrue(MatchLimit.count(2).returnsArray)
        XCTAssertTrue(MatchLimit.all.returnsArray)
    }

    func testStatusMessagesUseApplesText() {
        XCTAssertEqual(SecStatus.message(for: -25300), "The specified item could not be found in the keychain.")
        XCTAssertEqual(SecStatus.message(for: -25308), "User interaction is not allowed.")
        XCTAssertEqual(SecStatus.message(for: -25299), "The specified item already exists in the keychain.")
    }

    func testPersistentRefFormats() {
        let uuid = [UInt8](repeating: 7, count: 16)
        let ref = PersistentRef(itemClass: .internetPassword, uuid: uuid)
        XCTAssertEqual(ref.bytes.count, 20)
        XCTAssertEqual(PersistentRef(bytes: ref.bytes), ref)
        XCTAssertEqual(
            PersistentRef(bytes: Array("genp".utf8) + [0, 0, 0, 0, 0, 0, 0, 5])?.rowID, 5, "legacy row-id form")
        XCTAssertNil(PersistentRef(bytes: Array("zzzz".utf8) + uuid))
    }
}

final class WipeTests: XCTestCase {
    func testWipeReachesSharedStorageOfNestedData() {
        let secret = (0..<32).map { UInt8($0 + 1) }  // heap storage, as decoded data is
        let copy = secret  // a second holder of the same buffer
        let value = SecValue.dictionary(["v_Data": .data(secret), "list": .array([.data(copy), .string("kept")])])
        value.wipeDataInPlace()
        XCTAssertEqual(secret, [UInt8](repeating: 0, count: 32))
        XCTAssertEqual(copy, [UInt8](repeating: 0, count: 32))
        XCTAssertEqual(SecValue.data([]), .data([]), "empty data is left alone")
        SecValue.data([]).wipeDataInPlace()
    }
}
