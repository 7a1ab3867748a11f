import LatchkeyModel
import LatchkeyValueTestSupport
import XCTest

@testable import LatchkeyCodec

/// Every cap and validity rule turns hostile bytes into a CodecError, never a trap or a big allocation.
/// (The protocol's own caps, on frames, secrets and messages, are tested in LatchkeyWireTests.)
final class ValueCapsTests: XCTestCase {
    /// The shared generators stay within the codec's depth cap (they cannot import the codec).
    func testGeneratorsUseTheCodecsDepthCap() {
        XCTAssertEqual(generatedValueDepth, ValueCodec.maxDepth)
    }

    private func isMalformed(_ error: CodecError?, file: StaticString = #filePath, line: UInt = #line) {
        guard case .malformed = error else {
            return XCTFail("expected .malformed, got \(String(describing: error))", file: file, line: line)
        }
    }

    func testHugeLengthsWithFewBytesFailFast() {
        // Claims of ~4 GiB with a handful of bytes behind them: rejected before any reservation,
        // which the clock confirms (reserving 4 billion values would take far longer or abort).
        let start = ContinuousClock.now
        for tag: UInt8 in [0x01, 0x02] {
            XCTAssertEqual(codecError { try ValueCodec.decode([tag, 0xff, 0xff, 0xff, 0xff, 0x61]) }, .truncated)
        }
        for tag: UInt8 in [0x07, 0x08] {
            // Over the count cap...
            isMalformed(
                codecError { try ValueCodec.decode([tag, 0xff, 0xff, 0xff, 0xff] + [UInt8](repeating: 9, count: 10)) })
            // ...and within it but beyond what 10 bytes can hold.
            XCTAssertEqual(
                codecError { try ValueCodec.decode([tag, 0x00, 0x01, 0x00, 0x00] + [UInt8](repeating: 9, count: 10)) },
                .truncated)
        }
        // A dictionary key length beyond the remaining bytes.
        XCTAssertEqual(codecError { try ValueCodec.decode(hex("08 00000001 ffffffff 61 09")) }, .truncated)
        // Refused from the header, without allocating or reading what the counts claim.
        XCTAssertLessThan(start.duration(to: .now), .seconds(5))
    }

    func testCollectionCountCapIsExact() throws {
        func count(_ n: Int) -> [UInt8] {
            [UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
        }
        let atCap =
            [0x07] + count(ValueCodec.maxCollectionCount)
            + [UInt8](repeating: 0x09, count: ValueCodec.maxCollectionCount)
        XCTAssertEqual(
            try ValueCodec.decode(atCap), .array(Array(repeating: .null, count: ValueCodec.maxCollectionCount)))
        let overCap =
            [0x07] + count(ValueCodec.maxCollectionCount + 1)
            + [UInt8](repeating: 0x09, count: ValueCodec.maxCollectionCount + 1)
        isMalformed(codecError { try ValueCodec.decode(overCap) })
    }

    func testDepthEightDecodesAndDepthNineFails() throws {
        for tag: UInt8 in [0x07, 0x08] {
            XCTAssertNoThrow(try ValueCodec.decode(nestedValue(ValueCodec.maxDepth, tag: tag)))
            isMalformed(codecError { try ValueCodec.decode(nestedValue(ValueCodec.maxDepth + 1, tag: tag)) })
        }
        // Thousands of levels: still an error, never a stack overflow.
        let veryDeep: [UInt8] = Array(Array(repeating: hex("07 00000001"), count: 100_000).joined()) + [0x09]
        isMalformed(codecError { try ValueCodec.decode(veryDeep) })
    }

    func testDuplicateKeysFail() {
        isMalformed(
            codecError { try ValueCodec.decode(hex("08 00000002 00000001 61 09 00000001 61 03 0000000000000001")) })
        // Canonically equivalent keys ("é" precomposed and decomposed) are duplicates too.
        isMalformed(codecError { try ValueCodec.decode(hex("08 00000002 00000002 c3a9 09 00000003 65cc81 09")) })
    }

    func testInvalidUTF8Fails() {
        for bad in ["ff", "c3", "c328", "eda080", "f4908080", "c0af"] {  // incl. surrogate, > U+10FFFF, overlong
            let n = UInt8(hex(bad).count)
            isMalformed(codecError { try ValueCodec.decode([0x01, 0, 0, 0, n] + hex(bad)) })
            isMalformed(codecError { try ValueCodec.decode([0x08, 0, 0, 0, 1, 0, 0, 0, n] + hex(bad) + [0x09]) })
        }
    }

    func testBadBoolAndUnknownTagFail() {
        for b: UInt8 in [2, 0x80, 0xff] { isMalformed(codecError { try ValueCodec.decode([0x04, b]) }) }
        for tag: UInt8 in [0x00, 0x0a, 0x7f, 0xff] { isMalformed(codecError { try ValueCodec.decode([tag]) }) }
    }

    func testTruncationAndTrailingBytes() {
        let full = ValueCodec.encode(.dictionary(["a": .array([.int(1), .string("x")])]))
        for cut in 0..<full.count {
            XCTAssertEqual(codecError { try ValueCodec.decode(Array(full.prefix(cut))) }, .truncated)
        }
        isMalformed(codecError { try ValueCodec.decode(full + [0x09]) })
    }
}
