import Foundation
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto
@testable import LatchkeyEngine

/// Vectors/backup-v1.json, docs/BACKUP.md §8: a backup written by `latchkey backup`, opened by an
/// independent reader of the document (Python and pyca/cryptography, the script in BACKUP.md's appendix),
/// which recorded the keys and the chunks' plaintext. This code must derive the same keys, open the same
/// chunks and read the same items; any change to the format fails here.
final class BackupVectorTests: XCTestCase {
    private func vector() throws -> [String: Any] {
        let url = try XCTUnwrap(
            Bundle.module.url(forResource: "backup-v1", withExtension: "json", subdirectory: "Vectors"))
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    private func hex(_ v: [String: Any], _ key: String) throws -> [UInt8] {
        backupHex(try XCTUnwrap(v[key] as? String, key))
    }

    func testTheVectorOpensToTheRecordedKeysChunksAndItems() throws {
        let v = try vector()
        let file = try hex(v, "file_hex")
        let header = try BackupHeader.read(file)
        let argon2 = try XCTUnwrap(v["argon2"] as? [String: Int])
        XCTAssertEqual(
            header.parameters,
            Argon2Parameters(
                timeCost: UInt32(argon2["t"]!), memoryKiB: UInt32(argon2["m"]!), parallelism: UInt32(argon2["p"]!)))
        XCTAssertEqual(header.salt, try hex(v, "salt_hex"))
        let key = try header.deriveKey(passphrase: secret(try XCTUnwrap(v["passphrase"] as? String)))
        XCTAssertEqual(key.unsafeCopyToArray(), try hex(v, "key_hex"))
        let keys = try BackupKeys(key)
        XCTAssertEqual(keys.chunks.unsafeCopyToArray(), try hex(v, "chunk_key_hex"))
        XCTAssertEqual(keys.verifier.unsafeCopyToArray(), try hex(v, "verifier_key_hex"))

        var chunks: [[UInt8]] = []
        try BackupFile.open(file, key: key) { plain, _ in chunks.append(plain) }
        XCTAssertEqual(chunks, try XCTUnwrap(v["chunks_hex"] as? [String]).map(backupHex))

        let (records, state) = try Keychain.readBackup(file, key: key)
        XCTAssertNil(state, "the keychain never had Secret Service collections")
        XCTAssertEqual(records.map(\.itemClass), [.genericPassword, .internetPassword])
        XCTAssertEqual(records[0].attributes["svce"], .string("vector"))
        XCTAssertEqual(records[0].attributes["acct"], .string("alice"))
        XCTAssertEqual(records[0].attributes["labl"], .string("Vector item"))
        XCTAssertEqual(records[0].secret, Array("hunter2".utf8))
        XCTAssertEqual(records[1].attributes["srvr"], .string("example.com"))
        XCTAssertEqual(records[1].secret, Array("pässwörd".utf8))
        XCTAssertEqual(
            status { _ = try Keychain.readBackup(file, key: SecretBytes(count: 32)) }, SecStatus.authFailed,
            "another key is a wrong passphrase")
    }
}

private func backupHex(_ string: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = string.startIndex
    while index < string.endIndex {
        let next = string.index(index, offsetBy: 2)
        out.append(UInt8(string[index..<next], radix: 16)!)
        index = next
    }
    return out
}
