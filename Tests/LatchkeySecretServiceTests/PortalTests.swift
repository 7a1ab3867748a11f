import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

/// The Secret portal's backend (docs/PORTAL.md) against the real agent on a private bus, called as
/// xdg-desktop-portal calls it: `latchkey-portal-probe`, installed root-owned in a root-owned
/// directory under /run with an application file granting it `Privileges=PortalSecrets` (the agent
/// reads it through LATCHKEY_APPLICATIONS_DIRS, which counts only for root-owned directories), takes
/// `org.freedesktop.portal.Desktop` and passes a pipe or a socket as `fd`. Root only: the files must be
/// root's to count. The setup is shared with PortalFrontendTests.
class PortalTestCase: SecretServiceTestCase {
    var root = ""
    /// The entitled copy of the probe.
    var portal: String { root + "/bin/xdg-desktop-portal" }
    /// A copy named by an application file without `Privileges=`.
    var listed: String { root + "/bin/listed" }
    /// The probe where it was built: an unlisted program.
    var unlisted: String { Self.binDirectory + "/latchkey-portal-probe" }

    override func setUpWithError() throws {
        guard geteuid() == 0 else { throw XCTSkip("application files must be root's") }
        try super.setUpWithError()
        var template = Array("/run/latchkey-portal.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp under /run failed: errno \(errno)") }
        root = String(cString: made)
        XCTAssertEqual(chmod(root, 0o755), 0)
        for directory in ["apps", "bin"] { XCTAssertEqual(mkdir(root + "/" + directory, 0o755), 0) }
        for program in [portal, listed] {
            try FileManager.default.copyItem(atPath: unlisted, toPath: program)
            XCTAssertEqual(chmod(program, 0o755), 0)
        }
        // An application with groups of its own, but no privilege.
        try Data("[Application]\nId=org.example.Listed\nExecutable=\(listed)\nAccessGroups=listed\n".utf8)
            .write(to: URL(fileURLWithPath: root + "/apps/listed.conf"))
        try Data(
            """
            [Application]
            Id=org.example.PortalProbe
            Executable=\(portal)
            AccessGroups=org.freedesktop.portal.Desktop
            Privileges=PortalSecrets

            """.utf8
        ).write(to: URL(fileURLWithPath: root + "/apps/portal.conf"))
        // The shipped file too, for the real xdg-desktop-portal (PortalFrontendTests).
        try FileManager.default.copyItem(
            atPath: Self.repository + "/contrib/applications.d/xdg-desktop-portal.conf",
            toPath: root + "/apps/xdg-desktop-portal.conf")
        setenv("LATCHKEY_APPLICATIONS_DIRS", root + "/apps", 1)
        try createKeychain()
    }

    override func tearDown() {
        super.tearDown()
        unsetenv("LATCHKEY_APPLICATIONS_DIRS")
        if !root.isEmpty { try? FileManager.default.removeItem(atPath: root) }
    }

    /// One RetrieveSecret by `program` for `appID`; the probe's one line.
    func retrieve(
        _ program: String, _ appID: String, _ options: [String] = ["--own-name"], environment: [String: String] = [:]
    ) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = [bus.address, appID] + options
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The 64 bytes (hex) of a successful retrieval, failing the test otherwise.
    func secret(_ appID: String, _ options: [String] = ["--own-name"], line: UInt = #line) throws -> String {
        let result = try retrieve(portal, appID, options)
        let pattern = /^response=0 bytes=([0-9a-f]{128}) eof=yes$/
        guard let match = result.wholeMatch(of: pattern) else {
            XCTFail("not a 64-byte secret: \(result)\nlog:\n\(agentLog())", line: line)
            return ""
        }
        return String(match.1)
    }
}

/// The backend's checks, one call of the probe each.
final class PortalTests: PortalTestCase {
    func testTheEntitledPortalGetsAStableSecretPerApplication() throws {
        let app = try secret("org.example.App")
        XCTAssertEqual(try secret("org.example.App"), app, "the same again")
        XCTAssertEqual(try secret("org.example.App", ["--own-name", "--fd=socket"]), app, "through a socket pair")
        XCTAssertEqual(try secret("org.example.App", ["--own-name", "--token=t1"]), app, "the token changes nothing")
        let other = try secret("org.example.Other")
        XCTAssertNotEqual(other, app)
        XCTAssertNotEqual(other, "")
    }

    func testRefusedWhileLockedAndGivenAgainAfterUnlock() throws {
        let app = try secret("org.example.App")
        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertEqual(try retrieve(portal, "org.example.App"), "response=2 bytes= eof=yes", "nothing is written")
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        XCTAssertEqual(try secret("org.example.App"), app)
    }

