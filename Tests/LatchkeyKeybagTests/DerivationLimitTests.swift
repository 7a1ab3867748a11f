import Foundation
import LatchkeyCrypto
import LatchkeySecrets
import XCTest

@testable import LatchkeyKeybag

/// A keybag's Argon2id cost comes from a file its user (or anyone who can write it) controls: the agent
/// refuses what pam_latchkey refuses (issue 10, defect 3), before anything is derived.
final class DerivationLimitTests: XCTestCase {
    private var directory = ""
    private var path: String { directory + "/keybag" }

    override func setUpWithError() throws {
        directory = try makeTemporaryDirectory()
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The costs that are valid in the format (docs/KEYBAG.md, "Reading") but above the derivation
    /// limits: t = 2^32 - 1 would run for years, m = 4 GiB would allocate 4 GiB, p = 16 lanes.
    static let beyondTheLimits = [
        Argon2Parameters(timeCost: UInt32.max, memoryKiB: 64, parallelism: 1),
        Argon2Parameters(timeCost: 17, memoryKiB: 64, parallelism: 1),
        Argon2Parameters(timeCost: 1, memoryKiB: 4 * 1024 * 1024, parallelism: 1),
        Argon2Parameters(timeCost: 1, memoryKiB: 1_048_577, parallelism: 1),
        Argon2Parameters(timeCost: 1, memoryKiB: 256, parallelism: 16),
        Argon2Parameters(timeCost: 1, memoryKiB: 256, parallelism: 9),
    ]

    /// A keybag file as a buggy or hostile writer would leave it: `parameters` in the header, the
    /// checksum recomputed so that it is intact.
    private func file(with parameters: Argon2Parameters) throws -> [UInt8] {
        let (keybag, _) = try Keybag.create(
            password: password("pw"), parameters: cheapParameters, allowWeakParameters: true)
        var bytes = keybag.serialized()
        for (offset, value) in [
            (KeybagLayout.timeCostOffset, parameters.timeCost),
            (KeybagLayout.memoryOffset, parameters.memoryKiB),
            (KeybagLayout.parallelismOffset, parameters.parallelism),
        ] {
            for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (24 - 8 * i)) }
        }
        return resealed(bytes)
    }

    /// The format accepts these costs, as pam/keybag.c's lk_parse does (one reader's verdict, two
    /// implementations), but loading the file for use refuses it, naming the file and the costs.
    func testLoadRefusesCostsBeyondTheLimitsNamingTheFile() throws {
        for parameters in Self.beyondTheLimits {
            let bytes = try file(with: parameters)
            XCTAssertEqual(try Keybag.parse(bytes, path: path).parameters, parameters, "the format accepts it")
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            XCTAssertThrowsError(try Keybag.load(path: path), "\(parameters)") { error in
                let text = String(describing: error)
                XCTAssertTrue(text.contains(path), text)
                XCTAssertTrue(text.contains("t=\(parameters.timeCost)"), text)
                XCTAssertTrue(text.contains("refused"), text)
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(bytes), "left untouched")
        }
    }

    /// No derivation runs beyond the limits, whoever asks: a keybag parsed from bytes, and Argon2id
    /// itself. (Only costs that are cheap to compute are used, so that the unfixed code answers too.)
    func testNoDerivationBeyondTheLimits() throws {
        let cheapButBeyond = [
            Argon2Parameters(timeCost: 17, memoryKiB: 64, parallelism: 1),
            Argon2Parameters(timeCost: 1, memoryKiB: 256, parallelism: 9),
        ]
        for parameters in cheapButBeyond {
            let keybag = try Keybag.parse(try file(with: parameters), path: path)
            XCTAssertThrowsError(try keybag.deriveMasterKey(password: password("pw")), "\(parameters)")
            XCTAssertThrowsError(
                try Argon2id.deriveKey(
                    password: password("pw"), salt: Array(repeating: 1, count: 16), parameters: parameters),
                "\(parameters)")
        }
        let atTheLimits = Argon2Parameters(timeCost: 16, memoryKiB: 64, parallelism: 8)
        XCTAssertNoThrow(
            try Argon2id.deriveKey(
                password: password("pw"), salt: Array(repeating: 1, count: 16), parameters: atTheLimits))
    }

    /// One definition, pam/keybag_limits.h, read by both implementations: these are its values, which
    /// docs/KEYBAG.md states.
    func testTheSharedLimits() {
        XCTAssertEqual(Argon2Parameters.maximumDerivationTimeCost, 16)
        XCTAssertEqual(Argon2Parameters.maximumDerivationMemoryKiB, 1_048_576)
        XCTAssertEqual(Argon2Parameters.maximumDerivationParallelism, 8)
        XCTAssertEqual(Argon2Parameters.maximumMemoryKiB, 4_194_304)
        XCTAssertEqual(Argon2Parameters.maximumParallelism, 16)
        XCTAssertEqual(Argon2Parameters.minimumMemoryKiB, 65536)
    }
}
