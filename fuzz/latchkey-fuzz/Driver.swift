#if !FUZZING
    import Foundation

    /// Without libFuzzer: replays inputs through a target, or writes the seed corpus.
    ///
    ///     latchkey-fuzz replay frames|dictionaries FILE|DIRECTORY...   exit 1 if any input shows a problem
    ///     latchkey-fuzz seed DIRECTORY                                  writes DIRECTORY/<target>/seed-<name>
    @main
    struct LatchkeyFuzz {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            switch (arguments.first, arguments.count) {
            case ("replay", 3...):
                guard let target = FuzzTarget(rawValue: arguments[1]) else { usage() }
                exit(replay(target, paths: Array(arguments.dropFirst(2))) ? 0 : 1)
            case ("seed", 2):
                writeSeeds(to: URL(fileURLWithPath: arguments[1]))
            default:
                usage()
            }
        }

        static func usage() -> Never {
            FileHandle.standardError.write(
                Data("usage: latchkey-fuzz replay frames|dictionaries PATH... | latchkey-fuzz seed DIRECTORY\n".utf8))
            exit(64)
        }

        static func replay(_ target: FuzzTarget, paths: [String]) -> Bool {
            var files: [URL] = []
            for path in paths {
                let url = URL(fileURLWithPath: path)
                if let names = try? FileManager.default.contentsOfDirectory(atPath: path) {
                    files += names.sorted().map { url.appendingPathComponent($0) }
                } else {
                    files.append(url)
                }
            }
            var failed = 0
            var total = FuzzOutcome()
            for file in files {
                guard let data = FileManager.default.contents(atPath: file.path) else {
                    print("\(file.path): cannot read")
                    failed += 1
                    continue
                }
                let outcome = target.run(Array(data))
                total.frames += outcome.frames
                total.requests += outcome.requests
                total.parsed += outcome.parsed
                for problem in outcome.problems { print("\(file.path): \(problem)") }
                if !outcome.problems.isEmpty { failed += 1 }
            }
            print(
                "\(target.rawValue): \(files.count) inputs, \(total.frames) frames, \(total.requests) decoded, "
                    + "\(total.parsed) parsed, \(failed) failed")
            return failed == 0
        }

        static func writeSeeds(to directory: URL) {
            for target in FuzzTarget.allCases {
                let folder = directory.appendingPathComponent(target.rawValue)
                do {
                    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                    for seed in target.seeds {
                        try Data(seed.bytes).write(to: folder.appendingPathComponent("seed-\(seed.name)"))
                    }
                } catch {
                    FileHandle.standardError.write(Data("latchkey-fuzz: \(folder.path): \(error)\n".utf8))
                    exit(1)
                }
                print("\(folder.path): \(target.seeds.count) seeds")
            }
        }
    }
#endif
