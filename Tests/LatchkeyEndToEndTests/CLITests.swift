import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The `latchkey` command against the real agent: every verb, its output and its errors.
final class CLITests: AgentTestCase {
    /// `latchkey init` with cheap parameters (the CLI's floor is 64 MiB, which is still fast).
    private func initKeychain(_ password: String = "pw") throws {
        let result = try cli(
            ["init", "--password-stdin", "--argon2-memory", "64", "--argon2-time", "1"], input: password + "\n")
        XCTAssertEqual(result.status, 0, result.err)
    }

    func testGenericPasswordLifecycle() throws {
        try initKeychain()
        var r = try cli(
            [
                "add-generic-password", "-s", "mail.example", "-a", "alice", "-l", "Mail", "-j", "work",
                "--password-stdin",
            ], input: "hunter2\n")
        XCTAssertEqual(r.status, 0, r.err)

        r = try cli(["find-generic-password", "-s", "mail.example", "-a", "alice", "-w"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "hunter2\n")

        r = try cli(["find-generic-password", "-s", "mail.example"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("alice"), r.out)
        XCTAssertTrue(r.out.contains("Mail"), r.out)
        XCTAssertFalse(r.out.contains("hunter2"), "attributes only, unless -g or -w")

        // A duplicate is Apple's errSecDuplicateItem, with the function, message and status.
        r = try cli(["add-generic-password", "-s", "mail.example", "-a", "alice", "--password-stdin"], input: "x\n")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(
            r.err.contains("latchkey: SecItemAdd: The specified item already exists in the keychain. (-25299)"), r.err)

        // -U updates in place.
        r = try cli(
            ["add-generic-password", "-U", "-s", "mail.example", "-a", "alice", "--password-stdin"], input: "n3w\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(try cli(["find-generic-password", "-s", "mail.example", "-a", "alice", "-w"]).out, "n3w\n")

        r = try cli(["delete-generic-password", "-s", "mail.example", "-a", "alice"])
        XCTAssertEqual(r.status, 0, r.err)
        r = try cli(["find-generic-password", "-s", "mail.example", "-a", "alice", "-w"])
        XCTAssertEqual(r.status, 44, "not found has its own exit status")
        XCTAssertTrue(
            r.err.contains(
                "latchkey: SecItemCopyMatching: The specified item could not be found in the keychain. (-25300)"),
            r.err)
    }

    /// Arguments that are not UTF-8 are usage errors: Swift would repair each bad byte to U+FFFD, so
    /// `svc\xfe`, `svc\xff` and `svc\u{FFFD}` would all name (and delete) the same item.
    func testArgumentsThatAreNotUTF8AreUsageErrors() throws {
        try createKeychain()
        let replacement = "svc\u{FFFD}"
        XCTAssertEqual(try cli(["add-generic-password", "-s", replacement, "-a", "a", "-w", "kept"]).status, 0)
        let binary = Self.binDirectory + "/latchkey"
        for bytes in ["svc\\xfe", "svc\\xff", "\\xc3\\x28", "\\xed\\xa0\\x80"] {
            // bash's $'...' passes the raw bytes, which no Swift String can hold.
            let result = try TestProcess.run(
                "/bin/bash",
                [
                    "-c", "exec \"$0\" delete-generic-password -s $'\(bytes)' -a a",
                    binary,
                ])
            XCTAssertEqual(result.status, 64, "\(bytes): \(result.err)")
            XCTAssertTrue(result.err.contains("is not valid UTF-8"), result.err)
        }
        XCTAssertEqual(
            try cli(["find-generic-password", "-s", replacement, "-a", "a", "-w"]).out, "kept\n",
            "the item whose name has a real U+FFFD is still there")
    }

    func testInternetPasswordLifecycle() throws {
        try initKeychain()
        var r = try cli(
            [
                "add-internet-password", "-s", "git.example", "-a", "bob", "-r", "htps", "-P", "443",
                "-p", "/repo", "--password-stdin",
            ], input: "tok\n")
        XCTAssertEqual(r.status, 0, r.err)
        r = try cli(["find-internet-password", "-s", "git.example", "-r", "htps", "-P", "443", "-w"])
        XCTAssertEqual(r.out, "tok\n", r.err)
        // Another port is another item.
        XCTAssertEqual(try cli(["find-internet-password", "-s", "git.example", "-P", "8443", "-w"]).status, 44)
        r = try cli(["delete-internet-password", "-s", "git.example", "-a", "bob"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(try cli(["find-internet-password", "-s", "git.example", "-w"]).status, 44)
    }

    func testLockUnlockStatusAndPasswd() throws {
        try initKeychain()
        XCTAssertEqual(
            try cli(["add-generic-password", "-s", "s", "-a", "wu", "--password-stdin"], input: "a\n").status, 0)
        XCTAssertEqual(
            try cli(
                [
                    "add-generic-password", "-s", "s", "-a", "afu", "--accessible", "after-first-unlock",
                    "--password-stdin",
                ], input: "b\n"
            ).status, 0)

        var r = try cli(["status"])
        XCTAssertTrue(r.out.contains("exists: yes"), r.out)
        XCTAssertTrue(r.out.range(of: #"WhenUnlocked\s+ak\s+unlocked"#, options: .regularExpression) != nil, r.out)
        XCTAssertTrue(r.out.contains("device binding: not bound"), r.out)

        XCTAssertEqual(try cli(["lock"]).status, 0)
        r = try cli(["find-generic-password", "-s", "s", "-a", "wu", "-w"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.err.contains("(-25308)"), r.err)
        XCTAssertEqual(try cli(["find-generic-password", "-s", "s", "-a", "afu", "-w"]).out, "b\n")

        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        r = try cli(["status"])
        XCTAssertTrue(r.out.range(of: #"AfterFirstUnlock\s+ck\s+locked"#, options: .regularExpression) != nil, r.out)

        r = try cli(["unlock", "--password-stdin"], input: "wrong\n")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.err.contains("(-25293)"), r.err)
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "pw\n").status, 0)
        XCTAssertEqual(try cli(["find-generic-password", "-s", "s", "-a", "wu", "-w"]).out, "a\n")

        r = try cli(["passwd", "--password-stdin"], input: "pw\nnew\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        XCTAssertNotEqual(try cli(["unlock", "--password-stdin"], input: "pw\n").status, 0)
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "new\n").status, 0)
        XCTAssertEqual(try cli(["find-generic-password", "-s", "s", "-a", "wu", "-w"]).out, "a\n")
    }

    func testDumpKeychainShowsSecretsOnlyWithD() throws {
        try initKeychain()
        XCTAssertEqual(
            try cli(
                ["add-generic-password", "-s", "svc-one", "-a", "acct-one", "--password-stdin"],
                input: "secret-one\n"
            ).status, 0)
        XCTAssertEqual(
            try cli(
                ["add-internet-password", "-s", "srv-two", "-a", "acct-two", "--password-stdin"],
                input: "secret-two\n"
            ).status, 0)
        var r = try cli(["dump-keychain"])
        XCTAssertEqual(r.status, 0, r.err)
        for text in ["svc-one", "acct-one", "srv-two", "acct-two"] {
            XCTAssertTrue(r.out.contains(text), "\(text) in \(r.out)")
        }
        XCTAssertFalse(r.out.contains("secret-one") || r.out.contains("secret-two"), "no secrets without -d")
        r = try cli(["dump-keychain", "-d"])
        XCTAssertTrue(r.out.contains("secret-one") && r.out.contains("secret-two"), r.out)
    }

    func testNoKeychainAndCorruptDatabaseGiveClearErrors() throws {
        var r = try cli(["find-generic-password", "-s", "x", "-w"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.err.contains("(-25307)"), r.err)
        XCTAssertTrue(r.err.contains("latchkey init"), "the hint names the fix: \(r.err)")

        try initKeychain()
        XCTAssertEqual(
            try cli(["add-generic-password", "-s", "x", "-a", "y", "--password-stdin"], input: "z\n").status, 0)
        stopAgent()
        // Overwrite the SQLite header: the file is no longer a database.
        let database = dataDirectory + "/latchkey/keychain.db"
        for suffix in ["-wal", "-shm"] { unlink(database + suffix) }
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: database))
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 100))
        try handle.close()
        let damaged = try Data(contentsOf: URL(fileURLWithPath: database))

        r = try cli(["find-generic-password", "-s", "x", "-w"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.err.contains("(-25295)"), r.err)
        XCTAssertTrue(r.err.contains(database), "the error names the file: \(r.err)")
        r = try cli(["status"])
        XCTAssertTrue(r.out.contains("problem:") && r.out.contains(database), r.out)
        r = try cli(["add-generic-password", "-s", "x2", "-a", "y", "--password-stdin"], input: "z\n")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: database)), damaged, "never overwritten or repaired")
    }

    func testUnlockExplainsAPasswordOutOfStep() throws {
        try initKeychain("old-login")
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        // What pam_latchkey writes when root set a new login password without the old one.
        try "the login password changed on 2026-11-22 without the old password; run 'latchkey passwd'\n"
            .write(toFile: dataDirectory + "/latchkey/password-out-of-step", atomically: true, encoding: .utf8)
        var r = try cli(["status"])
        XCTAssertTrue(r.out.contains("login password: OUT OF STEP"), r.out)
        r = try cli(["unlock", "--password-stdin"], input: "new-login\n")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(
            r.err.contains("(-25293)") && r.err.contains("previous login password")
                && r.err.contains("latchkey passwd"),
            r.err)
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "old-login\n").status, 0)
        XCTAssertEqual(try cli(["passwd", "--password-stdin"], input: "old-login\nnew-login\n").status, 0)
        XCTAssertFalse(try cli(["status"]).out.contains("OUT OF STEP"), "passwd brings the passwords in step")
    }
}
