import Foundation
import LatchkeyTestSupport
import XCTest

/// GNOME's "Passwords and Keys" (Debian's Seahorse 43, libsecret) against the real agent, in a real X
/// server (Xvfb) with the private session bus of the harness and an accessibility bus: Seahorse must
/// follow changes made from outside while it is open (secret-tool, `latchkey`, a lock and an unlock)
/// and never crash, and what is done in its windows must reach the keychain (docs/SECRET-SERVICE.md §6,
/// "Signals"). The windows are read through their accessible tree (AT-SPI) and driven with xdotool
/// by `scripts/lib/seahorse_a11y.py`. Skips, saying why, when Xvfb, Seahorse, xdotool or pyatspi are missing.
final class SeahorseTests: SecretServiceTestCase {
    private var processes: [Process] = []
    private var seahorse: Process?
    private var display = ""
    private var accessibilityBus = ""
    private var home = ""

    private static let driver = repository + "/scripts/lib/seahorse_a11y.py"
    private static let tools = [
        "/usr/bin/Xvfb": "xvfb", "/usr/bin/seahorse": "seahorse", "/usr/bin/xdotool": "xdotool",
        "/usr/libexec/at-spi-bus-launcher": "at-spi2-core", "/usr/bin/python3": "python3",
        "/usr/bin/dbus-send": "dbus",
    ]

    override func tearDown() {
        for process in ([seahorse].compactMap { $0 } + processes.reversed()) where process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        processes = []
        seahorse = nil
        super.tearDown()
    }

    func testSeahorseFollowsChangesFromOutsideAndItsOwnReachTheKeychain() throws {
        try requireTools()
        try createKeychain()
        XCTAssertEqual(try secretTool(["store", "--label=Alpha mail", "service", "alpha"], input: "alpha-1").status, 0)
        XCTAssertEqual(
            try cli(["add-generic-password", "-s", "beta.example", "-a", "bob", "-l", "Beta site", "-w", "beta-1"])
                .status, 0)
        try startDisplay()
        try startSeahorse()

        // Open: the Login keyring's items are listed.
        XCTAssertTrue(try waitUntil("Seahorse shows the Login keyring") { try driver(["resize", "1100", "700"]) })
        _ = try? driver(["click", "label", "Login"])
        try expectItems(["Alpha mail", "Beta site"], "the items made before it started")

        // Changes from outside appear while it is open, and it survives each one.
        XCTAssertEqual(try secretTool(["store", "--label=Gamma", "service", "gamma"], input: "gamma-1").status, 0)
        try expectItems(["Alpha mail", "Beta site", "Gamma"], "an item stored with secret-tool")
        XCTAssertEqual(try cli(["delete-generic-password", "-s", "beta.example", "-a", "bob"]).status, 0)
        try expectItems(["Alpha mail", "Gamma"], "an item deleted through SecItem")
        XCTAssertEqual(
            try cli(["add-generic-password", "-s", "beta.example", "-a", "bob", "-l", "Beta again", "-w", "beta-2"])
                .status, 0)
        try expectItems(["Alpha mail", "Beta again", "Gamma"], "an item added through SecItem")
        XCTAssertEqual(
            try cli([
                "add-generic-password", "-s", "beta.example", "-a", "bob", "-l", "Beta renamed", "-w", "beta-3", "-U",
            ]).status, 0)
        try expectItems(["Alpha mail", "Beta renamed", "Gamma"], "an item changed through SecItem")
        XCTAssertEqual(try secretTool(["clear", "service", "gamma"]).status, 0)
        try expectItems(["Alpha mail", "Beta renamed"], "an item cleared with secret-tool")

        // A lock from outside shows ("Keyring is locked", its Unlock button), and so does the unlock.
        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertTrue(try waitUntil("the keyring shows as locked") { try state()["locked"] as? Bool == true })
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        XCTAssertTrue(try waitUntil("the keyring shows as unlocked") { try state()["locked"] as? Bool == false })
        try expectItems(["Alpha mail", "Beta renamed"], "the items after the unlock")

        // Reveal: open the item, show its password, the one SecItem changed while Seahorse was open.
        // (Seahorse keeps a secret it has read for as long as it runs, whatever the service announces:
        // a password changed from outside shows in an item not revealed before, as here.)
        try open("Beta renamed")
        XCTAssertTrue(
            try waitUntil("the password is revealed") {
                _ = try driver(["click", "icon", "dialog-password-symbolic"])
                return try entries("Item Properties").contains("beta-3")
            })
        XCTAssertTrue(try driver(["click", "push button", "Close"]))
        try requireRunning()

        // Delete in Seahorse: the item leaves the keychain.
        try open("Alpha mail")
        XCTAssertTrue(try waitUntil("the delete button") { try driver(["click", "push button", "Delete Password"]) })
        XCTAssertTrue(try waitUntil("the confirmation") { try driver(["click", "push button", "Delete"]) })
        try expectItems(["Beta renamed"], "the item deleted in Seahorse")
        XCTAssertNotEqual(try secretTool(["lookup", "service", "alpha"]).status, 0, "deleted from the keychain")

        // Create with "+": a password stored in the keychain.
        XCTAssertTrue(try waitUntil("the + menu") { try driver(["click-tooltip", "toggle button", "Add a new"]) })
        XCTAssertTrue(try waitUntil("the Password entry of the menu") { try driver(["click", "label", "Password"]) })
        XCTAssertTrue(
            try waitUntil("the description typed") { try driver(["fill", "Add Password", "text", "Made in Seahorse"]) })
        XCTAssertTrue(
            try waitUntil("the password typed") { try driver(["fill", "Add Password", "password text", "s3cret-4"]) })
        XCTAssertTrue(try driver(["click", "push button", "Add"]))
        try expectItems(["Beta renamed", "Made in Seahorse"], "the item made in Seahorse")
        let stored = try cli(["find-generic-password", "-l", "Made in Seahorse", "-w"])
        XCTAssertEqual(stored.out.trimmingCharacters(in: .newlines), "s3cret-4", stored.err)

        // Edit in Seahorse: a new password and a new description reach the keychain. Seahorse 43 saves
        // neither as typed but when the dialog is closed and "Save changes for this item?" is answered
        // OK (gkr-item-properties.vala, `response`); answered Cancel, the keychain keeps the old ones.
        try open("Beta renamed")
        XCTAssertTrue(
            try waitUntil("the password is revealed") {
                _ = try driver(["click", "icon", "dialog-password-symbolic"])
                return try entries("Item Properties").contains("beta-3")
            })
        XCTAssertTrue(try driver(["replace", "Item Properties", "beta-3", "beta-4"]), "the new password typed")
        XCTAssertTrue(
            try driver(["replace", "Item Properties", "Beta renamed", "Beta edited"]), "the new description typed")
        XCTAssertTrue(try driver(["click", "push button", "Close"]))
        XCTAssertTrue(try waitUntil("the question to save") { try driver(["click", "push button", "OK"]) })
        XCTAssertTrue(
            try waitUntil("the new password in the keychain") {
                try secretTool(["lookup", "service", "beta.example", "account", "bob"]).out == "beta-4"
            })
        try expectItems(["Beta edited", "Made in Seahorse"], "the item's new description")
        let edited = try cli(["find-generic-password", "-s", "beta.example", "-a", "bob", "-l", "Beta edited", "-w"])
        XCTAssertEqual(edited.out.trimmingCharacters(in: .newlines), "beta-4", edited.err)

        try requireRunning()
    }

