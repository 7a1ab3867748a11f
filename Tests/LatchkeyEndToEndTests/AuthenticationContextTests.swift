import Foundation
import LatchkeySecrets
import LatchkeyTransport
import XCTest

@testable import Latchkey

/// `LAContext` and `kSecUseAuthenticationContext` (docs/ACCESS-CONTROL.md §7) against the real agent,
/// real Linux-PAM and the stand-in pinentry of `AccessControlTestCase`, which records each prompt: one
/// evaluation serves every protected item given with the context, within its window, for its process
/// only, until a lock or `invalidate`.
final class AuthenticationContextTests: AccessControlTestCase {
    /// How many prompts were shown so far (the stand-in records one SETDESC per prompt).
    private var prompts: Int {
        let text = (try? String(contentsOfFile: shown, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("SETDESC") }.count
    }

    private func read(_ account: String, _ extra: [CFString: Any] = [:]) -> (OSStatus, String?) {
        var query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: account, kSecReturnData: true,
        ]
        for (key, value) in extra { query[key] = value }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    /// `evaluatePolicy`, waited for (bounded): whether it succeeded, and its error.
    private func evaluate(_ context: LAContext, _ reason: String = "Open the vault") -> (Bool, LAError?) {
        let done = expectation(description: "evaluatePolicy replies")
        let outcome = LockedBox<(Bool, LAError?)>((false, nil))
        context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: reason) { success, error in
            outcome.set((success, error as? LAError))
            done.fulfill()
        }
        wait(for: [done], timeout: 60)
        return outcome.get()
    }

    func testOneEvaluationServesEveryItemTheContextIsGivenWith() throws {
        addProtected("first", secret: "one")
        addProtected("second", secret: "two")
        try answer("sesame")
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 60
        XCTAssertEqual(read("first", [kSecUseAuthenticationContext: context]).1, "one")
        XCTAssertEqual(prompts, 1, "the first read asked, and evaluated the context")
        XCTAssertEqual(read("second", [kSecUseAuthenticationContext: context]).1, "two")
        XCTAssertEqual(read("first", [kSecUseAuthenticationContext: context]).1, "one")
        XCTAssertEqual(prompts, 1, "the evaluated context served without another prompt")
        // Without the context every read asks, as before.
        XCTAssertEqual(read("second").1, "two")
        XCTAssertEqual(prompts, 2)
        // Another context is not evaluated.
        XCTAssertEqual(read("second", [kSecUseAuthenticationContext: LAContext()]).1, "two")
        XCTAssertEqual(prompts, 3)
    }

