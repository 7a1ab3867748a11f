import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// The backup file's container (docs/BACKUP.md §2–4): any change to any byte, any truncation, a chunk
/// dropped, repeated or moved, a newer version or an Argon2id cost beyond the limits is refused.
final class BackupFileTests: XCTestCase {
    private let parameters = Argon2Parameters(timeCost: 1, memoryKiB: 8192, parallelism: 1)
    private let key = secret(Array(repeating: 0x11, count: 32))

    /// A file of three chunks (the last empty).
    private func threeChunks() throws -> [UInt8] {
        var writer = try BackupFile.Writer(
            header: BackupHeader(parameters: parameters, salt: Array(repeating: 3, count: 16)), key: key)
        try writer.append(Array("first chunk".utf8), final: false)
        try writer.append(Array("second".utf8), final: false)
        try writer.append([], final: true)
        return writer.bytes
    }

    private func chunks(_ file: [UInt8], key: SecretBytes? = nil) throws -> [String] {
        var out: [String] = []
        try BackupFile.open(file, key: key ?? self.key) { plain, _ in out.append(String(decoding: plain, as: UTF8.self))
        }
        return out
    }

    private func refusal(_ file: [UInt8], key: SecretBytes? = nil) -> BackupFileError? {
        do {
            _ = try chunks(file, key: key)
            return nil
        } catch let error as BackupFileError {
            return error
        } catch {
            XCTFail("not a BackupFileError: \(error)")
            return nil
        }
    }

    func testAFileOpensToItsChunksInOrder() throws {
        XCTAssertEqual(try chunks(try threeChunks()), ["first chunk", "second", ""])
    }

    func testEveryFlippedBitOfEveryByteIsRefused() throws {
        let file = try threeChunks()
        for position in file.indices {
            for bit in [0, 7] {
                var damaged = file
                damaged[position] ^= UInt8(1 << bit)
                XCTAssertNotNil(refusal(damaged), "byte \(position) bit \(bit)")
            }
        }
    }

    func testEveryTruncationIsRefused() throws {
        let file = try threeChunks()
        for length in 0..<file.count {
            let error = refusal(Array(file[0..<length]))
            XCTAssertNotNil(error, "\(length) bytes")
            if length >= BackupHeader.length, let error {
                XCTAssertTrue(error == .truncated, "\(length) bytes: \(error)")
            }
        }
        XCTAssertEqual(
            refusal(try threeChunks() + [0]), .damaged(chunk: 2), "a byte after the last chunk: it is not the last")
    }

    func testChunksCannotBeDroppedRepeatedOrSwapped() throws {
        let file = try threeChunks()
        // Offsets of the three chunks (u32 length, then the sealed box).
        var spans: [Range<Int>] = []
        var offset = BackupHeader.length
        while offset < file.count {
            let n =
                Int(file[offset]) << 24 | Int(file[offset + 1]) << 16 | Int(file[offset + 2]) << 8
                | Int(file[offset + 3])
            spans.append(offset..<(offset + 4 + n))
            offset += 4 + n
        }
        XCTAssertEqual(spans.count, 3)
        let header = Array(file[0..<BackupHeader.length])
        let part = { (i: Int) in Array(file[spans[i]]) }
        XCTAssertNotNil(refusal(header + part(0) + part(2)), "a chunk dropped")
        XCTAssertNotNil(refusal(header + part(1) + part(0) + part(2)), "two chunks swapped")
        XCTAssertNotNil(refusal(header + part(0) + part(0) + part(1) + part(2)), "a chunk repeated")
        XCTAssertNotNil(refusal(header + part(0) + part(1)), "the last chunk dropped")
        // A chunk taken into another backup (another salt, the same key): refused, the header is in its AAD.
        var other = try BackupFile.Writer(
            header: BackupHeader(parameters: parameters, salt: Array(repeating: 4, count: 16)), key: key)
        try other.append(Array("first chunk".utf8), final: false)
        XCTAssertNotNil(refusal(Array(other.bytes[0..<BackupHeader.length]) + part(0) + part(1) + part(2)))
    }

    func testAWrongKeyIsAWrongPassphrase() throws {
        XCTAssertEqual(refusal(try threeChunks(), key: secret(Array(repeating: 0x12, count: 32))), .wrongPassphrase)
    }

    func testANewerVersionIsRefusedWhateverFollows() throws {
        var file = try threeChunks()
        file[9] = 2
        XCTAssertEqual(refusal(file), .newerVersion(2))
        XCTAssertEqual(refusal(Array(file[0..<10])), .newerVersion(2), "even with nothing after the version")
        XCTAssertTrue(BackupFileError.newerVersion(2).message.contains("newer latchkey"))
    }

    func testArgon2CostsBeyondTheLimitsAreRefusedBeforeDeriving() throws {
        func header(t: UInt32, m: UInt32, p: UInt32) -> [UInt8] {
            BackupHeader(
                parameters: Argon2Parameters(timeCost: t, memoryKiB: m, parallelism: p),
                salt: Array(repeating: 1, count: 16)
            )
            .fields + Array(repeating: 0, count: 32)
        }
        let most = BackupHeader.maximumParameters
        for (t, m, p) in [
            (most.timeCost + 1, 8192, 1), (1, most.memoryKiB + 1, 1), (1, 8192, most.parallelism + 1),
            (UInt32.max, UInt32.max, 1),
        ] {
            XCTAssertThrowsError(try BackupHeader.read(header(t: t, m: m, p: p))) { error in
                guard case .costTooHigh = error as? BackupFileError else {
                    return XCTFail("t=\(t) m=\(m) p=\(p): \(error)")
                }
            }
        }
        XCTAssertNoThrow(try BackupHeader.read(header(t: most.timeCost, m: most.memoryKiB, p: most.parallelism)))
    }

    func testOtherFilesAreNotBackups() {
        XCTAssertEqual(refusal(Array("SQLite format 3\0".utf8) + Array(repeating: 0, count: 100)), .notABackup)
        XCTAssertEqual(refusal(Array("LKBAC".utf8)), .truncated)
        XCTAssertEqual(refusal([]), .truncated)
    }
}
