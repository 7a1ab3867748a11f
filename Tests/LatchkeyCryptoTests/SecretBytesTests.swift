import Foundation
import LatchkeySecrets
import XCTest

/// `SecretBytes` storage: zeroed, independent, wiped on release, and locked in memory for as long as
/// any secret lives (page locks do not nest, so freeing one secret must not unlock another's page).
final class SecretBytesTests: XCTestCase {
    func testStorageIsZeroedIndependentAndReusable() {
        var live: [(secret: SecretBytes, seed: Int)] = []
        for round in 0..<3 {
            for size in [0, 1, 31, 32, 33, 64, 100, 512, 4096, 4097, 10_000] {
                let secret = SecretBytes(count: size)
                secret.withUnsafeBytes {
                    XCTAssertTrue($0.allSatisfy { $0 == 0 }, "fresh storage of \(size) bytes is zero")
                }
                let seed = size &+ round * 7
                secret.withUnsafeMutableBytes { buffer in
                    for i in 0..<buffer.count { buffer[i] = UInt8(truncatingIfNeeded: i &+ seed) }
                }
                live.append((secret, seed))
            }
            // Drop every other one so chunks are recycled while the rest stay in use.
            live = live.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        }
        for (secret, seed) in live {
            let intact = secret.withUnsafeBytes { buffer in
                (0..<buffer.count).allSatisfy { buffer[$0] == UInt8(truncatingIfNeeded: $0 &+ seed) }
            }
            XCTAssertTrue(intact, "a \(secret.count)-byte secret was overwritten by another")
        }
        XCTAssertEqual(SecretBytes(copying: [1, 2, 3]).unsafeCopyToArray(), [1, 2, 3])
    }

    func testFreeingShortLivedSecretsKeepsLongLivedOnesLocked() throws {
        let classKey = SecretBytes(copying: [UInt8](repeating: 0xA5, count: 32))
        try XCTSkipIf(SecretBytes.mlockHasFailed, "mlock is not permitted here (RLIMIT_MEMLOCK)")
        // Item keys come and go next to the class key, as in the agent.
        for _ in 0..<10_000 { _ = SecretBytes(count: 32) }
        let address = classKey.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
        XCTAssertGreaterThan(try lockedKiB(containing: address), 0, "the class key's page was unlocked")
    }

    /// The `Locked:` figure of the mapping that contains `address`, from /proc/self/smaps.
    private func lockedKiB(containing address: UInt) throws -> Int {
        // procfs files report size 0: read until EOF rather than by the stat size.
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/self/smaps"))
        let smaps = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        var inside = false
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), !range.hasSuffix(":") {
                let bounds = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
                inside = bounds.count == 2 && bounds[0] <= address && address < bounds[1]
            } else if inside, fields.first == "Locked:", fields.count >= 2 {
                return Int(fields[1]) ?? 0
            }
        }
        XCTFail("no mapping contains the secret")
        return 0
    }
}
