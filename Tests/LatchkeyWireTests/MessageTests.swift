import LatchkeyModel
import LatchkeySecrets
import LatchkeyValueTestSupport
import XCTest

@testable import LatchkeyWire

final class MessageTests: XCTestCase {
    private let query: SecDictionary = ["class": .string("genp"), "svce": .string("mail"), "r_Data": .bool(true)]

    private var everyRequest: [Request] {
        [
            .hello,
            .add(query.merging(["v_Data": .data([1, 2, 3])]) { $1 }),
            .copyMatching(query),
            .update(query: query, attributes: ["labl": .string("new")]),
            .delete(query),
            .evaluateContext(["policy": .int(1), "reuse": .int(10_000), "reason": .string("why")]),
            .invalidateContext(handle: [UInt8](repeating: 7, count: 32)),
            .status,
            .create(
                password: secret("correct horse"),
                options: ["argon2.t": .int(3), "argon2.m": .int(65536), "argon2.p": .int(1)]),
            .unlock(password: secret("correct horse")),
            .unlock(password: secret("")),
            .lock(all: true),
            .lock(all: false),
            .changePassword(old: secret("old"), new: secret("new")),
            .authorizeGroups(password: secret("pw"), groups: ["com.example.mail", "*"]),
            .backup(
                password: secret("pw"), key: SecretBytes(copying: [UInt8](repeating: 4, count: 32)),
                options: ["salt": .data([UInt8](repeating: 5, count: 16)), "argon2.t": .int(3)]),
            .restore(
                password: secret("pw"), key: SecretBytes(copying: [UInt8](repeating: 4, count: 32)),
                options: ["step": .string("begin"), "size": .int(1000)]),
            .restore(
                password: secret(""), key: secret(""), options: ["step": .string("data"), "bytes": .data([1, 2])]),
            .importSecretServiceItem([
                "label": .string("Mail ✓"), "attributes": .array([.string("service"), .string("mail")]),
                "secret": .data([0xFF, 0x00]), "contentType": .string("application/octet-stream"),
            ]),
            .keyHandoff(
                masterKey: SecretBytes(copying: [UInt8](repeating: 1, count: 32)),
                deviceFactor: SecretBytes(copying: [UInt8](repeating: 2, count: 32))),
            .keyHandoff(masterKey: SecretBytes(copying: [UInt8](repeating: 1, count: 32)), deviceFactor: nil),
            .sessionOpen(token: Array(0..<16)),
            .sessionClose(token: Array(16..<32)),
            .sessionOpenWithDetails(token: Array(32..<48), logindSession: "c7"),
            .sessionOpenWithDetails(token: Array(32..<48), logindSession: nil),
            .keyOperation([
                "v_PersistentRef": .data(Array("keys".utf8) + [UInt8](repeating: 3, count: 16)),
                "op": .string("sign"), "algid": .string("algid:sign:ECDSA:message-X962:SHA256"),
                "v_Data": .data([1, 2, 3]),
            ]),
            .generateKey(["type": .string("73"), "bsiz": .int(256), "private": .dictionary(["perm": .bool(true)])]),
        ]
    }

    func testHandoffLayoutAndLengthChecks() throws {
        let master = [UInt8](repeating: 0xAA, count: 32)
        let bytes = Request.keyHandoff(masterKey: SecretBytes(copying: master), deviceFactor: nil).encode()
        XCTAssertEqual(bytes, [0x01, 0x30, 0, 0, 0, 32] + master + [0, 0, 0, 0])
        // A master key must be exactly 32 bytes, a device factor 0 or 32.
        for (m, d) in [(31, 0), (33, 0), (0, 0), (32, 16), (32, 33)] {
            let body =
                [0x01, 0x30, 0, 0, 0, UInt8(m)] + [UInt8](repeating: 1, count: m)
                + [0, 0, 0, UInt8(d)] + [UInt8](repeating: 2, count: d)
            XCTAssertThrowsError(try Request.decode(body), "m=\(m) d=\(d)")
        }
        XCTAssertEqual(Request.sessionOpen(token: Array(0..<16)).encode(), [0x01, 0x31] + Array(0..<16))
        XCTAssertThrowsError(try Request.decode([0x01, 0x31] + Array(0..<15)), "short token")
        XCTAssertThrowsError(try Request.decode([0x01, 0x32] + Array(0..<17)), "trailing byte")
        XCTAssertEqual(
            Set(Opcode.allCases.filter(\.permittedForRoot)),
            [.hello, .keyHandoff, .sessionOpen, .sessionClose, .sessionOpenWithDetails])
        XCTAssertEqual(
            Set(Opcode.allCases.filter(\.requiresRoot)), [.sessionOpen, .sessionClose, .sessionOpenWithDetails])
    }

