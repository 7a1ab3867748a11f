import LatchkeyModel
import LatchkeySecrets

@testable import LatchkeyWire

/// SplitMix64: a tiny seeded generator so fuzz failures reproduce from the seed alone.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Parses "01 02 ff" (spaces and newlines ignored) into bytes.
func hex(_ text: String) -> [UInt8] {
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

func secret(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

func randomBytes<G: RandomNumberGenerator>(_ count: Int, using rng: inout G) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// A random value within the caps; NaN is avoided because it is never equal to itself.
func randomValue<G: RandomNumberGenerator>(depth: Int = 1, using rng: inout G) -> SecValue {
    let containerAllowed = depth < Wire.maxValueDepth
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

func randomDictionary<G: RandomNumberGenerator>(depth: Int = 1, using rng: inout G) -> SecDictionary {
    var d: SecDictionary = [:]
    for _ in 0..<Int.random(in: 0..<4, using: &rng) {
        d[randomString(using: &rng)] =
            depth < Wire.maxValueDepth
            ? randomValue(depth: depth, using: &rng) : .int(1)
    }
    return d
}

func randomString<G: RandomNumberGenerator>(using rng: inout G) -> String {
    let alphabet: [Character] = ["a", "b", "c", "_", "é", "ß", "😀", "\u{0}", "中", "Z"]
    return String((0..<Int.random(in: 0..<6, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
}

func randomRequest<G: RandomNumberGenerator>(using rng: inout G) -> Request {
    let pw = { (rng: inout G) in SecretBytes(copying: randomBytes(Int.random(in: 0..<32, using: &rng), using: &rng)) }
    switch Int.random(in: 0..<10, using: &rng) {
    case 0: return .hello
    case 1: return .add(randomDictionary(using: &rng))
    case 2: return .copyMatching(randomDictionary(using: &rng))
    case 3: return .update(query: randomDictionary(using: &rng), attributes: randomDictionary(using: &rng))
    case 4: return .delete(randomDictionary(using: &rng))
    case 5: return .status
    case 6: return .create(password: pw(&rng), options: randomDictionary(using: &rng))
    case 7: return .unlock(password: pw(&rng))
    case 8: return .lock(all: Bool.random(using: &rng))
    default: return .changePassword(old: pw(&rng), new: pw(&rng))
    }
}

func randomResponse<G: RandomNumberGenerator>(using rng: inout G) -> Response {
    Response(
        status: Int32.random(in: .min ... .max, using: &rng),
        value: Bool.random(using: &rng) ? randomValue(using: &rng) : nil,
        message: Bool.random(using: &rng) ? randomString(using: &rng) : nil)
}

/// Runs `body` and returns the WireError it threw, or nil if it did not throw. (Closures are not
/// inferred as typed-throwing, hence the cast; the API's typed throws guarantee it succeeds.)
func wireError<T>(_ body: () throws -> T) -> WireError? {
    do {
        _ = try body()
        return nil
    } catch { return error as? WireError ?? .malformed("not a WireError: \(error)") }
}
