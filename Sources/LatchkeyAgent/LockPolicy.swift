#if canImport(Glibc)
import Glibc
#endif
import LatchkeyDesktop
import LatchkeyEngine

/// Runs the agent's `LockSchedule` (when it drops the WhenUnlocked keys by itself: a screen lock after
/// a grace period, sleep at once, a time without keychain use) against the real monotonic clock: a
/// timer thread sleeps until the schedule's next deadline, and every action is done on the keychain.
final class LockPolicy: @unchecked Sendable {
    typealias Settings = LockSchedule.Settings

    private let keychain: Keychain
    private let idleLimited: Bool
    // Heap-allocated: pthread objects must not move, and Swift does not promise a stable address for a
    // stored property passed with `&`. Never freed: the timer thread keeps the policy alive for as long
    // as the agent runs.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var schedule: LockSchedule  // guarded by mutex

    init(keychain: Keychain, settings: Settings) {
        self.keychain = keychain
        self.idleLimited = settings.idleLimit != nil
        self.schedule = LockSchedule(settings: settings, now: LockPolicy.now())
        pthread_mutex_init(mutex, nil)
        // Deadlines are monotonic, so the clock the wait uses must be too (a wall-clock jump must
        // neither delay a lock nor fire one early).
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
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
        pthread_mutex_lock(mutex)
        let before = schedule.deadline
        let action = schedule.handle(event, now: now)
        // Wake the timer only for a deadline earlier than the one it sleeps towards; a later one (a
        // request restarting the idle clock) is found when it wakes, which saves a wake-up per request.
        if let after = schedule.deadline, before.map({ after < $0 }) ?? true {
            pthread_cond_signal(condition)
        }
        pthread_mutex_unlock(mutex)
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

    /// Sleeps until the schedule's next deadline, then does what is due.
    private func timerLoop() -> Never {
        pthread_mutex_lock(mutex)
        while true {
            let now = LockPolicy.now()
            let due = schedule.advance(to: now)
            if !due.isEmpty {
                pthread_mutex_unlock(mutex)
                due.forEach(perform)
                pthread_mutex_lock(mutex)
                continue
            }
            if let next = schedule.deadline {
                // A millisecond late, so that the deadline has passed when the wait returns.
                var wake = timespec()
                let total = max(next, now) + 0.001
                wake.tv_sec = Int(total)
                wake.tv_nsec = Int((total - Double(Int(total))) * 1e9)
                pthread_cond_timedwait(condition, mutex, &wake)
            } else {
                pthread_cond_wait(condition, mutex)
            }
        }
    }

    /// Monotonic seconds.
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