    // MARK: - The display, the accessibility bus and Seahorse

    private func requireTools() throws {
        for (path, package) in Self.tools.sorted(by: { $0.key < $1.key })
        where !FileManager.default.isExecutableFile(atPath: path) {
            throw XCTSkip("\(path) is not installed (apt-get install \(package))")
        }
        let pyatspi = try TestProcess.run("/usr/bin/python3", ["-c", "import pyatspi"])
        guard pyatspi.status == 0 else {
            throw XCTSkip("pyatspi is not importable (apt-get install python3-pyatspi): \(pyatspi.err)")
        }
    }

    /// Xvfb on a display number no one uses, and the accessibility bus of this session.
    private func startDisplay() throws {
        home = base + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        var started = false
        for _ in 0..<8 where !started {
            let number = Int.random(in: 300..<900)
            guard !FileManager.default.fileExists(atPath: "/tmp/.X\(number)-lock") else { continue }
            let xvfb = try spawn(
                "/usr/bin/Xvfb", [":\(number)", "-screen", "0", "1280x800x24", "-nolisten", "tcp"], log: "xvfb")
            display = ":\(number)"
            started = Poll.until(within: 10, every: 0.05) {
                xvfb.isRunning
                    && (try? TestProcess.run("/usr/bin/xdotool", ["getdisplaygeometry"], environment: environment()))?
                        .status == 0
            }
        }
        guard started else { throw XCTSkip("Xvfb could not start a display (see \(base)/xvfb.log)") }
        try spawn("/usr/libexec/at-spi-bus-launcher", ["--launch-immediately"], log: "at-spi")
        // The bus's address from the launcher itself: the X root window's AT_SPI_BUS property could be
        // set by anyone who reaches this display.
        XCTAssertTrue(
            Poll.until(within: 10, every: 0.05) {
                let reply = try? TestProcess.run(
                    "/usr/bin/dbus-send",
                    [
                        "--session", "--print-reply=literal", "--dest=org.a11y.Bus", "/org/a11y/bus",
                        "org.a11y.Bus.GetAddress",
                    ], environment: environment())
                guard let reply, reply.status == 0 else { return false }
                accessibilityBus = reply.out.trimmingCharacters(in: .whitespacesAndNewlines)
                return !accessibilityBus.isEmpty
            }, "the accessibility bus did not start")
    }

