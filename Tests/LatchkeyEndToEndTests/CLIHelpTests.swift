import Foundation
import XCTest

/// Help and usage checks of the built `latchkey` binary. None of them reaches the agent: help and
/// argument errors are handled before any keychain call.
final class CLIHelpTests: XCTestCase {
    /// Each verb and options its help must mention.
    static let verbs: [(verb: String, mentions: [String])] = [
        ("init", ["--password-stdin", "--argon2-memory", "--argon2-time", "--argon2-parallelism"]),
        ("unlock", ["--password-stdin"]),
        ("lock", ["--all"]),
        ("status", ["keychain"]),
        ("passwd", ["--password-stdin"]),
        (
            "add-generic-password",
            [
                "-s <service>", "-a <account>", "-w <password>", "--password-stdin", "-U",
                "--accessible", "--access-group", "--sync", "-l <label>", "-j <comment>",
                "-D <kind>", "-G <value>", "ps(1)",
            ]
        ),
        ("find-generic-password", ["-s <service>", "-a <account>", "-l <label>", "-G <value>", "-w", "-g"]),
        ("delete-generic-password", ["-s <service>", "-a <account>", "-l <label>"]),
        (
            "add-internet-password",
            [
                "-s <server>", "-a <account>", "-r <protocol>", "-P <port>", "-p <path>",
                "-d <domain>", "-t <type>", "--password-stdin", "-U", "--accessible",
            ]
        ),
        ("find-internet-password", ["-s <server>", "-r <protocol>", "-P <port>", "-w", "-g"]),
        ("delete-internet-password", ["-s <server>", "-a <account>", "-r <protocol>"]),
        ("dump-keychain", ["-d"]),
        ("apps", ["--directory", "applications.d", "default"]),
        ("version", ["version"]),
    ]

    func testRootHelpListsEveryVerb() throws {
        let result = try run(["--help"])
        XCTAssertEqual(result.status, 0)
        for (verb, _) in Self.verbs { XCTAssertTrue(result.stdout.contains(verb), "root help lacks \(verb)") }
        XCTAssertTrue(result.stdout.contains("44"), "root help should document exit status 44")
    }

    func testEveryVerbHasHelp() throws {
        for (verb, mentions) in Self.verbs {
            let result = try run([verb, "--help"])
            XCTAssertEqual(result.status, 0, "\(verb) --help")
            XCTAssertTrue(result.stdout.contains("Example"), "\(verb) --help has no example")
            for text in mentions {
                XCTAssertTrue(result.stdout.contains(text), "\(verb) --help does not mention \(text)")
            }
        }
    }

    func testVersion() throws {
        let result = try run(["version"])
        XCTAssertEqual(result.status, 0)
        XCTAssertTrue(result.stdout.hasPrefix("latchkey "))
        XCTAssertEqual(try run(["--version"]).stdout, result.stdout)
    }

    func testUsageErrorsExit64() throws {
        let cases: [[String]] = [
            ["no-such-verb"],
            ["add-generic-password", "-s", "only-service"],
            ["add-generic-password", "-s", "s", "-a", "a", "--accessible", "sometimes"],
            ["add-generic-password", "-s", "s", "-a", "a", "-w", "pw", "--password-stdin"],
            ["add-internet-password", "-s", "host"],
            ["add-internet-password", "-s", "host", "-a", "a", "-r", "toolong"],
            ["find-generic-password", "-w", "-g"],
            ["delete-generic-password"],
            ["delete-internet-password"],
            ["init", "--argon2-memory", "1"],
            ["init", "--argon2-parallelism", "17"],
            ["lock", "--everything"],
            ["apps", "--directory", "relative/applications.d"],
            ["apps", "--directory", "/etc/../etc/latchkey/applications.d"],
        ]
        for arguments in cases {
            let result = try run(arguments)
            XCTAssertEqual(result.status, 64, "\(arguments) should be a usage error; stderr: \(result.stderr)")
            XCTAssertFalse(result.stderr.isEmpty, "\(arguments) printed no error")
        }
    }

    func testAccessibleAcceptsNamesAndPdmnValues() throws {
        // Valid values get past parsing and fail later (here: -w and --password-stdin together),
        // so the status tells parsing of --accessible apart from everything else.
        for value in ["when-unlocked", "after-first-unlock-this-device-only", "akpu", "dku"] {
            let result = try run([
                "add-generic-password", "-s", "s", "-a", "a", "--accessible", value,
                "-w", "x", "--password-stdin",
            ])
            XCTAssertEqual(result.status, 64)
            XCTAssertFalse(result.stderr.contains("--accessible"), "\(value) rejected: \(result.stderr)")
        }
    }

    // MARK: - Running the binary

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `latchkey` with a private runtime and data directory, so that nothing here could reach
    /// the user's agent or keychain even if a check went wrong.
    func run(_ arguments: [String]) throws -> Result {
        let process = Process()
        process.executableURL = try Self.binary()
        process.arguments = arguments
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = scratch.path
        environment["XDG_DATA_HOME"] = scratch.path
        process.environment = environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// The `latchkey` executable: in `LATCHKEY_BIN_DIR`, next to the test bundle (the products
    /// directory), or in the package's `.build/debug`.
    static func binary() throws -> URL {
        var candidates: [URL] = []
        if let directory = ProcessInfo.processInfo.environment["LATCHKEY_BIN_DIR"] {
            candidates.append(URL(fileURLWithPath: directory))
        }
        let bundle = Bundle.main.bundleURL
        candidates += [bundle, bundle.deletingLastPathComponent()]
        for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
            candidates.append(bundle.bundleURL.deletingLastPathComponent())
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(packageRoot.appendingPathComponent(".build/debug"))
        for directory in candidates {
            let file = directory.appendingPathComponent("latchkey")
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                FileManager.default.isExecutableFile(atPath: file.path)
            {
                return file
            }
        }
        throw XCTSkip("latchkey binary not found (looked in \(candidates.map(\.path)))")
    }
}
