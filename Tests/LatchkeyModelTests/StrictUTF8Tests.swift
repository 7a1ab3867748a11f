import LatchkeyModel
import XCTest

/// `String(strictUTF8:)` must answer exactly as the standard library's `String(validating:as:)`:
/// compared on every sequence of one and two bytes, every three-byte sequence that starts with a
/// multi-byte lead, crafted four-byte cases, and seeded random strings built from the bytes where
/// UTF-8 goes wrong (leads, continuations, surrogates, overlongs, U+FFFD itself).
final class StrictUTF8Tests: XCTestCase {
    private func check(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        let expected = String(validating: bytes, as: UTF8.self)
        let actual = String(strictUTF8: bytes)
        if actual != expected || actual.map({ Array($0.utf8) == bytes }) == false {
            XCTFail(
                "\(bytes.map { String($0, radix: 16) }): \(String(describing: actual)) ≠ \(String(describing: expected))",
                file: file, line: line)
        }
    }

    func testShortSequencesAgreeWithTheStandardLibrary() {
        check([])
        for a in 0...255 {
            check([UInt8(a)])
            for b in 0...255 { check([UInt8(a), UInt8(b)]) }
        }
    }

    func testThreeByteSequencesAgreeWithTheStandardLibrary() {
        for a in 0xC0...0xF7 {
            for b in 0...255 {
                for c in stride(from: 0, through: 255, by: a >= 0xE0 && a <= 0xEF ? 1 : 17) {
                    check([UInt8(a), UInt8(b), UInt8(c)])
                }
            }
        }
    }

    func testCraftedSequences() {
        let cases: [[UInt8]] = [
            [0xEF, 0xBF, 0xBD],  // U+FFFD itself is well-formed
            [0xEF, 0xBF], [0xEF, 0xBF, 0x41], [0xEF, 0x41], [0xEF, 0xBF, 0xBD, 0xFF],
            [0xF0, 0x9F, 0x98, 0x80], [0xF0, 0x9F, 0x98], [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80],
            [0xF0, 0x80, 0x80, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xED, 0x9F, 0xBF],
            [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], Array("svc\u{FFFD}".utf8), [0x73, 0x76, 0x63, 0xFE],
        ]
        for bytes in cases { check(bytes) }
        // A long valid string, and the same with one bad byte at each end and in the middle.
        let long = Array(String(repeating: "añ€😀", count: 200).utf8)
        check(long)
        for i in [0, long.count / 2, long.count - 1] {
            var bad = long
            bad[i] = 0xFF
            check(bad)
        }
        check(Array(long[1...]))  // starts inside a sequence
        check(Array(long[..<(long.count - 1)]))  // ends inside one
    }

    func testSeededRandomStringsAgreeWithTheStandardLibrary() {
        let alphabet: [UInt8] = [
            0x00, 0x41, 0x7F, 0x80, 0xBD, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0xA0, 0x9F,
            0x8F, 0x90,
        ]
        var state: UInt64 = 0x5EED_0F_0054_0F8
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        for _ in 0..<50_000 {
            let count = Int(next() % 12)
            check((0..<count).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
        }
    }

    func testSlicesAndBuffers() {
        let bytes: [UInt8] = [0x78, 0xC3, 0xA9, 0x79]
        XCTAssertEqual(String(strictUTF8: bytes[1..<3]), "é")
        XCTAssertNil(String(strictUTF8: bytes[1..<2]))
        bytes.withUnsafeBufferPointer { XCTAssertEqual(String(strictUTF8: $0), "xéy") }
    }
}
