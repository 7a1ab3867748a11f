import LatchkeyModel
import LatchkeyValueTestSupport

@testable import LatchkeyCodec

// The helpers only the codec's tests use; the value generators and the mutator are shared with
// LatchkeyWireTests in LatchkeyValueTestSupport.

/// `depth` containers, each holding the next, around a null; a dictionary's entry has key "k".
func nestedValue(_ depth: Int, tag: UInt8) -> [UInt8] {
    var bytes: [UInt8] = [0x09]
    for _ in 0..<depth {
        bytes = tag == 0x07 ? hex("07 00000001") + bytes : hex("08 00000001 00000001 6b") + bytes
    }
    return bytes
}

/// Runs `body` and returns the CodecError it threw, or nil if it did not throw. (Closures are not
/// inferred as typed-throwing, hence the cast; the API's typed throws guarantee it succeeds.)
func codecError<T>(_ body: () throws -> T) -> CodecError? {
    do {
        _ = try body()
        return nil
    } catch { return error as? CodecError ?? .malformed("not a CodecError: \(error)") }
}
