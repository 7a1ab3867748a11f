import Foundation
import LatchkeyDBus
import LatchkeySecrets
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Runs each test against the real `latchkeyd` on a private session `dbus-daemon`, in temporary XDG
/// directories, with the non-interactive file prompter of contrib/dbus (docs/SECRET-SERVICE.md §5).
class SecretServiceTestCase: XCTestCase {
    var base = ""
    var runtimeDirectory = ""
    var dataDirectory = ""
    /// The file the prompter answers from, one password per attempt.
    var passwordFile = ""
    var bus: PrivateBus!

    static var binDirectory: String { TestProcess.binDirectory }
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static var prompter: String { repository + "/contrib/dbus/latchkey-file-prompter" }
    static let password = "pw"

    /// Whether setUp starts a session bus and points the agent at it.
    var wantsBus: Bool { true }

    override func setUpWithError() throws {
        base = NSTemporaryDirectory() + "lk-ss-\(UUID().uuidString.prefix(8))"
        runtimeDirectory = base + "/run"
        dataDirectory = base + "/data"
        passwordFile = base + "/password"
        try FileManager.default.createDirectory(
            atPath: runtimeDirectory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try "\(Self.password)\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        // The bus first: an agent started in the new runtime directory (by this test, or by a call that
        // comes late from the test before) must never see it without its bus.
        if wantsBus {
            bus = try PrivateBus(system: false)
            setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
        }
        setenv("XDG_RUNTIME_DIR", runtimeDirectory, 1)
        setenv("XDG_DATA_HOME", dataDirectory, 1)
        setenv("LATCHKEYD", Self.binDirectory + "/latchkeyd", 1)
        setenv("LATCHKEY_PROMPTER", Self.prompter, 1)
        setenv("LATCHKEY_PROMPTER_FILE", passwordFile, 1)
        // No logind here: a system bus that does not exist, which the agent logs once and ignores.
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=\(base)/no-system-bus", 1)
        AgentClient.shared.resetConnection()
    }

    override func tearDown() {
        stopAgent()
        AgentClient.shared.resetConnection()
        bus?.stop()
        bus = nil
        for name in [
            "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "LATCHKEY_PROMPTER", "LATCHKEY_PROMPTER_FILE",
        ] {
            unsetenv(name)
        }
        try? FileManager.default.removeItem(atPath: base)
    }

    // MARK: - The agent

    /// Creates the keychain (cheap Argon2id, tests only) with the password the prompter knows; this
    /// starts the agent, and waits until it owns `org.freedesktop.secrets` when there is a bus.
    func createKeychain(waitForName: Bool = true) throws {
        try KeychainControl.create(
            password: SecretBytes(copying: Array(Self.password.utf8)),
            options: .init(timeCost: 1, memoryKiB: 8192, parallelism: 1, allowWeak: true))
        if waitForName && wantsBus { try waitForServiceName() }
    }

    func waitForServiceName(timeout: Double = 10) throws {
        let client = try BusConnection(.address(bus.address))
        defer { client.close() }
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            let owned = try client.sync { bus in
                try bus.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "NameHasOwner",
                    [.string("org.freedesktop.secrets")]
                ).arguments().first?.bool ?? false
            }
            if owned { return }
            usleep(20_000)
        }
        XCTFail("the agent did not take org.freedesktop.secrets; log:\n\(agentLog())")
        throw XCTSkip("no Secret Service")
    }

    func agentPID() -> pid_t? {
        let response = AgentClient.shared.send(.hello)
        guard case .dictionary(let d)? = response.value, case .int(let pid)? = d["pid"] else { return nil }
        return pid_t(pid)
    }

    func stopAgent() {
        guard let pid = agentPID() else { return }
        kill(pid, SIGTERM)
        TestProcess.waitForExit(pid)
    }

    func agentLog() -> String {
        (try? String(contentsOfFile: runtimeDirectory + "/latchkey/agent.log", encoding: .utf8)) ?? ""
    }

    /// Runs the `latchkey` command.
    @discardableResult
    func cli(_ arguments: [String], input: String? = nil) throws -> TestProcess.Output {
        try TestProcess.run(Self.binDirectory + "/latchkey", arguments, input: input)
    }

    /// Runs Debian's `secret-tool` (libsecret: DH session, prompts, aliases).
    @discardableResult
    func secretTool(_ arguments: [String], input: String? = nil) throws -> TestProcess.Output {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool") else {
            throw XCTSkip("secret-tool is not installed (apt-get install libsecret-tools)")
        }
        return try TestProcess.run("/usr/bin/secret-tool", arguments, input: input)
    }

    func setPasswordFile(_ lines: [String]) throws {
        try (lines.joined(separator: "\n") + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
    }
}

