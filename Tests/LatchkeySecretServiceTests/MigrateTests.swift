import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// `latchkey migrate --from secret-service` (issue 15 §2, docs/MIGRATING.md) against Debian's real
/// gnome-keyring-daemon and a real latchkeyd serving only its socket, both on the test's private bus;
/// then the switch-over: gnome-keyring stopped, latchkeyd takes the name, and every item is read back
/// through it byte for byte.
final class MigrateTests: SecretServiceTestCase {
    private static let gnomePassword = "gk-pw"
    private static let secondPassword = "second-pw"
    private static let secondLabel = "Zweite Sammlung ✓ 鍵"
    private static let guilty = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
    private static let itemCount = 1_000
    private static let inSecond = 100

    /// The secret of item `i`: binary (not UTF-8: 0xFF, 0xFE, NUL) for even `i`, text for odd.
    private static func secret(_ i: Int) -> (bytes: [UInt8], type: String) {
        i % 2 == 0
            ? ([0xFF, 0x00, 0xFE, UInt8(i & 0xFF), UInt8(i >> 8), 0x80, 0xC0], "application/octet-stream")
            : (Array("sécret \(i) ✓".utf8), "text/plain")
    }

    private static func attributes(_ i: Int) -> [(String, String)] {
        var pairs = [
            ("service", "svc-\(i)"), ("account", "üser \(i)"), ("migrate-test", "yes"), ("ключ", "значение \(i)"),
        ]
        if i % 3 == 0 { pairs.append(("xdg:schema", "org.gnome.keyring.NetworkPassword")) }
        if i % 7 == 0 { pairs.append(("emoji 🔑", "🗝️ \(i)")) }
        return pairs
    }

    private func createItem(_ client: SecretServiceClient, collection: String, session: String, _ i: Int) throws {
        let secret = Self.secret(i)
        try client.call(
            collection, SSPath.collectionInterface, "CreateItem",
            [
                .dictionary(
                    keyType: "s", valueType: "v",
                    [
                        (.string("org.freedesktop.Secret.Item.Label"), .variant(.string("Item \(i) ✓ 日本語"))),
                        (
                            .string("org.freedesktop.Secret.Item.Attributes"),
                            .variant(SecretServiceClient.attributes(Self.attributes(i)))
                        ),
                    ]),
                .structure([.objectPath(session), .byteArray([]), .byteArray(secret.bytes), .string(secret.type)]),
                .boolean(false),
            ])
    }

    private func unlockSecond(_ client: SecretServiceClient, _ path: String, session: String) throws {
        try client.call(
            SSPath.service, Self.guilty, "UnlockWithMasterPassword",
            [
                .objectPath(path),
                .structure([
                    .objectPath(session), .byteArray([]), .byteArray(Array(Self.secondPassword.utf8)),
                    .string("text/plain"),
                ]),
            ])
    }

    private func migrate(_ extra: [String] = [], onLine: (String, Process) -> Void = { _, _ in }) throws
        -> CommandOutput
    {
        try runLatchkey(["migrate", "--from", "secret-service"] + extra, onLine: onLine)
    }

    private func summary(_ output: CommandOutput) -> String {
        output.out.split(separator: "\n").first { $0.contains(" item(s): ") }.map(String.init) ?? "(none)"
    }

