import LatchkeyModel

// Seeded random values, byte helpers and a mutator for the tests of the two decoders that read
// values from outside: the value codec's (LatchkeyCodecTests) and the protocol's (LatchkeyWireTests).

/// SplitMix64: a tiny seeded generator so fuzz failures reproduce from the seed alone.
package struct SplitMix64: RandomNumberGenerator {
    package var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Parses "01 02 ff" (spaces and newlines ignored) into bytes.
package func hex(_ text: String) -> [UInt8] {
    let digits = text.filter { $0.isHexDigit }
    precondition(digits.count % 2 == 0, "odd number of hex digits")
    var out: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        out.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return out
}

package func randomBytes<G: RandomNumberGenerator>(_ count: Int, using rng: inout G) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// Values nest at most this deep (the codec's `maxDepth`, which the protocol shares); generators stay
/// within it.
package let generatedValueDepth = 8

/// A random value within the caps; NaN is avoided because it is never equal to itself.
package func randomValue<G: RandomNumberGenerator>(depth: Int = 1, using rng: inout G) -> SecValue {
    let containerAllowed = depth < generatedValueDepth
    switch Int.random(in: 0..<(containerAllowed ? 9 : 7), using: &rng) {
    case 0: return .string(randomString(using: &rng))
    case 1: return .data(randomBytes(Int.random(in: 0..<20, using: &rng), using: &rng))
    case 2: return .int(Int64.random(in: .min ... .max, using: &rng))
    case 3: return .bool(Bool.random(using: &rng))
    case 4: return .double(Double.random(in: -1e300...1e300, using: &rng))
    case 5: return .date(Double.random(in: -1e9...1e9, using: &rng))
    case 6: return .null
    case 7:
        return .array((0..<Int.random(in: 0..<4, using: &rng)).map { _ in randomValue(depth: depth + 1, using: &rng) })
    default: return .dictionary(randomDictionary(depth: depth + 1, using: &rng))
    }
}

package func randomDictionary<G: RandomNumberGenerator>(depth: Int = 1, using rng: inout G) -> SecDictionary {
    var d: SecDictionary = [:]
    for _ in 0..<Int.random(in: 0..<4, using: &rng) {
        d[randomString(using: &rng)] = depth < generatedValueDepth ? randomValue(depth: depth, using: &rng) : .int(1)
    }
    return d
}

package func randomString<G: RandomNumberGenerator>(using rng: inout G) -> String {
    let alphabet: [Character] = ["a", "b", "c", "_", "é", "ß", "😀", "\u{0}", "中", "Z"]
    return String((0..<Int.random(in: 0..<6, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
}

/// A valid encoding with a few bytes flipped, inserted, deleted or cut off: these reach deep into a
/// decoder, unlike purely random bytes.
package func mutate(_ input: [UInt8], using rng: inout SplitMix64) -> [UInt8] {
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