    private func startSeahorse() throws {
        seahorse = try spawn("/usr/bin/seahorse", [], log: "seahorse")
    }

    /// The environment of the programs on this display: the harness's session bus and directories,
    /// a home of their own (Seahorse also looks at GnuPG and SSH keys there), settings in memory.
    private func environment() -> [String: String] {
        var environment = [
            "DISPLAY": display, "HOME": home, "XDG_CONFIG_HOME": home + "/.config", "XDG_CACHE_HOME": home + "/.cache",
            // GTK loads the accessibility bridge unless NO_AT_BRIDGE is 1, which a CI may have set.
            "GSETTINGS_BACKEND": "memory", "NO_AT_BRIDGE": "0",
            "PATH": "\(Self.binDirectory):/usr/bin:/bin",
        ]
        if !accessibilityBus.isEmpty { environment["AT_SPI_BUS_ADDRESS"] = accessibilityBus }
        return environment
    }

    @discardableResult
    private func spawn(_ executable: String, _ arguments: [String], log: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var inherited = ProcessInfo.processInfo.environment
        inherited["AT_SPI_BUS_ADDRESS"] = nil
        process.environment = inherited.merging(environment()) { _, new in new }
        _ = FileManager.default.createFile(atPath: "\(base)/\(log).log", contents: nil)
        let output = FileHandle(forWritingAtPath: "\(base)/\(log).log")
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        processes.append(process)
        return process
    }

    // MARK: - Reading and driving Seahorse

    /// Runs the driver (at most 30 s); whether it found what it was asked for.
    private func driver(_ arguments: [String]) throws -> Bool {
        try runDriver(arguments).status == 0
    }

    private func runDriver(_ arguments: [String]) throws -> TestProcess.Output {
        try TestProcess.run(
            "/usr/bin/timeout", ["30", "/usr/bin/python3", Self.driver] + arguments, environment: environment())
    }

    private func state() throws -> [String: Any] {
        try requireRunning()
        let output = try runDriver(["state"])
        guard output.status == 0,
            let state = try JSONSerialization.jsonObject(with: Data(output.out.utf8)) as? [String: Any]
        else {
            XCTFail("the accessible tree could not be read: \(output.err)")
            return [:]
        }
        return state
    }

    private func entries(_ window: String) throws -> [String] {
        ((try state()["entries"] as? [String: Any])?[window] as? [Any])?.compactMap { $0 as? String } ?? []
    }

    /// Fails, with how it ended, once Seahorse is no longer running.
    private func requireRunning(file: StaticString = #filePath, line: UInt = #line) throws {
        guard let seahorse, !seahorse.isRunning else { return }
        let how =
            seahorse.terminationReason == .uncaughtSignal
            ? "killed by signal \(seahorse.terminationStatus)" : "exited with \(seahorse.terminationStatus)"
        let log = (try? String(contentsOfFile: base + "/seahorse.log", encoding: .utf8)) ?? ""
        XCTFail("Seahorse \(how); its output:\n\(log.suffix(2000))", file: file, line: line)
        throw SeahorseGone()
    }

    /// Checks `condition` (a driver call, at most 30 s each) until it holds, for at most 60 s.
    private func waitUntil(_ what: String, _ condition: () throws -> Bool) throws -> Bool {
        var failure: (any Error)?
        let held = Poll.until(within: 60, every: 0.2) {
            // Gone: stop waiting, and say so once (requireRunning).
            if seahorse?.isRunning == false { return true }
            do { return try condition() } catch {
                failure = failure ?? error
                return false
            }
        }
        try requireRunning()
        if let failure { throw failure }
        if !held { XCTFail("\(what): not seen within 60 s; Seahorse shows \((try? state()) ?? [:])") }
        return held
    }

    private func expectItems(_ labels: [String], _ what: String) throws {
        _ = try waitUntil(what) { try state()["items"] as? [String] == labels.sorted() }
    }

    /// Opens an item's properties (a double click on its row, as a user does).
    private func open(_ label: String) throws {
        XCTAssertTrue(
            try waitUntil("the properties of \(label)") {
                if try state()["windows"] as? [String] == ["frame"] {
                    _ = try driver(["click", "label", label, "2"])
                }
                return try state()["windows"] as? [String] == ["frame", "Item Properties"]
            })
    }
}

private struct SeahorseGone: Error {}
