import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// AES-256-GCM: NIST known answers, round trips, and rejection of every kind of tampering.
final class AES256GCMTests: XCTestCase {
    private let zeroKey = SecretBytes(count: 32)
    private let zeroNonce = [UInt8](repeating: 0, count: 12)

    /// McGrew–Viega GCM specification, test cases 13 and 14 (AES-256, zero key and IV).
    func testNISTKnownAnswers() throws {
        XCTAssertEqual(
            hex(try AES256GCM.seal([UInt8](), key: zeroKey, aad: [], nonce: zeroNonce)),
            hex(zeroNonce) + "530f8afbc74536b9a963b4f1c4cb738b")
        let sealed = try AES256GCM.seal([UInt8](repeating: 0, count: 16), key: zeroKey, aad: [], nonce: zeroNonce)
        XCTAssertEqual(
            hex(sealed), hex(zeroNonce) + "cea7403d4d606b6e074ec5d3baf39d18" + "d0d1c8a799996bf0265b98b5d48ab919")
        XCTAssertEqual(try AES256GCM.open(sealed, key: zeroKey, aad: []), [UInt8](repeating: 0, count: 16))
    }

    func testRoundTripAllOverloads() throws {
        let key = try SecureRandom.secret(32)
        let message = Array("attack at dawn".utf8)
        let aad = Array("header".utf8)
        let a = try AES256GCM.seal(message, key: key, aad: aad)
        let b = try AES256GCM.seal(SecretBytes(copying: message), key: key, aad: aad)
        let c = try message.withUnsafeBytes { try AES256GCM.seal($0, key: key, aad: aad) }
        for sealed in [a, b, c] {
            XCTAssertEqual(sealed.count, message.count + AES256GCM.overhead)
            XCTAssertEqual(try AES256GCM.open(sealed, key: key, aad: aad), message)
            XCTAssertEqual(try AES256GCM.openSecret(sealed, key: key, aad: aad).unsafeCopyToArray(), message)
        }
        XCTAssertNotEqual(a.prefix(12), b.prefix(12), "nonces must be fresh per seal")
        let empty = try AES256GCM.seal([UInt8](), key: key, aad: [])
        XCTAssertEqual(try AES256GCM.open(empty, key: key, aad: []), [])
        XCTAssertEqual(try AES256GCM.openSecret(empty, key: key, aad: []).count, 0)
    }

    func testEveryFlippedBitFailsAuthentication() throws {
        let key = try SecureRandom.secret(32)
        let sealed = try AES256GCM.seal(Array("secret".utf8), key: key, aad: [1, 2, 3])
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x01
            XCTAssertThrowsError(try AES256GCM.open(tampered, key: key, aad: [1, 2, 3])) {
                XCTAssertEqual($0 as? CryptoError, .authenticationFailed)
            }
            XCTAssertThrowsError(try AES256GCM.openSecret(tampered, key: key, aad: [1, 2, 3])) {
                XCTAssertEqual($0 as? CryptoError, .authenticationFailed)
            }
        }
    }

    func testWrongKeyAADAndLengthFail() throws {
        let key = try SecureRandom.secret(32)
        let sealed = try AES256GCM.seal(Array("secret".utf8), key: key, aad: [9])
        expectFailure { _ = try AES256GCM.open(sealed, key: try SecureRandom.secret(32), aad: [9]) }
        expectFailure { _ = try AES256GCM.open(sealed, key: key, aad: []) }
        expectFailure { _ = try AES256GCM.open(sealed, key: key, aad: [9, 9]) }
        expectFailure { _ = try AES256GCM.open(Array(sealed.dropLast()), key: key, aad: [9]) }
        expectFailure { _ = try AES256GCM.open(Array(sealed.prefix(27)), key: key, aad: [9]) }
        expectFailure { _ = try AES256GCM.open([], key: key, aad: [9]) }
        expectFailure { _ = try AES256GCM.open(sealed + [0], key: key, aad: [9]) }
    }

    private func expectFailure(_ body: () throws -> Void, line: UInt = #line) {
        XCTAssertThrowsError(try body(), line: line) {
            XCTAssertEqual($0 as? CryptoError, .authenticationFailed, line: line)
        }
    }

    func testRejectsBadKeyAndNonceSizes() {
        XCTAssertThrowsError(try AES256GCM.seal([1], key: SecretBytes(count: 16), aad: [])) {
            guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try AES256GCM.seal([1], key: zeroKey, aad: [], nonce: [0, 0, 0])) {
            guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
        }
    }
}
