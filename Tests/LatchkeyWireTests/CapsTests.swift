import LatchkeyCodec
import LatchkeyModel
import LatchkeySecrets
import LatchkeyValueTestSupport
import XCTest

@testable import LatchkeyWire

/// Every cap and validity rule turns hostile input into a WireError, never a trap or a big allocation.
final class CapsTests: XCTestCase {
    private func isMalformed(_ error: WireError?, file: StaticString = #filePath, line: UInt = #line) {
        guard case .malformed = error else {
            return XCTFail("expected .malformed, got \(String(describing: error))", file: file, line: line)
        }
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
        // The value codec's own depth cap is tested in LatchkeyCodecTests. A request body is depth 1,
        // so it can hold 7 more levels.
        XCTAssertNoThrow(try Request.decode([0x01, 0x10] + nested(Wire.maxValueDepth, tag: 0x08)))
        isMalformed(wireError { try Request.decode([0x01, 0x10] + nested(Wire.maxValueDepth + 1, tag: 0x08)) })
    }

    func testInvalidUTF8Fails() {
        // Invalid UTF-8 inside values is the codec's (LatchkeyCodecTests); the message is the protocol's.
        var response = Response(status: -50, message: "ab").encode()
        response[response.count - 1] = 0xff
        isMalformed(wireError { try Response.decode(response) })
    }

    func testTruncationAndTrailingBytes() {
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

    /// authorizeGroups: a password, then 1 to 64 access groups, each a string of 1 to 256 bytes.
    func testAuthorizeGroupsNamesOneToSixtyFourGroups() throws {
        func u32(_ n: Int) -> [UInt8] {
            [UInt8(n >> 24 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
        }
        func request(_ groups: [SecValue]) -> [UInt8] {
            var bytes: [UInt8] = [0x01, 0x25] + u32(2) + Array("pw".utf8)
            ValueCodec.encode(.array(groups), into: &bytes)
            return bytes
        }
        let longest = String(repeating: "g", count: Request.maxAccessGroupLength)
        XCTAssertEqual(
            try Request.decode(request([.string("a"), .string(longest)])),
            .authorizeGroups(password: SecretBytes(copying: Array("pw".utf8)), groups: ["a", longest]))
        XCTAssertNoThrow(try Request.decode(request(Array(repeating: .string("g"), count: 64))))
        for bad: [SecValue] in [
            [], Array(repeating: .string("g"), count: 65), [.string("")], [.string(longest + "g")], [.int(1)],
            [.data(Array("g".utf8))],
        ] {
            isMalformed(wireError { try Request.decode(request(bad)) })
        }
        isMalformed(
            wireError { try Request.decode([0x01, 0x25] + u32(2) + Array("pw".utf8) + [0x01] + u32(1) + [0x67]) })
    }

    func testVersionOpcodeAndFlagChecks() {
        XCTAssertEqual(wireError { try Request.decode([]) }, .truncated)
        XCTAssertEqual(wireError { try Request.decode([0x01]) }, .truncated)
        XCTAssertEqual(wireError { try Request.decode([0x02]) }, .unsupportedVersion(2))
        XCTAssertEqual(wireError { try Request.decode([0x00, 0x01]) }, .unsupportedVersion(0))
        for op: UInt8 in [0x00, 0x02, 0x18, 0x2f, 0x34, 0x3f, 0x40, 0xff] {
            XCTAssertEqual(wireError { try Request.decode([0x01, op]) }, .unknownOpcode(op))
        }
        isMalformed(wireError { try Request.decode([0x01, 0x23, 0x02]) })
        // invalidateContext carries exactly a 32-byte handle.
        XCTAssertEqual(wireError { try Request.decode([0x01, 0x17] + [UInt8](repeating: 1, count: 31)) }, .truncated)
        isMalformed(wireError { try Request.decode([0x01, 0x17] + [UInt8](repeating: 1, count: 33)) })
        XCTAssertEqual(try Request.decode([0x01, 0x23, 0x01]), .lock(all: true))
        // A body that is a value but not a dictionary.
        isMalformed(wireError { try Request.decode([0x01, 0x10, 0x09]) })
        XCTAssertEqual(wireError { try Response.decode([0x02, 0, 0, 0, 0, 0]) }, .unsupportedVersion(2))
        isMalformed(wireError { try Response.decode([0x01, 0, 0, 0, 0, 0x04]) })
        XCTAssertEqual(wireError { try Response.decode([0x01, 0, 0, 0, 0, 0x01]) }, .truncated)
        XCTAssertEqual(wireError { try Response.decode([0x01, 0, 0, 0, 0, 0x02, 0x00, 0x05, 0x61]) }, .truncated)
    }
}
