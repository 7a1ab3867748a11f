import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Slot events (docs/TOKENS.md, "The watcher"): OpenSC's module, reading a virtual PIV card through a
/// real pcscd (`VirtualPIVCard`), reports insertions and removals through C_WaitForSlotEvent, and the
/// agent shows and drops the card's items on those events. `poll-seconds` is 60, and a module with slot
/// events is polled no more often than that: within the tests' 10-second waits, only the events can
/// explain a change, and the agent's log says which look saw it.
final class TokenEventTests: TokenTestCase {
    private var reader: VirtualPIVCard?
    private var cardDirectory = ""

    override func setUpWithError() throws {
        try VirtualPIVCard.skipUnlessAvailable()
        // Made by mkdtemp: root runs python3 and a pcscd driver path from it.
        var template = Array((NSTemporaryDirectory() + "lk-card-XXXXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw NSError(domain: "mkdtemp", code: Int(errno)) }
        cardDirectory = String(cString: made)
        // pcscd before the agent: OpenSC finds it when the agent initialises the module.
        reader = try VirtualPIVCard(directory: cardDirectory)
        try super.setUpWithError()
    }

    override func tokensConfiguration() throws -> String {
        let module = try XCTUnwrap(VirtualPIVCard.openscModule)
        if name.contains("Restarted") {
            return "# tests: OpenSC, started again at each look\nsystem-modules = no\nmodule = \(module)\n"
                + "restart = opensc-pkcs11\n"
        }
        return
            "# tests: OpenSC alone, polled once a minute\nsystem-modules = no\nmodule = \(module)\npoll-seconds = 60\n"
    }

    override func tearDown() {
        super.tearDown()
        reader?.stop()
        reader = nil
        if !cardDirectory.isEmpty { try? FileManager.default.removeItem(atPath: cardDirectory) }
    }

    private func agentLog() -> String {
        (try? String(contentsOfFile: runtimeDirectory + "/latchkey/agent.log", encoding: .utf8)) ?? ""
    }

    /// A self-signed EC P-256 certificate (DER) for a card, with common name `name`.
    private func certificate(_ name: String) throws -> String {
        let base = cardDirectory + "/" + name
        try tool(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                base + ".key", "-outform", "DER", "-out", base + ".der", "-subj", "/CN=\(name)", "-days", "30",
            ])
        return base + ".der"
    }

    private func items(of tokenID: String) -> (certificates: Int, keys: Int) {
        (
            tokenItems(kSecClassCertificate, [kSecAttrTokenID: tokenID]).count,
            tokenItems(kSecClassKey, [kSecAttrTokenID: tokenID]).count
        )
    }

    func testACardIsShownAndDroppedOnItsSlotEvents() throws {
        waitFor("the agent to wait for OpenSC's slot events") {
            agentLog().contains("tokens: module opensc-pkcs11 answers C_WaitForSlotEvent")
        }
        XCTAssertTrue(tokenItems(kSecClassCertificate).isEmpty, "no card yet")

        let first = "opensc-pkcs11:0123456789abcdef"
        try reader?.insert(serial: "0123456789abcdef", certificate: try certificate("card-one"))
        // The certificate, its public key, and the private key it stands for (hidden until a login).
        waitFor("the card's items") { items(of: first) == (1, 2) }
        XCTAssertTrue(agentLog().contains("tokens: \(first) present (3 items) after a slot event"), agentLog())
        // OpenSC labels the PIV certificate by its slot; the identity takes the certificate's label.
        XCTAssertNotNil(identityKey("Certificate for PIV Authentication"), "the certificate and key form an identity")

        reader?.remove()
        waitFor("the card's removal") { tokenItems(kSecClassCertificate).isEmpty && tokenItems(kSecClassKey).isEmpty }
        XCTAssertTrue(agentLog().contains("tokens: \(first) removed after a slot event"), agentLog())

        // Another card in the same reader: a new token id.
        let second = "opensc-pkcs11:fedcba9876543210"
        try reader?.insert(serial: "fedcba9876543210", certificate: try certificate("card-two"))
        waitFor("the second card's items") { items(of: second) == (1, 2) }
        XCTAssertEqual(items(of: first).certificates, 0)
        XCTAssertTrue(agentLog().contains("tokens: \(second) present (3 items) after a slot event"), agentLog())
        XCTAssertFalse(agentLog().contains("C_WaitForSlotEvent failed"), agentLog())
        XCTAssertFalse(agentLog().contains("does not wait for slot events"), agentLog())
    }

    func testARestartedModuleIsPolledWithoutAWaitingThread() throws {
        // Finalised and initialised again at every look, OpenSC gets no thread waiting in it: it is polled.
        let id = "opensc-pkcs11:00000000000000aa"
        try reader?.insert(serial: "00000000000000aa", certificate: try certificate("card-polled"))
        waitFor("the card's items") { items(of: id) == (1, 2) }
        reader?.remove()
        waitFor("the card's removal") { items(of: id) == (0, 0) }
        let log = agentLog()
        XCTAssertTrue(log.contains("tokens: module opensc-pkcs11 loaded"), log)
        XCTAssertFalse(log.contains("C_WaitForSlotEvent"), log)
        XCTAssertFalse(log.contains("after a slot event"), log)
    }
}

/// The fallback: SoftHSM2 answers C_WaitForSlotEvent without blocking (CKR_NO_EVENT) but refuses the
/// blocking wait, and is polled every `poll-seconds` as before. Not named by `restart` here, so a change
/// on its present token (an object another program writes) is what a poll sees.
final class TokenPollingFallbackTests: TokenTestCase {
    override func tokensConfiguration() throws -> String {
        "# tests: SoftHSM alone, not restarted\nsystem-modules = no\nmodule = \(Self.module)\n"
    }

    func testAModuleWithoutSlotEventsIsPolled() throws {
        // The token exists before the agent loads the module (SoftHSM2 reads its tokens when initialised).
        stopAgent()
        waitUntilNothingListens()
        let serial = try makeToken("tok1")
        waitForItems(tokens: 1)
        let log = runtimeDirectory + "/latchkey/agent.log"
        waitFor("the agent to fall back to polling") {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains(
                "tokens: module softhsm2 does not wait for slot events; polled")
        }
        // Another program adds a certificate to the present token: no slot event, a poll sees it.
        let base = "\(tokens)/extra"
        try tool(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                base + ".key", "-outform", "DER", "-out", base + ".der", "-subj", "/CN=extra", "-days", "30",
            ])
        try tool(
            "/usr/bin/pkcs11-tool",
            [
                "--module", Self.module, "--token-label", "tok1", "--login", "--pin", Self.pin, "--write-object",
                base + ".der", "--type", "cert", "--id", "03", "--label", "extra",
            ])
        waitFor("the new certificate") {
            tokenItems(kSecClassCertificate, [kSecAttrTokenID: "softhsm2:\(serial)"]).count == 3
        }
    }
}
