import XCTest
@testable import LatchkeyEngine
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets

/// The cache of imported private keys (PrivateKeyCache) is an optimisation only: every use still
/// finds and checks the item, and a lock of the item's class drops the cached key with the class key.
final class PrivateKeyCacheTests: XCTestCase {
    private let sign = "algid:sign:ECDSA:message-X962:SHA256"

    /// Generates a P-256 key in `accessible`'s class and returns its persistent reference.
    private func generate(_ keychain: Keychain, accessible: String) throws -> [UInt8] {
        let value = try keychain.generateKey(
            ["type": .int(KeyReference.typeEC), "bsiz": .int(256), "pdmn": .string(accessible),
             "private": .dictionary(["perm": .int(1)])],
            caller: testCaller)
        guard case .dictionary(let reference) = value, case .data(let ref)? = reference[SecKeys.valuePersistentRef] else {
            XCTFail("no persistent reference in \(value)")
            return []
        }
        return ref
    }

    private func signRequest(_ ref: [UInt8], _ message: String = "hello") -> SecDictionary {
        [KeyOperation.Field.key: .data(ref), KeyOperation.Field.operation: .string("sign"),
         KeyOperation.Field.algorithm: .string(sign), KeyOperation.Field.input: bytes(message)]
    }

    private func cached(_ keychain: Keychain) -> Int {
        (try? keychain.withItems { items throws(SecError) -> Int in items.keys.privateKeys.count }) ?? -1
    }

    func testAKeyUsedOnceIsKeptAndSignsTheSame() throws {
        let (keychain, _) = try makeKeychain()
        let ref = try generate(keychain, accessible: "ak")
        XCTAssertEqual(cached(keychain), 0)
        let first = try keychain.keyOperation(signRequest(ref), caller: testCaller)
        XCTAssertEqual(cached(keychain), 1)
        let second = try keychain.keyOperation(signRequest(ref), caller: testCaller)
        XCTAssertEqual(cached(keychain), 1)
        // ECDSA signatures are randomised; both must verify under the key's public half.
        let export = try keychain.keyOperation([KeyOperation.Field.key: .data(ref),
                                                KeyOperation.Field.operation: .string("export")], caller: testCaller)
        guard case .data(let material) = export else { return XCTFail("export gave \(export)") }
        let privateKey = try AsymmetricKey(externalRepresentation: material, algorithm: .ec, isPrivate: true)
        let key = try AsymmetricKey(externalRepresentation: privateKey.publicKeyBytes, algorithm: .ec, isPrivate: false)
        for signature in [first, second] {
            guard case .data(let bytes) = signature else { return XCTFail("sign gave \(signature)") }
            XCTAssertTrue(try key.verify(.ecdsaSignatureMessageX962SHA256, Array("hello".utf8), signature: bytes))
        }
    }

    func testAScreenLockDropsTheCachedKeyOfItsClassOnly() throws {
        let (keychain, _) = try makeKeychain()
        let whenUnlocked = try generate(keychain, accessible: "ak")
        let afterFirstUnlock = try generate(keychain, accessible: "ck")
        _ = try keychain.keyOperation(signRequest(whenUnlocked), caller: testCaller)
        _ = try keychain.keyOperation(signRequest(afterFirstUnlock), caller: testCaller)
        XCTAssertEqual(cached(keychain), 2)

        keychain.lock(all: false)
        XCTAssertEqual(cached(keychain), 1, "the WhenUnlocked key must go with its class key")
        XCTAssertEqual(status { _ = try keychain.keyOperation(signRequest(whenUnlocked), caller: testCaller) },
                       SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { _ = try keychain.keyOperation(signRequest(afterFirstUnlock), caller: testCaller) }, 0)

        keychain.lock(all: true)
        XCTAssertEqual(cached(keychain), 0)
        XCTAssertEqual(status { _ = try keychain.keyOperation(signRequest(afterFirstUnlock), caller: testCaller) },
                       SecStatus.interactionNotAllowed)

        try keychain.unlock(password: secret("pw"))
        XCTAssertEqual(status { _ = try keychain.keyOperation(signRequest(whenUnlocked), caller: testCaller) }, 0)
        XCTAssertEqual(cached(keychain), 1)
    }

    func testADeletedKeyIsForgottenAndCannotBeUsed() throws {
        let (keychain, _) = try makeKeychain()
        let ref = try generate(keychain, accessible: "ak")
        _ = try keychain.keyOperation(signRequest(ref), caller: testCaller)
        XCTAssertEqual(cached(keychain), 1)
        try keychain.delete(["class": .string("keys"), SecKeys.valuePersistentRef: .data(ref)])
        XCTAssertEqual(cached(keychain), 0)
        XCTAssertEqual(status { _ = try keychain.keyOperation(signRequest(ref), caller: testCaller) },
                       SecStatus.itemNotFound)
    }

    /// The cache is bounded: the least recently used key goes first.
    func testTheCacheEvictsTheLeastRecentlyUsedKey() throws {
        let cache = PrivateKeyCache()
        let key = try AsymmetricKey.generateEC(bits: 256)
        for i in 0..<PrivateKeyCache.capacity {
            cache.insert(key, ref: [UInt8(i)], sealedSecret: [1], protection: .whenUnlocked)
        }
        XCTAssertNotNil(cache.key(ref: [0], sealedSecret: [1]))  // 0 is now the most recent
        cache.insert(key, ref: [0xFF], sealedSecret: [1], protection: .whenUnlocked)
        XCTAssertEqual(cache.count, PrivateKeyCache.capacity)
        XCTAssertNil(cache.key(ref: [1], sealedSecret: [1]), "1 was the least recently used")
        XCTAssertNotNil(cache.key(ref: [0], sealedSecret: [1]))
        XCTAssertNil(cache.key(ref: [0], sealedSecret: [2]), "another sealed secret is another key")
        cache.removeAll { $0 == .whenUnlocked }
        XCTAssertEqual(cache.count, 0)
    }
}
