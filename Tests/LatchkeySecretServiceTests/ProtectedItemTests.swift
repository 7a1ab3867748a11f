import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Items whose kSecAttrAccessControl needs the user present, seen through the Secret Service
/// (docs/SECRET-SERVICE.md §4c): locked until an `Unlock` of the item passes the agent's user check (real
/// Linux-PAM, a private stack that LATCHKEY_PAM_DIR names, honoured by a root agent only), then unlocked for
/// that bus client alone until the reuse window ends (shortened to 3 s here).
final class ProtectedItemTests: SecretServiceTestCase {
    private var shown = ""
    private var answers = ""
    private var client: SecretServiceClient!

    override func setUpWithError() throws {
        try super.setUpWithError()
        try XCTSkipUnless(geteuid() == 0, "LATCHKEY_PAM_DIR is honoured by an agent running as root only")
        let pamDirectory = base + "/pam.d"
        shown = base + "/shown"
        answers = base + "/answers"
        try FileManager.default.createDirectory(atPath: pamDirectory, withIntermediateDirectories: true)
        let checker = base + "/check-password"
        try write("#!/bin/sh\npw=$(tr -d '\\000')\n[ \"$pw\" = sesame ]\n", to: checker, mode: 0o755)
        try write("auth required pam_exec.so expose_authtok quiet \(checker)\n", to: pamDirectory + "/latchkey")
        // The stand-in pinentry: records SETDESC, answers GETPIN from the answers file (none: cancel;
        // "!wait": never answers).
        let prompter = base + "/prompter"
        try write(
            """
            #!/bin/sh
            n=0
            echo "OK ready"
            while IFS= read -r line; do
              case "$line" in
                SETDESC*) echo "$line" >> "\(shown)"; echo OK ;;
                GETPIN*)
                  n=$((n + 1))
                  answer=$(sed -n "${n}p" "\(answers)" 2>/dev/null)
                  if [ -z "$answer" ]; then echo "ERR 83886179 Operation cancelled"
                  elif [ "$answer" = "!wait" ]; then exec sleep 600
                  else printf 'D %s\\nOK\\n' "$answer"; fi ;;
                BYE*) echo OK; exit 0 ;;
                *) echo OK ;;
              esac
            done
            """, to: prompter, mode: 0o755)
        setenv("LATCHKEY_PROMPTER", prompter, 1)
        setenv("LATCHKEY_PAM_DIR", pamDirectory, 1)
        setenv("LATCHKEY_PRESENCE_TIMEOUT", "8", 1)
        // Short windows, except where a lock must be what ends the unlock.
        setenv("LATCHKEY_SECRET_SERVICE_REUSE", name.contains("ALockEnds") ? "60" : "3", 1)
        try createKeychain()
        client = try SecretServiceClient(bus.address)
    }

    override func tearDown() {
        client = nil
        super.tearDown()
        for name in ["LATCHKEY_PAM_DIR", "LATCHKEY_PRESENCE_TIMEOUT", "LATCHKEY_SECRET_SERVICE_REUSE"] {
            unsetenv(name)
        }
    }