    /// A key found with a context carries it: its operations are served by the context's evaluation,
    /// as Apple's key reference carries the context of the query that returned it.
    func testAKeyFoundWithAContextSignsWithItsEvaluation() throws {
        var error: Unmanaged<CFError>?
        let control = SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .userPresence], &error)
        _ = try XCTUnwrap(
            SecKeyCreateRandomKey(
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256,
                    kSecPrivateKeyAttrs: [
                        kSecAttrIsPermanent: true, kSecAttrAccessControl: control!,
                        kSecAttrApplicationTag: Data("ctx-key".utf8),
                    ],
                ]
                    as CFDictionary, &error), "\(String(describing: error))")
        try answer("sesame")
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 60
        XCTAssertTrue(evaluate(context).0)
        XCTAssertEqual(prompts, 1)
        var found: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("ctx-key".utf8),
                    kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecReturnRef: true,
                    kSecUseAuthenticationContext: context,
                ] as CFDictionary, &found), errSecSuccess)
        let key = try XCTUnwrap(found as! SecKey?)
        let message = Data("hello".utf8) as CFData
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertNotNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertEqual(prompts, 1, "the context's evaluation served both signatures")
        context.invalidate()
        XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        XCTAssertEqual(prompts, 1, "an invalidated context fails the operation, it does not ask")
    }

    func testEvaluatePolicyAsksOnceAndThenServesEvenWithoutUI() throws {
        addProtected()
        try answer("sesame")
        let context = LAContext()
        var error: NSError?
        XCTAssertTrue(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.biometryNotAvailable.rawValue)
        let (success, failure) = evaluate(context, "Open the vault")
        XCTAssertTrue(success, "\(String(describing: failure))")
        XCTAssertEqual(prompts, 1)
        let text = try String(contentsOfFile: shown, encoding: .utf8)
        XCTAssertTrue(text.contains("Open the vault"), text)
        // An evaluated context needs no UI: Fail does not refuse what it covers, nor Skip leave it out.
        XCTAssertEqual(
            read(
                "guarded",
                [kSecUseAuthenticationContext: context, kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]
            )
            .1, "s3cret")
        XCTAssertEqual(
            read(
                "guarded",
                [kSecUseAuthenticationContext: context, kSecUseAuthenticationUI: kSecUseAuthenticationUISkip]
            )
            .1, "s3cret")
        XCTAssertTrue(evaluate(context).0, "evaluating again within the window needs no answer")
        XCTAssertEqual(prompts, 1)
        // The update of the protected item is served by the context too.
        XCTAssertEqual(
            SecItemUpdate(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded",
                    kSecUseAuthenticationContext: context,
                ]
                    as CFDictionary, [kSecValueData: Data("new".utf8)] as CFDictionary), errSecSuccess)
        XCTAssertEqual(prompts, 1)
    }

    func testAFailedOrCancelledEvaluationServesNothing() throws {
        addProtected()
        let context = LAContext()
        try answer("wrong")
        XCTAssertEqual(evaluate(context).1?.code, .authenticationFailed)
        try answer()
        XCTAssertEqual(evaluate(context).1?.code, .userCancel)
        let before = prompts
        XCTAssertEqual(
            read(
                "guarded",
                [kSecUseAuthenticationContext: context, kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]
            )
            .0, errSecInteractionNotAllowed)
        XCTAssertEqual(prompts, before)
    }

    func testTheWindowEnds() throws {
        addProtected()
        try answer("sesame")
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 1
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).1, "s3cret")
        XCTAssertEqual(prompts, 1)
        usleep(1_300_000)  // past the one-second window
        XCTAssertEqual(
            read(
                "guarded",
                [kSecUseAuthenticationContext: context, kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]
            )
            .0, errSecInteractionNotAllowed, "the evaluation no longer serves")
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).1, "s3cret")
        XCTAssertEqual(prompts, 2, "it asked again, and the context holds the new evaluation")
        // A longer window set later applies to the evaluation the context holds.
        context.touchIDAuthenticationAllowableReuseDuration = 60
        usleep(1_300_000)
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).1, "s3cret")
        XCTAssertEqual(prompts, 2)
    }

    func testAnInvalidatedContextNeverServes() throws {
        addProtected()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: "open",
                    kSecValueData: Data("plain".utf8),
                ] as CFDictionary, nil), errSecSuccess)
        try answer("sesame")
        let context = LAContext()
        XCTAssertTrue(evaluate(context).0)
        let handle = try context.requestHandle()
        context.invalidate()
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).0, errSecAuthFailed)
        XCTAssertEqual(read("open", [kSecUseAuthenticationContext: context]).0, errSecAuthFailed)
        XCTAssertEqual(evaluate(context).1?.code, .invalidContext)
        // Its handle, sent as it is, is no context of the agent's any more either.
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: Data(handle)]).0, errSecAuthFailed)
        XCTAssertEqual(read("open", [kSecUseAuthenticationContext: Data(count: 32)]).0, errSecAuthFailed)
        XCTAssertEqual(read("open", [kSecUseAuthenticationContext: Data(count: 31)]).0, errSecParam)
        XCTAssertEqual(read("open", [kSecUseAuthenticationContext: "a context"]).0, errSecParam)
        XCTAssertEqual(prompts, 1)
    }

    func testInteractionNotAllowedNeverAsks() throws {
        addProtected()
        try answer("sesame")
        let context = LAContext()
        context.interactionNotAllowed = true
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).0, errSecInteractionNotAllowed)
        XCTAssertEqual(
            read(
                "guarded",
                [kSecUseAuthenticationContext: context, kSecUseAuthenticationUI: kSecUseAuthenticationUIAllow]
            )
            .0, errSecInteractionNotAllowed)
        XCTAssertEqual(
            read(
                "guarded",
                [kSecUseAuthenticationContext: context, kSecUseAuthenticationUI: kSecUseAuthenticationUISkip]
            )
            .0, errSecItemNotFound)
        XCTAssertEqual(evaluate(context).1?.code, .notInteractive)
        XCTAssertEqual(prompts, 0)
        // Once evaluated, it serves without asking.
        context.interactionNotAllowed = false
        XCTAssertTrue(evaluate(context).0)
        context.interactionNotAllowed = true
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).1, "s3cret")
        XCTAssertEqual(prompts, 1)
    }

    func testAHandleReplayedByAnotherProcessIsRefused() throws {
        addProtected()
        try answer("sesame")
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 60
        XCTAssertTrue(evaluate(context).0)
        let handle = try context.requestHandle().map { String(format: "%02x", $0) }.joined()
        try answer()  // a prompt now would be cancelled
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: Self.binDirectory + "/latchkey-probe")
        probe.arguments = ["find-with-context", "ac", "guarded", handle]
        let output = Pipe()
        probe.standardOutput = output
        try probe.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        probe.waitUntilExit()
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "-25293\n", "another process of the same user")
        XCTAssertEqual(prompts, 1)
        // The context still serves its own process.
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).1, "s3cret")
    }

    func testAContextReleasedAfterItsAgentStoppedStartsNoAgent() throws {
        var context: LAContext? = LAContext()
        XCTAssertNotNil(try context?.requestHandle())
        stopAgent()
        context = nil  // its release ends it in a running agent only
        XCTAssertNil(context)
        guard case .nothingListens = AgentSocket.connect(AgentEndpoint.current(), deadline: .now + .seconds(2)) else {
            return XCTFail("releasing the context started an agent")
        }
    }

    func testALockEndsTheEvaluation() throws {
        addProtected()
        try answer("sesame")
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 120
        XCTAssertTrue(evaluate(context).0)
        try KeychainControl.lock(all: false)
        try KeychainControl.unlock(password: SecretBytes(copying: Array("pw".utf8)))
        XCTAssertEqual(
            read(
                "guarded",
                [kSecUseAuthenticationContext: context, kSecUseAuthenticationUI: kSecUseAuthenticationUIFail]
            )
            .0, errSecInteractionNotAllowed, "the lock ended the evaluation")
        XCTAssertEqual(read("guarded", [kSecUseAuthenticationContext: context]).1, "s3cret")
        XCTAssertEqual(prompts, 2)
    }

    func testAContextWaitingForItsPromptBlocksNoOtherCaller() throws {
        addProtected()
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "ac", kSecAttrAccount: "open",
                    kSecValueData: Data("plain".utf8),
                ] as CFDictionary, nil), errSecSuccess)
        try answer("!wait")
        let context = LAContext()
        let done = expectation(description: "the evaluation ends")
        let outcome = LockedBox<LAError?>(nil)
        context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "wait") { _, error in
            outcome.set(error as? LAError)
            done.fulfill()
        }
        let deadline = Date().addingTimeInterval(10)
        while prompts == 0 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(prompts, 1, "the prompt was shown")
        // Another program's ordinary read is answered meanwhile.
        let other = try cli(["find-generic-password", "-s", "ac", "-a", "open", "-w"])
        XCTAssertEqual(other.out, "plain\n", other.err)
        wait(for: [done], timeout: 30)
        XCTAssertEqual(outcome.get()?.code, .userCancel, "the prompt timed out")
    }
}
