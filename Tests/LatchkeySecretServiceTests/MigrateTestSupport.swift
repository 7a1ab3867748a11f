import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

/// What `MigrateTests` needs besides the Secret Service harness: Debian's gnome-keyring-daemon on the
/// test's private bus, a reader of everything a provider holds, and the `latchkey` command run with
/// its output followed line by line (to stop it, or its provider, midway).
extension SecretServiceTestCase {
    static let gnomeKeyringDaemon = "/usr/bin/gnome-keyring-daemon"

    /// Starts `gnome-keyring-daemon --foreground --unlock --components=secrets` with `password` on its
    /// standard input (its login keyring is created with it, or unlocked), in `home`, and waits until it
    /// owns org.freedesktop.secrets.
    func startGnomeKeyring(home: String, password: String) throws -> Process {
        guard FileManager.default.isExecutableFile(atPath: Self.gnomeKeyringDaemon) else {
            throw XCTSkip("gnome-keyring is not installed (apt-get install gnome-keyring)")
        }
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.gnomeKeyringDaemon)
        process.arguments = ["--foreground", "--unlock", "--components=secrets"]
        process.environment = ProcessInfo.processInfo.environment.merging(["HOME": home]) { _, new in new }
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        input.fileHandleForWriting.write(Data(password.utf8))
        try input.fileHandleForWriting.close()
        try waitForServiceName()
        return process
    }

    /// Stops a process started here and waits for it.
    func stop(_ process: Process) {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// Runs `latchkey` with `arguments` and `environment` on top of this process's, handing each line
    /// of its standard output to `onLine` as it comes; returns its status, output and error output.
    func runLatchkey(
        _ arguments: [String], environment: [String: String] = [:], onLine: (String, Process) -> Void = { _, _ in }
    ) throws -> CommandOutput {
        try runCommand(Self.binDirectory + "/latchkey", arguments, environment: environment, onLine: onLine)
    }

    /// Runs `executable` as `runLatchkey` runs latchkey; its error output goes to a file, so a command
    /// that writes much there cannot block on a pipe nobody reads yet.
    func runCommand(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        onLine: (String, Process) -> Void = { _, _ in }
    ) throws -> CommandOutput {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let stdout = Pipe()
        let errorFile = base + "/cli-\(UUID().uuidString.prefix(8)).err"
        _ = FileManager.default.createFile(atPath: errorFile, contents: nil)
        process.standardOutput = stdout
        process.standardError = FileHandle(forWritingAtPath: errorFile)
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        var output = Data()
        var pending = Data()
        while true {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            output += chunk
            pending += chunk
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                onLine(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self), process)
                pending = Data(pending[pending.index(after: newline)...])
            }
        }
        process.waitUntilExit()
        let err = (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
        return CommandOutput(
            status: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
            out: String(decoding: output, as: UTF8.self), err: err)
    }
}

/// What a finished `latchkey` left behind.
struct CommandOutput {
    /// The exit status, or the signal that ended it.
    var status: Int32
    /// Whether a signal ended it.
    var signalled: Bool
    var out: String
    var err: String
}

/// One item as a provider gives it, in a form that compares byte for byte.
struct ProviderItem: Hashable, CustomStringConvertible {
    /// "<default>" for the provider's `login` collection, else the collection's label.
    var collection: String
    var label: String
    /// Name, value pairs, sorted by the name's bytes.
    var attributes: [[UInt8]]
    var secret: [UInt8]
    var contentType: String

    var description: String {
        "\(collection) / \(label) / \(attributes.map { String(decoding: $0, as: UTF8.self) }) / "
            + "\(secret.count) bytes \(contentType)"
    }
}

extension SecretServiceClient {
    /// Every item of every collection but `session`, read in a plain session; the provider must have
    /// them unlocked. gnome-keyring reports `xdg:schema` = `org.freedesktop.Secret.Generic` for an item
    /// stored without a schema only after it has read its file again (a restart), so whether a copy has
    /// it depends on when it was read: that one pair is left out, every other is compared as it is.
    func everyItem() throws -> [ProviderItem] {
        let session = try openPlainSession()
        guard let collections = try property(SSPath.service, SSPath.serviceInterface, "Collections")?.elements else {
            throw XCTSkip("no Collections")
        }
        var items: [ProviderItem] = []
        for case .objectPath(let collection) in collections where !collection.hasSuffix("/collection/session") {
            let label = try property(collection, SSPath.collectionInterface, "Label")?.string ?? ""
            let paths = (try property(collection, SSPath.collectionInterface, "Items")?.elements ?? []).compactMap(
                \.string)
            for start in stride(from: 0, to: paths.count, by: 256) {
                let batch = Array(paths[start..<min(start + 256, paths.count)])
                let reply = try call(
                    SSPath.service, SSPath.serviceInterface, "GetSecrets",
                    [.array(elementType: "o", batch.map { .objectPath($0) }), .objectPath(session)])
                var secrets: [String: (value: [UInt8], type: String)] = [:]
                for case .dictEntry(let path, let secret) in reply.first?.elements ?? [] {
                    let fields = secret.fields ?? []
                    secrets[path.string ?? ""] = (fields[2].bytes ?? [], fields[3].string ?? "")
                }
                for path in batch {
                    let all = try call(
                        path, "org.freedesktop.DBus.Properties", "GetAll", [.string(SSPath.itemInterface)])
                    let properties = all.first?.stringKeyedEntries ?? [:]
                    var pairs: [[UInt8]] = []
                    for case .dictEntry(let name, let value) in properties["Attributes"]?.variantValue?.elements ?? [] {
                        let pair = Array((name.string ?? "").utf8) + [0] + Array((value.string ?? "").utf8)
                        if pair != Array("xdg:schema\u{0}org.freedesktop.Secret.Generic".utf8) { pairs.append(pair) }
                    }
                    guard let secret = secrets[path] else {
                        XCTFail("\(path): no secret (locked?)")
                        continue
                    }
                    items.append(
                        ProviderItem(
                            collection: collection.hasSuffix("/collection/login") ? "<default>" : label,
                            label: properties["Label"]?.variantValue?.string ?? "",
                            attributes: pairs.sorted { $0.lexicographicallyPrecedes($1) },
                            secret: secret.value, contentType: secret.type))
                }
            }
        }
        return items
    }
}