    func testMigrateFromGnomeKeyringAndSwitchOver() throws {
        let home = base + "/home"
        var gnome = try startGnomeKeyring(home: home, password: Self.gnomePassword)
        defer { stop(gnome) }
        // latchkeyd starts while gnome-keyring owns the name: it serves its socket only (§7).
        try createKeychain(waitForName: false)

        // Fill gnome-keyring: its login keyring, and a second collection (made with the password through
        // its own interface: its CreateCollection needs gcr's prompter), then locked.
        let client = try SecretServiceClient(bus.address)
        let session = try client.openPlainSession()
        let second = try XCTUnwrap(
            try client.call(
                SSPath.service, Self.guilty, "CreateWithMasterPassword",
                [
                    .dictionary(
                        keyType: "s", valueType: "v",
                        [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string(Self.secondLabel)))]),
                    .structure([
                        .objectPath(session), .byteArray([]), .byteArray(Array(Self.secondPassword.utf8)),
                        .string("text/plain"),
                    ]),
                ]
            ).first?.string)
        for i in 0..<Self.itemCount {
            try createItem(client, collection: i < Self.inSecond ? second : SSPath.login, session: session, i)
        }
        try client.call(
            SSPath.service, SSPath.serviceInterface, "Lock", [.array(elementType: "o", [.objectPath(second)])])
        XCTAssertEqual(try client.property(second, SSPath.collectionInterface, "Locked")?.bool, true)

        // A dry run: the locked collection goes through gnome-keyring's Unlock prompt, which has no
        // prompter to show on this bus (gcr's is a desktop program) and completes dismissed; its items are
        // reported as not copied. Nothing is written, and no secret is printed.
        let dry = try migrate(["--dry-run"])
        XCTAssertEqual(dry.status, 1, dry.err)
        XCTAssertTrue(summary(dry).contains("900 added, 0 unchanged"), summary(dry))
        XCTAssertTrue(summary(dry).contains("100 locked"), summary(dry))
        XCTAssertTrue(dry.err.contains("was dismissed"), dry.err)
        XCTAssertEqual(dry.out.components(separatedBy: "would add: ").count - 1, 900)
        XCTAssertTrue(dry.out.contains(#""ключ": "значение 999""#), dry.out.suffix(500).description)
        XCTAssertFalse((dry.out + dry.err).contains("sécret"), "a dry run printed a secret")

        // A run killed midway (SIGKILL after 300 items): what it copied stays, whole.
        var seen = 0
        let killed = try migrate { line, process in
            guard line.hasPrefix("added: ") else { return }
            seen += 1
            if seen == 300 { kill(process.processIdentifier, SIGKILL) }
        }
        XCTAssertTrue(killed.signalled && killed.status == SIGKILL, "\(killed.status) \(summary(killed))")
        XCTAssertGreaterThanOrEqual(seen, 300)

        // A provider that disappears midway: the run stops, says where, and exits 1.
        var counted = 0
        let gnomePID = gnome.processIdentifier
        let interrupted = try migrate { line, _ in
            counted += 1
            if counted == 600 { kill(gnomePID, SIGKILL) }
        }
        gnome.waitUntilExit()
        XCTAssertEqual(interrupted.status, 1, interrupted.err)
        XCTAssertTrue(interrupted.err.contains("stopped at item "), interrupted.err)
        XCTAssertTrue(interrupted.err.contains("run the same command again to continue"), interrupted.err)

        // gnome-keyring again, from its files; the second collection unlocked as a user would (Seahorse),
        // here through gnome-keyring's own password interface.
        gnome = try startGnomeKeyring(home: home, password: Self.gnomePassword)
        let client2 = try SecretServiceClient(bus.address)
        let session2 = try client2.openPlainSession()
        try unlockSecond(client2, second, session: session2)
        let original = try client2.everyItem()
        XCTAssertEqual(original.count, Self.itemCount)

        // The re-run completes: what the earlier runs copied is unchanged, the rest is added.
        let complete = try migrate()
        XCTAssertEqual(complete.status, 0, complete.err)
        let line = summary(complete)
        XCTAssertTrue(line.hasPrefix("1000 of 1000 item(s): "), line)
        XCTAssertTrue(line.contains(" 0 kept, 0 replaced, 0 duplicated, 0 locked, 0 refused"), line)
        let added = Int(line.split(separator: " ")[4]) ?? -1
        let unchanged = Int(line.split(separator: " ")[6]) ?? -1
        XCTAssertEqual(added + unchanged, Self.itemCount, line)
        XCTAssertGreaterThanOrEqual(unchanged, 600, line)
        XCTAssertTrue(complete.out.contains("encrypted session"), complete.out.suffix(300).description)

        // Run twice, it adds nothing twice.
        let again = try migrate(["--quiet"])
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertTrue(summary(again).hasPrefix("1000 of 1000 item(s): 0 added, 1000 unchanged"), summary(again))

        // The switch-over (docs/MIGRATING.md): gnome-keyring's Secret Service stopped, latchkeyd takes the
        // name through the D-Bus activation hand-over, the keychain still unlocked.
        stop(gnome)
        XCTAssertEqual(
            try TestProcess.run(Self.binDirectory + "/latchkeyd", ["--secret-service-activation"]).status, 0)
        try waitForServiceName()
        let latchkey = try SecretServiceClient(bus.address)
        let migrated = try latchkey.everyItem()
        XCTAssertEqual(migrated.count, Self.itemCount)
        let missing = Set(original).subtracting(migrated), extra = Set(migrated).subtracting(original)
        XCTAssertTrue(
            missing.isEmpty && extra.isEmpty,
            "not in latchkey: \(Array(missing.prefix(3))); only in latchkey: \(Array(extra.prefix(3)))")
        XCTAssertEqual(
            Set(migrated.map(\.collection)), ["<default>", Self.secondLabel],
            "collections: \(Set(migrated.map(\.collection)))")

        // secret-tool finds them after the switch: searches show labels and attributes, lookups the secrets.
        for i in [1, 7, 99, 100, 101, 777, 998, 999] {
            // secret-tool prints the item's path on standard output, its properties on standard error.
            var search = try runCommand("/usr/bin/secret-tool", ["search", "--all", "service", "svc-\(i)"])
            XCTAssertEqual(search.status, 0, search.err)
            search.out += search.err
            XCTAssertTrue(search.out.contains("label = Item \(i) ✓ 日本語\n"), "item \(i): \(search.out)")
            XCTAssertTrue(search.out.contains("attribute.ключ = значение \(i)\n"), "item \(i): \(search.out)")
            XCTAssertEqual(search.out.components(separatedBy: "\nlabel = ").count, 2, "item \(i): \(search.out)")
            guard i % 2 == 1 else { continue }
            let lookup = try runCommand(
                "/usr/bin/secret-tool", ["lookup", "service", "svc-\(i)", "ключ", "значение \(i)"])
            XCTAssertEqual(lookup.out, "sécret \(i) ✓", "item \(i): \(lookup.err)")
        }
    }

    /// The provider's `Unlock` prompt driven to the end: latchkeyd as the provider (its prompter answers
    /// from a file), locked, and the command copying into a second agent of its own (another runtime
    /// and data directory, serving its socket only). gnome-keyring's prompt needs gcr's graphical
    /// prompter, which cannot run here; the test above sees it complete dismissed.
    func testMigrateUnlocksThroughTheProvidersPrompt() throws {
        try createKeychain()
        for (i, label) in ["first", "zweite ✓"].enumerated() {
            XCTAssertEqual(
                try secretTool(
                    ["store", "--label", label, "service", "svc\(i)", "account", "acct\(i)"], input: "pw-\(i)"
                )
                .status, 0)
        }
        XCTAssertEqual(try cli(["lock"]).status, 0)

        // Migrating from latchkeyd into itself is refused.
        let itself = try runLatchkey(["migrate", "--from", "secret-service"])
        XCTAssertEqual(itself.status, 1)
        XCTAssertTrue(itself.err.contains("served by latchkeyd itself"), itself.err)

        let other = [
            "XDG_RUNTIME_DIR": base + "/run2", "XDG_DATA_HOME": base + "/data2",
        ]
        try FileManager.default.createDirectory(
            atPath: base + "/run2", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { stopAgent(runtimeDirectory: base + "/run2") }
        let initialized = try TestProcess.run(
            Self.binDirectory + "/latchkey",
            [
                "init", "--password-stdin", "--allow-weak-argon2", "--argon2-memory", "8", "--argon2-time", "1",
                "--argon2-parallelism", "1",
            ], input: "other\n", environment: other)
        XCTAssertEqual(initialized.status, 0, initialized.err)
        let copied = try runLatchkey(["migrate", "--from", "secret-service"], environment: other)
        XCTAssertEqual(copied.status, 0, copied.err)
        XCTAssertTrue(copied.out.contains("2 of 2 item(s): 2 added"), copied.out)
        for i in 0..<2 {
            let found = try TestProcess.run(
                Self.binDirectory + "/latchkey", ["find-generic-password", "-s", "svc\(i)", "-a", "acct\(i)", "-w"],
                environment: other)
            XCTAssertEqual(found.out, "pw-\(i)\n", found.err)
        }
        // The provider was unlocked by its own prompt, and stays so.
        XCTAssertEqual(try secretTool(["lookup", "service", "svc0"]).out, "pw-0")
    }

    /// Stops the agent of another runtime directory (its pid from `hello` on that socket).
    private func stopAgent(runtimeDirectory: String) {
        let saved = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"]
        setenv("XDG_RUNTIME_DIR", runtimeDirectory, 1)
        AgentClient.shared.resetConnection()
        if let pid = agentPID() {
            kill(pid, SIGTERM)
            TestProcess.waitForExit(pid)
        }
        if let saved { setenv("XDG_RUNTIME_DIR", saved, 1) }
        AgentClient.shared.resetConnection()
    }
}