    /// sessionOpenWithDetails (0x33): the token, then a dictionary whose "logind" string is logind's
    /// session id (docs/PROTOCOL.md 4a; pam/tests/test_pam.c checks the module's bytes for "c5").
    func testSessionOpenWithDetailsLayoutAndChecks() throws {
        let token = [UInt8](repeating: 0xAB, count: 16)
        let details: [UInt8] =
            [0x08, 0, 0, 0, 1, 0, 0, 0, 6] + Array("logind".utf8) + [0x01, 0, 0, 0, 2] + Array("c5".utf8)
        XCTAssertEqual(
            Request.sessionOpenWithDetails(token: token, logindSession: "c5").encode(), [0x01, 0x33] + token + details)
        XCTAssertEqual(
            Request.sessionOpenWithDetails(token: token, logindSession: nil).encode(),
            [0x01, 0x33] + token + [0x08, 0, 0, 0, 0])

        func u32(_ n: Int) -> [UInt8] {
            [UInt8(n >> 24 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
        }
        func string(_ text: String) -> [UInt8] { [0x01] + u32(text.utf8.count) + Array(text.utf8) }
        func body(_ entries: [(key: String, value: [UInt8])]) -> [UInt8] {
            [0x01, 0x33] + token + [0x08] + u32(entries.count)
                + entries.flatMap { u32($0.key.utf8.count) + Array($0.key.utf8) + $0.value }
        }
        // Keys this version does not know are ignored: a newer module may send more.
        XCTAssertEqual(
            try Request.decode(body([("logind", string("1234")), ("seat", string("seat0"))])),
            .sessionOpenWithDetails(token: token, logindSession: "1234"))
        XCTAssertEqual(
            try Request.decode(body([("seat", string("seat0"))])),
            .sessionOpenWithDetails(token: token, logindSession: nil))
        // An id logind would not make, or not a string, is malformed.
        let longest = String(repeating: "c", count: Request.maxLogindSessionLength)
        XCTAssertNoThrow(try Request.decode(body([("logind", string(longest))])))
        let bad: [[UInt8]] = [
            string(""), string(longest + "c"), string("c-7"), string("c7\n"), string("c\u{0}7"), string("c7é"),
            [0x03] + [UInt8](repeating: 0, count: 7) + [7], [0x02] + u32(2) + Array("c7".utf8),
        ]
        for value in bad {
            XCTAssertThrowsError(try Request.decode(body([("logind", value)])), "\(value)")
        }
        XCTAssertThrowsError(try Request.decode([0x01, 0x33] + token), "no dictionary")
        XCTAssertThrowsError(try Request.decode(body([]) + [0]), "trailing byte")
    }

    /// A backup key is 32 bytes; only a restore's later steps may send none.
    func testBackupKeyLengths() {
        for (opcode, length, valid) in [
            (Opcode.backup, 32, true), (.backup, 0, false), (.backup, 31, false), (.restore, 32, true),
            (.restore, 0, true), (.restore, 33, false),
        ] {
            let body =
                [0x01, opcode.rawValue, 0, 0, 0, 2, 0x70, 0x77, 0, 0, 0, UInt8(length)]
                + [UInt8](repeating: 9, count: length) + [0x08, 0, 0, 0, 0]
            if valid {
                XCTAssertNoThrow(try Request.decode(body), "\(opcode) key of \(length)")
            } else {
                XCTAssertThrowsError(try Request.decode(body), "\(opcode) key of \(length)")
            }
        }
    }

    func testEveryRequestRoundTrips() throws {
        var seen = Set<UInt8>()
        for request in everyRequest {
            let bytes = request.encode()
            XCTAssertEqual(bytes.count, request.encodedSize, "\(request)")
            XCTAssertEqual(bytes[0], Wire.protocolVersion)
            XCTAssertEqual(bytes[1], request.opcode.rawValue)
            seen.insert(bytes[1])
            XCTAssertEqual(try Request.decode(bytes), request, "\(request)")
        }
        XCTAssertEqual(seen, Set(Opcode.allCases.map(\.rawValue)), "every opcode is covered")
    }

    func testRequestEqualityDistinguishesPasswords() {
        XCTAssertNotEqual(Request.unlock(password: secret("a")), .unlock(password: secret("b")))
        XCTAssertNotEqual(Request.unlock(password: secret("a")), .unlock(password: secret("aa")))
        XCTAssertNotEqual(Request.lock(all: true), .lock(all: false))
        XCTAssertNotEqual(Request.hello, .status)
    }

    func testDecodeWipingDecodesSecretsAndZeroesTheBuffer() throws {
        var payload = Request.changePassword(old: secret("hunter2"), new: secret("swordfish")).encode()
        let length = payload.count
        let request = try Request.decode(wiping: &payload)
        XCTAssertEqual(payload, [UInt8](repeating: 0, count: length))
        guard case .changePassword(let old, let new) = request else { return XCTFail("wrong request") }
        XCTAssertEqual(old.unsafeCopyToArray(), Array("hunter2".utf8))
        XCTAssertEqual(new.unsafeCopyToArray(), Array("swordfish".utf8))

        // Wiped on failure too: a truncated unlock still had password bytes in it.
        var broken = Array(Request.unlock(password: secret("hunter2")).encode().dropLast())
        XCTAssertEqual(wireError { try Request.decode(wiping: &broken) }, .truncated)
        XCTAssertTrue(broken.allSatisfy { $0 == 0 })
    }

    func testDescriptionsRedactSecretsAndValues() {
        let request = Request.create(password: secret("hunter2"), options: ["x": .string("visible?")])
        XCTAssertEqual(request.description, "Request.create")
        XCTAssertFalse("\(request)".contains("hunter2"))
        let response = Response(status: 0, value: .data(Array("topsecret".utf8)), message: "ok")
        XCTAssertEqual(response.description, "Response(status: 0, value: data, message: ok)")
    }

    func testResponsesRoundTrip() throws {
        let responses = [
            Response(),
            Response(status: -25300),
            Response(status: 0, value: .dictionary(["acct": .string("me"), "v_Data": .data([0, 255])])),
            Response(status: -25293, message: "wrong password"),
            Response(status: 0, value: .array([.null]), message: ""),
            Response(status: .min, value: .int(1), message: "ünïcødé 😀"),
            Response(status: .max),
        ]
        for response in responses {
            let bytes = response.encode()
            XCTAssertEqual(bytes.count, response.encodedSize)
            XCTAssertEqual(try Response.decode(bytes), response)
        }
    }

    func testLongMessagesAreTruncatedAtAScalarBoundary() throws {
        let long = String(repeating: "é", count: 40_000)  // 80,000 bytes
        let decoded = try Response.decode(Response(status: -50, message: long).encode())
        let text = try XCTUnwrap(decoded.message)
        XCTAssertEqual(text.utf8.count, Wire.maxMessageLength - 1)  // 65,534: an é does not fit in the last byte
        XCTAssertTrue(text.allSatisfy { $0 == "é" })
        let exact = String(repeating: "a", count: Wire.maxMessageLength)
        XCTAssertEqual(try Response.decode(Response(message: exact).encode()).message, exact)
    }

    func testRejectingResponses() throws {
        let version = Response(rejecting: .unsupportedVersion(2))
        XCTAssertEqual(version.status, -4)
        XCTAssertEqual(version.message, "unsupported protocol version 2")
        XCTAssertEqual(Response(rejecting: .unknownOpcode(0x40)).status, -4)
        XCTAssertEqual(Response(rejecting: .unknownOpcode(0x40)).message, "unknown opcode 0x40")
        XCTAssertEqual(Response(rejecting: .malformed("x")).status, -50)
        XCTAssertEqual(Response(rejecting: .truncated).status, -50)
        XCTAssertFalse(WireError.unsupportedVersion(2).agentKeepsConnection)
        XCTAssertTrue(WireError.unknownOpcode(0x40).agentKeepsConnection)
        XCTAssertFalse(WireError.malformed("x").agentKeepsConnection)
        XCTAssertFalse(WireError.truncated.agentKeepsConnection)
        XCTAssertFalse(WireError.frameTooLarge(1, limit: 0).agentKeepsConnection)
        // A version-2 client can still read the rejection: it is always a version-1 response.
        XCTAssertEqual(version.encode().prefix(6), [0x01, 0xff, 0xff, 0xff, 0xfc, 0x02])
    }

    /// The worked examples in docs/PROTOCOL.md, byte for byte.
    func testProtocolDocumentExamples() throws {
        let request = Request.copyMatching(["class": .string("genp"), "r_Data": .bool(true)])
        let requestFrame = hex(
            """
            00 00 00 25 01 11 08 00 00 00 02 00 00 00 05 63 6c 61 73 73 01 00 00 00 04 67 65 6e 70
            00 00 00 06 72 5f 44 61 74 61 04 01
            """)
        XCTAssertEqual(frame(request.encode()), requestFrame)
        XCTAssertEqual(try Request.decode(Array(requestFrame.dropFirst(4))), request)

        let success = Response(status: 0, value: .data(Array("hunter2".utf8)))
        let successFrame = hex("00 00 00 12 01 00 00 00 00 01 02 00 00 00 07 68 75 6e 74 65 72 32")
        XCTAssertEqual(frame(success.encode()), successFrame)

        let failure = Response(status: -25300, message: "no matching item")
        let failureFrame = hex(
            """
            00 00 00 18 01 ff ff 9d 2c 02 00 10 6e 6f 20 6d 61 74 63 68 69 6e 67 20 69 74 65 6d
            """)
        XCTAssertEqual(frame(failure.encode()), failureFrame)

        let rejection = hex(
            """
            00 00 00 26 01 ff ff ff fc 02 00 1e 75 6e 73 75 70 70 6f 72 74 65 64 20 70 72 6f 74 6f
            63 6f 6c 20 76 65 72 73 69 6f 6e 20 32
            """)
        XCTAssertEqual(frame(Response(rejecting: .unsupportedVersion(2)).encode()), rejection)
    }

    private func frame(_ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
    }
}
