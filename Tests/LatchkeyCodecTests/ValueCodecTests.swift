import LatchkeyModel
import LatchkeyValueTestSupport
import XCTest

@testable import LatchkeyCodec

final class ValueCodecTests: XCTestCase {
    /// Each type's exact bytes, as docs/PROTOCOL.md §3 and docs/STORE.md give them.
    func testEveryTypeHasTheDocumentedEncoding() throws {
        let cases: [(SecValue, String)] = [
            (.string("hé"), "01 00000003 68 c3a9"),
            (.data([0xde, 0xad]), "02 00000002 dead"),
            (.int(-2), "03 fffffffffffffffe"),
            (.bool(false), "04 00"),
            (.bool(true), "04 01"),
            (.double(1.5), "05 3ff8000000000000"),
            (.date(-1.0), "06 bff0000000000000"),
            (.array([.null, .int(1)]), "07 00000002 09 03 0000000000000001"),
            (.dictionary(["b": .null, "a": .bool(true)]), "08 00000002 00000001 61 04 01 00000001 62 09"),
            (.null, "09"),
            (.string(""), "01 00000000"),
            (.array([]), "07 00000000"),
            (.dictionary([:]), "08 00000000"),
        ]
        for (value, expected) in cases {
            XCTAssertEqual(ValueCodec.encode(value), hex(expected), "\(value)")
            XCTAssertEqual(ValueCodec.encodedSize(value), hex(expected).count)
            XCTAssertEqual(try ValueCodec.decode(hex(expected)), value)
        }
    }

    func testExtremeScalarsRoundTrip() throws {
        let values: [SecValue] = [
            .int(.min), .int(.max), .int(0), .double(.infinity), .double(-.infinity), .double(-0.0),
            .double(.leastNonzeroMagnitude), .date(.greatestFiniteMagnitude), .string("\u{0}nul"),
            .string("😀中ß"), .data([]), .data(Array(0...255)),
        ]
        for value in values {
            XCTAssertEqual(try ValueCodec.decode(ValueCodec.encode(value)), value)
        }
        // NaN is never == itself, so compare its bits: the payload must survive.
        let nan = Double(bitPattern: 0x7ff8_0000_0000_1234)
        guard case .double(let back) = try ValueCodec.decode(ValueCodec.encode(.double(nan))) else {
            return XCTFail("not a double")
        }
        XCTAssertEqual(back.bitPattern, nan.bitPattern)
    }

    /// Keys are sorted by UTF-8 bytes, not by Swift's String order, and the bytes never vary.
    func testDictionaryEncodingIsDeterministicByteOrder() {
        let d: SecDictionary = ["é": .null, "z": .null, "Z": .null, "a": .null, "ab": .null, "": .null]
        let encoded = ValueCodec.encode(.dictionary(d))
        var reader = 5
        var keys: [[UInt8]] = []
        for _ in 0..<d.count {
            let n =
                Int(encoded[reader]) << 24 | Int(encoded[reader + 1]) << 16 | Int(encoded[reader + 2]) << 8
                | Int(encoded[reader + 3])
            keys.append(Array(encoded[(reader + 4)..<(reader + 4 + n)]))
            reader += 4 + n + 1
        }
        XCTAssertEqual(keys, [[], [0x5a], [0x61], [0x61, 0x62], [0x7a], [0xc3, 0xa9]])
        for _ in 0..<20 {
            var copy = SecDictionary()
            for (k, v) in d.shuffled() { copy[k] = v }
            XCTAssertEqual(ValueCodec.encode(.dictionary(copy)), encoded)
        }
    }

    func testDecoderAcceptsUnsortedKeys() throws {
        let unsorted = hex("08 00000002 00000001 62 09 00000001 61 09")
        XCTAssertEqual(try ValueCodec.decode(unsorted), .dictionary(["a": .null, "b": .null]))
    }

    func testRandomValuesRoundTrip() throws {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<2_000 {
            let value = randomValue(using: &rng)
            XCTAssertNoThrow(try ValueCodec.validate(value))
            let bytes = ValueCodec.encode(value)
            XCTAssertEqual(bytes.count, ValueCodec.encodedSize(value))
            XCTAssertEqual(try ValueCodec.decode(bytes), value)
        }
    }

    func testDecodeAtOffsetAdvances() throws {
        let bytes = ValueCodec.encode(.int(7)) + ValueCodec.encode(.string("x"))
        var offset = 0
        XCTAssertEqual(try ValueCodec.decode(bytes, offset: &offset), .int(7))
        XCTAssertEqual(offset, 9)
        XCTAssertEqual(try ValueCodec.decode(bytes, offset: &offset), .string("x"))
        XCTAssertEqual(offset, bytes.count)
        XCTAssertEqual(codecError { try ValueCodec.decode(bytes, offset: &offset) }, .truncated)
        var bad = -1
        XCTAssertEqual(codecError { try ValueCodec.decode(bytes, offset: &bad) }, .truncated)
    }

    func testValidateEnforcesCaps() {
        var deep = SecValue.null
        for _ in 0..<ValueCodec.maxDepth { deep = .array([deep]) }
        XCTAssertNoThrow(try ValueCodec.validate(deep))
        XCTAssertNotNil(codecError { try ValueCodec.validate(.array([deep])) })
        let many = SecValue.array(Array(repeating: .null, count: ValueCodec.maxCollectionCount + 1))
        XCTAssertNotNil(codecError { try ValueCodec.validate(many) })
        XCTAssertNoThrow(try ValueCodec.validate(.array(Array(repeating: .null, count: ValueCodec.maxCollectionCount))))
    }
}