/// A D-Bus client of the Secret Service, for what the command-line clients cannot show (errors,
/// properties, signals).
final class SecretServiceClient {
    let connection: BusConnection
    let signals = SignalLog()

    init(_ address: String) throws {
        connection = try BusConnection(.address(address))
    }

    deinit { connection.close() }

    var uniqueName: String { connection.uniqueName }

    /// Calls a method on the service; returns the reply's arguments or throws its `BusError`.
    @discardableResult
    func call(
        _ path: String, _ interface: String, _ member: String, _ arguments: [BusValue] = [],
        timeout: Duration = .seconds(20)
    ) throws -> [BusValue] {
        try connection.sync { bus in
            try bus.call(
                destination: "org.freedesktop.secrets", path: path, interface: interface, member: member,
                arguments, timeout: timeout
            ).arguments()
        }
    }

    /// The error name a call fails with, or nil when it succeeds.
    func errorName(_ path: String, _ interface: String, _ member: String, _ arguments: [BusValue] = []) -> String? {
        do {
            try call(path, interface, member, arguments)
            return nil
        } catch {
            return (error as? BusError)?.name ?? "\(error)"
        }
    }

    func property(_ path: String, _ interface: String, _ name: String) throws -> BusValue? {
        try call(path, "org.freedesktop.DBus.Properties", "Get", [.string(interface), .string(name)]).first?
            .variantValue
    }

    /// Opens a `plain` session; returns its path.
    func openPlainSession() throws -> String {
        let reply = try call(
            SSPath.service, SSPath.serviceInterface, "OpenSession", [.string("plain"), .variant(.string(""))])
        return try XCTUnwrap(reply.last?.string)
    }

    /// Records every signal from the service's objects.
    func watchSignals() throws {
        let log = signals
        try connection.sync { bus in
            _ = try bus.addMatch(Bus.signalRule(pathNamespace: "/org/freedesktop/secrets")) { message in
                let arguments = (try? message.arguments()) ?? []
                log.append(
                    .init(
                        path: message.path ?? "", interface: message.interface ?? "",
                        member: message.member ?? "", arguments: arguments))
            }
        }
    }

    /// A `(oayays)` secret in a plain session.
    static func plainSecret(_ session: String, _ value: String, contentType: String = "text/plain") -> BusValue {
        .structure([.objectPath(session), .byteArray([]), .byteArray(Array(value.utf8)), .string(contentType)])
    }

    static func attributes(_ pairs: [(String, String)]) -> BusValue {
        .dictionary(keyType: "s", valueType: "s", pairs.map { (.string($0.0), .string($0.1)) })
    }

    static func bytes(_ value: BusValue?) -> [UInt8]? {
        value?.bytes
    }
}

/// Signals received on a client's loop thread, read from the test thread.
final class SignalLog: @unchecked Sendable {
    struct Signal: Sendable {
        var path: String
        var interface: String
        var member: String
        var arguments: [BusValue]
    }

    private let lock = NSLock()
    private var signals: [Signal] = []

    func append(_ signal: Signal) {
        lock.lock()
        signals.append(signal)
        lock.unlock()
    }

    var all: [Signal] {
        lock.lock()
        defer { lock.unlock() }
        return signals
    }

    /// Waits until a signal matching `predicate` has arrived; returns it.
    func wait(timeout: Double = 10, _ predicate: (Signal) -> Bool) -> Signal? {
        let end = Date().addingTimeInterval(timeout)
        repeat {
            if let found = all.first(where: predicate) { return found }
            usleep(10_000)
        } while Date() < end
        return nil
    }
}

enum SSPath {
    static let service = "/org/freedesktop/secrets"
    static let login = "/org/freedesktop/secrets/collection/login"
    static let defaultAlias = "/org/freedesktop/secrets/aliases/default"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let promptInterface = "org.freedesktop.Secret.Prompt"
    static let sessionInterface = "org.freedesktop.Secret.Session"
}
