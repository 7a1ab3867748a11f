import XCTest

@testable import LatchkeyCrypto

/// The internal DER reader's limits: hostile lengths, tags and nesting fail cleanly.
final class DERTests: XCTestCase {
    private func readAll(_ bytes: [UInt8]) throws {
        var reader = DER.Reader(bytes)
        while let element = try reader.next() {
            if element.isConstructed { try readAll(Array(element.content)) }
        }
    }

    func testReaderRejectsWhatItCannotBound() {
        let hostile: [(String, [UInt8])] = [
            ("indefinite length", [0x30, 0x80, 0x00, 0x00]),
            ("high tag number", [0x1F, 0x81, 0x01, 0x00]),
            ("five length octets", [0x04, 0x85, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00]),
            ("length past the end", [0x04, 0x05, 0x01, 0x02]),
            ("long length past the end", [0x04, 0x84, 0x7F, 0xFF, 0xFF, 0xFF, 0x00]),
            ("missing length", [0x30]),
            ("truncated long length", [0x30, 0x82, 0x01]),
        ]
        for (name, bytes) in hostile {
            XCTAssertThrowsError(try readAll(bytes), name) {
                guard case .invalidInput = $0 as? CryptoError else { return XCTFail("\(name): \($0)") }
            }
        }
    }

    func testNestingIsLimited() throws {
        func nested(_ depth: Int) -> [UInt8] {
            var value: [UInt8] = [0x05, 0x00]
            for _ in 0..<depth { value = DER.encode(DER.sequence, value) }
            return value
        }
        func descend(_ element: DER.Element) throws {
            var reader = try element.contents()
            while let child = try reader.next() {
                if child.isConstructed { try descend(child) }
            }
        }
        XCTAssertNoThrow(try descend(DER.single(nested(DER.maximumDepth)[...], "nested")))
        XCTAssertThrowsError(try descend(DER.single(nested(DER.maximumDepth + 2)[...], "nested")))
    }

    func testLengthsAndIntegers() throws {
        XCTAssertEqual(DER.lengthOctets(0x7F), [0x7F])
        XCTAssertEqual(DER.lengthOctets(0x80), [0x81, 0x80])
        XCTAssertEqual(DER.lengthOctets(0x1234), [0x82, 0x12, 0x34])
        // A long form that could have been short is read (as Apple's libDER does).
        let element = try DER.single([0x04, 0x81, 0x02, 0xAA, 0xBB][...], "octets")
        XCTAssertEqual(Array(element.content), [0xAA, 0xBB])
        XCTAssertEqual(DER.unsignedInteger([0x00, 0x00, 0x80]), [0x02, 0x02, 0x00, 0x80])
        XCTAssertEqual(DER.unsignedInteger([0x7F]), [0x02, 0x01, 0x7F])
        XCTAssertEqual(DER.unsignedInteger([]), [0x02, 0x01, 0x00])
        XCTAssertThrowsError(try DER.unsignedMagnitude([0x80][...], "negative"))
        XCTAssertThrowsError(try DER.unsignedMagnitude([0x00, 0x01][...], "padded"))
        XCTAssertEqual(Array(try DER.unsignedMagnitude([0x00, 0x80][...], "sign byte")), [0x80])
    }
}
