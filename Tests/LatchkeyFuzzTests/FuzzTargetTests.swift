import Foundation
import LatchkeyValueTestSupport
import XCTest
import latchkey_fuzz

/// The fuzz targets of `fuzz/latchkey-fuzz` without libFuzzer: the corpus in the repository replayed, and
/// seeded structure-aware mutations for a fixed time budget (a few seconds; `scripts/fuzz` runs libFuzzer
/// for longer). A problem a target reports fails the test with the seed and iteration that reproduce it;
/// a trap fails the whole run.
final class FuzzTargetTests: XCTestCase {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("fuzz/corpus")

    /// How long each target's mutation test runs, and at most how many inputs: the budget keeps the test
    /// short on a loaded machine, the cap keeps it from running longer on a fast one.
    static let budget: Duration = .seconds(3)
    static let maxIterations = 200_000

    private func corpusFiles(_ target: FuzzTarget) throws -> [(name: String, bytes: [UInt8])] {
        let folder = Self.corpus.appendingPathComponent(target.rawValue)
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().map {
            ($0, Array(try Data(contentsOf: folder.appendingPathComponent($0))))
        }
    }

    /// The committed seeds are what `Seeds` generates today: a protocol change shows here, as a corpus to
    /// regenerate (`latchkey-fuzz seed fuzz/corpus`), instead of seeds that quietly stop decoding.
    func testCommittedSeedsAreCurrent() throws {
        for target in FuzzTarget.allCases {
            let files = Dictionary(try corpusFiles(target).map { ($0.name, $0.bytes) }, uniquingKeysWith: { a, _ in a })
            for seed in target.seeds {
                XCTAssertEqual(
                    files["seed-\(seed.name)"], seed.bytes,
                    "fuzz/corpus/\(target.rawValue)/seed-\(seed.name) is missing or stale: run "
                        + "`swift run latchkey-fuzz seed fuzz/corpus`")
            }
        }
    }

    /// Every seed is valid: it decodes whole, and its dictionaries are ones the parser accepts (the
    /// deliberately refused "unknown-opcode" frame aside), so mutations start from inputs that go deep.
    func testSeedsDecodeAndParse() {
        for seed in FuzzTarget.frames.seeds {
            let outcome = FuzzTarget.frames.run(seed.bytes)
            XCTAssertEqual(outcome.problems, [], seed.name)
            XCTAssertGreaterThan(outcome.requests, 0, seed.name)
            XCTAssertEqual(
                outcome.frames, outcome.requests + (seed.name.hasPrefix("unknown-opcode") ? 1 : 0), seed.name)
        }
        for seed in FuzzTarget.dictionaries.seeds {
            let outcome = FuzzTarget.dictionaries.run(seed.bytes)
            XCTAssertEqual(outcome.problems, [], seed.name)
            XCTAssertEqual(outcome.requests, 1, seed.name)
        }
        XCTAssertGreaterThan(FuzzTarget.frames.run(Seeds.frames.first { $0.name == "add-genp" }!.bytes).parsed, 0)
    }

    /// Every file in the corpus (seeds and what libFuzzer found and `scripts/fuzz --merge` kept) replays
    /// without a problem.
    func testCorpusReplays() throws {
        for target in FuzzTarget.allCases {
            let files = try corpusFiles(target)
            XCTAssertFalse(files.isEmpty, "fuzz/corpus/\(target.rawValue) is empty")
            for file in files {
                XCTAssertEqual(target.run(file.bytes).problems, [], "fuzz/corpus/\(target.rawValue)/\(file.name)")
            }
        }
    }

    func testMutatedFrames() throws {
        try runMutations(.frames, seed: 0xF4A3_E5_01) { mutator, a, b in mutator.frames(from: a, other: b) }
    }

    func testMutatedDictionaries() throws {
        try runMutations(.dictionaries, seed: 0xD1C7_5EED) { mutator, a, b in mutator.dictionary(from: a, other: b) }
    }

    func testMutatedBackups() throws {
        try runMutations(.backups, seed: 0xBAC4_0B5) { mutator, a, b in
            // Keep the mode byte most of the time, so mutations reach the records behind the authentication.
            let mutated = mutator.dictionary(from: Array(a.dropFirst()), other: Array(b.dropFirst()))
            return Int.random(in: 0..<8, using: &mutator.rng) == 0
                ? mutate(a, using: &mutator.rng) : [a.first ?? 1] + mutated
        }
    }

    /// Mutates corpus entries for `budget` (at most `maxIterations` inputs) and runs each through `target`.
    private func runMutations(
        _ target: FuzzTarget, seed: UInt64, _ mutation: (inout Mutator, [UInt8], [UInt8]) -> [UInt8]
    ) throws {
        let inputs = try corpusFiles(target).map(\.bytes)
        var mutator = Mutator(seed: seed)
        var total = FuzzOutcome()
        var failures = 0
        let end = ContinuousClock.now + Self.budget
        var iteration = 0
        while iteration < Self.maxIterations, ContinuousClock.now < end {
            let a = inputs.randomElement(using: &mutator.rng)!
            let b = inputs.randomElement(using: &mutator.rng)!
            let input = mutation(&mutator, a, b)
            let outcome = target.run(input)
            total.frames += outcome.frames
            total.requests += outcome.requests
            total.parsed += outcome.parsed
            if !outcome.problems.isEmpty, failures < 10 {
                failures += 1
                XCTFail("seed \(seed), iteration \(iteration): \(outcome.problems) on \(input.prefix(64))")
            }
            iteration += 1
        }
        print(
            "\(target.rawValue): \(iteration) mutated inputs, \(total.frames) frames, \(total.requests) decoded, \(total.parsed) parsed"
        )
        // Some mutations must still reach the decoders and the parser, or the test exercises only the
        // first checks.
        XCTAssertGreaterThan(total.requests, 0)
        XCTAssertGreaterThan(total.parsed, 0)
    }
}
