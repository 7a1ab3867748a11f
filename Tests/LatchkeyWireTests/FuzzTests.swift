import LatchkeyModel
import LatchkeyValueTestSupport
import XCTest

@testable import LatchkeyWire

/// Random and mutated payloads through the request and response decoders (the value decoder's own
/// fuzz test is in LatchkeyCodecTests). The property is "returns or throws a WireError,
/// never traps"; a trap fails the whole test run. Seeds are fixed so a failure reproduces.
final class FuzzTests: XCTestCase {
    private let iterations = 20_000

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
