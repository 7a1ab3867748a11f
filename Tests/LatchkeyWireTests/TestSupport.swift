import LatchkeyModel
import LatchkeySecrets
import LatchkeyValueTestSupport

@testable import LatchkeyWire

func secret(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

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
