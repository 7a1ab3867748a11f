import LatchkeyAgent
import XCTest

/// The agent's lock rules, one at a time, with a clock moved by hand (`LockSchedule`).
final class LockScheduleTests: XCTestCase {
    /// A schedule and the monotonic time it is fed; the time starts far from zero, as a real
    /// monotonic clock does.
    struct FakeClock {
        var now: Double = 1_000
        var schedule: LockSchedule

        init(grace: Double = 5, idle: Double? = nil) {
            schedule = LockSchedule(settings: .init(grace: grace, idleLimit: idle), now: now)
        }

        mutating func send(_ event: LockSchedule.Event) -> LockSchedule.Action? {
            schedule.handle(event, now: now)
        }

        /// Moves the clock to `time` and fires what is due then.
        mutating func advance(to time: Double) -> [LockSchedule.Action] {
            now = time
            return schedule.advance(to: time)
        }

        mutating func wait(_ seconds: Double) -> [LockSchedule.Action] {
            advance(to: now + seconds)
        }
    }

    private static func screenLock(_ source: String) -> LockSchedule.Action {
        .lock(reason: "screen locked (\(source))")
    }

    // MARK: - Screen lock and grace period

    func testGraceExpiresExactlyAtTheDeadlineAndNotBefore() {
        var clock = FakeClock(grace: 5)
        XCTAssertNil(clock.schedule.deadline, "nothing to wake for")
        XCTAssertNil(clock.send(.screenLocked(source: "login1.Lock")), "the grace period starts; nothing at once")
        XCTAssertEqual(clock.schedule.deadline, 1_005)
        XCTAssertEqual(clock.schedule.pendingLock, .init(deadline: 1_005, source: "login1.Lock"))
        XCTAssertEqual(clock.advance(to: 1_002), [])
        XCTAssertEqual(clock.advance(to: (1_005 as Double).nextDown), [], "not a moment early")
        XCTAssertEqual(clock.schedule.deadline, 1_005, "an early wake-up keeps the deadline")
        XCTAssertEqual(clock.advance(to: 1_005), [Self.screenLock("login1.Lock")])
        XCTAssertNil(clock.schedule.pendingLock)
        XCTAssertNil(clock.schedule.deadline)
        XCTAssertEqual(clock.advance(to: 1_005), [], "fired once")
        XCTAssertEqual(clock.wait(100), [])
    }

    func testALateWakeUpStillLocksOnce() {
        var clock = FakeClock(grace: 5)
        _ = clock.send(.screenLocked(source: "org.gnome.ScreenSaver"))
        XCTAssertEqual(clock.advance(to: 1_030), [Self.screenLock("org.gnome.ScreenSaver")])
        XCTAssertEqual(clock.advance(to: 1_031), [])
    }

    func testRepeatedLockEventsDoNotExtendTheGracePeriod() {
        var clock = FakeClock(grace: 5)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        _ = clock.wait(3)
        XCTAssertNil(clock.send(.screenLocked(source: "login1.LockedHint")))
        XCTAssertNil(clock.send(.screenLocked(source: "login1.Lock")))
        XCTAssertEqual(
            clock.schedule.pendingLock, .init(deadline: 1_005, source: "login1.Lock"),
            "the first report's deadline and source stand")
        XCTAssertEqual(clock.advance(to: 1_005), [Self.screenLock("login1.Lock")])
        // A lock after the pending one fired starts a new grace period.
        _ = clock.wait(1)
        XCTAssertNil(clock.send(.screenLocked(source: "login1.LockedHint")))
        XCTAssertEqual(clock.schedule.deadline, 1_011)
        XCTAssertEqual(clock.advance(to: 1_011), [Self.screenLock("login1.LockedHint")])
    }

    func testUnlockWithinTheGracePeriodCancelsTheLock() {
        var clock = FakeClock(grace: 5)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        _ = clock.wait(4.9)
        XCTAssertEqual(
            clock.send(.screenUnlocked(source: "login1.Unlock")),
            .log("screen unlocked within the grace period (login1.Unlock); keys kept"))
        XCTAssertNil(clock.schedule.pendingLock)
        XCTAssertNil(clock.schedule.deadline)
        XCTAssertEqual(clock.wait(60), [], "the keys are kept")
        // A second "unlocked" has nothing to cancel and says nothing.
        XCTAssertNil(clock.send(.screenUnlocked(source: "login1.Unlock")))
    }

