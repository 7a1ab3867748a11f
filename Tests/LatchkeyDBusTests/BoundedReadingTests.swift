import Foundation
import LatchkeyTestSupport
import XCTest

@testable import LatchkeyDBus

/// `BusMessage.arguments(within:)` against a real private dbus-daemon: each cap is exact (the largest
/// allowed value passes, one more is refused with `InvalidArgs`), an oversized message is refused with
/// the reader's own error, and byte arrays can be wiped in the message and in every copy.
final class BoundedReadingTests: XCTestCase {
    private var daemon: PrivateBus!
    private var service: BusConnection!
    private var client: BusConnection!

    static let limits = ReadLimits(maxValues: 40, maxArrayElements: 8, maxStringBytes: 16, maxByteArray: 32)

    override func setUpWithError() throws {
        daemon = try PrivateBus(system: false)
        service = try BusConnection(.address(daemon.address))
        // `Read` reads within `limits` and answers how many values it got; `Wipe` reads with wiping and
        // answers what it read, then what a second read of the same message finds.
        try service.sync { bus in
            try bus.addObject(path: "/read") { call in
                switch call.member {
                case "Read":
                    let values = try call.arguments(within: Self.limits)
                    try call.reply([.uint32(UInt32(values.count))])
                case "Wipe":
                    let first = try call.arguments(within: ReadLimits(), wipingByteArrays: true)
                    let second = try call.arguments()
                    try call.reply([.structure(first), .structure(second)])
                default:
                    return .notHandled
                }
                return .handled
            }
            try bus.requestName("org.example.Reader")
        }
        client = try BusConnection(.address(daemon.address))
    }

    override func tearDown() {
        client?.close()
        service?.close()
        daemon?.stop()
    }

    private func call(_ member: String, _ arguments: [BusValue]) throws -> [BusValue] {
        try client.sync { bus in
            try bus.call(
                destination: "org.example.Reader", path: "/read", interface: "org.example.Reader",
                member: member, arguments
            ).arguments()
        }
    }

    /// The error a `Read` of `arguments` is refused with, or nil when it is accepted.
    private func refusal(_ arguments: [BusValue]) -> BusError? {
        do {
            _ = try call("Read", arguments)
            return nil
        } catch {
            return error as? BusError ?? BusError(name: "not a BusError", message: "\(error)")
        }
    }

    private static func map(_ count: Int) -> BusValue {
        .dictionary(keyType: "s", valueType: "s", (0..<count).map { (.string("k\($0)"), .string("v")) })
    }

    func testEachCapIsExact() throws {
        // Arrays: 8 elements pass, 9 do not (also inside a variant and a struct).
        XCTAssertNil(refusal([.strings((0..<8).map { "\($0)" })]))
        XCTAssertEqual(
            refusal([.strings((0..<9).map { "\($0)" })])?.message,
            "message refused while reading it: an array has more than 8 elements")
        XCTAssertNil(refusal([Self.map(8)]))
        XCTAssertEqual(refusal([.variant(.structure([Self.map(9)]))])?.name, BusError.Name.invalidArgs)
        // Strings, object paths and signatures: 16 bytes pass, 17 do not.
        XCTAssertNil(refusal([.string(String(repeating: "é", count: 8))]))
        XCTAssertEqual(
            refusal([.string(String(repeating: "x", count: 17))])?.message,
            "message refused while reading it: a string is longer than 16 bytes")
        XCTAssertEqual(refusal([.objectPath("/" + String(repeating: "p", count: 16))])?.name, BusError.Name.invalidArgs)
        // Byte arrays: 32 bytes pass, 33 do not.
        XCTAssertNil(refusal([.byteArray([UInt8](repeating: 1, count: 32))]))
        XCTAssertEqual(refusal([.byteArray([UInt8](repeating: 1, count: 33))])?.name, BusError.Name.invalidArgs)
        // Values in the whole body: 40 pass, 41 do not. (A map of 8 entries is 1 + 8 × 3 = 25 values.)
        XCTAssertNil(refusal([Self.map(8)] + (0..<15).map { .uint32(UInt32($0)) }))
        XCTAssertEqual(
            refusal([Self.map(8)] + (0..<16).map { .uint32(UInt32($0)) })?.message,
            "message refused while reading it: the message holds more than 40 values")
        // Without limits the same reader takes everything.
        XCTAssertEqual(try call("Wipe", [Self.map(9)]).count, 2)
    }

    func testAHugeMapIsRefusedByTheReaderAndTheServiceStaysUp() throws {
        // 100,000 entries (about 2 MB on the wire): the reader's array cap, not anything after it, refuses it.
        let huge = Self.map(100_000)
        XCTAssertEqual(refusal([huge])?.message, "message refused while reading it: an array has more than 8 elements")
        XCTAssertEqual(try call("Read", [Self.map(2)]), [.uint32(1)])
    }

    func testByteArraysAreWipedInTheMessageAndInEveryCopy() throws {
        let secret = Array("correct horse battery staple".utf8)
        let reply = try call("Wipe", [.string("label"), .structure([.byteArray(secret), .uint32(7)])])
        XCTAssertEqual(
            reply.first, .structure([.string("label"), .structure([.byteArray(secret), .uint32(7)])]),
            "what was read keeps the bytes")
        XCTAssertEqual(
            reply.last,
            .structure([
                .string("label"),
                .structure([.byteArray([UInt8](repeating: 0, count: secret.count)), .uint32(7)]),
            ]),
            "the message itself no longer has them")

        // wipeByteArrays zeroes the storage every copy shares, nested or not.
        let bytes = Array("hunter2".utf8)
        let copy = bytes
        let value = BusValue.structure([
            .variant(.byteArray(bytes)), .array(elementType: "ay", [.byteArray(Array("x".utf8))]),
        ])
        value.wipeByteArrays()
        XCTAssertEqual(copy, [UInt8](repeating: 0, count: 7))
        XCTAssertEqual(bytes, [UInt8](repeating: 0, count: 7))
        XCTAssertEqual(
            value,
            .structure([
                .variant(.byteArray([0, 0, 0, 0, 0, 0, 0])),
                .array(elementType: "ay", [.byteArray([0])]),
            ]))
        BusValue.byteArray([]).wipeByteArrays()  // nothing to wipe, and no crash
    }
}
