import Foundation
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine

/// The application-password box (docs/STORE.md, "Application password"): the test vector there, computed
/// independently (the `argon2` command and Python's `cryptography`), and what a damaged box gives.
final class ApplicationPasswordTests: XCTestCase {
    private let password = SecretBytes(copying: Array("correct horse battery staple".utf8))
    private let derivation = ApplicationPassword.Derivation(
        salt: Array("latchkey-salt-16".utf8),
        parameters: Argon2Parameters(timeCost: 3, memoryKiB: 65_536, parallelism: 1))
    private let key = "d6c96c6c7310d84ed16bece1ec520e95eea896712ccfb1307c6a2ecf7f22f49d"
    private let box =
        "4c4b4150010000000300010000000000016c617463686b65792d73616c742d3136000102030405060708090a0b"
        + "db532c26424badf19b6f998950890cabeb90854646e8"

    private func hex(_ text: String) -> [UInt8] {
        stride(from: 0, to: text.count, by: 2).map {
            let start = text.index(text.startIndex, offsetBy: $0)
            return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    func testTheStoreVector() throws {
        let derived = try ApplicationPassword.deriveKey(password, derivation)
        XCTAssertEqual(derived.withUnsafeBytes { Array($0) }, hex(key))
        let sealed = try ApplicationPassword.wrap(
            Array("s3cret".utf8), key: derived, derivation, nonce: Array(0..<12))
        XCTAssertEqual(sealed, hex(box))
        XCTAssertEqual(try ApplicationPassword.derivation(of: hex(box)), derivation)
        XCTAssertEqual(try ApplicationPassword.unwrap(hex(box), key: derived), Array("s3cret".utf8))
        XCTAssertEqual(ApplicationPassword.parameters, derivation.parameters, "new boxes use the vector's parameters")
    }

    func testAWrongPasswordOrAChangedBoxFails() throws {
        let derived = SecretBytes(copying: hex(key))
        let wrong = try ApplicationPassword.deriveKey(
            SecretBytes(copying: Array("Correct horse battery staple".utf8)), derivation)
        XCTAssertEqual(
            status { _ = try ApplicationPassword.unwrap(self.hex(self.box), key: wrong) }, SecStatus.authFailed)
        // Any byte of the header is authenticated: a salt or a cost changed in place fails.
        for index in [20, 8] {
            var changed = hex(box)
            changed[index] ^= 0x01
            XCTAssertNotEqual(status { _ = try ApplicationPassword.unwrap(changed, key: derived) }, nil)
        }
        var tag = hex(box)
        tag[tag.count - 1] ^= 0x80
        XCTAssertEqual(status { _ = try ApplicationPassword.unwrap(tag, key: derived) }, SecStatus.authFailed)
        // No box, or a box whose costs no derivation may have: errSecDecode before any derivation.
        var magic = hex(box)
        magic[0] = 0x58
        XCTAssertEqual(status { _ = try ApplicationPassword.derivation(of: magic) }, SecStatus.decode)
        XCTAssertEqual(
            status { _ = try ApplicationPassword.derivation(of: Array(self.hex(self.box).prefix(40))) },
            SecStatus.decode)
        var costly = hex(box)
        costly[9] = 0x7f  // memory: about 2 TiB
        XCTAssertEqual(status { _ = try ApplicationPassword.derivation(of: costly) }, SecStatus.decode)
    }

    func testFreshBoxesHaveTheirOwnSaltAndNonce() throws {
        let a = try ApplicationPassword.Derivation.fresh()
        let b = try ApplicationPassword.Derivation.fresh()
        XCTAssertNotEqual(a.salt, b.salt)
        let derived = SecretBytes(copying: hex(key))
        let first = try ApplicationPassword.wrap(Array("same".utf8), key: derived, derivation)
        let second = try ApplicationPassword.wrap(Array("same".utf8), key: derived, derivation)
        XCTAssertNotEqual(first, second)
    }

    private func status(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let error as SecError {
            return error.status
        } catch {
            return nil
        }
    }
}
