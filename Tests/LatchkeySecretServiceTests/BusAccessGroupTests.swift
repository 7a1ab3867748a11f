import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Applications own their items through the Secret Service too (issue 12 §4, docs/IDENTITY.md §4): two
/// copies of Debian's `secret-tool`, installed root-owned in a root-owned directory under /run, each with
/// an application file granting it a group of its own, each on a bus connection of its own, against the
/// real agent on a private dbus-daemon. Root only: the files must be root's to count.
final class BusAccessGroupTests: SecretServiceTestCase {
    private var root = ""
    private var mail: String { root + "/bin/mail" }
    private var chat: String { root + "/bin/chat" }
    private let unlisted = "/usr/bin/secret-tool"

    override func setUpWithError() throws {
        guard geteuid() == 0 else { throw XCTSkip("application files must be root's") }
        guard FileManager.default.isExecutableFile(atPath: unlisted) else {
            throw XCTSkip("secret-tool is not installed (apt-get install libsecret-tools)")
        }
        try super.setUpWithError()
        var template = Array("/run/latchkey-bus-groups.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp under /run failed: errno \(errno)") }
        root = String(cString: made)
        XCTAssertEqual(chmod(root, 0o755), 0)
        for directory in ["apps", "bin"] { XCTAssertEqual(mkdir(root + "/" + directory, 0o755), 0) }
        for (name, id, group) in [("mail", "org.example.Mail", "mail"), ("chat", "org.example.Chat", "chat")] {
            try FileManager.default.copyItem(atPath: unlisted, toPath: root + "/bin/" + name)
            XCTAssertEqual(chmod(root + "/bin/" + name, 0o755), 0)
            try Data("[Application]\nId=\(id)\nExecutable=\(root)/bin/\(name)\nAccessGroups=\(group);shared\n".utf8)
                .write(to: URL(fileURLWithPath: root + "/apps/\(name).conf"))
            // The same application's D-Bus tool (systemd's busctl), for calls secret-tool does not make.
            try FileManager.default.copyItem(atPath: "/usr/bin/busctl", toPath: root + "/bin/\(name)ctl")
            XCTAssertEqual(chmod(root + "/bin/\(name)ctl", 0o755), 0)
            try Data(
                "[Application]\nId=\(id).Ctl\nExecutable=\(root)/bin/\(name)ctl\nAccessGroups=\(group);shared\n".utf8
            ).write(to: URL(fileURLWithPath: root + "/apps/\(name)ctl.conf"))
        }
        setenv("LATCHKEY_APPLICATIONS_DIRS", root + "/apps", 1)
        try createKeychain()
    }

    override func tearDown() {
        super.tearDown()
        unsetenv("LATCHKEY_APPLICATIONS_DIRS")
        if !root.isEmpty { try? FileManager.default.removeItem(atPath: root) }
    }

    /// Runs `program` (a copy of secret-tool); its exit status and standard output.
    private func run(
        _ program: String, _ arguments: String..., input: String? = nil, environment: [String: String] = [:]
    ) throws -> (status: Int32, out: String) {
        let result = try TestProcess.run(program, arguments, input: input, environment: environment)
        return (result.status, result.out)
    }

    /// The SecItem view of the store, for the item's group: what `latchkey` shows with every group.
    private func groups(service: String) throws -> [String] {
        let dump = try cli(["dump-keychain", "--all-groups", "--keychain-password-fd", "0"], input: "pw\n")
        XCTAssertEqual(dump.status, 0, dump.err)
        return dump.out.components(separatedBy: "\n\n").filter { $0.contains("\"\(service)\"") }.compactMap { entry in
            entry.split(separator: "\n").first { $0.contains("\"agrp\"") }.map { String($0) }
        }
    }

    func testEachApplicationReachesOnlyItsOwnItemsOverTheBus() throws {
        XCTAssertEqual(try run(mail, "store", "--label", "Mail", "service", "imap", input: "mail's").status, 0)
        XCTAssertEqual(try run(mail, "lookup", "service", "imap").out, "mail's", "its own item")
        XCTAssertNotEqual(try run(chat, "lookup", "service", "imap").status, 0, "another application's item")
        XCTAssertEqual(try run(chat, "search", "--all", "service", "imap").out, "", "not listed either")
        XCTAssertNotEqual(try run(unlisted, "lookup", "service", "imap").status, 0, "nor an unlisted program's")
        // chat's clear finds nothing to delete; storing the same attributes makes chat's own item.
        _ = try run(chat, "clear", "service", "imap")
        XCTAssertEqual(try run(mail, "lookup", "service", "imap").out, "mail's", "still there")
        XCTAssertEqual(try run(chat, "store", "--label", "Chat", "service", "imap", input: "chat's").status, 0)
        XCTAssertEqual(try run(chat, "lookup", "service", "imap").out, "chat's")
        XCTAssertEqual(try run(mail, "lookup", "service", "imap").out, "mail's", "not replaced by chat's")
        // An unlisted program's items are in `default`, which neither application was granted.
        XCTAssertEqual(try run(unlisted, "store", "--label", "Any", "service", "web", input: "everyone's").status, 0)
        XCTAssertNotEqual(try run(mail, "lookup", "service", "web").status, 0)
        XCTAssertEqual(try run(unlisted, "lookup", "service", "web").out, "everyone's")
        // Each item went to its maker's first group, as a SecItem add would have.
        let imap = try groups(service: "imap").joined(separator: "\n")
        XCTAssertTrue(imap.contains("\"mail\"") && imap.contains("\"chat\""), imap)
        XCTAssertTrue(try groups(service: "web").joined().contains("\"default\""))
        // mail's clear deletes its own item only.
        XCTAssertEqual(try run(mail, "clear", "service", "imap").status, 0)
        XCTAssertNotEqual(try run(mail, "lookup", "service", "imap").status, 0)
        XCTAssertEqual(try run(chat, "lookup", "service", "imap").out, "chat's")
    }

    func testTheSessionCollectionKeepsEachApplicationsItemsApart() throws {
        let store = ["store", "--collection", "session", "--label", "Token", "service", "tok"]
        XCTAssertEqual(try TestProcess.run(mail, store, input: "mail's token").status, 0)
        XCTAssertEqual(try run(mail, "lookup", "service", "tok").out, "mail's token")
        XCTAssertNotEqual(try run(chat, "lookup", "service", "tok").status, 0)
        XCTAssertNotEqual(try run(unlisted, "lookup", "service", "tok").status, 0)
        _ = try run(chat, "clear", "service", "tok")
        XCTAssertEqual(try run(mail, "lookup", "service", "tok").out, "mail's token")
        // The same attributes stored by chat are chat's item, beside mail's.
        XCTAssertEqual(try TestProcess.run(chat, store, input: "chat's token").status, 0)
        XCTAssertEqual(try run(chat, "lookup", "service", "tok").out, "chat's token")
        XCTAssertEqual(try run(mail, "lookup", "service", "tok").out, "mail's token")
    }

    /// Collections are shared; deleting one that holds another application's items deletes nothing
    /// (AccessDenied), so those items are neither deleted by a client that cannot see them nor left in
    /// no collection.
    func testACollectionWithAnotherApplicationsItemsIsNotDeleted() throws {
        let client = try SecretServiceClient(bus.address)
        let label = BusValue.dictionary(
            keyType: "s", valueType: "v",
            [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("Work")))])
        let made = try client.call(SSPath.service, SSPath.serviceInterface, "CreateCollection", [label, .string("")])
        let work = try XCTUnwrap(made.first?.string)
        XCTAssertEqual(
            try run(mail, "store", "--collection", work, "--label", "M", "service", "vpn", input: "mail's").status, 0)
        XCTAssertEqual(
            client.errorName(work, "org.freedesktop.Secret.Collection", "Delete"),
            "org.freedesktop.DBus.Error.AccessDenied")
        XCTAssertEqual(try run(mail, "lookup", "service", "vpn").out, "mail's", "nothing was deleted")
        XCTAssertEqual(try run(mail, "clear", "service", "vpn").status, 0)
        XCTAssertNil(client.errorName(work, "org.freedesktop.Secret.Collection", "Delete"), "now only its own")
    }

    /// What every client hears: a deletion through SecItem is announced (`ItemDeleted`) for an item of
    /// `default` only, not for another application's item.
    func testDeletionsOfAnotherApplicationsItemsAreNotAnnounced() throws {
        let client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        XCTAssertEqual(try run(mail, "store", "--label", "M", "service", "vpn", input: "mail's").status, 0)
        XCTAssertEqual(try run(unlisted, "store", "--label", "W", "service", "web", input: "anyone's").status, 0)
        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "web")])])
        let web = try XCTUnwrap(found.first?.elements?.first?.string)
        let delete = try cli(
            ["delete-generic-password", "-s", "vpn", "--access-group", "mail", "--keychain-password-fd", "0"],
            input: "pw\n")
        XCTAssertEqual(delete.status, 0, delete.err)
        XCTAssertEqual(try cli(["delete-generic-password", "-s", "web"]).status, 0)
        // Announced in the order made: once web's deletion is here, vpn's would be too.
        XCTAssertNotNil(client.signals.wait { $0.member == "ItemDeleted" && $0.arguments == [.objectPath(web)] })
        let deleted = client.signals.all.filter { $0.member == "ItemDeleted" }.flatMap(\.arguments)
        XCTAssertTrue(
            !deleted.isEmpty && deleted.allSatisfy { $0 == .objectPath(web) }, "only default's item: \(deleted)")
    }

    /// Runs an application's busctl against the private bus; its exit status.
    private func busctl(_ program: String, _ arguments: String...) throws -> Int32 {
        let result = try TestProcess.run(program, ["--address=\(bus.address)"] + arguments)
        XCTAssertEqual(result.status, 0, result.err)
        return result.status
    }

    /// The PropertiesChanged signals seen on `path`: (changed property names, invalidated names).
    private func propertyChanges(_ client: SecretServiceClient, _ path: String) -> [([String], [String])] {
        client.signals.all.filter { $0.member == "PropertiesChanged" && $0.path == path }.map { signal in
            let changed =
                signal.arguments.count > 1 ? (signal.arguments[1].stringKeyedEntries.map { Array($0.keys) } ?? []) : []
            let invalidated =
                signal.arguments.count > 2 ? (signal.arguments[2].elements?.compactMap(\.string) ?? []) : []
            return (changed.sorted(), invalidated)
        }
    }

    /// What is broadcast when an application changes its item's label or attributes names the property,
    /// never its new value (every client hears it); an item of `default`'s carries the value, as
    /// gnome-keyring sends it.
    func testAnotherApplicationsNewLabelIsNotBroadcast() throws {
        let watcher = try SecretServiceClient(bus.address)
        try watcher.watchSignals()
        XCTAssertEqual(try run(mail, "store", "--label", "M", "service", "vpn", input: "mail's").status, 0)
        XCTAssertEqual(try run(unlisted, "store", "--label", "W", "service", "web", input: "anyone's").status, 0)
        let mailctl = root + "/bin/mailctl"
        let search = try TestProcess.run(
            mailctl,
            [
                "--address=\(bus.address)", "call", "org.freedesktop.secrets", "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service", "SearchItems", "a{ss}", "1", "service", "vpn",
            ])
        let vpn = try XCTUnwrap(
            search.out.split(separator: "\"").first { $0.hasPrefix("/org/") }.map(String.init), search.out)
        let found = try watcher.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "web")])])
        let web = try XCTUnwrap(found.first?.elements?.first?.string)
        XCTAssertEqual(
            try busctl(
                mailctl, "set-property", "org.freedesktop.secrets", vpn, "org.freedesktop.Secret.Item", "Label", "s",
                "VPN PIN 4711"), 0)
        // An unlisted program's own item: the value travels.
        let setWeb = try TestProcess.run(
            "/usr/bin/busctl",
            [
                "--address=\(bus.address)", "set-property", "org.freedesktop.secrets", web,
                "org.freedesktop.Secret.Item", "Label", "s", "Web",
            ])
        XCTAssertEqual(setWeb.status, 0, setWeb.err)
        XCTAssertNotNil(watcher.signals.wait { $0.member == "PropertiesChanged" && $0.path == web })
        XCTAssertTrue(
            propertyChanges(watcher, web).contains { $0.0.contains("Label") }, "\(propertyChanges(watcher, web))")
        // mail's change is announced by its path alone (ItemChanged), never with a value.
        XCTAssertTrue(
            watcher.signals.all.contains { $0.member == "ItemChanged" && $0.arguments == [.objectPath(vpn)] },
            "the change is announced")
        let vpnChanges = propertyChanges(watcher, vpn)
        XCTAssertTrue(vpnChanges.allSatisfy { $0.0.isEmpty }, "no value of mail's item in a broadcast: \(vpnChanges)")
    }

    /// A lock through the bus by an application is announced for every item every client may see, as
    /// a lock from outside is (not as the application that locked sees the keychain).
    func testALockByAnApplicationIsAnnouncedForDefaultsItems() throws {
        XCTAssertEqual(try run(unlisted, "store", "--label", "W", "service", "web", input: "anyone's").status, 0)
        XCTAssertEqual(try run(chat, "store", "--label", "C", "service", "chat", input: "chat's").status, 0)
        let watcher = try SecretServiceClient(bus.address)
        let found = try watcher.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "web")])])
        let web = try XCTUnwrap(found.first?.elements?.first?.string)
        try watcher.watchSignals()
        XCTAssertEqual(
            try busctl(
                root + "/bin/chatctl", "call", "org.freedesktop.secrets", "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service", "Lock", "ao", "0"), 0)
        XCTAssertNotNil(
            watcher.signals.wait { $0.member == "PropertiesChanged" && $0.path == web },
            "default's item is announced locked: \(watcher.signals.all.map { ($0.member, $0.path) })")
    }

    /// Signals are broadcast: the `Items` they carry are what an unlisted program lists (the group
    /// `default`), and a change to another application's item is announced by its path alone, never
    /// with its label or attributes.
    func testSignalsCarryNoOtherApplicationsItems() throws {
        let client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        XCTAssertEqual(try run(unlisted, "store", "--label", "W", "service", "web", input: "anyone's").status, 0)
        XCTAssertEqual(try run(mail, "store", "--label", "M", "service", "vpn", input: "mail's").status, 0)
        XCTAssertEqual(try run(mail, "store", "--label", "M2", "service", "vpn", input: "mail's 2").status, 0)
        XCTAssertEqual(try run(unlisted, "clear", "service", "web").status, 0)
        XCTAssertNotNil(
            client.signals.wait {
                $0.path == SSPath.login && $0.member == "PropertiesChanged"
                    && $0.arguments[1].stringKeyedEntries?["Items"]?.variantValue?.elements == []
            }, "the clear's Items")
        var created: [String] = []
        for signal in client.signals.all where signal.member == "ItemCreated" {
            if let path = signal.arguments.first?.string, !created.contains(path) { created.append(path) }
        }
        XCTAssertEqual(created.count, 2)
        let (web, vpn) = (created.first ?? "", created.last ?? "")
        let listed = client.signals.all.compactMap {
            $0.member == "PropertiesChanged" ? $0.arguments[1].stringKeyedEntries?["Items"]?.variantValue : nil
        }.flatMap { $0.elements ?? [] }
        XCTAssertTrue(listed.contains(.objectPath(web)), "default's item is listed")
        XCTAssertFalse(listed.contains(.objectPath(vpn)), "mail's item is never listed")
        XCTAssertTrue(
            client.signals.all.contains { $0.member == "ItemChanged" && $0.arguments == [.objectPath(vpn)] },
            "the replacement is announced by its path")
        XCTAssertFalse(client.signals.all.contains { $0.path == vpn }, "nothing about mail's item itself")
    }

    /// A copy of an entitled program elsewhere, or the program started with a loader variable, is an
    /// unlisted program on the bus as on the socket.
    func testImpostorsGetNoApplicationIdentityOverTheBus() throws {
        XCTAssertEqual(try run(mail, "store", "--label", "Mail", "service", "imap", input: "mail's").status, 0)
        let copy = runtimeDirectory + "/mail"
        try FileManager.default.copyItem(atPath: mail, toPath: copy)
        XCTAssertEqual(chmod(copy, 0o755), 0)
        XCTAssertNotEqual(try run(copy, "lookup", "service", "imap").status, 0, "a copy in a user-writable place")
        let library = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"].first {
            FileManager.default.fileExists(atPath: $0)
        }
        if let library {
            XCTAssertNotEqual(
                try run(mail, "lookup", "service", "imap", environment: ["LD_PRELOAD": library]).status, 0,
                "started under LD_PRELOAD")
        }
        XCTAssertEqual(try run(mail, "lookup", "service", "imap").out, "mail's")
    }
}
