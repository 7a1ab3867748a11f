import Foundation
import LatchkeyTestSupport
import XCTest

/// `latchkey apps` on real application files: root-owned directories under /run (the ownership rule
/// refuses anything under /tmp, which everyone may write), so these tests need root and skip otherwise.
/// No agent is involved: the command reads the files itself.
final class CLIAppsTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        guard geteuid() == 0 else { throw XCTSkip("root-owned application files need root") }
        var template = Array("/run/latchkey-cli-apps.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp under /run failed: errno \(errno)") }
        root = String(cString: made)
        XCTAssertEqual(chmod(root, 0o755), 0)
        for directory in ["pkg", "etc", "bin"] { XCTAssertEqual(mkdir(root + "/" + directory, 0o755), 0) }
    }

    override func tearDown() {
        if !root.isEmpty { try? FileManager.default.removeItem(atPath: root) }
    }

    private func write(_ relative: String, _ text: String, mode: mode_t = 0o644) throws {
        let path = root + "/" + relative
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(chmod(path, mode), 0)
    }

    private func apps(_ arguments: [String] = []) throws -> TestProcess.Output {
        try TestProcess.run(
            TestProcess.binDirectory + "/latchkey",
            ["apps", "--directory", root + "/pkg", "--directory", root + "/etc"] + arguments)
    }

    func testListsTheApplicationsInForceAndTheIgnoredFilesWithTheirReasons() throws {
        // Not scripts (#!), which the agent refuses: a process runs their interpreter.
        try write("bin/mail", "\u{7F}ELF", mode: 0o755)
        try write("bin/loose", "\u{7F}ELF", mode: 0o777)
        let mail = root + "/bin/mail"
        try write("pkg/mail.conf", "[Application]\nId=org.example.Mail\nExecutable=\(mail)\nAccessGroups=wide\n")
        try write("etc/mail.conf", "[Application]\nId=org.example.Mail\nExecutable=\(mail)\nAccessGroups=mail;a\\;b\n")
        try write("etc/evo.conf", "[Application]\nId=evo\nFlatpakId=org.gnome.Evolution\nAccessGroups=mail\n")
        try write("etc/loose.conf", "[Application]\nId=loose\nExecutable=\(root)/bin/loose\nAccessGroups=x\n")
        try write("etc/open.conf", "[Application]\nId=open\nSnapName=open\nAccessGroups=x\n", mode: 0o666)

        let result = try apps()
        XCTAssertEqual(result.status, 0, result.err)
        let lines = result.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines[0], "directory: \(root)/pkg (read)")
        XCTAssertEqual(lines[1], "directory: \(root)/etc (read)")
        let header = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("APPLICATION") }, result.out)
        XCTAssertEqual(
            lines[header].split(separator: " ", omittingEmptySubsequences: true),
            ["APPLICATION", "IDENTIFIED", "BY", "ACCESS", "GROUPS", "FILE"])
        XCTAssertEqual(
            lines[header + 1].split(separator: " ", omittingEmptySubsequences: true).map(String.init),
            ["evo", "flatpak", "org.gnome.Evolution", "mail", "\(root)/etc/evo.conf"])
        XCTAssertEqual(
            lines[header + 2].split(separator: " ", omittingEmptySubsequences: true).map(String.init),
            ["org.example.Mail", "executable", mail, "mail;a\\;b", "\(root)/etc/mail.conf"],
            "groups as AccessGroups= writes them: one group 'a;b' is escaped")
        XCTAssertEqual(lines[header + 3], "")
        XCTAssertEqual(
            Array(lines[(header + 4)...].prefix(3)),
            [
                "ignored: \(root)/etc/loose.conf: Executable= does not count: \(root)/bin/loose is writable by "
                    + "others than root (mode 777)",
                "ignored: \(root)/etc/open.conf: \(root)/etc/open.conf is writable by others than root (mode 666)",
                "ignored: \(root)/pkg/mail.conf: overridden by \(root)/etc/mail.conf",
            ])
        XCTAssertTrue(result.out.hasSuffix("any other program 'default'\n"), result.out)
    }

    func testAnUntrustedDirectoryAndAnEmptyOneAreSaidSo() throws {
        XCTAssertEqual(chmod(root + "/etc", 0o775), 0)
        let result = try apps(["--directory", root + "/none"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertTrue(
            result.out.hasPrefix(
                """
                directory: \(root)/pkg (read)
                directory: \(root)/etc (ignored: \(root)/etc is writable by others than root (mode 775))
                directory: \(root)/none (absent)

                no application files in force

                """), result.out)
    }

    func testANameWithAnEscapeSequenceCannotReachTheTerminal() throws {
        try write("etc/\u{1B}[2J.conf", "")
        let result = try apps()
        XCTAssertFalse(result.out.contains("\u{1B}"), result.out)
        XCTAssertTrue(result.out.contains("ignored: \(root)/etc/\\u{1b}[2J.conf: empty"), result.out)
    }
}
