import Foundation
import LatchkeyCrypto
import LatchkeyEngineTestSupport
import LatchkeyKeybag
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine

/// Backup and restore in the engine (docs/BACKUP.md), between two keychains bound to two machines: what
/// crosses, what stays, and that a refused restore changes nothing.
final class BackupEngineTests: XCTestCase {
    private let header = BackupHeader(parameters: testParameters, salt: Array(repeating: 9, count: 16))
    private let key = SecretBytes(copying: Array(repeating: 0x42, count: 32))

    /// A keychain bound to the machine secret `machine` (the PAM hand-off's device factor), unlocked.
    private func boundKeychain(machine: UInt8, password: String) throws -> Keychain {
        let directory = NSTemporaryDirectory() + "latchkey-backup-test-\(UUID().uuidString)"
        let keychain = Keychain(location: KeychainLocation(directory: directory))
        try keychain.create(password: secret(password), parameters: testParameters, allowWeakParameters: true)
        let bag = try Keybag.load(path: directory + "/keybag")
        try keychain.handOff(
            masterKey: try bag.deriveMasterKey(password: secret(password)),
            deviceFactor: try bag.deviceFactor(
                machineSecret: SecretBytes(copying: Array(repeating: machine, count: 32)), uid: 1000))
        XCTAssertTrue(keychain.status().deviceBound)
        return keychain
    }

    private func attributes(_ keychain: Keychain, _ query: SecDictionary) throws -> SecDictionary {
        var q = query
        q["r_Attributes"] = .bool(true)
        q["r_Data"] = .bool(true)
        guard case .dictionary(let d)? = try keychain.copy(q) else { throw XCTSkip("no item") }
        return d
    }

    private func secretServiceItem(
        _ keychain: Keychain, _ pairs: [(String, String)], collection: String, secret: String
    )
        throws
    {
        let data = SecretServiceData(
            attributes: try XCTUnwrap(SecretAttributes(pairs.map { SecretAttributes.Pair($0.0, $0.1) })),
            collection: collection, contentType: "text/plain")
        _ = try keychain.withSecretServiceStorage(AccessRequest(.add, caller: testCaller, itemClass: .genericPassword))
        {
            storage in try storage.insert(label: "SS \(secret)", data: data, secret: Array(secret.utf8))
        }
    }

    private func secretServiceLookup(_ keychain: Keychain, _ pairs: [(String, String)], collection: String) throws
        -> [String]
    {
        try keychain.withSecretServiceStorage(AccessRequest(.readData, caller: testCaller, itemClass: .genericPassword))
        { storage in
            let query = try XCTUnwrap(SecretAttributes(pairs.map { SecretAttributes.Pair($0.0, $0.1) }))
            return try storage.select(query, in: collection, collections: ["login", "work"]).map { match in
                let entry = try XCTUnwrap(try storage.entry(match.id))
                return String(decoding: try storage.secret(of: entry), as: UTF8.self)
            }
        }
    }

