import XCTest
import LatchkeyModel
import LatchkeySecrets
@testable import LatchkeyWire

/// Every cap and validity rule turns hostile input into a WireError, never a trap or a big allocation.
final class CapsTests: XCTestCase {
    private func isMalformed(_ error: WireError?, file: StaticString = #filePath, line: UInt = #line) {
        guard case .malformed = error else { return XCTFail("expected .malformed, got \(String(describing: error))", file: file, line: line) }
    }

    func testHugeLengthsWithFewBytesFailFast() {
        // Claims of ~4 GiB with a handful of bytes behind them: rejected before any reservation,
        // which the clock confirms (reserving 4 billion values would take far longer or abort).
        let start = ContinuousClock.now
        for tag: UInt8 in [0x01, 0x02] {
            XCTAssertEqual(wireError { try ValueCodec.decode([tag, 0xff, 0xff, 0xff, 0xff, 0x61]) }, .truncated)
        }
        for tag: UInt8 in [0x07, 0x08] {
            // Over the count cap...
            isMalformed(wireError { try ValueCodec.decode([tag, 0xff, 0xff, 0xff, 0xff] + [UInt8](repeating: 9, count: 10)) })
            // ...and within it but beyond what 10 bytes can hold.
            XCTAssertEqual(wireError { try ValueCodec.decode([tag, 0x00, 0x01, 0x00, 0x00] + [UInt8](repeating: 9, count: 10)) }, .truncated)
        }
        // A dictionary key length beyond the remaining bytes.
        XCTAssertEqual(wireError { try ValueCodec.decode(hex("08 00000001 ffffffff 61 09")) }, .truncated)
        // Refused from the header, without allocating or reading what the counts claim.
        XCTAssertLessThan(start.duration(to: .now), .seconds(5))
    }

