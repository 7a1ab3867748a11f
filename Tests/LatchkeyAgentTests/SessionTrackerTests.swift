import XCTest

@testable import LatchkeyAgent

#if canImport(Glibc)
    import Glibc
#endif

/// The login sessions the agent counts: the cap, the slot an ended session frees, and when the end of
/// the last one locks (the `whenNoneLeft` action).
final class SessionTrackerTests: XCTestCase {
    private func token(_ n: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt64(n).bigEndian) { Array($0) } + [UInt8](repeating: 0, count: 8)
    }

    /// At the cap a new session is refused; a session whose login process dies, or that logind removes,
    /// frees its slot at once.
    func testEndedSessionsFreeTheirSlotsAtTheCap() throws {
        let maximum = SessionTracker.maximumSessions
        let exits = try XCTUnwrap(ProcessExitWatch())
        let tracker = SessionTracker(exits: exits)
        XCTAssertTrue(exits.start { key in _ = tracker.processExited(key: key, whenNoneLeft: {}) })
        let peers = try PeerSocket()
        let (pid, connection) = try peers.connectingChild(stays: true)
        guard case .running(let process) = PeerProcess.of(connection: connection, pid: pid) else {
            return XCTFail("the live peer is not followed")
        }
        let first = try XCTUnwrap(tracker.open(token(0), process: process))
        XCTAssertEqual(first.count, 1)
        XCTAssertNil(first.unwatched)
        for n in 1..<maximum {
            XCTAssertNotNil(tracker.open(token(n), logindSession: n == 7 ? "c7" : nil), "session \(n)")
        }
        XCTAssertNil(tracker.open(token(maximum)), "beyond the cap")
        XCTAssertEqual(tracker.open(token(5))?.count, maximum, "a token already open is not counted twice")

        peers.kill9(pid)
        XCTAssertTrue(PeerSocket.within(5) { tracker.count == maximum - 1 }, "the dead login's session still counts")
        XCTAssertNotNil(tracker.open(token(maximum)), "the dead login's slot was not freed")
        XCTAssertNil(tracker.open(token(maximum + 1)))

        let (ended, remaining) = tracker.logindSessionRemoved("c7") { XCTFail("others are open") }
        XCTAssertEqual(ended.map(\.token), [token(7)])
        XCTAssertEqual(remaining, maximum - 1)
        XCTAssertNotNil(tracker.open(token(maximum + 1)), "logind's removal did not free the slot")
    }

    /// The action runs when the last session closes, when the last one ends otherwise, and for the close
    /// of an unknown token when none is open; never for the late close of a session that ended already.
    func testTheLastEndLocksAndALateCloseDoesNot() throws {
        let tracker = SessionTracker(exits: nil)
        var locks = 0
        XCTAssertNotNil(tracker.open(token(1), logindSession: "c1"))
        XCTAssertNotNil(tracker.open(token(2), logindSession: "c2"))
        XCTAssertEqual(tracker.logindSessionRemoved("c9") { locks += 1 }.ended.count, 0)
        XCTAssertEqual(tracker.logindSessionRemoved("c1") { locks += 1 }.remaining, 1)
        XCTAssertEqual(locks, 0)
        XCTAssertEqual(tracker.close(token(1)) { locks += 1 }, .endedEarlier, "the late close of an ended session")
        XCTAssertEqual(tracker.close(token(3)) { locks += 1 }, .unknown(remaining: 1))
        XCTAssertEqual(locks, 0)
        XCTAssertEqual(tracker.close(token(2)) { locks += 1 }, .closed(remaining: 0))
        XCTAssertEqual(locks, 1)
        XCTAssertEqual(tracker.close(token(2)) { locks += 1 }, .unknown(remaining: 0), "closed twice")
        XCTAssertEqual(locks, 2, "an unknown close with none open locks, as before")
        XCTAssertEqual(tracker.ifNoneOpen { locks += 1 }, 0)
        XCTAssertEqual(locks, 3)

        XCTAssertNotNil(tracker.open(token(4), logindSession: "c4"))
        XCTAssertEqual(tracker.logindSessionRemoved("c4") { locks += 1 }.remaining, 0)
        XCTAssertEqual(locks, 4)
        XCTAssertEqual(tracker.close(token(4)) { locks += 1 }, .endedEarlier)
        XCTAssertEqual(locks, 4)
    }
}
