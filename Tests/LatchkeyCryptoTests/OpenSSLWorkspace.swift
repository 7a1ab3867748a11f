import Foundation
import LatchkeySecrets

/// A scratch directory plus the `openssl` command-line tool: the independent implementation the key,
/// certificate and PKCS#12 tests check latchkey against. A missing `openssl` fails the tests (it is
/// a test dependency, installed by scripts/install-deps); it never skips them.
final class OpenSSLWorkspace {
    struct CommandFailed: Error, CustomStringConvertible {
        let arguments: [String]
        let status: Int32
        let stderr: String
        var description: String { "openssl \(arguments.joined(separator: " ")) exited \(status): \(stderr)" }
    }

    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "latchkey-crypto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    static let executable: String = {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(dir)/openssl"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return "/usr/bin/openssl"
    }()

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func write(_ name: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: directory.appendingPathComponent(name))
    }

    func write(_ name: String, _ text: String) throws { try write(name, Array(text.utf8)) }

    func write(_ name: String, _ secret: SecretBytes) throws { try write(name, secret.unsafeCopyToArray()) }

    func read(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: directory.appendingPathComponent(name))) }

    func readText(_ name: String) throws -> String { String(decoding: try read(name), as: UTF8.self) }

    /// Runs `openssl arguments` in the workspace; returns standard output, throws on a non-zero exit.
    @discardableResult
    func run(_ arguments: [String], input: [UInt8]? = nil) throws -> [UInt8] {
        let result = try status(arguments, input: input)
        guard result.status == 0 else {
            throw CommandFailed(arguments: arguments, status: result.status, stderr: result.stderr)
        }
        return result.stdout
    }

    /// `run` as text.
    func text(_ arguments: [String], input: [UInt8]? = nil) throws -> String {
        String(decoding: try run(arguments, input: input), as: UTF8.self)
    }

    /// Runs `openssl arguments` and returns the exit status with both outputs.
    func status(_ arguments: [String], input: [UInt8]? = nil) throws -> (status: Int32, stdout: [UInt8], stderr: String)
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let errorFile = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errorFile) }
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = try FileHandle(forWritingTo: errorFile)
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input)) }
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let err = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
        return (process.terminationStatus, Array(out), err)
    }
}

/// Hex of `openssl … -text` style output ("04:ab:cd…" across lines) as bytes.
func bytes(fromColonHex text: String) -> [UInt8] {
    hex(text.filter { $0.isHexDigit })
}