    func testEveryItemThatMayLeaveCrossesToAnotherMachineAsItWas() throws {
        let source = try boundKeychain(machine: 1, password: "pw")
        let mail = genp(
            "imap", "me",
            [
                "agrp": .string("mail"), "labl": .string("Mail"), "icmt": bytes("a comment"),
                "v_Data": bytes("hunter2"),
            ])
        _ = try source.add(mail)
        _ = try source.add(genp("ck", "me", ["pdmn": .string("ck"), "v_Data": bytes("after first unlock")]))
        _ = try source.add(genp("dk", "me", ["pdmn": .string("dk"), "v_Data": bytes("always")]))
        for pdmn in ["aku", "cku", "dku", "akpu"] {
            _ = try source.add(genp("device", pdmn, ["pdmn": .string(pdmn), "v_Data": bytes("stays")]))
        }
        _ = try source.add([
            "class": .string("inet"), "srvr": .string("example.com"), "acct": .string("me"), "ptcl": .string("htps"),
            "port": .int(443), "agrp": .string("browser"), "v_Data": bytes("web"),
        ])
        let control = try AccessControl(protection: .afterFirstUnlock, flags: [])
        _ = try source.add(genp("controlled", "me", ["accc": .data(control.encoded), "v_Data": bytes("guarded")]))
        try secretServiceItem(
            source, [("xdg:schema", "org.example"), ("user", "ünï")], collection: "login", secret: "s1")
        try secretServiceItem(
            source, [("xdg:schema", "org.example"), ("user", "work")], collection: "work", secret: "s2")

        let (file, count) = try source.backup(password: secret("pw"), key: key, header: header)
        XCTAssertEqual(count, 7, "every item but the four ThisDeviceOnly ones")
        XCTAssertNil(file.firstRange(of: Array("hunter2".utf8)), "the file holds no secret in the clear")
        XCTAssertNil(file.firstRange(of: Array("imap".utf8)), "nor an attribute")

        let target = try boundKeychain(machine: 2, password: "other")
        let outcome = try target.restore(
            file, key: key, password: secret("other"), decisions: RestoreDecisions(otherwise: nil))
        XCTAssertEqual(outcome.added, 7)
        XCTAssertEqual(outcome.duplicates, [])
        XCTAssertEqual(try attributes(target, genp("imap", "me")), try attributes(source, genp("imap", "me")))
        XCTAssertEqual(
            try attributes(target, ["class": .string("inet"), "srvr": .string("example.com")]),
            try attributes(source, ["class": .string("inet"), "srvr": .string("example.com")]))
        let controlled = try attributes(target, genp("controlled", "me"))
        XCTAssertEqual(controlled["accc"], .data(control.encoded))
        XCTAssertEqual(controlled["pdmn"], .string("ck"))
        for pdmn in ["aku", "cku", "dku", "akpu"] {
            XCTAssertEqual(status { _ = try target.copy(genp("device", pdmn)) }, SecStatus.itemNotFound, pdmn)
        }
        XCTAssertEqual(try secretServiceLookup(target, [("user", "ünï")], collection: "login"), ["s1"])
        XCTAssertEqual(try secretServiceLookup(target, [("user", "work")], collection: "work"), ["s2"])
    }

    func testDuplicatesAreReplacedSkippedOrRefuseTheWholeRestore() throws {
        let source = try boundKeychain(machine: 1, password: "pw")
        _ = try source.add(genp("a", "me", ["v_Data": bytes("backup a")]))
        _ = try source.add(genp("b", "me", ["v_Data": bytes("backup b")]))
        _ = try source.add(genp("c", "me", ["v_Data": bytes("backup c")]))
        let (file, _) = try source.backup(password: secret("pw"), key: key, header: header)

        let target = try boundKeychain(machine: 2, password: "pw")
        _ = try target.add(genp("a", "me", ["v_Data": bytes("target a")]))
        _ = try target.add(genp("b", "me", ["v_Data": bytes("target b")]))
        func data(_ service: String) throws -> SecValue? {
            try target.copy(genp(service, "me", ["r_Data": .bool(true)]))
        }

        let look = try target.restore(file, key: key, password: secret("pw"), decisions: nil)
        XCTAssertEqual(look.duplicates.map(\.index), [0, 1])
        XCTAssertEqual(look.added, 0)
        XCTAssertEqual(status { _ = try data("c") }, SecStatus.itemNotFound, "looking changes nothing")

        let refused = status {
            _ = try target.restore(file, key: key, password: secret("pw"), decisions: RestoreDecisions(otherwise: nil))
        }
        XCTAssertEqual(refused, SecStatus.duplicateItem)
        XCTAssertEqual(status { _ = try data("c") }, SecStatus.itemNotFound, "a refused restore adds nothing")

        let partly = status {
            _ = try target.restore(
                file, key: key, password: secret("pw"), decisions: RestoreDecisions(otherwise: nil, replace: [0]))
        }
        XCTAssertEqual(partly, SecStatus.duplicateItem, "a duplicate no decision covers refuses everything")
        XCTAssertEqual(try data("a"), bytes("target a"))

        let mixed = try target.restore(
            file, key: key, password: secret("pw"), decisions: RestoreDecisions(otherwise: nil, replace: [0], skip: [1])
        )
        XCTAssertEqual([mixed.added, mixed.replaced, mixed.skipped], [1, 1, 1])
        XCTAssertEqual(try data("a"), bytes("backup a"))
        XCTAssertEqual(try data("b"), bytes("target b"))
        XCTAssertEqual(try data("c"), bytes("backup c"))

        let skipped = try target.restore(
            file, key: key, password: secret("pw"), decisions: RestoreDecisions(otherwise: .skip))
        XCTAssertEqual([skipped.added, skipped.replaced, skipped.skipped], [0, 0, 3])
        let replaced = try target.restore(
            file, key: key, password: secret("pw"), decisions: RestoreDecisions(otherwise: .replace))
        XCTAssertEqual([replaced.added, replaced.replaced, replaced.skipped], [0, 3, 0])
        XCTAssertEqual(try data("b"), bytes("backup b"))
    }

