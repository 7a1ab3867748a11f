import Foundation
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecretService
import LatchkeyTestSupport
import LatchkeyTokens
import XCTest

@testable import LatchkeyAgent

/// The questions the agent puts to the user for a token (docs/TOKENS.md §5), through a stand-in pinentry
/// that records what it is shown and answers from a file: the PIN, the confirmation before a reader's PIN
/// pad asks (the pad cannot say which program wants the key), and the consent to a key made on a token.
final class TokenPromptTests: XCTestCase {
    private var directory = ""
    private var presence: UserPresence!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "lk-token-prompt-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let prompter = directory + "/prompter"
        try StandInPinentry.write(to: prompter, shown: directory + "/shown", answers: directory + "/answers")
        presence = UserPresence(prompter: PinentryPrompter(command: [prompter], timeoutSeconds: 5), directory: nil)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func answer(_ lines: String...) throws {
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: directory + "/answers", atomically: true, encoding: .utf8)
        try? FileManager.default.removeItem(atPath: directory + "/shown")
    }

    private var shown: String { (try? String(contentsOfFile: directory + "/shown", encoding: .utf8)) ?? "" }

    private func request(_ kind: TokenService.PINRequest.Kind, _ purpose: TokenService.PINRequest.Purpose = .useKey)
        -> TokenService.PINRequest
    {
        var caller = Caller(uid: getuid(), pid: getpid(), accessGroups: [])
        caller.executable = "/usr/bin/ssh"
        return TokenService.PINRequest(
            caller: caller, tokenID: "opensc-pkcs11:0123", tokenLabel: "PIV Card", keyLabel: "SIGN key",
            prompt: "Sign in to example.org", kind: kind, purpose: purpose)
    }

    func testThePINIsAskedAndGiven() throws {
        try answer("123456")
        let pin = try XCTUnwrap(try presence.askPIN(request(.pin)))
        XCTAssertEqual(pin.withUnsafeBytes { Array($0) }, Array("123456".utf8))
        XCTAssertTrue(shown.contains("GETPIN"), shown)
        XCTAssertTrue(shown.contains("/usr/bin/ssh wants to use the key"), shown)
        XCTAssertTrue(shown.contains("Sign in to example.org"), shown)
    }

    func testAPINPadIsPrecededByAConfirmationNamingTheProgram() throws {
        try answer("yes")
        XCTAssertNil(try presence.askPIN(request(.pinPad)))
        XCTAssertTrue(shown.contains("CONFIRM"), shown)
        XCTAssertFalse(shown.contains("GETPIN"), "the PIN goes to the pad, not the prompter: \(shown)")
        XCTAssertTrue(shown.contains("/usr/bin/ssh wants to use the key"), shown)
        XCTAssertTrue(shown.contains("PIN pad"), shown)
        XCTAssertTrue(shown.contains("SETOK Continue"), shown)

        try answer()  // cancelled: the pad is never reached
        XCTAssertThrowsError(try presence.askPIN(request(.pinPad))) { error in
            XCTAssertEqual((error as? SecError)?.status, SecStatus.userCanceled)
        }
    }

    func testAKeyMadeOnATokenIsConfirmedWithWhatItIs() throws {
        try answer("yes")
        XCTAssertNil(try presence.askPIN(request(.confirm, .makeKey("EC P-256"))))
        XCTAssertTrue(shown.contains("wants to make a new EC P-256 key"), shown)
        XCTAssertTrue(shown.contains("SETOK Make the key"), shown)
        try answer()
        XCTAssertThrowsError(try presence.askPIN(request(.confirm, .makeKey("RSA 2048-bit")))) { error in
            XCTAssertEqual((error as? SecError)?.status, SecStatus.userCanceled)
        }
    }
}
