import LatchkeyCrypto
import LatchkeyModel
import XCTest

@testable import LatchkeyTokens

/// The DER the token side builds and unwraps, and the mechanisms it chooses.
final class TokenDERTests: XCTestCase {
    func testECPointIsUnwrappedFromItsOctetStringAndABarePointIsKept() {
        let point: [UInt8] = [0x04] + [UInt8](repeating: 0xAB, count: 64)
        XCTAssertEqual(TokenDER.ecPoint([0x04, 0x41] + point), point)
        XCTAssertEqual(TokenDER.ecPoint(point), point)
        let large: [UInt8] = [0x04] + [UInt8](repeating: 0xCD, count: 132)
        XCTAssertEqual(TokenDER.ecPoint([0x04, 0x81, 0x85] + large), large)
    }

    func testRSAPublicKeyFromModulusAndExponentIsWhatOpenSSLReads() throws {
        let key = try AsymmetricKey.generateRSA(bits: 2048)
        let reference = try AsymmetricKey(externalRepresentation: key.publicKeyBytes, algorithm: .rsa, isPrivate: false)
        // Take the modulus and exponent back out of PKCS#1 and rebuild it.
        let bytes = reference.publicKeyBytes
        XCTAssertEqual(bytes[0], 0x30)
        var index = 1
        index += bytes[index] & 0x80 != 0 ? Int(bytes[index] & 0x7F) + 1 : 1
        func integer() -> [UInt8] {
            XCTAssertEqual(bytes[index], 0x02)
            index += 1
            var length = Int(bytes[index])
            index += 1
            if length & 0x80 != 0 {
                let count = length & 0x7F
                length = bytes[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
                index += count
            }
            defer { index += length }
            return Array(bytes[index..<index + length])
        }
        let modulus = integer(), exponent = integer()
        XCTAssertEqual(TokenDER.rsaPublicKey(modulus: Array(modulus.drop { $0 == 0 }), exponent: exponent), bytes)
    }

    func testECDSARawSignatureBecomesDER() {
        let r = [UInt8](repeating: 0x80, count: 32), s: [UInt8] = [0x00] + [UInt8](repeating: 0x01, count: 31)
        let der = TokenDER.ecdsaSignature(raw: r + s)
        XCTAssertEqual(Array(der[0...1]), [0x30, UInt8(der.count - 2)])
        XCTAssertEqual(Array(der[2...4]), [0x02, 33, 0x00], "a high bit gets a zero byte")
        XCTAssertEqual(Array(der[37...38]), [0x02, 31], "leading zeros are dropped")
    }

    func testMechanismsHashInTheAgentAndPrefixTheDigestInfo() throws {
        let message = Array("message".utf8)
        let digest = try DigestAlgorithm.sha256.hash(message)
        let ecdsa = try TokenMechanism(
            operation: .sign, algorithm: "algid:sign:ECDSA:message-X962:SHA256", keyType: KeyReference.typeEC,
            input: message)
        XCTAssertEqual(ecdsa.input, digest)
        XCTAssertTrue(ecdsa.derSignature)
        let pkcs1 = try TokenMechanism(
            operation: .sign, algorithm: "algid:sign:RSA:message-PKCS1v15:SHA256", keyType: KeyReference.typeRSA,
            input: message)
        XCTAssertEqual(pkcs1.input, TokenDER.digestInfoPrefix(32)! + digest)
        XCTAssertThrowsError(
            try TokenMechanism(
                operation: .sign, algorithm: "algid:sign:RSA:digest-PKCS1v15:SHA256", keyType: KeyReference.typeRSA,
                input: [1, 2, 3]), "a digest of the wrong size")
        XCTAssertThrowsError(
            try TokenMechanism(
                operation: .sign, algorithm: "algid:sign:RSA:message-PKCS1v15:SHA256", keyType: KeyReference.typeEC,
                input: message), "an RSA algorithm with an EC key")
        XCTAssertThrowsError(
            try TokenMechanism(
                operation: .decrypt, algorithm: "algid:encrypt:RSA:OAEP:SHA256:AESGCM", keyType: KeyReference.typeRSA,
                input: message))
    }
}
