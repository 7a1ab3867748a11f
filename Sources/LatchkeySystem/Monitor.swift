#if canImport(Glibc)
    import Glibc
#endif

/// A mutex with a condition variable, for state that one thread waits on and others change (a bus loop
/// and its callers, a reconnecting supervisor, a timer thread).
///
/// Plain mutual exclusion uses `Locked`, which keeps the guarded state inside the lock. A condition must
/// be waited on with the very mutex that guards the state, and neither `Locked` nor the standard library's
/// `Mutex` offers one; so waiting needs this type, built on POSIX threads like `Locked`.
///
/// The state a monitor guards lives in its owner, annotated "guarded", and is touched only inside
/// ``locked(_:)`` or a ``wait(timeout:until:)`` predicate.
package final class Monitor: @unchecked Sendable {
    private let mutex = PThreadMutex()
    // Heap-allocated, like the mutex: pthread objects must not move.
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        // Deadlines are monotonic, so the clock the wait uses must be too: a wall-clock jump must neither
        // stretch a timeout nor cut it short.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    /// Runs `body` with the mutex held. Not reentrant: `body` must not call back into this monitor.
    package func locked<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        mutex.lock()
        defer { mutex.unlock() }
        return try body()
    }

    /// Wakes every thread blocked in ``wait(timeout:until:)``; call it after changing the state they wait on.
    package func broadcast() {
        mutex.lock()
        pthread_cond_broadcast(condition)
        mutex.unlock()
    }

    /// Wakes one thread blocked in ``wait(timeout:until:)``, when any waiter will do.
    package func signal() {
        mutex.lock()
        pthread_cond_signal(condition)
        mutex.unlock()
    }

    /// Timeouts from this many seconds up (about 31,700 years) wait forever.
    package static let longestTimeout: Double = 1e12

    /// Blocks until `predicate` holds (checked with the mutex held) or `seconds` pass; nil waits forever.
    /// Returns whether the predicate holds.
    @discardableResult
    package func wait(timeout seconds: Double? = nil, until predicate: () -> Bool) -> Bool {
        // A timeout too long for a timespec (or infinite) is waiting forever, not a crash.
        let seconds = seconds.flatMap { $0.isFinite && $0 < Self.longestTimeout ? $0 : nil }
        var deadline = timespec()
        if let seconds {
            let clamped = max(seconds, 0)
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            let nanoseconds = Int(deadline.tv_nsec) + Int(clamped.truncatingRemainder(dividingBy: 1) * 1e9)
            deadline.tv_sec += Int(clamped) + nanoseconds / 1_000_000_000
            deadline.tv_nsec = nanoseconds % 1_000_000_000
        }
        mutex.lock()
        defer { mutex.unlock() }
        while !predicate() {
            if seconds == nil {
                pthread_cond_wait(condition, mutex.pointer)
            } else if pthread_cond_timedwait(condition, mutex.pointer, &deadline) == ETIMEDOUT {
                return predicate()
            }
        }
        return true
    }

    /// ``wait(timeout:until:)`` with the timeout as a `Duration`.
    @discardableResult
    package func wait(timeout: Duration, until predicate: () -> Bool) -> Bool {
        let (seconds, attoseconds) = timeout.components
        return wait(timeout: Double(seconds) + Double(attoseconds) / 1e18, until: predicate)
    }
}
