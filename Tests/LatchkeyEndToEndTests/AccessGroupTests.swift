import Foundation
import LatchkeyTestSupport
import XCTest

/// Applications own their items (issue 12 §4): two copies of `latchkey-probe`, installed root-owned in a
/// root-owned directory under /run, each with an application file granting it its own group and a shared
/// one, against the real agent (pointed at those files with LATCHKEY_APPLICATIONS_DIRS, which it honours
/// only for root-owned directories). Root only: the files must be root's to count.
final class AccessGroupTests: AgentTestCase {
    private var root = ""
    private var mail: String { root + "/bin/mail" }
    private var chat: String { root + "/bin/chat" }

    override func setUpWithError() throws {
        guard geteuid() == 0 else { throw XCTSkip("application files must be root's") }
        try super.setUpWithError()
        var template = Array("/run/latchkey-groups.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp under /run failed: errno \(errno)") }
        root = String(cString: made)
        XCTAssertEqual(chmod(root, 0o755), 0)
        for directory in ["apps", "bin"] { XCTAssertEqual(mkdir(root + "/" + directory, 0o755), 0) }
        let probe = Self.binDirectory + "/latchkey-probe"
        for (name, id, group) in [("mail", "org.example.Mail", "mail"), ("chat", "org.example.Chat", "chat")] {
            try FileManager.default.copyItem(atPath: probe, toPath: root + "/bin/" + name)
            XCTAssertEqual(chmod(root + "/bin/" + name, 0o755), 0)
            try Data("[Application]\nId=\(id)\nExecutable=\(root)/bin/\(name)\nAccessGroups=\(group);shared\n".utf8)
                .write(to: URL(fileURLWithPath: root + "/apps/\(name).conf"))
        }
        setenv("LATCHKEY_APPLICATIONS_DIRS", root + "/apps", 1)
        try createKeychain()
    }

    override func tearDown() {
        super.tearDown()
        unsetenv("LATCHKEY_APPLICATIONS_DIRS")
        if !root.isEmpty { try? FileManager.default.removeItem(atPath: root) }
    }

    /// Runs one probe call as `program`; its one output line.
    private func run(_ program: String, _ arguments: String..., environment: [String: String] = [:]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testEachApplicationReachesOnlyItsOwnGroups() throws {
        XCTAssertEqual(try run(mail, "add", "imap", "me", "mail's"), "0")
        XCTAssertEqual(try run(mail, "find", "imap", "me"), "0 mail's", "its own item")
        XCTAssertEqual(try run(chat, "find", "imap", "me"), "-25300", "another application's item is not there")
        XCTAssertEqual(try run(chat, "update", "imap", "me", "overwritten"), "-25300")
        XCTAssertEqual(try run(chat, "delete", "imap", "me"), "-25300")
        XCTAssertEqual(try run(chat, "list"), "-25300")
        // The same primary key in chat's group is chat's own item.
        XCTAssertEqual(try run(chat, "add", "imap", "me", "chat's"), "0")
        XCTAssertEqual(try run(mail, "find", "imap", "me"), "0 mail's")
        XCTAssertEqual(try run(mail, "list"), "0 mail/imap/me")
        // Naming another application's group is errSecMissingEntitlement; a shared group works for both.
        XCTAssertEqual(try run(mail, "add", "x", "y", "z", "chat"), "-34018")
        XCTAssertEqual(try run(mail, "find", "imap", "me", "chat"), "-34018")
        XCTAssertEqual(try run(mail, "add", "team", "me", "both see it", "shared"), "0")
        XCTAssertEqual(try run(chat, "find", "team", "me", "shared"), "0 both see it")
        // An unlisted program (the probe where it was built, with no application file) has `default`.
        let unlisted = Self.binDirectory + "/latchkey-probe"
        XCTAssertEqual(try run(unlisted, "find", "imap", "me"), "-25300")
        XCTAssertEqual(try run(unlisted, "add", "imap", "me", "everyone's"), "0")
        XCTAssertEqual(try run(unlisted, "list"), "0 default/imap/me")
        XCTAssertEqual(try run(mail, "find", "imap", "me"), "0 mail's")
    }

    func testPersistentReferencesAndKeysOfAnotherApplicationCannotBeUsed() throws {
        XCTAssertEqual(try run(mail, "add", "imap", "me", "mail's"), "0")
        let ref = try XCTUnwrap(try run(mail, "ref", "imap", "me").split(separator: " ").last.map(String.init))
        XCTAssertEqual(try run(chat, "find-ref", ref), "-25300")
        XCTAssertEqual(try run(chat, "update-ref", ref, "overwritten"), "-25300")
        XCTAssertEqual(try run(chat, "delete-ref", ref), "-25300")
        XCTAssertEqual(try run(mail, "find-ref", ref), "0 mail's", "still there, unchanged")

        let generated = try run(mail, "generate-key", "signing")
        let key = try XCTUnwrap(generated.split(separator: " ").last.map(String.init), generated)
        XCTAssertTrue(generated.hasPrefix("0 "), generated)
        XCTAssertEqual(try run(mail, "sign", key), "0")
        XCTAssertEqual(try run(chat, "sign", key), "-25300", "chat cannot sign with mail's key")
    }

    /// A copy of an entitled program elsewhere, or the program started with a loader variable, is an
    /// unlisted program: it reaches `default` only.
    func testImpostorsGetNoApplicationIdentity() throws {
        XCTAssertEqual(try run(mail, "add", "imap", "me", "mail's"), "0")
        let copy = runtimeDirectory + "/mail"
        try FileManager.default.copyItem(atPath: mail, toPath: copy)
        XCTAssertEqual(chmod(copy, 0o755), 0)
        XCTAssertEqual(try run(copy, "find", "imap", "me"), "-25300", "a copy in a user-writable place")
        let library = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"].first {
            FileManager.default.fileExists(atPath: $0)
        }
        if let library {
            XCTAssertEqual(
                try run(mail, "find", "imap", "me", environment: ["LD_PRELOAD": library]), "-25300",
                "started under LD_PRELOAD")
        }
        // Started traced: the tracer could make it do anything.
        let traced = """
            import ctypes, os, sys
            libc = ctypes.CDLL(None, use_errno=True)
            child = os.fork()
            if child == 0:
                libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME: stopped at the exec, traced from then on
                os.execv(sys.argv[1], sys.argv[1:])
            while True:
                _, status = os.waitpid(child, 0)
                if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                    break
                signal = os.WSTOPSIG(status)
                libc.ptrace(7, child, None, 0 if signal == 5 else signal)  # PTRACE_CONT
            """
        XCTAssertEqual(
            try run("/usr/bin/python3", "-I", "-c", traced, mail, "find", "imap", "me"), "-25300", "run traced")
        XCTAssertEqual(try run(mail, "find", "imap", "me"), "0 mail's")
    }

    /// The administrator's tool reaches another group only with the keychain password, in that invocation.
    func testTheCommandReachesAnotherGroupOnlyWithTheKeychainPassword() throws {
        XCTAssertEqual(try run(mail, "add", "imap", "me", "mail's"), "0")
        let find = ["find-generic-password", "-s", "imap", "-a", "me", "-w"]
        XCTAssertNotEqual(try cli(find).status, 0, "its own group is default")
        let wrong = try cli(find + ["--access-group", "mail", "--keychain-password-fd", "0"], input: "nope\n")
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.err.contains("-25293"), wrong.err)
        let right = try cli(find + ["--access-group", "mail", "--keychain-password-fd", "0"], input: "pw\n")
        XCTAssertEqual(right.status, 0, right.err)
        XCTAssertEqual(right.out, "mail's\n")
        let dump = try cli(["dump-keychain", "--all-groups", "--keychain-password-fd", "0"], input: "pw\n")
        XCTAssertEqual(dump.status, 0, dump.err)
        XCTAssertTrue(dump.out.contains("mail"), "the dump says which group: \(dump.out)")
        XCTAssertNotEqual(try cli(find).status, 0, "the next command is back to default")
    }
}