    func testUnlockAfterTheLockFiredChangesNothing() {
        var clock = FakeClock(grace: 5)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        XCTAssertEqual(clock.wait(5), [Self.screenLock("login1.Lock")])
        let before = clock.schedule
        XCTAssertNil(clock.send(.screenUnlocked(source: "login1.Unlock")), "an unlock is never authentication")
        XCTAssertEqual(clock.schedule, before)
    }

    /// Timers fire only in `advance`: an event that arrives after a deadline, before the timer thread
    /// woke, applies to the state as it stands (here: the lock is still pending, so it is cancelled).
    func testAnEventBeforeALateAdvanceSeesTheLockStillPending() {
        var clock = FakeClock(grace: 5)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        clock.now = 1_005.0005
        XCTAssertEqual(
            clock.send(.screenUnlocked(source: "login1.Unlock")),
            .log("screen unlocked within the grace period (login1.Unlock); keys kept"))
        XCTAssertEqual(clock.advance(to: 1_006), [])
    }

    func testNoGracePeriodLocksAtOnce() {
        var clock = FakeClock(grace: 0)
        XCTAssertEqual(clock.send(.screenLocked(source: "login1.Lock")), Self.screenLock("login1.Lock"))
        XCTAssertNil(clock.schedule.pendingLock, "nothing left to wait for")
        XCTAssertNil(clock.schedule.deadline)
        XCTAssertEqual(
            clock.send(.screenLocked(source: "login1.Lock")), Self.screenLock("login1.Lock"),
            "every report locks (the keychain logs only when that dropped keys)")
        XCTAssertNil(clock.send(.screenUnlocked(source: "login1.Unlock")), "nothing was pending")
        XCTAssertEqual(clock.wait(60), [])
    }

    // MARK: - Sleep, resume, authentication

    func testSleepLocksAtOnceAndClearsThePendingLock() {
        var clock = FakeClock(grace: 5)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        _ = clock.wait(1)
        XCTAssertEqual(clock.send(.preparingForSleep), .lock(reason: "the machine is going to sleep"))
        XCTAssertNil(clock.schedule.pendingLock)
        XCTAssertNil(clock.schedule.deadline)
        XCTAssertNil(clock.send(.resumed))
        XCTAssertEqual(clock.wait(60), [], "the screen lock does not fire again after the sleep")
        XCTAssertNil(clock.send(.screenUnlocked(source: "login1.Unlock")), "nothing left to cancel")
    }

    func testSleepWithNothingPendingLocksToo() {
        var clock = FakeClock(grace: 5)
        XCTAssertEqual(clock.send(.preparingForSleep), .lock(reason: "the machine is going to sleep"))
        XCTAssertNil(clock.schedule.deadline)
    }

    func testResumeChangesNothing() {
        var clock = FakeClock(grace: 5, idle: 60)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        let before = clock.schedule
        XCTAssertNil(clock.send(.resumed))
        XCTAssertEqual(clock.schedule, before)
    }

    func testAuthenticatedUnlockCancelsThePendingLockSilently() {
        var clock = FakeClock(grace: 5)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        _ = clock.wait(2)
        XCTAssertNil(clock.send(.authenticated), "the keys just handed over stay; nothing to log here")
        XCTAssertNil(clock.schedule.pendingLock)
        XCTAssertEqual(clock.wait(60), [])
        XCTAssertNil(clock.send(.screenUnlocked(source: "login1.Unlock")), "no longer within a grace period")
    }

    func testAuthenticationDoesNotRestartTheIdleClock() {
        var clock = FakeClock(grace: 5, idle: 60)
        _ = clock.wait(30)
        XCTAssertNil(clock.send(.authenticated))
        XCTAssertEqual(clock.schedule.deadline, 1_060, "only SecItem requests count as use")
    }

    // MARK: - Idle lock

    func testIdleLockFiresOncePerIdlePeriod() {
        var clock = FakeClock(grace: 5, idle: 900)
        XCTAssertEqual(clock.schedule.deadline, 1_900, "idle time counts from the start")
        XCTAssertEqual(clock.advance(to: (1_900 as Double).nextDown), [])
        XCTAssertEqual(clock.advance(to: 1_900), [.lock(reason: "no keychain use for 15 min")])
        XCTAssertEqual(clock.advance(to: 1_900), [], "once per idle period")
        XCTAssertEqual(clock.schedule.deadline, 2_800, "the next period starts at the lock")
        XCTAssertEqual(clock.advance(to: 2_799), [])
        XCTAssertEqual(clock.advance(to: 2_800), [.lock(reason: "no keychain use for 15 min")])
    }

