import Foundation
import LatchkeyCodec
import LatchkeyCrypto
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore
import XCTest

@testable import LatchkeyEngine

/// The engine must open, and reproduce byte for byte, every value in Vectors/store-v1.json: the worked
/// examples of docs/STORE.md, whose expected values an independent implementation of that document
/// re-derived (Python and pyca/cryptography; the script is STORE.md's appendix). Any change to the
/// at-rest format fails here.
final class StoreVectorTests: XCTestCase {
    /// One item of the vector file, parsed.
    private struct Vector {
        let json: [String: Any]
        let name: String
        let itemClass: ItemClass
        let protection: ProtectionClass
        let synchronizable: Bool
        let attributes: SecDictionary
        let secretService: SecretServiceData?

        func bytes(_ key: String) throws -> [UInt8] { try hexBytes(XCTUnwrap(json[key] as? String, "\(name): \(key)")) }
        func list(_ key: String) -> [[String: Any]] { json[key] as? [[String: Any]] ?? [] }
    }

    private func loadDocument() throws -> [String: Any] {
        let url = try XCTUnwrap(
            Bundle.module.url(forResource: "store-v1", withExtension: "json", subdirectory: "Vectors"))
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    private func loadVectors() throws -> [Vector] {
        try XCTUnwrap(loadDocument()["items"] as? [[String: Any]]).map { v in
            let name = try XCTUnwrap(v["name"] as? String)
            var attributes: SecDictionary = [:]
            for entry in try XCTUnwrap(v["attributes"] as? [[String: Any]]) {
                attributes[try XCTUnwrap(entry["name"] as? String)] = try value(entry)
            }
            var secretService: SecretServiceData?
            if let ss = v["secret_service"] as? [String: Any] {
                let pairs = try XCTUnwrap(ss["attributes"] as? [[String]]).map { SecretAttributes.Pair($0[0], $0[1]) }
                var data = SecretServiceData(
                    attributes: try XCTUnwrap(SecretAttributes(pairs)),
                    collection: try XCTUnwrap(ss["collection"] as? String),
                    contentType: try XCTUnwrap(ss["content_type"] as? String),
                    nonce: hexBytes(try XCTUnwrap(ss["nonce_hex"] as? String)))
                data.keepsGenericIdentity = try XCTUnwrap(ss["keeps_generic_identity"] as? Bool)
                secretService = data
            }
            return Vector(
                json: v, name: name,
                itemClass: try XCTUnwrap(ItemClass(rawValue: UInt8(try XCTUnwrap(v["item_class"] as? Int)))),
                protection: try XCTUnwrap(ProtectionClass(rawValue: UInt8(try XCTUnwrap(v["protection"] as? Int)))),
                synchronizable: try XCTUnwrap(v["synchronizable"] as? Bool),
                attributes: attributes, secretService: secretService)
        }
    }

    /// A typed attribute value: `{"type": "string" | "data" (hex) | "int" | "date", "value": ...}`.
    private func value(_ entry: [String: Any]) throws -> SecValue {
        let type = try XCTUnwrap(entry["type"] as? String)
        switch type {
        case "string": return .string(try XCTUnwrap(entry["value"] as? String))
        case "data": return .data(hexBytes(try XCTUnwrap(entry["value"] as? String)))
        case "int": return .int(try XCTUnwrap(entry["value"] as? NSNumber).int64Value)
        case "date": return .date(try XCTUnwrap(entry["value"] as? NSNumber).doubleValue)
        default: throw VectorFileError(message: "unknown value type \(type)")
        }
    }

    /// The class keys of the file, installed as the engine installs keys from the keybag.
    private func keyState() throws -> KeyState {
        var keys: [ProtectionClass: SecretBytes] = [:]
        for (raw, key) in try XCTUnwrap(loadDocument()["class_keys"] as? [String: String]) {
            keys[try XCTUnwrap(UInt8(raw).flatMap(ProtectionClass.init(rawValue:)))] = SecretBytes(
                copying: hexBytes(key))
        }
        var state = KeyState()
        try state.install(keys)
        return state
    }

    private func row(_ v: Vector, persistentRef: [UInt8]? = nil) throws -> StoreRow {
        StoreRow(
            id: 1, persistentRef: try persistentRef ?? v.bytes("persistent_ref_hex"),
            itemClass: Int(v.itemClass.rawValue),
            protection: Int(v.protection.rawValue), synchronizable: v.synchronizable,
            uniqueHash: try v.bytes("unique_hash_hex"), wrappedKey: try v.bytes("wrapped_key_hex"),
            metadata: try v.bytes("metadata_hex"), secret: try v.bytes("secret_sealed_hex"))
    }

    func testVectorsCoverEveryKindOfItem() throws {
        let vectors = try loadVectors()
        XCTAssertEqual(Set(vectors.map(\.itemClass)), [.genericPassword, .internetPassword, .key])
        XCTAssertTrue(vectors.contains { $0.synchronizable }, "no synchronizable item")
        XCTAssertTrue(
            vectors.contains { $0.secretService == nil && $0.itemClass == .genericPassword },
            "no generic password seen through the Secret Service view")
        XCTAssertTrue(
            vectors.contains { $0.json["collection_hash_hex"] != nil && $0.secretService != nil },
            "no Secret Service item outside login")
        for v in vectors {
            // The plaintext columns repeat what the sealed attributes say.
            XCTAssertEqual(v.attributes[SecAttr.accessible], .string(v.protection.pdmn), v.name)
            XCTAssertEqual(v.attributes[SecAttr.synchronizable], .int(v.synchronizable ? 1 : 0), v.name)
        }
    }

    func testIndexKeyIsHKDFOfTheAfterFirstUnlockClassKey() throws {
        XCTAssertEqual(KeyState.indexKeyInfo, Array("latchkey index v1".utf8))
        // The engine keeps the index key only as a keyed HMAC context; it is the vector's key exactly when
        // it computes the same MACs as that key (checked on an input and its neighbour).
        let indexKey = try keyState().requireIndexKey()
        let expected = SecretBytes(copying: hexBytes(try XCTUnwrap(loadDocument()["index_key_hex"] as? String)))
        for input in [Array("latchkey".utf8), Array("latchkez".utf8), []] {
            XCTAssertEqual(try indexKey.hash(input), try HMAC.sha256(key: expected, input))
        }
    }

    /// (a) The fixed blobs open with the fixed keys through the engine's own path, to the given values.
    func testEngineOpensEveryVector() throws {
        let keys = try keyState()
        for v in try loadVectors() {
            let item = try ItemSealer.open(try row(v), keys: keys)
            XCTAssertEqual(item.attributes, v.attributes, v.name)
            XCTAssertEqual(item.secretService, v.secretService, v.name)
            XCTAssertEqual(item.itemClass, v.itemClass, v.name)
            XCTAssertEqual(item.protection, v.protection, v.name)
            XCTAssertTrue(item.itemKey.constantTimeEquals(SecretBytes(copying: try v.bytes("item_key_hex"))), v.name)
            XCTAssertEqual(try ItemSealer.openSecret(item), try v.bytes("secret_hex"), v.name)

            // The associated data binds the blobs to their row: under another persistent ref they do not open.
            var otherRef = try v.bytes("persistent_ref_hex")
            otherRef[0] ^= 0x01
            XCTAssertEqual(
                status { _ = try ItemSealer.open(try row(v, persistentRef: otherRef), keys: keys) },
                SecStatus.decode, v.name)
        }
    }

    /// (b) Everything deterministic, recomputed with the engine's code and compared byte for byte.
    func testEngineReproducesTheDeterministicBytes() throws {
        let indexKey = try keyState().requireIndexKey()
        for v in try loadVectors() {
            let ref = try v.bytes("persistent_ref_hex")
            for (role, key) in [
                (ItemSealer.Role.wrappedKey, "aad_wrapped_key_hex"), (.metadata, "aad_metadata_hex"),
                (.secret, "aad_secret_hex"),
            ] {
                XCTAssertEqual(
                    hexString(ItemSealer.aad(role, ref: ref, itemClass: v.itemClass, protection: v.protection)),
                    v.json[key] as? String, "\(v.name): \(key)")
            }
            var sealed = v.attributes
            if let ss = v.secretService { sealed[SecretServiceData.key] = ss.encoded }
            XCTAssertEqual(
                hexString(ValueCodec.encode(.dictionary(sealed))), v.json["metadata_plaintext_hex"] as? String,
                "\(v.name): encoded attributes")

            var expectedIndex: [String] = []
            for entry in v.list("attribute_hashes") {
                let name = try XCTUnwrap(entry["name"] as? String)
                let spec = try XCTUnwrap(v.itemClass.attribute(name))
                let value = try XCTUnwrap(v.attributes[name])
                XCTAssertEqual(
                    hexString(AttributeValue.canonicalBytes(spec, value)), entry["canonical_hex"] as? String,
                    "\(v.name): canonical \(name)")
                XCTAssertEqual(
                    hexString(try ItemSealer.attributeHash(spec, value, indexKey: indexKey)),
                    entry["hash_hex"] as? String, "\(v.name): A hash of \(name)")
                expectedIndex.append(try XCTUnwrap(entry["hash_hex"] as? String))
            }
            XCTAssertEqual(
                Set(v.list("attribute_hashes").compactMap { $0["name"] as? String }),
                Set(v.attributes.keys).subtracting([SecAttr.accessible, SecAttr.synchronizable]), v.name)
            if v.itemClass == .genericPassword {
                let data = SecretServiceMapping.data(of: v.attributes, sealed: v.secretService)
                XCTAssertEqual(
                    data.attributes.pairs.map { [$0.name, $0.value] },
                    v.list("pair_hashes").map { [$0["name"] as? String ?? "", $0["value"] as? String ?? ""] }, v.name)
                for (pair, entry) in zip(data.attributes.pairs, v.list("pair_hashes")) {
                    XCTAssertEqual(
                        hexString(try SecretServiceMapping.pairHash(pair, indexKey: indexKey)),
                        entry["hash_hex"] as? String, "\(v.name): S hash of \(pair.name)")
                    expectedIndex.append(try XCTUnwrap(entry["hash_hex"] as? String))
                }
                if let collectionHash = v.json["collection_hash_hex"] as? String {
                    XCTAssertEqual(
                        hexString(try SecretServiceMapping.collectionHash(data.collection, indexKey: indexKey)),
                        collectionHash, "\(v.name): C hash")
                    expectedIndex.append(collectionHash)
                }
            }
            let indexHashes = try ItemSealer.indexHashes(
                itemClass: v.itemClass, attributes: v.attributes, indexKey: indexKey,
                secretService: v.secretService)
            XCTAssertEqual(
                indexHashes.map(hexString).sorted(), v.json["index_hashes_hex"] as? [String], "\(v.name): index")
            XCTAssertEqual(
                expectedIndex.sorted(), v.json["index_hashes_hex"] as? [String], "\(v.name): index hashes listed")

            let discriminator = SecretServiceMapping.discriminator(v.secretService)
            if let ss = v.json["secret_service"] as? [String: Any] {
                XCTAssertEqual(
                    discriminator.map(hexString), ss["discriminator_hex"] as? String, "\(v.name): discriminator")
            }
            let uniqueHash = try ItemSealer.uniqueHash(
                itemClass: v.itemClass, attributes: v.attributes, indexKey: indexKey,
                discriminator: discriminator)
            XCTAssertEqual(uniqueHash, try v.bytes("unique_hash_hex"), "\(v.name): U hash")
            XCTAssertEqual(try indexKey.hash(try v.bytes("unique_input_hex")), uniqueHash, "\(v.name): U input")
        }
    }

    /// (c) Sealing with the vector's item key and nonces reproduces the row the store would hold.
    func testSealingWithTheVectorsKeyAndNoncesReproducesTheRow() throws {
        let keys = try keyState()
        for v in try loadVectors() {
            let row = try ItemSealer.seal(
                ref: try v.bytes("persistent_ref_hex"), itemClass: v.itemClass, protection: v.protection,
                synchronizable: v.synchronizable, attributes: v.attributes, secret: try v.bytes("secret_hex"),
                classKey: try keys.key(for: v.protection), indexKey: try keys.requireIndexKey(),
                secretService: v.secretService, itemKey: SecretBytes(copying: try v.bytes("item_key_hex")),
                nonces: ItemSealer.Nonces(
                    wrappedKey: try v.bytes("nonce_wrapped_key_hex"),
                    metadata: try v.bytes("nonce_metadata_hex"),
                    secret: try v.bytes("nonce_secret_hex")))
            XCTAssertEqual(row.persistentRef, try v.bytes("persistent_ref_hex"), v.name)
            XCTAssertEqual(row.itemClass, Int(v.itemClass.rawValue), v.name)
            XCTAssertEqual(row.protection, Int(v.protection.rawValue), v.name)
            XCTAssertEqual(row.synchronizable, v.synchronizable, v.name)
            XCTAssertEqual(hexString(row.wrappedKey), v.json["wrapped_key_hex"] as? String, "\(v.name): wrapped key")
            XCTAssertEqual(hexString(row.metadata), v.json["metadata_hex"] as? String, "\(v.name): metadata")
            XCTAssertEqual(hexString(row.secret), v.json["secret_sealed_hex"] as? String, "\(v.name): secret")
            XCTAssertEqual(hexString(row.uniqueHash), v.json["unique_hash_hex"] as? String, "\(v.name): uniq")
            XCTAssertEqual(row.indexHashes.map(hexString).sorted(), v.json["index_hashes_hex"] as? [String], v.name)
        }
    }
}

private struct VectorFileError: Error {
    let message: String
}

private func hexBytes(_ string: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = string.startIndex
    while index < string.endIndex {
        let next = string.index(index, offsetBy: 2)
        out.append(UInt8(string[index..<next], radix: 16)!)
        index = next
    }
    return out
}

private func hexString(_ bytes: [UInt8]) -> String {
    let digits: [Character] = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xf)]] })
}
