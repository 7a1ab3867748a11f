import Foundation

/// Running the built executables and system tools from tests.
public enum TestProcess {
    /// What a finished command left behind.
    public struct Output: Sendable {
        public var status: Int32
        public var out: String
        public var err: String
    }

    /// Where `swift build` put the executables (the test bundle sits beside them), or `LATCHKEY_BIN_DIR`.
    public static var binDirectory: String {
        if let dir = ProcessInfo.processInfo.environment["LATCHKEY_BIN_DIR"] { return dir }
        return Bundle.main.bundleURL.path.hasSuffix(".xctest")
            ? Bundle.main.bundleURL.deletingLastPathComponent().path
            : URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
    }

    /// A file of /proc, read to its end. (String(contentsOfFile:) trusts st_size, which is 0 there.)
    public static func readProcFile(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Waits (up to 5 s) until `pid` is gone or a zombie: a daemonised agent is reparented, and PID 1 in
    /// a container may never reap it. An unreadable /proc entry does not count as gone.
    public static func waitForExit(_ pid: pid_t) {
        for _ in 0..<500 {
            if kill(pid, 0) != 0 && errno == ESRCH { return }
            if let stat = readProcFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")"),
                stat.index(close, offsetBy: 2) < stat.endIndex, stat[stat.index(close, offsetBy: 2)] == "Z"
            {
                return
            }
            usleep(10_000)
        }
    }

    /// Runs `executable` (an absolute path) with `arguments`, writes `input` to its standard input and
    /// waits for it; returns its exit status and output. `environment` is set on top of this process's.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String], input: String? = nil, environment: [String: String] = [:]
    ) throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(
            status: process.terminationStatus, out: String(decoding: out, as: UTF8.self),
            err: String(decoding: err, as: UTF8.self))
    }
}