    func testCollectionCountCapIsExact() throws {
        func count(_ n: Int) -> [UInt8] { [UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)] }
        let atCap = [0x07] + count(Wire.maxCollectionCount) + [UInt8](repeating: 0x09, count: Wire.maxCollectionCount)
        XCTAssertEqual(try ValueCodec.decode(atCap), .array(Array(repeating: .null, count: Wire.maxCollectionCount)))
        let overCap = [0x07] + count(Wire.maxCollectionCount + 1) + [UInt8](repeating: 0x09, count: Wire.maxCollectionCount + 1)
        isMalformed(wireError { try ValueCodec.decode(overCap) })
    }

    func testDepthEightDecodesAndDepthNineFails() throws {
        func nested(_ depth: Int, tag: UInt8) -> [UInt8] {
            // `depth` containers, each holding the next; a dictionary's entry has key "k".
            var bytes: [UInt8] = [0x09]
            for _ in 0..<depth {
                bytes = tag == 0x07 ? hex("07 00000001") + bytes : hex("08 00000001 00000001 6b") + bytes
            }
            return bytes
        }
        for tag: UInt8 in [0x07, 0x08] {
            XCTAssertNoThrow(try ValueCodec.decode(nested(Wire.maxValueDepth, tag: tag)))
            isMalformed(wireError { try ValueCodec.decode(nested(Wire.maxValueDepth + 1, tag: tag)) })
        }
        // Thousands of levels: still an error, never a stack overflow.
        let veryDeep: [UInt8] = Array(Array(repeating: hex("07 00000001"), count: 100_000).joined()) + [0x09]
        isMalformed(wireError { try ValueCodec.decode(veryDeep) })
        // A request body is depth 1, so it can hold 7 more levels.
        XCTAssertNoThrow(try Request.decode([0x01, 0x10] + nested(Wire.maxValueDepth, tag: 0x08)))
        isMalformed(wireError { try Request.decode([0x01, 0x10] + nested(Wire.maxValueDepth + 1, tag: 0x08)) })
    }

    func testDuplicateKeysFail() {
        isMalformed(wireError { try ValueCodec.decode(hex("08 00000002 00000001 61 09 00000001 61 03 0000000000000001")) })
        // Canonically equivalent keys ("é" precomposed and decomposed) are duplicates too.
        isMalformed(wireError { try ValueCodec.decode(hex("08 00000002 00000002 c3a9 09 00000003 65cc81 09")) })
    }

    func testInvalidUTF8Fails() {
        for bad in ["ff", "c3", "c328", "eda080", "f4908080", "c0af"] {  // incl. surrogate, > U+10FFFF, overlong
            let n = UInt8(hex(bad).count)
            isMalformed(wireError { try ValueCodec.decode([0x01, 0, 0, 0, n] + hex(bad)) })
            isMalformed(wireError { try ValueCodec.decode([0x08, 0, 0, 0, 1, 0, 0, 0, n] + hex(bad) + [0x09]) })
        }
        var response = Response(status: -50, message: "ab").encode()
        response[response.count - 1] = 0xff
        isMalformed(wireError { try Response.decode(response) })
    }

    func testBadBoolAndUnknownTagFail() {
        for b: UInt8 in [2, 0x80, 0xff] { isMalformed(wireError { try ValueCodec.decode([0x04, b]) }) }
        for tag: UInt8 in [0x00, 0x0a, 0x7f, 0xff] { isMalformed(wireError { try ValueCodec.decode([tag]) }) }
    }

    func testTruncationAndTrailingBytes() {
        let full = ValueCodec.encode(.dictionary(["a": .array([.int(1), .string("x")])]))
        for cut in 0..<full.count {
            XCTAssertEqual(wireError { try ValueCodec.decode(Array(full.prefix(cut))) }, .truncated)
        }
        isMalformed(wireError { try ValueCodec.decode(full + [0x09]) })
        let request = Request.update(query: ["a": .null], attributes: ["b": .null]).encode()
        for cut in 0..<request.count {
            XCTAssertNotNil(wireError { try Request.decode(Array(request.prefix(cut))) })
        }
        isMalformed(wireError { try Request.decode(request + [0]) })
        isMalformed(wireError { try Request.decode([0x01, 0x01, 0x00]) })  // hello has no body
        isMalformed(wireError { try Response.decode(Response().encode() + [0]) })
    }

    func testSecretLengthCap() throws {
        let atCap = SecretBytes(count: Wire.maxSecretLength)
        XCTAssertEqual(try Request.decode(Request.unlock(password: atCap).encode()), .unlock(password: atCap))
        let over = Request.unlock(password: SecretBytes(count: Wire.maxSecretLength + 1)).encode()
        isMalformed(wireError { try Request.decode(over) })
        // A claimed 4 GiB password with no bytes: the cap, not the allocator, answers.
        isMalformed(wireError { try Request.decode(hex("01 22 ffffffff")) })
        XCTAssertEqual(wireError { try Request.decode(hex("01 22 00000010 41")) }, .truncated)
    }

    func testVersionOpcodeAndFlagChecks() {
        XCTAssertEqual(wireError { try Request.decode([]) }, .truncated)
        XCTAssertEqual(wireError { try Request.decode([0x01]) }, .truncated)
        XCTAssertEqual(wireError { try Request.decode([0x02]) }, .unsupportedVersion(2))
        XCTAssertEqual(wireError { try Request.decode([0x00, 0x01]) }, .unsupportedVersion(0))
        for op: UInt8 in [0x00, 0x02, 0x16, 0x25, 0x33, 0x3f, 0x40, 0xff] {
            XCTAssertEqual(wireError { try Request.decode([0x01, op]) }, .unknownOpcode(op))
        }
        isMalformed(wireError { try Request.decode([0x01, 0x23, 0x02]) })
        XCTAssertEqual(try Request.decode([0x01, 0x23, 0x01]), .lock(all: true))
        // A body that is a value but not a dictionary.
        isMalformed(wireError { try Request.decode([0x01, 0x10, 0x09]) })
        XCTAssertEqual(wireError { try Response.decode([0x02, 0, 0, 0, 0, 0]) }, .unsupportedVersion(2))
        isMalformed(wireError { try Response.decode([0x01, 0, 0, 0, 0, 0x04]) })
        XCTAssertEqual(wireError { try Response.decode([0x01, 0, 0, 0, 0, 0x01]) }, .truncated)
        XCTAssertEqual(wireError { try Response.decode([0x01, 0, 0, 0, 0, 0x02, 0x00, 0x05, 0x61]) }, .truncated)
    }
}
