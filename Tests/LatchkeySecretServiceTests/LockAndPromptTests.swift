import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Lock state shared with the SecItem side, the Unlock prompt through the prompter, dismissal and
/// wrong passwords (docs/SECRET-SERVICE.md §4–5).
final class LockAndPromptTests: SecretServiceTestCase {
    private var client: SecretServiceClient!
    private var item = ""

    override func tearDown() {
        client = nil
        super.tearDown()
    }

    /// A keychain with one item made through secret-tool; returns with a client watching signals.
    private func prepare() throws {
        try createKeychain()
        let stored = try secretTool(["store", "--label", "L", "service", "s", "account", "a"], input: "the secret")
        XCTAssertEqual(stored.status, 0, stored.err)
        client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s")])])
        item = try XCTUnwrap(found.first?.elements?.first?.string)
    }

    private func locked(_ path: String, _ interface: String) throws -> Bool? {
        try client.property(path, interface, "Locked")?.bool
    }

    private func lockWithCLI() throws {
        let result = try cli(["lock"])
        XCTAssertEqual(result.status, 0, result.err)
    }

    private func unlockPrompt() throws -> String {
        let reply = try client.call(
            SSPath.service, SSPath.serviceInterface, "Unlock",
            [.array(elementType: "o", [.objectPath(SSPath.login)])])
        XCTAssertEqual(reply.first?.elements, [], "nothing was unlocked without a prompt")
        let prompt = try XCTUnwrap(reply.last?.string)
        XCTAssertTrue(prompt.hasPrefix("/org/freedesktop/secrets/prompt/"), prompt)
        return prompt
    }

    private func completed(_ prompt: String) -> SignalLog.Signal? {
        client.signals.wait(timeout: 20) { $0.path == prompt && $0.member == "Completed" }
    }

    /// Waits until the prompter the agent started waits for a user: on `!wait` the file prompter
    /// becomes `sleep` (exec), so a `sleep` child of the agent. Returns whether it got there.
    private func prompterWaits() throws -> Bool {
        let agent = try XCTUnwrap(agentPID())
        /// The command name and parent of `pid`, from /proc/pid/stat ("pid (comm) state ppid ...").
        func stat(_ pid: String) -> (command: String, parent: pid_t)? {
            guard let text = TestProcess.readProcFile("/proc/\(pid)/stat"), let open = text.firstIndex(of: "("),
                let close = text.lastIndex(of: ")")
            else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 1, let parent = pid_t(fields[1]) else { return nil }
            return (String(text[text.index(after: open)..<close]), parent)
        }
        return Poll.until(within: 10) {
            let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter { Int($0) != nil }
            return pids.contains { pid in stat(pid).map { $0.command == "sleep" && $0.parent == agent } ?? false }
        }
    }

