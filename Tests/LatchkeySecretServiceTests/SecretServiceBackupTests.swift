import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// A backup carries the Secret Service's items, attributes and collections (docs/BACKUP.md §5): what
/// `secret-tool` stored on one keychain, `secret-tool lookup` finds after a restore into another.
final class SecretServiceBackupTests: SecretServiceTestCase {
    private let weak = [
        "--argon2-memory", "8", "--argon2-time", "1", "--argon2-parallelism", "1", "--argon2-allow-weak",
    ]

    func testSecretToolFindsTheItemsAndCollectionsOfARestoredBackup() throws {
        try createKeychain()
        let client = try SecretServiceClient(bus.address)
        let label = BusValue.dictionary(
            keyType: "s", valueType: "v",
            [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("Work")))])
        let work = try XCTUnwrap(
            try client.call(SSPath.service, SSPath.serviceInterface, "CreateCollection", [label, .string("")]).first?
                .string)
        var result = try unicodeSecretTool(
            ["store", "--label", "Wiki", "service", "wiki", "user", "ünïcödé ✓"], input: "login secret")
        guard result.status == 0 else { return XCTFail("secret-tool store: \(result.err)") }
        result = try unicodeSecretTool(
            ["store", "--collection", work, "--label", "VPN", "service", "vpn", "host", "h1"], input: "work secret")
        XCTAssertEqual(result.status, 0, result.err)

        let file = base + "/keychain.lkbackup"
        result = try cli(
            ["backup", "-o", file, "--passphrase-stdin", "--keychain-password-fd", "0"] + weak,
            input: "phrase\n\(Self.password)\n")
        XCTAssertEqual(result.out, "backed up 2 item(s) to \(file)\n")
        // Without the file, the restore below would exit before reading its input.
        guard result.status == 0 else { return XCTFail("backup failed: \(result.err)") }

        // Another keychain, with another password, served by another agent on the same bus.
        stopAgent()
        AgentClient.shared.resetConnection()
        dataDirectory = base + "/data2"
        setenv("XDG_DATA_HOME", dataDirectory, 1)
        try KeychainControl.create(
            password: SecretBytes(copying: Array("other".utf8)),
            options: .init(timeCost: 1, memoryKiB: 8192, parallelism: 1, allowWeak: true))
        try waitForServiceName()
        XCTAssertNotEqual(try unicodeSecretTool(["lookup", "service", "wiki"]).status, 0, "a new, empty keychain")

        result = try cli(
            ["restore", file, "--no-ui", "--passphrase-stdin", "--keychain-password-fd", "0"], input: "phrase\nother\n")
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertEqual(try unicodeSecretTool(["lookup", "user", "ünïcödé ✓"]).out, "login secret")
        XCTAssertEqual(try unicodeSecretTool(["lookup", "service", "vpn", "host", "h1"]).out, "work secret")
        XCTAssertEqual(
            try client.property(work, SSPath.collectionInterface, "Label")?.string, "Work", "the collection came back")
        let items = try XCTUnwrap(try client.property(work, SSPath.collectionInterface, "Items")?.elements)
        XCTAssertEqual(items.count, 1, "with its item")
        let search = try unicodeSecretTool(["search", "--all", "service", "wiki"])
        XCTAssertTrue(search.out.contains("label = Wiki"), search.out)
    }

    /// `secret-tool` in a UTF-8 locale: it converts its arguments from the locale's encoding, and another
    /// test of this target leaves `LANG` unset (in the C locale "ünïcödé" is an invalid byte sequence, and
    /// secret-tool would exit before reading the secret this test writes to it).
    private func unicodeSecretTool(_ arguments: [String], input: String? = nil) throws -> TestProcess.Output {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool") else {
            throw XCTSkip("secret-tool is not installed (apt-get install libsecret-tools)")
        }
        return try TestProcess.run("/usr/bin/secret-tool", arguments, input: input, environment: ["LC_ALL": "C.UTF-8"])
    }
}
