import Foundation
import LatchkeyTestSupport
import XCTest

/// `latchkey --access-control` and `--no-ui` through the real CLI binary, against the real agent with
/// the root-only PAM stacks and stand-in pinentry of AccessControlTestCase.
final class CLIAccessControlTests: AccessControlTestCase {
    private var prompted: Bool { FileManager.default.fileExists(atPath: shown) }

    func testAddShowReadAndNoUI() throws {
        var r = try cli(
            [
                "add-generic-password", "-s", "ac", "-a", "guarded", "--access-control", "user-presence",
                "--password-stdin",
            ],
            input: "s3cret\n")
        XCTAssertEqual(r.status, 0, r.err)
        // Attributes need no check, and show the access control in the words that made it.
        r = try cli(["find-generic-password", "-s", "ac", "-a", "guarded"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("\"accc\"<access-control>=\"protection=ak user-presence\""), r.out)
        XCTAssertFalse(prompted, "no prompt for attributes")

        // --no-ui: a clear failure, status -25308, exit 1, and no prompt.
        r = try cli(["find-generic-password", "-s", "ac", "-a", "guarded", "-w", "--no-ui"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.out, "")
        XCTAssertTrue(r.err.contains("(-25308)"), r.err)
        XCTAssertTrue(r.err.contains("--no-ui forbids asking"), r.err)
        XCTAssertFalse(r.err.contains("latchkey unlock"), "not the locked keychain's hint: \(r.err)")
        XCTAssertFalse(prompted, "--no-ui showed a prompt")

        // Without it the user is asked; the right password reads the secret.
        try answer("sesame")
        r = try cli(["find-generic-password", "-s", "ac", "-a", "guarded", "-w"])
        XCTAssertEqual(r.out, "s3cret\n", r.err)
        XCTAssertTrue(prompted)

        // -U on the protected item changes its secret: a check, refused with --no-ui.
        try FileManager.default.removeItem(atPath: shown)
        r = try cli(
            ["add-generic-password", "-U", "-s", "ac", "-a", "guarded", "--no-ui", "--password-stdin"], input: "new\n")
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.err.contains("SecItemUpdate") && r.err.contains("(-25308)"), r.err)
        XCTAssertFalse(prompted)
    }

    func testCombinationsAndTheProtectionClass() throws {
        var r = try cli([
            "add-internet-password", "-s", "host.example", "-a", "bob", "-w", "pw",
            "--accessible", "after-first-unlock", "--access-control", "biometry-any,or,device-passcode",
        ])
        XCTAssertEqual(r.status, 0, r.err)
        r = try cli(["find-internet-password", "-s", "host.example"])
        XCTAssertTrue(
            r.out.contains("\"accc\"<access-control>=\"protection=ck biometry-any,or,device-passcode\""), r.out)
        XCTAssertTrue(r.out.contains("\"pdmn\"<blob>=\"ck\""), r.out)
        // The password stack satisfies the "or".
        try answer("sesame")
        r = try cli(["find-internet-password", "-s", "host.example", "-w"])
        XCTAssertEqual(r.out, "pw\n", r.err)

        // Unknown words and refused combinations are usage errors that say what is wrong.
        for (words, message) in [
            ("fingerprint", "unknown word 'fingerprint'"),
            ("user-presence,or,device-passcode", "user-presence already means"),
            ("biometry-any,or,and,device-passcode", "'or' or 'and', not both"),
            ("biometry-any,biometry-current-set", "exclude each other"),
            ("or", "name a check"),
            ("device-passcode,and", "join two checks"),
            ("application-password", "unknown word"),
        ] {
            r = try cli(["add-generic-password", "-s", "x", "-a", "y", "-w", "z", "--access-control", words])
            XCTAssertEqual(r.status, 64, "\(words): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(words): \(r.err)")
        }
        r = try cli(["add-generic-password", "-s", "x", "-a", "y", "--sync", "--access-control", "user-presence"])
        XCTAssertEqual(r.status, 64, r.err)
        XCTAssertEqual(try cli(["find-generic-password", "-s", "x"]).status, 44, "nothing was added")
    }

    func testDumpWithAndWithoutUI() throws {
        XCTAssertEqual(try cli(["add-generic-password", "-s", "ac", "-a", "open", "-w", "plain"]).status, 0)
        XCTAssertEqual(
            try cli([
                "add-generic-password", "-s", "ac", "-a", "guarded", "-w", "s3cret", "--access-control",
                "device-passcode",
            ]).status, 0)
        // Without -d nothing needs a check.
        var r = try cli(["dump-keychain"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("\"accc\"<access-control>=\"protection=ak device-passcode\""), r.out)
        XCTAssertFalse(prompted)
        // -d --no-ui: every item listed, the protected one without its password; exit 1 with -25308.
        r = try cli(["dump-keychain", "-d", "--no-ui"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.out.contains("password: \"plain\""), r.out)
        XCTAssertTrue(r.out.contains("\"acct\"<blob>=\"guarded\""), r.out)
        XCTAssertFalse(r.out.contains("s3cret"), r.out)
        XCTAssertEqual(r.out.components(separatedBy: "password: ").count, 2, "one password shown: \(r.out)")
        XCTAssertTrue(r.err.contains("1 item needs a user check") && r.err.contains("(-25308)"), r.err)
        XCTAssertFalse(prompted)
        // -d asks once and shows both.
        try answer("sesame")
        r = try cli(["dump-keychain", "-d"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("password: \"s3cret\"") && r.out.contains("password: \"plain\""), r.out)
    }

    func testGeneratedKeyNeedsTheCheckToExport() throws {
        var r = try cli([
            "generate-key", "--type", "ec", "--tag", "t.signing", "--access-control",
            "user-presence,private-key-usage",
        ])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(
            r.out.contains("\"accc\"<access-control>=\"protection=ak user-presence,private-key-usage\""), r.out)
        r = try cli(["export", "--type", "keys", "--tag", "t.signing", "--class", "private", "--no-ui"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("(-25308)") && r.err.contains("--no-ui forbids asking"), r.err)
        XCTAssertFalse(r.out.contains("PRIVATE KEY"), r.out)
        XCTAssertFalse(prompted)
        try answer()  // cancelled
        r = try cli(["export", "--type", "keys", "--tag", "t.signing", "--class", "private"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("(-128)"), r.err)
        try answer("sesame")
        r = try cli(["export", "--type", "keys", "--tag", "t.signing", "--class", "private"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("BEGIN PRIVATE KEY"), r.out)
    }

    func testImportedKeyGetsTheAccessControl() throws {
        let pem = work + "/imported.pem"
        let made = try TestProcess.run(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", pem])
        XCTAssertEqual(made.status, 0, made.err)
        var r = try cli(["import", pem, "--tag", "t.imported", "--access-control", "device-passcode"])
        XCTAssertEqual(r.status, 0, r.err)
        r = try cli(["find-key", "--tag", "t.imported", "--class", "private"])
        XCTAssertTrue(r.out.contains("\"accc\"<access-control>=\"protection=ak device-passcode\""), r.out)
        r = try cli(["export", "--type", "keys", "--tag", "t.imported", "--class", "private", "--no-ui"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("(-25308)"), r.err)
    }
}
