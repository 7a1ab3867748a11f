import LatchkeyModel
import LatchkeyValueTestSupport
import XCTest

@testable import LatchkeyCodec

/// Random and mutated values through the decoder. The property is "returns or throws a CodecError,
/// never traps"; a trap fails the whole test run. The seed is fixed so a failure reproduces.
final class ValueFuzzTests: XCTestCase {
    private let iterations = 20_000

    func testValueDecoderSurvivesFuzzing() {
        var rng = SplitMix64(seed: 0xC0DE_C0DE)
        for _ in 0..<iterations {
            let payload = mutate(ValueCodec.encode(randomValue(using: &rng)), using: &rng)
            guard let value = try? ValueCodec.decode(payload) else { continue }
            let canonical = ValueCodec.encode(value)
            XCTAssertEqual(ValueCodec.encode(try ValueCodec.decode(canonical)), canonical)
        }
    }
}