    func testTheKeychainPasswordIsRequiredAndLockedClassesAreNotLeftOut() throws {
        let source = try boundKeychain(machine: 1, password: "pw")
        _ = try source.add(genp("a", "me", ["v_Data": bytes("a")]))
        XCTAssertEqual(
            status { _ = try source.backup(password: secret("nope"), key: key, header: header) }, SecStatus.authFailed)
        let (file, _) = try source.backup(password: secret("pw"), key: key, header: header)
        XCTAssertEqual(
            status {
                _ = try source.restore(file, key: key, password: secret("nope"), decisions: .init(otherwise: .skip))
            },
            SecStatus.authFailed)
        source.lock(all: false)
        XCTAssertEqual(
            status { _ = try source.backup(password: secret("pw"), key: key, header: header) },
            SecStatus.interactionNotAllowed, "a backup never silently leaves out the locked items")
    }

    func testAWrongKeyOrADamagedFileChangesNothing() throws {
        let source = try boundKeychain(machine: 1, password: "pw")
        _ = try source.add(genp("a", "me", ["v_Data": bytes("a")]))
        let (file, _) = try source.backup(password: secret("pw"), key: key, header: header)
        let target = try boundKeychain(machine: 2, password: "pw")
        let wrongKey = SecretBytes(copying: Array(repeating: 0x43, count: 32))
        XCTAssertEqual(
            status {
                _ = try target.restore(file, key: wrongKey, password: secret("pw"), decisions: .init(otherwise: .skip))
            },
            SecStatus.authFailed)
        for position in stride(from: 0, to: file.count, by: 7) {
            var damaged = file
            damaged[position] ^= 0x01
            XCTAssertNotEqual(
                status {
                    _ = try target.restore(
                        damaged, key: key, password: secret("pw"), decisions: .init(otherwise: .skip))
                },
                0, "byte \(position)")
        }
        XCTAssertEqual(status { _ = try target.copy(genp("a", "me")) }, SecStatus.itemNotFound)
    }

    /// A record the engine would not have written is a damaged backup, refused before anything is written.
    func testRecordsTheEngineWouldNotWriteAreRefused() throws {
        func file(_ record: SecValue) throws -> [UInt8] {
            var writer = try BackupFile.Writer(header: header, key: key)
            try writer.append(BackupChunk.encode([record]), final: true)
            return writer.bytes
        }
        let attributes: SecDictionary = [
            "svce": .string("s"), "acct": .string("a"), "agrp": .string("default"), "pdmn": .string("ak"),
            "sync": .int(0),
        ]
        func record(_ changes: SecDictionary = [:], attributes extra: SecDictionary = [:]) -> SecValue {
            var d: SecDictionary = [
                "class": .string("genp"), "pdmn": .string("ak"), "sync": .bool(false), "data": bytes("x"),
                "attrs": .dictionary(attributes.merging(extra) { $1 }),
            ]
            for (k, v) in changes { d[k] = v }
            return .dictionary(d)
        }
        XCTAssertEqual(try Keychain.readBackup(try file(record()), key: key).0.count, 1, "the control case is read")
        let refused: [(String, SecValue)] = [
            ("a ThisDeviceOnly class", record(["pdmn": .string("aku")], attributes: ["pdmn": .string("aku")])),
            ("the tokens' group", record(attributes: ["agrp": .string(Caller.tokenAccessGroup)])),
            ("no group", record(attributes: ["agrp": .string("")])),
            ("an attribute of another class", record(attributes: ["srvr": .string("example.com")])),
            ("an attribute that is a list", record(attributes: ["labl": .array([.string("x")])])),
            ("a pdmn that disagrees", record(attributes: ["pdmn": .string("ck")])),
            ("a malformed access control", record(attributes: ["accc": .data([1, 2, 3])])),
            (
                "Secret Service data on an internet password",
                record(["class": .string("inet"), "ss": .dictionary([:])])
            ),
            ("a key too many", record(["more": .int(1)])),
            ("an unknown class", record(["class": .string("idnt")])),
        ]
        for (what, value) in refused {
            XCTAssertEqual(status { _ = try Keychain.readBackup(try file(value), key: key) }, SecStatus.decode, what)
        }
    }
}
