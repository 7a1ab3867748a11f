import LatchkeyModel
import XCTest

/// `kSecValueRef` and `kSecClassIdentity` in dictionaries: class inference, the wire form of
/// references, identity persistent references and the split of identity filters.
final class ReferenceParsingTests: XCTestCase {
    private func status(_ body: () throws -> Void) -> Int32 {
        do {
            try body()
            return 0
        } catch let e as SecError { return e.status } catch { return -1 }
    }

    private let key = KeyReference(
        keyType: 73, keyClass: 1, sizeInBits: 256, publicKey: [4, 1, 2], material: [4, 1, 2, 3])
    private let certificate = CertificateReference(der: [0x30, 0x03, 0x02, 0x01, 0x01])

    func testReferencesRoundTripThroughTheirWireForm() throws {
        var agentKey = key
        agentKey.material = nil
        agentKey.persistentRef = Array("keys".utf8) + [UInt8](repeating: 7, count: 16)
        agentKey.extractable = false
        for reference in [
            ItemReference.key(key), .key(agentKey), .certificate(certificate),
            .identity(certificate: certificate, key: agentKey),
        ] {
            XCTAssertEqual(try ItemReference(reference.secValue), reference)
        }
        // A key reference naming neither bytes nor an item, or missing its public half, is refused.
        var nothing = key
        nothing.material = nil
        XCTAssertEqual(status { _ = try ItemReference(ItemReference.key(nothing).secValue) }, SecStatus.param)
        XCTAssertEqual(status { _ = try ItemReference(.dictionary(["class": .string("keys")])) }, SecStatus.param)
        XCTAssertEqual(status { _ = try ItemReference(.string("keys")) }, SecStatus.param)
        XCTAssertEqual(status { _ = try ItemReference(.dictionary(["class": .string("genp")])) }, SecStatus.param)
    }

    func testTheClassComesFromTheReferenceAndMustAgree() throws {
        let add = try DictionaryParser.parseAdd(["v_Ref": ItemReference.key(key).secValue, "atag": .data([1])])
        XCTAssertEqual(add.itemClass, .key)
        XCTAssertEqual(add.reference, .key(key))
        XCTAssertEqual(
            status {
                _ = try DictionaryParser.parseAdd(["class": .string("cert"), "v_Ref": ItemReference.key(key).secValue])
            },
            SecStatus.param)
        // The pitfall: an application tag is not a certificate attribute.
        XCTAssertEqual(
            status {
                _ = try DictionaryParser.parseAdd([
                    "v_Ref": ItemReference.certificate(certificate).secValue,
                    "atag": .data([1]),
                ])
            }, SecStatus.noSuchAttr)
        let query = try DictionaryParser.parseQuery(
            ["v_Ref": ItemReference.certificate(certificate).secValue], for: .delete)
        XCTAssertEqual(query.itemClass, .certificate)
        XCTAssertFalse(query.identity)
        // An identity is added only through its reference.
        XCTAssertEqual(status { _ = try DictionaryParser.parseAdd(["class": .string("idnt")]) }, SecStatus.param)
    }

    func testIdentityQueriesSplitCertificateAndKeyFilters() throws {
        let query = try DictionaryParser.parseQuery(
            [
                "class": .string("idnt"), "labl": .string("me"), "atag": .data([1]),
                "bsiz": .int(256), "issr": .data([1]),
            ], for: .copyMatching)
        XCTAssertTrue(query.identity)
        XCTAssertEqual(query.itemClass, .certificate)
        XCTAssertEqual(Set(query.attributes.keys), ["labl", "issr"], "the certificate wins on shared names")
        XCTAssertEqual(Set(query.keyAttributes.keys), ["atag", "bsiz"])
        XCTAssertEqual(
            status {
                _ = try DictionaryParser.parseQuery(
                    ["class": .string("idnt"), "acct": .string("x")], for: .copyMatching)
            },
            SecStatus.noSuchAttr)
    }

    func testIdentityPersistentReferences() throws {
        let uuid = [UInt8](repeating: 9, count: 16)
        let ref = PersistentRef(itemClass: .certificate, uuid: uuid, identity: true)
        XCTAssertEqual(Array(ref.bytes.prefix(4)), Array("idnt".utf8))
        XCTAssertEqual(PersistentRef(bytes: ref.bytes), ref)
        let query = try DictionaryParser.parseQuery(["v_PersistentRef": .data(ref.bytes)], for: .copyMatching)
        XCTAssertTrue(query.identity)
        // A certificate's own reference is not an identity's, and the classes must agree.
        let plain = PersistentRef(itemClass: .certificate, uuid: uuid)
        XCTAssertFalse(
            try DictionaryParser.parseQuery(["v_PersistentRef": .data(plain.bytes)], for: .copyMatching).identity)
        XCTAssertEqual(
            status {
                _ = try DictionaryParser.parseQuery(
                    ["class": .string("cert"), "v_PersistentRef": .data(ref.bytes)],
                    for: .copyMatching)
            }, SecStatus.noSuchClass)
        XCTAssertEqual(
            status {
                _ = try DictionaryParser.parseQuery(
                    ["class": .string("idnt"), "v_PersistentRef": .data(plain.bytes)],
                    for: .copyMatching)
            }, SecStatus.noSuchClass)
    }
}
