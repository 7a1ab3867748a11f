#if canImport(Glibc)
import Glibc
#endif

/// A mutex with a condition variable, for the little state shared between a bus loop thread and its
/// callers (the module avoids Foundation, as the agent does).
final class Monitor: @unchecked Sendable {
    // Heap-allocated: pthread objects must not move, and Swift does not promise a stable address for a
    // stored property passed with `&`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with the mutex held.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Wakes every thread blocked in `wait`; call it after changing the state they wait on.
    func broadcast() {
        pthread_mutex_lock(mutex)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Blocks until `condition` holds (checked with the mutex held) or `seconds` pass; nil waits forever.
    /// Returns whether the condition holds.
    func wait(timeout seconds: Double? = nil, until predicate: () -> Bool) -> Bool {
        var deadline = timespec()
        if let seconds {
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            let nanoseconds = Int(deadline.tv_nsec) + Int(seconds.truncatingRemainder(dividingBy: 1) * 1e9)
            deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
            deadline.tv_nsec = nanoseconds % 1_000_000_000
        }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !predicate() {
            if seconds == nil {
                pthread_cond_wait(condition, mutex)
            } else if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT {
                return predicate()
            }
        }
        return true
    }
}

/// Starts a detached POSIX thread running `body`; returns false when the thread cannot be created.
/// Shared by the agent and the Secret Service, which avoid Foundation's `Thread`.
public func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    let result = pthread_create(&thread, &attributes, { raw in
        Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, context)
    if result != 0 {
        Unmanaged<Box>.fromOpaque(context).release()
        return false
    }
    return true
}
