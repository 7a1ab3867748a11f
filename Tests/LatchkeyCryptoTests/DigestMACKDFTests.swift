import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// Known-answer tests for the hash, MAC and KDF wrappers against their RFCs.
final class DigestMACKDFTests: XCTestCase {
    func testSHA256KnownAnswers() {
        XCTAssertEqual(
            hex(SHA256.hash(Array("abc".utf8))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(
            hex(SHA256.hash([])),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testSHA1KnownAnswers() {
        XCTAssertEqual(hex(SHA1.hash(Array("abc".utf8))), "a9993e364706816aba3e25717850c26c9cd0d89d")
        XCTAssertEqual(hex(SHA1.hash([])), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }

    /// RFC 4231 test cases 1 and 2.
    func testHMACSHA256RFC4231() throws {
        let key1 = secret([UInt8](repeating: 0x0b, count: 20))
        XCTAssertEqual(
            hex(try HMAC.sha256(key: key1, Array("Hi There".utf8))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let key2 = secret(Array("Jefe".utf8))
        let data2 = Array("what do ya want for nothing?".utf8)
        XCTAssertEqual(
            hex(try data2.withUnsafeBytes { try HMAC.sha256(key: key2, $0) }),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    func testHMACEmptyKeyAndData() throws {
        // HMAC-SHA256("", "") is a well-known constant; checks the empty-key path does not fail.
        XCTAssertEqual(
            hex(try HMAC.sha256(key: SecretBytes(count: 0), [])),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    /// The keyed context gives RFC 4231's answers (cases 1, 2 and 6: a key longer than the block,
    /// which HMAC hashes first), the same as the one-shot function, again and again from one key.
    func testHMACKeyRFC4231() throws {
        let key1 = try HMACKey(secret([UInt8](repeating: 0x0b, count: 20)))
        for _ in 0..<3 {
            XCTAssertEqual(
                hex(try key1.sha256(Array("Hi There".utf8))),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        }
        let key2 = try HMACKey(secret(Array("Jefe".utf8)))
        let data2 = Array("what do ya want for nothing?".utf8)
        XCTAssertEqual(
            hex(try data2.withUnsafeBytes { try key2.sha256($0) }),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let key6 = try HMACKey(secret([UInt8](repeating: 0xaa, count: 131)))
        XCTAssertEqual(
            hex(try key6.sha256(Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        XCTAssertEqual(
            hex(try HMACKey(SecretBytes(count: 0)).sha256([])),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        // Messages of every length up to two blocks agree with the one-shot function.
        let raw = secret((0..<32).map { UInt8($0) })
        let keyed = try HMACKey(raw)
        for length in 0...130 {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            XCTAssertEqual(try keyed.sha256(message), try HMAC.sha256(key: raw, message), "length \(length)")
        }
    }

    /// One keyed context used from many threads at once: each MAC works on its own duplicate.
    func testHMACKeyConcurrentUse() throws {
        let key = try HMACKey(secret([UInt8](repeating: 0x0b, count: 20)))
        let expected = try key.sha256(Array("Hi There".utf8))
        let failures = Counter()
        DispatchQueue.concurrentPerform(iterations: 32) { i in
            for _ in 0..<100 {
                let message = [UInt8](repeating: UInt8(i), count: i)
                guard (try? key.sha256(Array("Hi There".utf8))) == expected,
                    (try? key.sha256(message)).map({ $0.count == 32 }) == true
                else {
                    failures.increment()
                    continue
                }
            }
        }
        XCTAssertEqual(failures.value, 0)
    }

    /// RFC 5869 test case 1 (salt and info) and test case 3 (empty salt and info, as the keybag uses).
    func testHKDFRFC5869() throws {
        let ikm = secret([UInt8](repeating: 0x0b, count: 22))
        let okm1 = try HKDF.sha256(
            ikm: ikm, salt: hex("000102030405060708090a0b0c"),
            info: hex("f0f1f2f3f4f5f6f7f8f9"), count: 42)
        XCTAssertEqual(
            hex(okm1), "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let okm3 = try HKDF.sha256(ikm: ikm, salt: [], info: [], count: 42)
        XCTAssertEqual(
            hex(okm3), "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    func testHKDFRejectsBadLengths() {
        let ikm = secret([1, 2, 3])
        XCTAssertThrowsError(try HKDF.sha256(ikm: ikm, salt: [], info: [], count: 0))
        XCTAssertThrowsError(try HKDF.sha256(ikm: ikm, salt: [], info: [], count: 255 * 32 + 1))
    }

    func testSecureRandom() throws {
        XCTAssertEqual(try SecureRandom.bytes(0), [])
        let a = try SecureRandom.bytes(32)
        let b = try SecureRandom.bytes(32)
        XCTAssertEqual(a.count, 32)
        XCTAssertNotEqual(a, b)
        let s = try SecureRandom.secret(32)
        XCTAssertEqual(s.count, 32)
        XCTAssertNotEqual(s.unsafeCopyToArray(), [UInt8](repeating: 0, count: 32))
        XCTAssertThrowsError(try SecureRandom.bytes(-1))
    }

    /// Many threads at once must each get the single-threaded answer (shared fetched algorithms,
    /// per-call contexts, thread-local OpenSSL error queues).
    func testConcurrentUseGivesSameResults() throws {
        let key = secret([UInt8](repeating: 0x0b, count: 20))
        let expectedMAC = try HMAC.sha256(key: key, Array("Hi There".utf8))
        let aesKey = try SecureRandom.secret(32)
        let failures = Counter()
        DispatchQueue.concurrentPerform(iterations: 64) { i in
            do {
                for _ in 0..<50 {
                    if try HMAC.sha256(key: key, Array("Hi There".utf8)) != expectedMAC { failures.increment() }
                    let message = [UInt8](repeating: UInt8(i), count: i)
                    let sealed = try AES256GCM.seal(message, key: aesKey, aad: [UInt8(i)])
                    if try AES256GCM.open(sealed, key: aesKey, aad: [UInt8(i)]) != message { failures.increment() }
                    let okm = try HKDF.sha256(ikm: key, salt: [], info: [UInt8(i)], count: 32)
                    if okm.count != 32 { failures.increment() }
                }
            } catch {
                failures.increment()
            }
        }
        XCTAssertEqual(failures.value, 0)
    }
}

/// A lock-protected counter for the concurrency test.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() {
        lock.lock()
        count += 1
        lock.unlock()
    }
    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}
