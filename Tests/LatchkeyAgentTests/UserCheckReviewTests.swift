import LatchkeyModel
import XCTest

@testable import LatchkeyAgent
@testable import LatchkeyEngine

/// What the attacker's review of issue 13 found, at the level of its decisions: which PAM files stand
/// for biometry, and when a Secret Service unlock stops covering an item.
final class UserCheckReviewTests: XCTestCase {
    /// Linux-PAM runs `other` for a service file without an `auth` line of its own (an empty file, a
    /// commented-out line): such a `latchkey-biometry` must count as absent.
    func testOnlyABiometryFileWithItsOwnAuthLineCounts() {
        XCTAssertTrue(UserPresence.hasOwnAuthLine("auth required pam_fprintd.so\n"))
        XCTAssertTrue(UserPresence.hasOwnAuthLine("# biometry\n-auth\tsufficient\tpam_fprintd.so max-tries=2\n"))
        XCTAssertTrue(UserPresence.hasOwnAuthLine("auth [success=done default=die] pam_fprintd.so\n"))
        XCTAssertFalse(UserPresence.hasOwnAuthLine(""))
        XCTAssertFalse(UserPresence.hasOwnAuthLine("#auth required pam_fprintd.so\naccount required pam_unix.so\n"))
        XCTAssertFalse(UserPresence.hasOwnAuthLine("auth include common-auth\n"))
        XCTAssertFalse(UserPresence.hasOwnAuthLine("auth substack common-auth\n"))
        XCTAssertFalse(UserPresence.hasOwnAuthLine("@include common-auth\n"))
    }

    /// A grant covers its items for its window, for its client, and only until the keychain locks.
    func testAnUnlockEndsWithItsWindowItsClientAndAnyLock() {
        let grants = UserCheckGrants()
        let item = [UInt8](repeating: 7, count: 16)
        let now = ContinuousClock.now
        let presence = AccessConstraint.check(.userPresence)
        XCTAssertTrue(grants.grant([item], passed: [.userPresence], to: ":1.5", lockCount: 3, now: now))
        XCTAssertTrue(grants.covers(item, presence, client: ":1.5", lockCount: 3, now: now + .seconds(1)))
        XCTAssertFalse(grants.covers(item, presence, client: ":1.6", lockCount: 3, now: now), "another client")
        XCTAssertFalse(grants.covers(item, presence, client: ":1.5", lockCount: 4, now: now), "after a lock")
        XCTAssertFalse(
            grants.covers(item, presence, client: ":1.5", lockCount: 3, now: now + grants.window), "after its window")
        XCTAssertFalse(
            grants.covers(item, .check(.biometryAny), client: ":1.5", lockCount: 3, now: now), "another check")
    }
}
