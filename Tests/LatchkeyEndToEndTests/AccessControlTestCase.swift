import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// What the access-control tests share: the real agent, real Linux-PAM (service files in a private
/// directory, `LATCHKEY_PAM_DIR`, honoured because the tests' agent runs as root) and a stand-in pinentry
/// that answers from a file, cancels, or never answers, and records what it was shown.
class AccessControlTestCase: AgentTestCase {
    var pamDirectory = ""
    var answers = ""
    var shown = ""
    /// The directory the test's files live in.
    var work = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        try XCTSkipUnless(geteuid() == 0, "LATCHKEY_PAM_DIR is honoured by an agent running as root only")
        let base = (runtimeDirectory as NSString).deletingLastPathComponent
        work = base
        pamDirectory = base + "/pam.d"
        answers = base + "/answers"
        shown = base + "/shown"
        try FileManager.default.createDirectory(atPath: pamDirectory, withIntermediateDirectories: true)
        // The password check: pam_exec hands the conversation's answer to this script on stdin.
        let checker = base + "/check-password"
        try write("#!/bin/sh\npw=$(tr -d '\\000')\n[ \"$pw\" = sesame ]\n", to: checker, mode: 0o755)
        try write("auth required pam_exec.so expose_authtok quiet \(checker)\n", to: pamDirectory + "/latchkey")
        // The stand-in pinentry: records what it is shown, answers from the answers file.
        let prompter = base + "/prompter"
        try StandInPinentry.write(to: prompter, shown: shown, answers: answers)
        setenv("LATCHKEY_PAM_DIR", pamDirectory, 1)
        setenv("LATCHKEY_PROMPTER", prompter, 1)
        setenv("LATCHKEY_PRESENCE_TIMEOUT", "8", 1)
        try createKeychain()
    }

    override func tearDown() {
        super.tearDown()
        for name in ["LATCHKEY_PAM_DIR", "LATCHKEY_PROMPTER", "LATCHKEY_PRESENCE_TIMEOUT"] { unsetenv(name) }
    }

    func write(_ text: String, to path: String, mode: Int = 0o644) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, mode_t(mode))
    }

    func answer(_ lines: String...) throws {
        try write(lines.joined(separator: "\n") + "\n", to: answers)
    }

    func presence(_ flags: SecAccessControlCreateFlags = .userPresence) -> SecAccessControl {
        SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, nil)!
    }

    func addProtected(_ account: String = "guarded", secret: String = "s3cret") {
        let status = SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: account,
                kSecAttrAccessControl: presence(), kSecValueData: Data(secret.utf8),
            ] as CFDictionary, nil)
        XCTAssertEqual(status, errSecSuccess)
    }
}