    private func write(_ text: String, to path: String, mode: Int = 0o644) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, mode_t(mode))
    }

    private func answer(_ lines: String...) throws {
        try write(lines.joined(separator: "\n") + "\n", to: answers)
    }

    /// Adds a generic password through SecItem, protected with .userPresence when `protected`.
    private func add(_ account: String, protected: Bool, accessible: CFString = kSecAttrAccessibleWhenUnlocked) {
        var attributes: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: account,
            kSecAttrLabel: "Label of \(account)", kSecValueData: Data("secret-\(account)".utf8),
        ]
        if protected {
            attributes[kSecAttrAccessControl] = SecAccessControlCreateWithFlags(
                nil, accessible, .userPresence, nil)!
        }
        XCTAssertEqual(SecItemAdd(attributes as CFDictionary, nil), errSecSuccess)
    }

    /// The paths SearchItems gives for `account`: (unlocked, locked).
    private func search(_ account: String, as searcher: SecretServiceClient) throws -> ([String], [String]) {
        let reply = try searcher.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("account", account)])])
        return (reply[0].objectPaths ?? [], reply[1].objectPaths ?? [])
    }

    private func secret(_ path: String, as reader: SecretServiceClient, session: String) throws -> String? {
        let reply = try reader.call(path, SSPath.itemInterface, "GetSecret", [.objectPath(session)])
        guard let fields = reply.first?.fields, fields.count == 4, let bytes = fields[2].bytes else {
            return nil
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func locked(_ path: String, as reader: SecretServiceClient) throws -> Bool? {
        try reader.property(path, SSPath.itemInterface, "Locked")?.bool
    }

    /// Unlock(path): the prompt's path (nothing is unlocked without one).
    private func unlockPrompt(_ path: String) throws -> String {
        let reply = try client.call(
            SSPath.service, SSPath.serviceInterface, "Unlock", [.array(elementType: "o", [.objectPath(path)])])
        XCTAssertEqual(reply[0].objectPaths, [], "nothing is unlocked without the check")
        return try XCTUnwrap(reply[1].string)
    }

    private func completed(_ prompt: String) -> (dismissed: Bool?, result: [String]?)? {
        guard let signal = client.signals.wait(timeout: 30, { $0.path == prompt && $0.member == "Completed" }) else {
            return nil
        }
        return (signal.arguments.first?.bool, signal.arguments.last?.variantValue?.objectPaths)
    }

    func testAProtectedItemIsLockedUntilItsUserCheckPassesForThatClientAlone() throws {
        add("guarded", protected: true)
        add("open", protected: false)
        try client.watchSignals()
        let session = try client.openPlainSession()
        let (unlockedGuarded, lockedGuarded) = try search("guarded", as: client)
        XCTAssertEqual(unlockedGuarded, [])
        let path = try XCTUnwrap(lockedGuarded.first, "the protected item is listed as locked")
        let open = try XCTUnwrap(try search("open", as: client).0.first)
        XCTAssertEqual(try locked(path, as: client), true)
        XCTAssertEqual(try locked(open, as: client), false)
        // Its attributes need no check: its label reads.
        XCTAssertEqual(try client.property(path, SSPath.itemInterface, "Label")?.string, "Label of guarded")
        XCTAssertEqual(
            client.errorName(path, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.IsLocked")
        let secrets = try client.call(
            SSPath.service, SSPath.serviceInterface, "GetSecrets",
            [.array(elementType: "o", [.objectPath(path), .objectPath(open)]), .objectPath(session)])
        XCTAssertEqual(secrets.first?.stringKeyedEntries.map { Array($0.keys) }, [open], "left out")

        // Unlock: its prompt runs the user check, naming the item; the right password unlocks it.
        try answer("sesame")
        let prompt = try unlockPrompt(path)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        let done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.dismissed, false)
        XCTAssertEqual(done.result, [path])
        let text = try String(contentsOfFile: shown, encoding: .utf8)
        XCTAssertTrue(text.contains("wants to read the password \u{201C}Label of guarded\u{201D}"), text)
        XCTAssertEqual(try secret(path, as: client, session: session), "secret-guarded")
        XCTAssertEqual(try locked(path, as: client), false)
        XCTAssertNotNil(
            client.signals.wait {
                $0.path == path && $0.member == "PropertiesChanged"
                    && $0.arguments.count > 1 && "\($0.arguments[1])".contains("Locked")
            }, "its Locked change is signalled to it")

        // Another client still sees it locked, and gets no signal about this client's state.
        let other = try SecretServiceClient(bus.address)
        try other.watchSignals()
        let otherSession = try other.openPlainSession()
        XCTAssertEqual(try locked(path, as: other), true)
        XCTAssertEqual(
            other.errorName(path, SSPath.itemInterface, "GetSecret", [.objectPath(otherSession)]),
            "org.freedesktop.Secret.Error.IsLocked")

        // The reuse window ends: locked again, with the signal.
        XCTAssertNotNil(
            client.signals.wait(timeout: 30) {
                $0.path == path && $0.member == "PropertiesChanged" && "\($0.arguments)".contains("true")
            }, "locked again when the window ends")
        XCTAssertEqual(try locked(path, as: client), true)
        XCTAssertEqual(
            client.errorName(path, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.IsLocked")
        XCTAssertFalse(
            other.signals.all.contains { $0.path == path && $0.member == "PropertiesChanged" },
            "the other client was told nothing about the first one's unlock")
    }

    /// Any lock ends an unlock, a screen lock's too, although it leaves an AfterFirstUnlock item's key
    /// held: the item is locked again for its client, who is told so.
    func testALockEndsTheUnlockOfAnItemWhoseKeyItLeaves() throws {
        add("kept", protected: true, accessible: kSecAttrAccessibleAfterFirstUnlock)
        try client.watchSignals()
        let session = try client.openPlainSession()
        let path = try XCTUnwrap(try search("kept", as: client).1.first)
        try answer("sesame")
        let prompt = try unlockPrompt(path)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        XCTAssertEqual(try XCTUnwrap(completed(prompt)).result, [path])
        XCTAssertEqual(try secret(path, as: client, session: session), "secret-kept")
        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertNotNil(
            client.signals.wait(timeout: 30) {
                $0.path == path && $0.member == "PropertiesChanged" && "\($0.arguments)".contains("true")
            }, "told it is locked again")
        XCTAssertEqual(try locked(path, as: client), true)
        XCTAssertEqual(
            client.errorName(path, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.IsLocked")
    }

    func testAWrongPasswordAndADismissUnlockNothing() throws {
        add("guarded", protected: true)
        try client.watchSignals()
        let path = try XCTUnwrap(try search("guarded", as: client).1.first)
        try answer("wrong")
        var prompt = try unlockPrompt(path)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        var done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.dismissed, false)
        XCTAssertEqual(done.result, [])
        XCTAssertEqual(try locked(path, as: client), true)

        // Dismissed while the prompter waits: Completed(dismissed) and the prompter is stopped.
        try answer("!wait")
        try? FileManager.default.removeItem(atPath: shown)
        prompt = try unlockPrompt(path)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        let end = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: shown) && Date() < end { usleep(20_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: shown), "the prompt was shown")
        try client.call(prompt, SSPath.promptInterface, "Dismiss")
        done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.dismissed, true)
        XCTAssertEqual(try locked(path, as: client), true)
        // The next check is not held up by the dismissed one.
        try answer("sesame")
        prompt = try unlockPrompt(path)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.result, [path])
    }
}

extension BusValue {
    /// The paths of an `ao`.
    fileprivate var objectPaths: [String]? { elements?.compactMap(\.string) }
}
