#if canImport(Glibc)
    import Glibc
#endif

// libFuzzer's entry point, in the build `scripts/fuzz` makes (`--sanitize fuzzer`, with -DFUZZING so
// that libFuzzer's `main` is the only one). In the ordinary build it is compiled too, and never called.

/// The target libFuzzer runs, named by `LATCHKEY_FUZZ_TARGET` (default: frames).
private let selectedTarget: FuzzTarget = {
    guard let name = getenv("LATCHKEY_FUZZ_TARGET").map({ String(cString: $0) }) else { return .frames }
    guard let target = FuzzTarget(rawValue: name) else { fatalError("unknown LATCHKEY_FUZZ_TARGET '\(name)'") }
    return target
}()

/// Runs one input; a problem traps, which libFuzzer records as a crash with the input that caused it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    let outcome = selectedTarget.run(input)
    if !outcome.problems.isEmpty {
        fatalError("\(selectedTarget.rawValue): " + outcome.problems.joined(separator: "; "))
    }
    return 0
}
