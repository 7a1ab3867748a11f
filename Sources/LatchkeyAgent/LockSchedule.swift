/// The rules for when the agent drops the WhenUnlocked family of class keys by itself, as a value with
/// no thread and no clock: fed events and the current time, it says what to do now and when it must
/// next be asked. `LockPolicy` drives it with the real monotonic clock and a timer thread;
/// LatchkeyAgentTests drives it with a fake clock.
///
/// - A screen lock drops the keys after a grace period; more lock events while one waits do not
///   extend it. With no grace period it drops them at once.
/// - Sleep drops them at once, and a lock waiting out its grace period has nothing left to do.
/// - Only authentication brings keys back (not here: the screen locker's PAM hand-off or `latchkey
///   unlock`). An "unlocked" event from the desktop only cancels a lock still waiting out its grace
///   period, so a screen locked for a moment does not cost the user a password prompt, as on Apple
///   devices. An authenticated unlock cancels it too, or it would drop the keys just handed over.
/// - With an idle limit, the keys are dropped once that long has passed without a SecItem request,
///   and once per idle period after that while no request comes.
///
/// Times are seconds on a monotonic clock, given to every call, so the same calls always give the
/// same answers. Timers fire only in `advance(to:)`; an event handled after a deadline passed but
/// before `advance` ran (the timer thread is a moment late) applies to the state as it stands.
package struct LockSchedule: Equatable, Sendable {
    /// The user's choices (`--lock-grace`, `--idle-lock`).
    package struct Settings: Equatable, Sendable {
        /// Seconds between a screen lock and dropping the keys.
        package var grace: Double = 5
        /// Lock after this many seconds without a SecItem request; nil: never.
        package var idleLimit: Double?

        package init(grace: Double = 5, idleLimit: Double? = nil) {
            self.grace = grace
            self.idleLimit = idleLimit
        }
    }

    /// What happened.
    package enum Event: Equatable, Sendable {
        /// The session was locked or a screen saver became active; `source` names who reported it.
        case screenLocked(source: String)
        /// The session was unlocked or the screen saver ended. Never authentication.
        case screenUnlocked(source: String)
        /// The machine is about to suspend or hibernate.
        case preparingForSleep
        /// The machine woke up.
        case resumed
        /// The user authenticated: a password unlock or a login hand-off.
        case authenticated
        /// A SecItem request arrived.
        case itemUse
    }

    /// What the caller must do.
    package enum Action: Equatable, Sendable {
        /// Drop the WhenUnlocked keys; when that dropped any, log "locked WhenUnlocked classes: `reason`".
        case lock(reason: String)
        /// Log this line; nothing else changes.
        case log(String)
    }

    /// A screen lock waiting out its grace period.
    package struct PendingLock: Equatable, Sendable {
        /// When it takes effect.
        package var deadline: Double
        /// Who reported the screen lock.
        package var source: String

        package init(deadline: Double, source: String) {
            self.deadline = deadline
            self.source = source
        }
    }

    package let settings: Settings
    package private(set) var pendingLock: PendingLock?
    /// The last SecItem request, or the last idle lock (so that there is one per idle period).
    package private(set) var lastUse: Double

    /// A schedule that starts counting idle time at `now`.
    package init(settings: Settings, now: Double) {
        self.settings = settings
        self.lastUse = now
    }

    /// When `advance(to:)` must next be called: the earlier of the pending lock's deadline and the end
    /// of the idle period; nil when nothing is due until the next event.
    package var deadline: Double? {
        let idleEnd = settings.idleLimit.map { lastUse + $0 }
        switch (pendingLock?.deadline, idleEnd) {
        case (let pending?, let idle?): return min(pending, idle)
        case (let pending, let idle): return pending ?? idle
        }
    }

    /// Applies `event`, which happened at `now`; returns what to do at once, if anything.
    package mutating func handle(_ event: Event, now: Double) -> Action? {
        switch event {
        case .screenLocked(let source):
            if settings.grace <= 0 { return .lock(reason: "screen locked (\(source))") }
            if pendingLock == nil {
                pendingLock = PendingLock(deadline: now + settings.grace, source: source)
            }
            return nil
        case .preparingForSleep:
            pendingLock = nil
            return .lock(reason: "the machine is going to sleep")
        case .screenUnlocked(let source):
            guard pendingLock != nil else { return nil }
            pendingLock = nil
            return .log("screen unlocked within the grace period (\(source)); keys kept")
        case .resumed:
            return nil
        case .authenticated:
            pendingLock = nil
            return nil
        case .itemUse:
            if settings.idleLimit != nil { lastUse = now }
            return nil
        }
    }

    /// Fires every timer due at `now` (the pending screen lock first, then the idle lock); returns the
    /// locks to make, in order.
    package mutating func advance(to now: Double) -> [Action] {
        var actions: [Action] = []
        if let pending = pendingLock, pending.deadline <= now {
            pendingLock = nil
            actions.append(.lock(reason: "screen locked (\(pending.source))"))
        }
        if let idle = settings.idleLimit, lastUse + idle <= now {
            lastUse = now  // one lock per idle period
            actions.append(.lock(reason: "no keychain use for \(Self.describe(seconds: idle))"))
        }
        return actions
    }

    /// "15 min" for whole minutes, "90.0 s" otherwise (as the log has always said).
    package static func describe(seconds: Double) -> String {
        seconds >= 60 && seconds.truncatingRemainder(dividingBy: 60) == 0
            ? "\(Int(seconds / 60)) min" : "\(seconds) s"
    }
}
