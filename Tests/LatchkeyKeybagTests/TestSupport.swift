import Foundation
import LatchkeyCrypto
import LatchkeySecrets
import XCTest

@testable import LatchkeyKeybag

/// Cheap Argon2 parameters so tests run in milliseconds; only allowed with `allowWeakParameters`.
let cheapParameters = Argon2Parameters(timeCost: 1, memoryKiB: 64, parallelism: 1)

func hexBytes(_ string: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var iterator = string.utf8.makeIterator()
    while let high = iterator.next(), let low = iterator.next() {
        bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
    }
    return bytes
}

func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

func password(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

/// Replaces the trailing checksum so a deliberately edited file passes the integrity check and
/// reaches the semantic checks behind it.
func resealed(_ bytes: [UInt8]) -> [UInt8] {
    let body = Array(bytes.dropLast(32))
    return body + SHA256.hash(body)
}

/// Asserts that `body` throws exactly `expected`.
func assertKeybagError<T>(
    _ expected: KeybagError, _ body: @autoclosure () throws -> T,
    file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssertThrowsError(try body(), file: file, line: line) { error in
        XCTAssertEqual(error as? KeybagError, expected, file: file, line: line)
    }
}

/// Asserts that `body` throws `.corrupt` for `path` (any reason).
func assertCorrupt<T>(
    _ body: @autoclosure () throws -> T, path: String = "test",
    file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssertThrowsError(try body(), file: file, line: line) { error in
        guard case .corrupt(let reportedPath, _)? = error as? KeybagError, reportedPath == path else {
            return XCTFail("expected corrupt, got \(error)", file: file, line: line)
        }
    }
}

/// A fresh private directory under the system temporary directory.
func makeTemporaryDirectory() throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-keybag-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    return url.path
}
