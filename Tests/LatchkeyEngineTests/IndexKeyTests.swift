import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine

/// The index key's remembered hashes (the keyed hashes of access groups, needed by every request of a
/// caller) are the hashes themselves, kept per key and bounded.
final class IndexKeyTests: XCTestCase {
    func testRememberedHashesAreTheHashesOfTheirKey() throws {
        let key = try IndexKey(afterFirstUnlock: SecretBytes(copying: [UInt8](repeating: 1, count: 32)))
        let other = try IndexKey(afterFirstUnlock: SecretBytes(copying: [UInt8](repeating: 2, count: 32)))
        for input in [[UInt8](), Array("default".utf8), Array("org.example.Mail".utf8)] {
            XCTAssertEqual(try key.remembered(input), try key.hash(input))
            XCTAssertEqual(try key.remembered(input), try key.hash(input), "asked again")
            XCTAssertEqual(try other.remembered(input), try other.hash(input), "another key remembers its own")
            XCTAssertNotEqual(try key.remembered(input), try other.remembered(input))
        }
        // Past the capacity it starts over, and stays right.
        for n in 0...(IndexKey.rememberedCapacity + 10) {
            let input = Array("group \(n)".utf8)
            XCTAssertEqual(try key.remembered(input), try key.hash(input))
        }
        XCTAssertEqual(try key.remembered(Array("default".utf8)), try key.hash(Array("default".utf8)))
    }
}
