import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

/// The Secret portal end to end with the real xdg-desktop-portal (Debian's, 1.16): it reads
/// contrib/latchkey.portal from XDG_DESKTOP_PORTAL_DIR, is entitled by the shipped
/// contrib/applications.d/xdg-desktop-portal.conf, and serves an application it takes for a Flatpak:
/// `latchkey-portal-probe --frontend` in a bubblewrap sandbox with its own root and a
/// `/.flatpak-info` naming org.example.App (docs/IDENTITY.md §2), which calls
/// org.freedesktop.portal.Secret.RetrieveSecret with a pipe as libsecret does.
final class PortalFrontendTests: PortalTestCase {
    private var desktopPortal: Process?

    override func tearDown() {
        if let desktopPortal, desktopPortal.isRunning {
            desktopPortal.terminate()
            desktopPortal.waitUntilExit()
        }
        desktopPortal = nil
        super.tearDown()
    }

    private static let executable = "/usr/libexec/xdg-desktop-portal"
    private static let bubblewrap = "/usr/bin/bwrap"

    /// Starts xdg-desktop-portal on the test's bus and waits until it owns its name.
    private func startDesktopPortal() throws {
        let portals = root + "/portals"
        XCTAssertEqual(mkdir(portals, 0o755), 0)
        try FileManager.default.copyItem(
            atPath: Self.repository + "/contrib/latchkey.portal", toPath: portals + "/latchkey.portal")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.environment = ProcessInfo.processInfo.environment.merging([
            "XDG_DESKTOP_PORTAL_DIR": portals, "XDG_CURRENT_DESKTOP": "GNOME",
        ]) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        desktopPortal = process
        let client = try SecretServiceClient(bus.address)
        let end = Date().addingTimeInterval(10)
        while Date() < end {
            let owned = try client.connection.sync { bus in
                try bus.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "NameHasOwner",
                    [.string("org.freedesktop.portal.Desktop")]
                ).arguments().first?.bool
            }
            if owned == true { return }
            usleep(20_000)
        }
        XCTFail("xdg-desktop-portal did not take its name")
    }

    /// Runs the application's side in a sandbox xdg-desktop-portal takes for the Flatpak `appID`: a
    /// mount namespace and a root of its own (the host's directories bound read-only into it), with
    /// `/.flatpak-info` at that root.
    private func retrieveAsFlatpak(_ appID: String) throws -> String {
        let info = base + "/flatpak-info"
        try "[Application]\nname=\(appID)\n\n[Instance]\ninstance-id=1\n".write(
            toFile: info, atomically: true, encoding: .utf8)
        var arguments: [String] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: "/").sorted()
        where !["proc", "dev", "sys", "tmp", ".flatpak-info"].contains(name) {
            let path = "/" + name
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) {
                arguments += ["--symlink", target, path]
            } else {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue
                else { continue }
                arguments += ["--ro-bind", path, path]
            }
        }
        arguments += [
            "--bind", "/tmp", "/tmp", "--proc", "/proc", "--dev", "/dev", "--ro-bind", info, "/.flatpak-info",
        ]
        arguments += ["--", unlisted, bus.address, "--frontend"]
        let output = try TestProcess.run(Self.bubblewrap, arguments)
        XCTAssertEqual(output.err, "")
        return output.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testAFlatpakApplicationGetsItsSecretThroughTheRealPortal() throws {
        for tool in [Self.executable, Self.bubblewrap] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is not installed (apt-get install xdg-desktop-portal bubblewrap)")
        }
        // What the backend gives for the id directly, before xdg-desktop-portal holds its name.
        let direct = try secret("org.example.App")
        try startDesktopPortal()

        XCTAssertEqual(try retrieveAsFlatpak("org.example.App"), "response=0 bytes=\(direct) eof=yes")
        let other = try retrieveAsFlatpak("org.example.Other")
        XCTAssertTrue(other.hasPrefix("response=0 bytes="), other)
        XCTAssertFalse(other.contains(direct))
        // A host program through the portal has no application id: nothing.
        XCTAssertEqual(
            try TestProcess.run(unlisted, [bus.address, "--frontend"]).out, "response=2 bytes= eof=yes\n")
        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertEqual(try retrieveAsFlatpak("org.example.App"), "response=2 bytes= eof=yes", "locked")
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        XCTAssertEqual(try retrieveAsFlatpak("org.example.App"), "response=0 bytes=\(direct) eof=yes")
    }
}
