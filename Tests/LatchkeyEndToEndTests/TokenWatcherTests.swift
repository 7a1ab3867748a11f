import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Seed 000's `TKTokenWatcher` flow and the command-line tool's view of tokens, against real SoftHSM2
/// tokens made and deleted while the agent runs.
final class TokenWatcherTests: TokenTestCase {
    private final class Events: @unchecked Sendable {
        let lock = NSLock()
        var lines: [String] = []
        func add(_ line: String) {
            lock.lock()
            lines.append(line)
            lock.unlock()
        }
        var all: [String] {
            lock.lock()
            defer { lock.unlock() }
            return lines
        }
    }

    func testSeedWatcherFlowSeesInsertionAndRemoval() throws {
        let first = try makeToken("tok1")
        waitForItems(tokens: 1)
        // Seed 000, as written there.
        let watcher = TKTokenWatcher()
        print("The following token IDs are present in the system:")
        for tokenID in watcher.tokenIDs {
            print(tokenID)
        }
        XCTAssertEqual(watcher.tokenIDs, ["softhsm2:\(first)"])
        let events = Events()
        watcher.setInsertionHandler { tokenID in
            print("Token \(tokenID) inserted")
            events.add("inserted \(tokenID)")
            watcher.addRemovalHandler(
                { tokenID in
                    print("Token \(tokenID) removed")
                    events.add("removed \(tokenID)")
                }, forTokenID: tokenID)
        }
        waitFor("the present token's insertion") { events.all == ["inserted softhsm2:\(first)"] }
        let second = try makeToken("tok2")
        waitFor("the second token's insertion") { events.all.contains("inserted softhsm2:\(second)") }
        try deleteToken("tok1")
        waitFor("the first token's removal") { events.all.contains("removed softhsm2:\(first)") }
        XCTAssertEqual(watcher.tokenIDs, ["softhsm2:\(second)"])
        // The seed's handler keeps the watcher alive (it captures it), so it looks for ever: its looks ask
        // a running agent and never start one (else it brings an agent back after every logout, into
        // whatever runtime directory the process names by then).
        stopAgent()
        waitUntilNothingListens()
        usleep(2_500_000)
        XCTAssertNotEqual(
            AgentClient.shared.sendToRunningAgent(.hello).status, errSecSuccess, "the watcher started an agent")
    }

    func testCommandLineListsTokensAndTheirItems() throws {
        let serial = try makeToken("tok1")
        waitForItems(tokens: 1)
        let latchkey = Self.binDirectory + "/latchkey"
        let tokensOutput = try TestProcess.run(latchkey, ["tokens"])
        XCTAssertEqual(tokensOutput.status, 0, tokensOutput.err)
        XCTAssertTrue(tokensOutput.out.contains("softhsm2:\(serial)\n"), tokensOutput.out)
        XCTAssertTrue(tokensOutput.out.contains("key (EC 256-bit private key) \"tok1-ec\""), tokensOutput.out)
        XCTAssertTrue(tokensOutput.out.contains("certificate \"tok1-rsa\""), tokensOutput.out)
        let identities = try TestProcess.run(latchkey, ["find-identity"])
        XCTAssertTrue(identities.out.contains("[token softhsm2:\(serial)]"), identities.out)
        XCTAssertTrue(identities.out.contains("2 identities found"), identities.out)
        let keys = try TestProcess.run(latchkey, ["find-key", "--token", "softhsm2:\(serial)", "--class", "private"])
        XCTAssertEqual(keys.status, 0, keys.err)
        XCTAssertTrue(keys.out.contains("\"tkid\"<blob>=\"softhsm2:\(serial)\""), keys.out)
        XCTAssertTrue(keys.out.contains("\"kcls\"<int>=1"), keys.out)
        let certificates = try TestProcess.run(latchkey, ["find-certificate", "-a"])
        XCTAssertTrue(certificates.out.contains("softhsm2:\(serial)"), certificates.out)
    }
}