    /// Only the entitled program that owns org.freedesktop.portal.Desktop: not an unlisted program, not
    /// an application whose file grants no privilege, not the entitled one without the name, not a copy of it elsewhere or a run under LD_PRELOAD.
    func testOnlyTheEntitledOwnerOfThePortalsNameMayAsk() throws {
        let denied = "error=org.freedesktop.DBus.Error.AccessDenied"
        XCTAssertEqual(try retrieve(unlisted, "org.example.App"), denied, "an unlisted program")
        XCTAssertEqual(try retrieve(listed, "org.example.App"), denied, "an application without the privilege")
        XCTAssertEqual(try retrieve(portal, "org.example.App", []), denied, "entitled, without the portal's name")
        let copy = runtimeDirectory + "/xdg-desktop-portal"
        try FileManager.default.copyItem(atPath: portal, toPath: copy)
        XCTAssertEqual(chmod(copy, 0o755), 0)
        XCTAssertEqual(try retrieve(copy, "org.example.App"), denied, "a copy in a user-writable place")
        let library = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"].first {
            FileManager.default.fileExists(atPath: $0)
        }
        if let library {
            XCTAssertEqual(
                try retrieve(portal, "org.example.App", environment: ["LD_PRELOAD": library]), denied,
                "started under LD_PRELOAD")
        }
        // The entitled program does get it while it owns the name.
        XCTAssertNotEqual(try secret("org.example.App"), "")
    }

    /// An id that is not a Flatpak application's (a host application's is empty), a descriptor that is
    /// no pipe or socket or not open for writing, a token that is not a string: InvalidArgs.
    func testMalformedRequestsAreRefused() throws {
        let invalid = "error=org.freedesktop.DBus.Error.InvalidArgs"
        for bad in ["", "org.example", "org..example.App", "1org.example.App", "org.example.App/x", "org.ex-ample.App"]
        {
            XCTAssertEqual(try retrieve(portal, bad), invalid, bad)
        }
        XCTAssertEqual(try retrieve(portal, String(repeating: "a.", count: 128) + "b"), invalid, "over 255 bytes")
        for kind in ["file", "read", "null"] {
            XCTAssertEqual(try retrieve(portal, "org.example.App", ["--own-name", "--fd=\(kind)"]), invalid, kind)
        }
        XCTAssertEqual(try retrieve(portal, "org.example.App", ["--own-name", "--bad-token"]), invalid)
        XCTAssertNotEqual(try secret("org.example.App"), "")
    }

    /// A pipe that never drains (full, and blocking) gets no secret, at once: the agent never waits on
    /// it (the probe's call gives up after 10 s, and would then print an error), and serves the next
    /// call.
    func testADescriptorThatNeverDrainsIsRefusedWithoutWaiting() throws {
        XCTAssertEqual(try retrieve(portal, "org.example.App", ["--own-name", "--fd=full"]), "response=2")
        XCTAssertNotEqual(try secret("org.example.App"), "")
        let client = try SecretServiceClient(bus.address)
        XCTAssertNoThrow(try client.openPlainSession(), "the Secret Service still answers")
    }

    /// A descriptor a write to which waits in the kernel whatever its flags (a pipe whose lock another
    /// process holds in `splice`): the agent never writes it itself, so the call is answered with
    /// failure after the copy's deadline and every other client is served meanwhile (before, the bus
    /// loop slept in the kernel, and the agent could not even be killed).
    func testADescriptorWhoseWriteWaitsInTheKernelStallsNothing() throws {
        XCTAssertEqual(try retrieve(portal, "org.example.App", ["--own-name", "--fd=spliced"]), "response=2")
        let client = try SecretServiceClient(bus.address)
        XCTAssertNoThrow(try client.openPlainSession(), "the Secret Service still answers")
        XCTAssertEqual(try retrieve(portal, "org.example.App", ["--own-name"]).prefix(11), "response=0 ")
    }

    /// The interface as xdg-desktop-portal and introspection see it; Close on a request handle succeeds
    /// (every request has ended by the time it could be served).
    func testTheInterface() throws {
        let client = try SecretServiceClient(bus.address)
        let path = "/org/freedesktop/portal/desktop"
        XCTAssertEqual(try client.property(path, "org.freedesktop.impl.portal.Secret", "version"), .uint32(1))
        let xml = try XCTUnwrap(client.call(path, "org.freedesktop.DBus.Introspectable", "Introspect").first?.string)
        XCTAssertTrue(xml.contains("<interface name=\"org.freedesktop.impl.portal.Secret\">"), xml)
        XCTAssertTrue(xml.contains("<arg name=\"fd\" type=\"h\" direction=\"in\"/>"), xml)
        XCTAssertNoThrow(
            try client.call(path + "/request/1_1/t", "org.freedesktop.impl.portal.Request", "Close"))
        XCTAssertEqual(
            client.errorName(path + "/other", "org.freedesktop.impl.portal.Request", "Close"),
            "org.freedesktop.DBus.Error.UnknownObject")
    }
}