    func testALateIdleWakeUpStartsTheNextPeriodWhenItFires() {
        var clock = FakeClock(grace: 5, idle: 60)
        XCTAssertEqual(clock.advance(to: 1_075), [.lock(reason: "no keychain use for 1 min")], "one lock, however late")
        XCTAssertEqual(clock.schedule.deadline, 1_135)
    }

    func testUseRestartsTheIdleClock() {
        var clock = FakeClock(grace: 5, idle: 60)
        _ = clock.wait(50)
        XCTAssertNil(clock.send(.itemUse))
        XCTAssertEqual(clock.schedule.deadline, 1_110)
        XCTAssertEqual(clock.advance(to: 1_060), [], "the old deadline is void (the timer may still wake for it)")
        _ = clock.wait(40)
        XCTAssertNil(clock.send(.itemUse))
        XCTAssertEqual(clock.advance(to: 1_159.5), [])
        XCTAssertEqual(clock.advance(to: 1_160), [.lock(reason: "no keychain use for 1 min")])
        // Use after the idle lock counts from then on.
        _ = clock.wait(10)
        XCTAssertNil(clock.send(.itemUse))
        XCTAssertEqual(clock.schedule.deadline, 1_230)
    }

    func testNoIdleLimitNeverIdles() {
        var clock = FakeClock(grace: 5, idle: nil)
        XCTAssertNil(clock.schedule.deadline)
        let before = clock.schedule
        XCTAssertNil(clock.send(.itemUse))
        XCTAssertEqual(clock.schedule, before, "use is not even recorded")
        XCTAssertEqual(clock.advance(to: 1_000_000), [])
        XCTAssertNil(clock.schedule.deadline)
    }

    func testIdleReasonNamesTheLimitAsConfigured() {
        XCTAssertEqual(LockSchedule.describe(seconds: 900), "15 min")
        XCTAssertEqual(LockSchedule.describe(seconds: 60), "1 min")
        XCTAssertEqual(LockSchedule.describe(seconds: 90), "90.0 s")
        XCTAssertEqual(LockSchedule.describe(seconds: 1.2), "1.2 s")
        XCTAssertEqual(LockSchedule.describe(seconds: 30), "30.0 s")
        var clock = FakeClock(grace: 5, idle: 1.2)  // LATCHKEY_IDLE_LOCK=0.02 (minutes)
        XCTAssertEqual(clock.wait(1.2), [.lock(reason: "no keychain use for 1.2 s")])
    }

    // MARK: - Both timers

    func testDeadlineIsTheEarlierOfBothTimers() {
        var clock = FakeClock(grace: 5, idle: 60)
        XCTAssertEqual(clock.schedule.deadline, 1_060)
        _ = clock.wait(10)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        XCTAssertEqual(clock.schedule.deadline, 1_015, "the screen lock comes first")
        XCTAssertEqual(clock.advance(to: 1_015), [Self.screenLock("login1.Lock")])
        XCTAssertEqual(clock.schedule.deadline, 1_060, "then the idle limit")
        // The idle limit comes first: a screen lock close to it.
        _ = clock.wait(43)  // 1_058
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        XCTAssertEqual(clock.schedule.deadline, 1_060)
        XCTAssertEqual(clock.advance(to: 1_060), [.lock(reason: "no keychain use for 1 min")])
        XCTAssertEqual(clock.schedule.deadline, 1_063, "the screen lock is still pending")
        XCTAssertEqual(clock.advance(to: 1_063), [Self.screenLock("login1.Lock")])
        XCTAssertEqual(clock.schedule.deadline, 1_120)
    }

    func testBothDueAtOnceFireScreenLockFirst() {
        var clock = FakeClock(grace: 5, idle: 60)
        _ = clock.wait(55)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        XCTAssertEqual(clock.schedule.deadline, 1_060)
        XCTAssertEqual(
            clock.advance(to: 1_060), [Self.screenLock("login1.Lock"), .lock(reason: "no keychain use for 1 min")])
        XCTAssertEqual(clock.schedule.deadline, 1_120)
    }

    func testUseDoesNotTouchAPendingScreenLock() {
        var clock = FakeClock(grace: 5, idle: 60)
        _ = clock.send(.screenLocked(source: "login1.Lock"))
        _ = clock.wait(3)
        XCTAssertNil(clock.send(.itemUse))
        XCTAssertEqual(clock.schedule.deadline, 1_005)
        XCTAssertEqual(clock.advance(to: 1_005), [Self.screenLock("login1.Lock")])
        XCTAssertEqual(clock.schedule.deadline, 1_063)
    }
}
