#if canImport(Glibc)
import Glibc
#endif
import LatchkeyDesktop
import LatchkeyEngine

/// When the agent drops the WhenUnlocked family of class keys by itself: a screen lock (after a grace
/// period), sleep (at once), and a configurable time without keychain use.
///
/// Only locking happens here. Keys come back solely through authentication (the screen locker's PAM
/// stack handing over a freshly derived key, or `latchkey unlock`); an "unlocked" event from the desktop
/// only cancels a lock that is still waiting out its grace period, so a screen locked for a moment does
/// not cost the user a password prompt, as on Apple devices.
final class LockPolicy: @unchecked Sendable {
    struct Settings: Equatable {
        /// Seconds between a screen lock and dropping the keys.
        var grace: Double = 5
        /// Lock after this many seconds without a SecItem request; nil: never.
        var idleLimit: Double?
    }

    private let keychain: Keychain
    private let settings: Settings
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    /// When a pending screen lock takes effect, and who reported it.
    private var pendingLock: (deadline: Double, source: String)?
    private var lastUse: Double

    init(keychain: Keychain, settings: Settings) {
        self.keychain = keychain
        self.settings = settings
        self.lastUse = LockPolicy.now()
        pthread_mutex_init(&mutex, nil)
        // Deadlines are monotonic, so the clock the wait uses must be too (a wall-clock jump must
        // neither delay a lock nor fire one early).
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(&condition, &attributes)
        pthread_condattr_destroy(&attributes)
        _ = startDetachedThread { [self] in timerLoop() }
    }

    /// A desktop event from `LockWatcher` (called on its threads).
    func handle(_ event: LockEvent) {
        switch event {
        case .locked(let source):
            if settings.grace <= 0 {
                lockNow(reason: "screen locked (\(source))")
                return
            }
            withMutex {
                if pendingLock == nil {
                    pendingLock = (LockPolicy.now() + settings.grace, source)
                    pthread_cond_signal(&condition)
                }
            }
        case .preparingForSleep:
            withMutex { pendingLock = nil }
            lockNow(reason: "the machine is going to sleep")
        case .unlocked(let source):
            let cancelled = withMutex { () -> Bool in
                defer { pendingLock = nil }
                return pendingLock != nil
            }
            if cancelled { AgentLog.info("screen unlocked within the grace period (\(source)); keys kept") }
        case .resumed:
            break
        }
    }

    /// The user authenticated (a password unlock or a login hand-off): a screen lock still waiting
    /// out its grace period is void, or it would drop the keys that were just handed over.
    func cancelPendingLock() {
        withMutex { pendingLock = nil }
    }

    /// A SecItem request arrived: restarts the idle clock.
    func noteUse() {
        guard settings.idleLimit != nil else { return }
        let now = LockPolicy.now()
        withMutex { lastUse = now }
    }

    private func lockNow(reason: String) {
        if keychain.lock(all: false) {
            AgentLog.info("locked WhenUnlocked classes: \(reason)")
        }
    }

    /// Sleeps until the next deadline (pending screen lock or idle limit), then acts on it.
    private func timerLoop() -> Never {
        pthread_mutex_lock(&mutex)
        while true {
            var deadlines: [Double] = []
            if let pendingLock { deadlines.append(pendingLock.deadline) }
            if let idle = settings.idleLimit { deadlines.append(lastUse + idle) }
            let now = LockPolicy.now()
            if let pending = pendingLock, pending.deadline <= now {
                pendingLock = nil
                pthread_mutex_unlock(&mutex)
                lockNow(reason: "screen locked (\(pending.source))")
                pthread_mutex_lock(&mutex)
                continue
            }
            if let idle = settings.idleLimit, lastUse + idle <= now {
                lastUse = now  // one lock per idle period
                pthread_mutex_unlock(&mutex)
                lockNow(reason: "no keychain use for \(LockPolicy.describe(seconds: idle))")
                pthread_mutex_lock(&mutex)
                continue
            }
            if let next = deadlines.min() {
                var wake = timespec()
                let total = max(next, now) + 0.001
                wake.tv_sec = Int(total)
                wake.tv_nsec = Int((total - Double(Int(total))) * 1e9)
                pthread_cond_timedwait(&condition, &mutex, &wake)
            } else {
                pthread_cond_wait(&condition, &mutex)
            }
        }
    }

    private func withMutex<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }

    /// Monotonic seconds.
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func describe(seconds: Double) -> String {
        seconds >= 60 && seconds.truncatingRemainder(dividingBy: 60) == 0
            ? "\(Int(seconds / 60)) min" : "\(seconds) s"
    }
}