    func testLatchkeyLockLocksCollectionAndItemsAndSecretsFailWithIsLocked() throws {
        try prepare()
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), false)
        XCTAssertEqual(try locked(item, SSPath.itemInterface), false)

        try lockWithCLI()
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), true)
        XCTAssertEqual(try locked(SSPath.defaultAlias, SSPath.collectionInterface), true)
        XCTAssertEqual(try locked(item, SSPath.itemInterface), true)
        // The change is announced, whatever locked the keychain.
        XCTAssertNotNil(
            client.signals.wait {
                $0.path == SSPath.login && $0.member == "PropertiesChanged" && ($0.arguments.count == 3)
                    && ($0.arguments[1].stringKeyedEntries?["Locked"]?.variantValue == .boolean(true))
            }, "PropertiesChanged(Locked) on the collection")

        let session = try client.openPlainSession()
        XCTAssertEqual(
            client.errorName(item, SSPath.itemInterface, "GetSecret", [.objectPath(session)]),
            "org.freedesktop.Secret.Error.IsLocked")
        // GetSecrets leaves a locked item out, as gnome-keyring does (testGetSecretsLeavesOutLockedItems).
        XCTAssertEqual(
            try client.call(
                SSPath.service, SSPath.serviceInterface, "GetSecrets",
                [.array(elementType: "o", [.objectPath(item)]), .objectPath(session)]),
            [.array(elementType: "{o(oayays)}", [])])
        XCTAssertEqual(
            client.errorName(
                SSPath.login, SSPath.collectionInterface, "CreateItem",
                [
                    .dictionary(keyType: "s", valueType: "v", []), SecretServiceClient.plainSecret(session, "x"),
                    .boolean(false),
                ]), "org.freedesktop.Secret.Error.IsLocked")
        // A locked item's label and attributes are sealed: they read as empty.
        XCTAssertEqual(try client.property(item, SSPath.itemInterface, "Label"), .string(""))
        // SearchItems still finds it, as locked.
        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s"), ("account", "a")])])
        XCTAssertEqual(found.first?.elements, [])
        XCTAssertEqual(found.last?.elements, [.objectPath(item)])
        // The SecItem side agrees.
        var data: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "s",
                    kSecReturnData: true,
                ] as NSDictionary, &data), errSecInteractionNotAllowed)

        // Service.Lock is `latchkey lock` too.
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), false)
        let lockReply = try client.call(
            SSPath.service, SSPath.serviceInterface, "Lock",
            [.array(elementType: "o", [.objectPath(SSPath.login)])])
        XCTAssertEqual(lockReply.first?.elements, [.objectPath(SSPath.login)])
        XCTAssertEqual(lockReply.last, .objectPath("/"))
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "s",
                    kSecReturnData: true,
                ] as NSDictionary, &data), errSecInteractionNotAllowed)
    }

    func testGetSecretsLeavesOutLockedItemsAndReturnsTheOthers() throws {
        try prepare()
        // An AfterFirstUnlock item made through SecItem stays readable after a screen lock.
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "s", kSecAttrAccount: "ck",
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
                    kSecValueData: Data("still readable".utf8),
                ] as NSDictionary, nil), errSecSuccess)
        try lockWithCLI()
        let found = try client.call(
            SSPath.service, SSPath.serviceInterface, "SearchItems",
            [SecretServiceClient.attributes([("service", "s")])])
        let readable = try XCTUnwrap(found.first?.elements?.first?.string)
        XCTAssertEqual(found.last?.elements, [.objectPath(item)])

        let session = try client.openPlainSession()
        let paths = [item, readable, SSPath.login + "/00112233445566778899aabbccddeeff", SSPath.login, "/not/ours"]
        let reply = try client.call(
            SSPath.service, SSPath.serviceInterface, "GetSecrets",
            [.array(elementType: "o", paths.map { .objectPath($0) }), .objectPath(session)])
        let entries = try XCTUnwrap(reply.first?.elements)
        XCTAssertEqual(entries.count, 1, "only the unlocked item: locked ones and paths that name no item are left out")
        guard case .dictEntry(let path, let secret)? = entries.first else { return XCTFail("not a dictionary entry") }
        XCTAssertEqual(path, .objectPath(readable))
        XCTAssertEqual(SecretServiceClient.bytes(secret.fields?[2]), Array("still readable".utf8))
        // Errors that are not about one item still fail the call.
        XCTAssertEqual(
            client.errorName(
                SSPath.service, SSPath.serviceInterface, "GetSecrets",
                [
                    .array(elementType: "o", [.objectPath(readable)]),
                    .objectPath("/org/freedesktop/secrets/session/999"),
                ]), "org.freedesktop.Secret.Error.NoSession")
        // libsecret (which asks GetSecrets for what it found unlocked) reads the readable item.
        let result = try secretTool(["search", "--all", "service", "s"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertTrue(result.out.contains("secret = still readable"), result.out)
        XCTAssertFalse(result.out.contains("the secret"), result.out)
    }

    func testUnlockPromptAsksThePrompterAndCompletes() throws {
        try prepare()
        try lockWithCLI()
        // The first answer is wrong: the prompter is asked again, and the second opens the keychain.
        try setPasswordFile(["not the password", Self.password])
        let prompt = try unlockPrompt()
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        let done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.arguments.first, .boolean(false), "not dismissed")
        XCTAssertEqual(done.arguments.last?.variantValue?.elements, [.objectPath(SSPath.login)])
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), false)
        XCTAssertEqual(try secretTool(["lookup", "service", "s", "account", "a"]).out, "the secret")
        // The prompt is gone once completed.
        XCTAssertEqual(
            client.errorName(prompt, SSPath.promptInterface, "Prompt", [.string("")]),
            "org.freedesktop.Secret.Error.NoSuchObject")
        // An unlocked keychain needs no prompt.
        let reply = try client.call(
            SSPath.service, SSPath.serviceInterface, "Unlock",
            [.array(elementType: "o", [.objectPath(SSPath.login), .objectPath(item)])])
        XCTAssertEqual(reply.first?.elements, [.objectPath(SSPath.login), .objectPath(item)])
        XCTAssertEqual(reply.last, .objectPath("/"))
    }

    func testSecretToolUnlocksThroughThePrompter() throws {
        try prepare()
        try lockWithCLI()
        let result = try secretTool(["lookup", "service", "s", "account", "a"])
        XCTAssertEqual(result.status, 0, result.err)
        XCTAssertEqual(result.out, "the secret")
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), false)
    }

    func testThreeWrongPasswordsUnlockNothing() throws {
        try prepare()
        try lockWithCLI()
        try setPasswordFile(["wrong 1", "wrong 2", "wrong 3", Self.password])
        let prompt = try unlockPrompt()
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        let done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.arguments.first, .boolean(false))
        XCTAssertEqual(done.arguments.last?.variantValue?.elements, [], "nothing unlocked")
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), true)
        XCTAssertTrue(agentLog().contains("3 wrong passwords"), agentLog())
    }

    func testDismissBeforeAndDuringThePrompt() throws {
        try prepare()
        try lockWithCLI()
        // Dismissed before it was shown.
        var prompt = try unlockPrompt()
        try client.call(prompt, SSPath.promptInterface, "Dismiss")
        var done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.arguments.first, .boolean(true))
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), true)

        // Dismissed while the prompter waits for the user: the prompter is stopped.
        try setPasswordFile(["!wait"])
        prompt = try unlockPrompt()
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        XCTAssertTrue(try prompterWaits(), "the prompter was started and asked for the password")
        try client.call(prompt, SSPath.promptInterface, "Dismiss")
        done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.arguments.first, .boolean(true))
        XCTAssertEqual(done.arguments.last?.variantValue?.elements, [])
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), true)

        // The user cancelling in the prompter is a dismissal too.
        try setPasswordFile([])
        prompt = try unlockPrompt()
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.arguments.first, .boolean(true))

        // Another connection cannot drive someone else's prompt.
        prompt = try unlockPrompt()
        let other = try SecretServiceClient(bus.address)
        XCTAssertEqual(
            other.errorName(prompt, SSPath.promptInterface, "Dismiss"), "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(try locked(SSPath.login, SSPath.collectionInterface), true)
    }

    func testPromptAfterUnlockElsewhereCompletesWithoutAsking() throws {
        try prepare()
        try lockWithCLI()
        try setPasswordFile([])  // the prompter would cancel if it were asked
        let prompt = try unlockPrompt()
        XCTAssertEqual(try cli(["unlock", "--password-stdin"], input: "\(Self.password)\n").status, 0)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        let done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.arguments.first, .boolean(false))
        XCTAssertEqual(done.arguments.last?.variantValue?.elements, [.objectPath(SSPath.login)])
    }

    func testCreateCollectionWhileLockedGoesThroughAPrompt() throws {
        try prepare()
        try lockWithCLI()
        let reply = try client.call(
            SSPath.service, SSPath.serviceInterface, "CreateCollection",
            [
                .dictionary(
                    keyType: "s", valueType: "v",
                    [(.string("org.freedesktop.Secret.Collection.Label"), .variant(.string("Later")))]),
                .string(""),
            ])
        XCTAssertEqual(reply.first, .objectPath("/"))
        let prompt = try XCTUnwrap(reply.last?.string)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        let done = try XCTUnwrap(completed(prompt))
        XCTAssertEqual(done.arguments.first, .boolean(false))
        XCTAssertEqual(done.arguments.last?.variantValue, .objectPath("/org/freedesktop/secrets/collection/Later"))
        XCTAssertEqual(
            try client.property("/org/freedesktop/secrets/collection/Later", SSPath.collectionInterface, "Label"),
            .string("Later"))
    }
}
