import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// Argon2id against RFC 9106 and the `argon2` reference CLI, plus parameter validation.
final class Argon2Tests: XCTestCase {
    /// RFC 9106 section 5.3 (Argon2id, with secret and associated data).
    func testRFC9106Vector() throws {
        let key = try Argon2id.derive(
            password: secret([UInt8](repeating: 0x01, count: 32)),
            salt: [UInt8](repeating: 0x02, count: 16),
            secret: [UInt8](repeating: 0x03, count: 8),
            associatedData: [UInt8](repeating: 0x04, count: 12),
            parameters: Argon2Parameters(timeCost: 3, memoryKiB: 32, parallelism: 4),
            length: 32)
        XCTAssertEqual(hex(key), "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659")
    }

    /// `printf password | argon2 somesalt -id -t 2 -k 65536 -p P -l 32 -r`; the p=1 value is also in
    /// libargon2's own test suite.
    func testReferenceCLIVectors() throws {
        let password = secret(Array("password".utf8))
        let salt = Array("somesalt".utf8)
        let p1 = try Argon2id.deriveKey(
            password: password, salt: salt,
            parameters: Argon2Parameters(timeCost: 2, memoryKiB: 65536, parallelism: 1))
        XCTAssertEqual(hex(p1), "09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7")
        let p4 = try Argon2id.deriveKey(
            password: password, salt: salt,
            parameters: Argon2Parameters(timeCost: 2, memoryKiB: 65536, parallelism: 4))
        XCTAssertEqual(hex(p4), "1a9677b0afe81fda7b548895e7a1bfeb8668ffc19a530e37e088a668fab1c02a")
    }

    func testValidation() throws {
        XCTAssertNoThrow(try Argon2Parameters.default.validate())
        XCTAssertGreaterThanOrEqual(Argon2Parameters.default.memoryKiB, Argon2Parameters.minimumMemoryKiB)
        XCTAssertNoThrow(try Argon2Parameters(timeCost: 1, memoryKiB: 8, parallelism: 1).validate())
        let bad = [
            Argon2Parameters(timeCost: 0, memoryKiB: 65536, parallelism: 1),
            Argon2Parameters(timeCost: 1, memoryKiB: 65536, parallelism: 0),
            Argon2Parameters(timeCost: 1, memoryKiB: 65536, parallelism: 17),
            Argon2Parameters(timeCost: 1, memoryKiB: 31, parallelism: 4),
            Argon2Parameters(timeCost: 1, memoryKiB: 4 * 1024 * 1024 + 1, parallelism: 1),
        ]
        for parameters in bad {
            XCTAssertThrowsError(try parameters.validate(), "\(parameters)") {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\($0)") }
            }
        }
    }

    func testDeriveRejectsShortSaltAndBadParameters() {
        let cheap = Argon2Parameters(timeCost: 1, memoryKiB: 64, parallelism: 1)
        XCTAssertThrowsError(try Argon2id.deriveKey(password: secret([1]), salt: [1, 2, 3], parameters: cheap))
        XCTAssertThrowsError(
            try Argon2id.deriveKey(
                password: secret([1]), salt: [UInt8](repeating: 0, count: 16),
                parameters: Argon2Parameters(timeCost: 0, memoryKiB: 64, parallelism: 1)))
    }

    func testEmptyPasswordAndLength() throws {
        let cheap = Argon2Parameters(timeCost: 1, memoryKiB: 64, parallelism: 1)
        let salt = [UInt8](repeating: 7, count: 16)
        let a = try Argon2id.deriveKey(password: SecretBytes(count: 0), salt: salt, parameters: cheap, length: 64)
        XCTAssertEqual(a.count, 64)
        let b = try Argon2id.deriveKey(password: SecretBytes(count: 0), salt: salt, parameters: cheap, length: 64)
        XCTAssertTrue(a.constantTimeEquals(b))
    }

    func testParametersCodableRoundTrip() throws {
        let data = try JSONEncoder().encode(Argon2Parameters.default)
        XCTAssertEqual(try JSONDecoder().decode(Argon2Parameters.self, from: data), .default)
    }
}
