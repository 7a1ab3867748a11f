import Foundation
import LatchkeyCrypto
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeySecrets
import Synchronization
import XCTest

@testable import LatchkeyEngine

/// The cache of imported private keys (PrivateKeyCache) is an optimisation only: every use still
/// finds and checks the item, and a lock of the item's class drops the cached key with the class key.
final class PrivateKeyCacheTests: XCTestCase {
    private let sign = "algid:sign:ECDSA:message-X962:SHA256"

    /// Generates a P-256 key in `accessible`'s class and returns its persistent reference.
    private func generate(_ keychain: Keychain, accessible: String) throws -> [UInt8] {
        let value = try keychain.generateKey(
            [
                "type": .int(KeyReference.typeEC), "bsiz": .int(256), "pdmn": .string(accessible),
                "private": .dictionary(["perm": .int(1)]),
            ],
            caller: testCaller)
        guard case .dictionary(let reference) = value, case .data(let ref)? = reference[SecKeys.valuePersistentRef]
        else {
            XCTFail("no persistent reference in \(value)")
            return []
        }
        return ref
    }

    private func signRequest(_ ref: [UInt8], _ message: String = "hello") -> SecDictionary {
        [
            KeyOperation.Field.key: .data(ref), KeyOperation.Field.operation: .string("sign"),
            KeyOperation.Field.algorithm: .string(sign), KeyOperation.Field.input: bytes(message),
        ]
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
        let export = try keychain.keyOperation(
            [
                KeyOperation.Field.key: .data(ref),
                KeyOperation.Field.operation: .string("export"),
            ], caller: testCaller)
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
        XCTAssertEqual(
            status { _ = try keychain.keyOperation(signRequest(whenUnlocked), caller: testCaller) },
            SecStatus.interactionNotAllowed)
        XCTAssertEqual(status { _ = try keychain.keyOperation(signRequest(afterFirstUnlock), caller: testCaller) }, 0)

        keychain.lock(all: true)
        XCTAssertEqual(cached(keychain), 0)
        XCTAssertEqual(
            status { _ = try keychain.keyOperation(signRequest(afterFirstUnlock), caller: testCaller) },
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
        XCTAssertEqual(
            status { _ = try keychain.keyOperation(signRequest(ref), caller: testCaller) },
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

    /// Deleting an identity deletes its private key, and with it the key's cached import.
    func testAnIdentityDeleteForgetsItsKey() throws {
        let directory = NSTemporaryDirectory() + "latchkey-cache-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(directory)/k.pem"])
        try openssl([
            "req", "-x509", "-new", "-key", "\(directory)/k.pem", "-subj", "/CN=cache", "-days", "2",
            "-outform", "DER", "-out", "\(directory)/c.der",
        ])
        let key = try AsymmetricKey(
            pem: SecretBytes(copying: Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/k.pem")))))
        let der = Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/c.der")))
        let (keychain, _) = try makeKeychain()
        let keyReference = KeyReference(
            keyType: KeyReference.typeEC, keyClass: KeyReference.classPrivate, sizeInBits: 256,
            publicKey: key.publicKeyBytes,
            material: try key.externalRepresentation().withUnsafeBytes { Array($0) })
        let identity = ItemReference.identity(certificate: CertificateReference(der: der), key: keyReference)
        _ = try keychain.add([
            "class": .string(SecKeys.classIdentity), SecKeys.valueRef: identity.secValue, "pdmn": .string("ak"),
        ])
        guard case .data(let ref)? = try keychain.copy(["class": .string("keys"), "r_PersistentRef": .bool(true)])
        else {
            return XCTFail("no key item")
        }
        _ = try keychain.keyOperation(signRequest(ref), caller: testCaller)
        XCTAssertEqual(cached(keychain), 1)
        try keychain.delete(["class": .string(SecKeys.classIdentity)])
        XCTAssertEqual(status { _ = try keychain.copy(["class": .string("keys")]) }, SecStatus.itemNotFound)
        XCTAssertEqual(cached(keychain), 0, "the deleted identity's private key must not stay imported")
    }

    /// An update of a key item forgets its import (the resealed key would never match it again).
    func testAnUpdatedKeyIsForgotten() throws {
        let (keychain, _) = try makeKeychain()
        let ref = try generate(keychain, accessible: "ak")
        _ = try keychain.keyOperation(signRequest(ref), caller: testCaller)
        XCTAssertEqual(cached(keychain), 1)
        try keychain.update(
            ["class": .string("keys"), SecKeys.valuePersistentRef: .data(ref)], ["labl": .string("renamed")])
        XCTAssertEqual(cached(keychain), 0)
        XCTAssertEqual(status { _ = try keychain.keyOperation(signRequest(ref), caller: testCaller) }, 0)
        XCTAssertEqual(cached(keychain), 1)
    }

    /// One cached RSA key signing from many threads at once: every signature verifies.
    func testConcurrentSignaturesWithOneCachedKey() throws {
        let (keychain, _) = try makeKeychain()
        let value = try keychain.generateKey(
            [
                "type": .int(KeyReference.typeRSA), "bsiz": .int(2048), "pdmn": .string("ak"),
                "private": .dictionary(["perm": .int(1)]),
            ], caller: testCaller)
        guard case .dictionary(let reference) = value, case .data(let ref)? = reference[SecKeys.valuePersistentRef]
        else {
            return XCTFail("no persistent reference")
        }
        guard case .data(let publicKey)? = reference["pubk"] else { return XCTFail("no public key in \(reference)") }
        let verifier = try AsymmetricKey(externalRepresentation: publicKey, algorithm: .rsa, isPrivate: false)
        let algorithm = "algid:sign:RSA:message-PKCS1v15:SHA256"
        let request = { @Sendable (message: [UInt8]) -> SecDictionary in
            [
                KeyOperation.Field.key: .data(ref), KeyOperation.Field.operation: .string("sign"),
                KeyOperation.Field.algorithm: .string(algorithm), KeyOperation.Field.input: .data(message),
            ]
        }
        _ = try keychain.keyOperation(request([0]), caller: testCaller)
        XCTAssertEqual(cached(keychain), 1)
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<20 {
                let message: [UInt8] = [UInt8(thread), UInt8(i)]
                guard case .data(let signature)? = try? keychain.keyOperation(request(message), caller: testCaller),
                    (try? verifier.verify(.rsaSignatureMessagePKCS1v15SHA256, message, signature: signature)) == true
                else {
                    failures.add(1, ordering: .relaxed)
                    continue
                }
            }
        }
        XCTAssertEqual(failures.load(ordering: .relaxed), 0)
    }

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "openssl \(arguments)")
    }
}
