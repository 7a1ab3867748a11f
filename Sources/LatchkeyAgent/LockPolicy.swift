import LatchkeyDesktop
import LatchkeyEngine
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the agent's `LockSchedule` (when it drops the WhenUnlocked keys by itself: a screen lock after
/// a grace period, sleep at once, a time without keychain use) against the real monotonic clock: a
/// timer thread sleeps until the schedule's next deadline, and every action is done on the keychain.
final class LockPolicy: @unchecked Sendable {
    typealias Settings = LockSchedule.Settings

    private let keychain: Keychain
    private let idleLimited: Bool
    private let monitor = Monitor()
    private var schedule: LockSchedule  // guarded by monitor
    /// Counts the events that moved the deadline earlier (guarded by monitor): the timer thread sleeps
    /// until its deadline or until this changes, so no wake-up is lost between reading the deadline
    /// and starting to wait.
    private var earlier: UInt64 = 0

    init(keychain: Keychain, settings: Settings) {
        self.keychain = keychain
        self.idleLimited = settings.idleLimit != nil
        self.schedule = LockSchedule(settings: settings, now: LockPolicy.now())
        _ = startDetachedThread { [self] in timerLoop() }
    }

    /// A desktop event from `LockWatcher` (called on its threads).
    func handle(_ event: LockEvent) {
        switch event {
        case .locked(let source): apply(.screenLocked(source: source))
        case .unlocked(let source): apply(.screenUnlocked(source: source))
        case .preparingForSleep: apply(.preparingForSleep)
        case .resumed: apply(.resumed)
        }
    }

    /// The user authenticated (a password unlock or a login hand-off): a screen lock still waiting
    /// out its grace period is void, or it would drop the keys that were just handed over.
    func cancelPendingLock() {
        apply(.authenticated)
    }

    /// A SecItem request arrived: restarts the idle clock.
    func noteUse() {
        // Every request comes here: without an idle limit there is nothing to record, so skip the mutex.
        guard idleLimited else { return }
        apply(.itemUse)
    }

    private func apply(_ event: LockSchedule.Event) {
        let now = LockPolicy.now()
        let (action, wake) = monitor.locked { () -> (LockSchedule.Action?, Bool) in
            let before = schedule.deadline
            let action = schedule.handle(event, now: now)
            // Wake the timer only for a deadline earlier than the one it sleeps towards; a later one (a
            // request restarting the idle clock) is found when it wakes, which saves a wake-up per request.
            guard let after = schedule.deadline, before.map({ after < $0 }) ?? true else { return (action, false) }
            earlier &+= 1
            return (action, true)
        }
        if wake { monitor.signal() }
        if let action { perform(action) }
    }

    private func perform(_ action: LockSchedule.Action) {
        switch action {
        case .lock(let reason):
            if keychain.lock(all: false) {
                AgentLog.info("locked WhenUnlocked classes: \(reason)")
            }
        case .log(let line):
            AgentLog.info(line)
        }
    }

    /// Sleeps until the schedule's next deadline (or until an event moves it earlier), then does what
    /// is due.
    private func timerLoop() -> Never {
        while true {
            let due = monitor.locked { schedule.advance(to: LockPolicy.now()) }
            if !due.isEmpty {
                due.forEach(perform)
                continue
            }
            let (deadline, seen) = monitor.locked { (schedule.deadline, earlier) }
            // A millisecond late, so that the deadline has passed when the wait returns.
            let timeout = deadline.map { max(0, $0 - LockPolicy.now()) + 0.001 }
            _ = monitor.wait(timeout: timeout) { earlier != seen }
        }
    }

    /// Monotonic seconds.
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
