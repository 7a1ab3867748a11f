import LatchkeyModel
import XCTest

@testable import LatchkeyWire

/// Random and mutated payloads through the request and response decoders (the value decoder's own
/// fuzz test is in LatchkeyCodecTests). The property is "returns or throws a WireError,
/// never traps"; a trap fails the whole test run. Seeds are fixed so a failure reproduces.
final class FuzzTests: XCTestCase {
    private let iterations = 20_000

    /// Valid encodings with a few bytes flipped, inserted, deleted or cut off: these reach deep into
    /// the decoders, unlike purely random bytes that mostly fail at the version byte.
    private func mutate(_ input: [UInt8], using rng: inout SplitMix64) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0 where !bytes.isEmpty:
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            case 1:
                bytes.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...bytes.count, using: &rng))
            case 2 where !bytes.isEmpty:
                bytes.remove(at: Int.random(in: 0..<bytes.count, using: &rng))
            case 3:
                bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng)))
            case 4 where bytes.count >= 4:
                // Overwrite a u32 with an extreme length or count.
                let at = Int.random(in: 0...(bytes.count - 4), using: &rng)
                let v: [UInt8] = [
                    [0xff, 0xff, 0xff, 0xff], [0x00, 0x01, 0x00, 0x01], [0x7f, 0xff, 0xff, 0xff], [0, 0, 0, 0],
                ]
                .randomElement(using: &rng)!
                bytes.replaceSubrange(at..<(at + 4), with: v)
            default:
                break
            }
        }
        return bytes
    }

    func testRequestDecoderSurvivesFuzzing() {
        var rng = SplitMix64(seed: 0x1A7C_4E11)
        var decoded = 0
        for i in 0..<iterations {
            let payload: [UInt8]
            switch i % 3 {
            case 0: payload = [1] + randomBytes(Int.random(in: 0..<64, using: &rng), using: &rng)
            default: payload = mutate(randomRequest(using: &rng).encode(), using: &rng)
            }
            // Typed throws: anything thrown is a WireError by construction.
            guard let request = try? Request.decode(payload) else { continue }
            decoded += 1
            // Whatever decodes must survive its own round trip (compared as bytes, which NaN allows).
            let canonical = request.encode()
            XCTAssertEqual(try Request.decode(canonical).encode(), canonical)
        }
        XCTAssertGreaterThan(decoded, 0, "the mutator should leave some payloads valid")
    }

    func testResponseDecoderSurvivesFuzzing() {
        var rng = SplitMix64(seed: 0x5EED_0002)
        for i in 0..<iterations {
            let payload: [UInt8]
            switch i % 3 {
            case 0: payload = [1] + randomBytes(Int.random(in: 0..<64, using: &rng), using: &rng)
            default: payload = mutate(randomResponse(using: &rng).encode(), using: &rng)
            }
            guard let response = try? Response.decode(payload) else { continue }
            let canonical = response.encode()
            XCTAssertEqual(try Response.decode(canonical).encode(), canonical)
        }
    }
}
