import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Sharing the bus: another owner of the name, no session bus, and D-Bus activation in both orders
/// (docs/SECRET-SERVICE.md §7).
final class StartupTests: SecretServiceTestCase {
    private func secItemWorks(file: StaticString = #filePath, line: UInt = #line) {
        let account = UUID().uuidString
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "startup", kSecAttrAccount: account,
                    kSecValueData: Data("x".utf8),
                ] as NSDictionary, nil), errSecSuccess, file: file, line: line)
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: account,
                    kSecReturnData: true,
                ] as NSDictionary, &data), errSecSuccess, file: file, line: line)
    }

    private func owner(_ client: BusConnection) throws -> pid_t? {
        try client.sync { bus -> pid_t? in
            guard
                let reply = try? bus.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID",
                    [.string("org.freedesktop.secrets")]),
                let pid = try reply.arguments().first?.uint32
            else { return nil }
            return pid_t(pid)
        }
    }

    func testAnotherOwnerIsNamedInTheLogAndTheAgentCarriesOn() throws {
        let squatter = try BusConnection(.address(bus.address))
        defer { squatter.close() }
        XCTAssertTrue(try squatter.sync { try $0.requestName("org.freedesktop.secrets") })
        try createKeychain(waitForName: false)
        secItemWorks()
        let log = agentLog()
        XCTAssertTrue(log.contains("org.freedesktop.secrets is owned by pid \(getpid())"), log)
        XCTAssertEqual(log.components(separatedBy: "is owned by").count, 2, "logged once")
        XCTAssertEqual(try owner(squatter), getpid(), "the agent did not take the name")
    }

    func testWithoutASessionBusTheAgentWorksAsBefore() throws {
        setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=\(base)/no-session-bus", 1)
        try createKeychain(waitForName: false)
        secItemWorks()
        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        secItemWorks()
        let log = agentLog()
        XCTAssertTrue(log.contains("Secret Service: the session bus"), log)
        XCTAssertTrue(log.contains("the agent works without it"), log)
    }

    /// The agent started before the session bus existed (by pam_latchkey, or a SecItem client); a
    /// client then asks for the name, and the bus runs `latchkeyd --secret-service-activation`.
    func testActivationHandsTheBusToARunningAgent() throws {
        setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=\(base)/no-session-bus-yet", 1)
        try createKeychain(waitForName: false)
        let agent = try XCTUnwrap(agentPID())
        let activation = ActivationBus(directory: base + "/activation")
        try activation.start()
        defer { activation.stop() }
        setenv("DBUS_SESSION_BUS_ADDRESS", activation.address, 1)

        let stored = try secretTool(
            ["store", "--label", "activated", "service", "act", "account", "a"], input: "on demand")
        XCTAssertEqual(stored.status, 0, stored.err + agentLog())
        let client = try BusConnection(.address(activation.address))
        defer { client.close() }
        XCTAssertEqual(try owner(client), agent, "the running agent owns the name; the activated process left")
        XCTAssertEqual(try secretTool(["lookup", "service", "act", "account", "a"]).out, "on demand")
        XCTAssertTrue(agentLog().contains("a D-Bus activation asked for the service"), agentLog())
    }

    /// No agent runs: the bus starts one, which serves both the name and the socket.
    func testActivationStartsTheAgent() throws {
        let activation = ActivationBus(directory: base + "/activation")
        try activation.start()
        defer { activation.stop() }
        setenv("DBUS_SESSION_BUS_ADDRESS", activation.address, 1)
        // The keychain exists (made by an agent that has since exited).
        try createKeychain(waitForName: false)
        stopAgent()
        AgentClient.shared.resetConnection()
        // Any client of the bus can change what activated services start with, as malware running as
        // the user would, to keep a locked screen from ever locking the keychain: the agent ignores it.
        let update = try TestProcess.run(
            "/usr/bin/dbus-update-activation-environment",
            [
                "LATCHKEY_LOCK_GRACE=86400", "LATCHKEY_LOG_LIMIT=1", "LATCHKEY_MAX_SESSIONS=1",
                "LATCHKEY_CONNECTION_IDLE=1",
            ])
        XCTAssertEqual(update.status, 0, update.err)

        XCTAssertEqual(
            try secretTool(["store", "--label", "x", "service", "act2", "account", "b"], input: "v").status,
            0, agentLog())
        XCTAssertNotNil(agentPID(), "the activated process is the agent")
        // An activated agent's standard error is the bus daemon's.
        let activatedLog = (try? String(contentsOfFile: activation.directory + "/daemon.log", encoding: .utf8)) ?? ""
        for name in ["LATCHKEY_LOCK_GRACE", "LATCHKEY_LOG_LIMIT", "LATCHKEY_MAX_SESSIONS", "LATCHKEY_CONNECTION_IDLE"] {
            XCTAssertTrue(activatedLog.contains("ignoring \(name): started by D-Bus activation"), activatedLog)
        }
        // The session cap of 1 was not taken: a second session opens.
        XCTAssertEqual(try secretTool(["lookup", "service", "act2", "account", "b"]).out, "v", agentLog())
        XCTAssertEqual(try secretTool(["lookup", "service", "act2", "account", "b"]).out, "v", agentLog())
        let client = try BusConnection(.address(activation.address))
        defer { client.close() }
        XCTAssertEqual(try owner(client), agentPID())
    }
}

/// A private session bus whose service directory holds an activation file for the built agent, like
/// contrib/dbus/org.freedesktop.secrets.service with the Exec line pointing at the build.
final class ActivationBus {
    let directory: String
    var address: String { "unix:path=\(directory)/bus.sock" }
    private var process: Process?

    init(directory: String) { self.directory = directory }

    func start() throws {
        let services = directory + "/services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
        let template = try String(
            contentsOfFile: SecretServiceTestCase.repository + "/contrib/dbus/org.freedesktop.secrets.service",
            encoding: .utf8)
        // An activated agent ignores LATCHKEY_PROMPTER (any client can change the activation
        // environment), so the test prompter is named in the service file, as an admin would.
        let installed = "/usr/local/libexec/latchkey/latchkeyd"  // the Exec= of contrib's file
        try template.replacingOccurrences(of: installed, with: TestProcess.binDirectory + "/latchkeyd")
            .replacingOccurrences(
                of: "--secret-service-activation",
                with: "--secret-service-activation --prompter \(SecretServiceTestCase.prompter)"
            )
            .write(toFile: services + "/org.freedesktop.secrets.service", atomically: true, encoding: .utf8)
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(directory)/bus.sock</listen>
              <auth>EXTERNAL</auth>
              <servicedir>\(services)</servicedir>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(directory)/bus.conf", "--nofork", "--nopidfile", "--print-address=1"]
        let output = Pipe()
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: directory + "/daemon.log", contents: nil)
        process.standardError = FileHandle(forWritingAtPath: directory + "/daemon.log")
        try process.run()
        self.process = process
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
    }

    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
