import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// The Secret Service session primitives: Oakley group 2 DH and AES-128-CBC/PKCS#7.
final class SecretServiceCryptoTests: XCTestCase {
    func testAES128CBCMatchesNISTVectorAndPads() throws {
        // NIST SP 800-38A F.2.1, first block.
        let key = SecretBytes(copying: hex("2b7e151628aed2a6abf7158809cf4f3c"))
        let iv = hex("000102030405060708090a0b0c0d0e0f")
        let plain = hex("6bc1bee22e409f96e93d7e117393172a")
        let sealed = try AES128CBC.encrypt(plain, key: key, iv: iv)
        XCTAssertEqual(sealed.count, 32, "a full block of PKCS#7 padding follows a whole block")
        XCTAssertEqual(Array(sealed.prefix(16)), hex("7649abac8119b246cee98e9b12e9197d"))
        XCTAssertEqual(try AES128CBC.decrypt(sealed, key: key, iv: iv), plain)
        for length in [0, 1, 15, 17, 100] {
            let data = (0..<length).map { UInt8($0 & 0xFF) }
            let c = try AES128CBC.encrypt(data, key: key, iv: iv)
            XCTAssertEqual(c.count, (length / 16 + 1) * 16)
            XCTAssertEqual(try AES128CBC.decrypt(c, key: key, iv: iv), data)
        }
    }

    func testAES128CBCRejectsBadInput() throws {
        let key = SecretBytes(copying: [UInt8](repeating: 7, count: 16))
        let iv = [UInt8](repeating: 0, count: 16)
        XCTAssertThrowsError(try AES128CBC.decrypt([1, 2, 3], key: key, iv: iv))
        XCTAssertThrowsError(try AES128CBC.decrypt([], key: key, iv: iv))
        XCTAssertThrowsError(try AES128CBC.encrypt([1], key: key, iv: [0]))
        XCTAssertThrowsError(try AES128CBC.encrypt([1], key: SecretBytes(count: 32), iv: iv))
        let sealed = try AES128CBC.encrypt(Array("secret".utf8), key: key, iv: iv)
        let wrongKey = SecretBytes(copying: [UInt8](repeating: 8, count: 16))
        // A wrong key almost always gives bad padding; when it does not, it must not give the plaintext.
        if let opened = try? AES128CBC.decrypt(sealed, key: wrongKey, iv: iv) {
            XCTAssertNotEqual(opened, Array("secret".utf8))
        }
    }

    func testDiffieHellmanAgreesAndPadsTo128Bytes() throws {
        let a = try OakleyGroup2KeyPair(), b = try OakleyGroup2KeyPair()
        let pa = try a.publicKey(), pb = try b.publicKey()
        XCTAssertEqual(pa.count, 128)
        XCTAssertNotEqual(pa, pb)
        XCTAssertTrue(pa.lexicographicallyPrecedes(OakleyGroup2KeyPair.prime))
        let sa = try a.sharedSecret(peer: pb), sb = try b.sharedSecret(peer: pa)
        XCTAssertEqual(sa.count, 128)
        XCTAssertTrue(sa.constantTimeEquals(sb))
        // A key given without its leading zero bytes (as libsecret sends it) is the same key.
        let trimmed = Array(pb.drop { $0 == 0 })
        XCTAssertTrue(try a.sharedSecret(peer: trimmed).constantTimeEquals(sa))
    }

    func testDiffieHellmanMatchesAnIndependentComputation() throws {
        // With the peer's private key 1 its public key is g = 2, and the shared secret is our own
        // public key: the agreement really is y^x mod p in RFC 2409's group.
        let a = try OakleyGroup2KeyPair()
        let secret = try a.sharedSecret(peer: [2])
        XCTAssertEqual(secret.withUnsafeBytes { Array($0) }, try a.publicKey())
    }

    func testDiffieHellmanRejectsDegeneratePublicKeys() throws {
        let a = try OakleyGroup2KeyPair()
        var pMinus1 = OakleyGroup2KeyPair.prime
        pMinus1[127] -= 1
        for bad in [
            [], [0], [1], [0, 0, 1], pMinus1, OakleyGroup2KeyPair.prime, [UInt8](repeating: 0xFF, count: 128),
            [UInt8](repeating: 1, count: 129),
        ] {
            XCTAssertThrowsError(try a.sharedSecret(peer: bad), "\(bad.prefix(4))")
        }
        var pMinus2 = pMinus1
        pMinus2[127] -= 1
        XCTAssertNoThrow(try a.sharedSecret(peer: pMinus2))
    }

    private func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var it = s.makeIterator()
        while let h = it.next(), let l = it.next() { out.append(UInt8(String([h, l]), radix: 16)!) }
        return out
    }
}
