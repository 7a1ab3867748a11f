/// A value that is read and changed only with a lock held: the package's one plain lock.
///
/// The same shape as the standard library's `Synchronization.Mutex` (the state lives inside the lock, and
/// `withLock` is the only way to it), built on a POSIX mutex. On Linux, Swift 6.3's `Mutex` uses
/// priority-inheritance futexes, which hand the lock from thread to thread in the kernel and collapse under
/// contention (swiftlang/swift#88440, fixed upstream by an adaptive lock in #88523): four threads allocating
/// `SecretBytes` took 0.76–6.4 s with `Mutex` against 0.33 s with a pthread mutex, sixteen threads
/// incrementing a counter 80 times as long. Once the toolchain in use ships the fix, this type can become a
/// thin wrapper over `Mutex` without touching its users.
///
/// Waiting for the state to change needs a condition variable; use `Monitor` for that.
package final class Locked<Value: Sendable>: @unchecked Sendable {
    @usableFromInline let mutex = PThreadMutex()
    @usableFromInline var value: Value  // only inside withLock

    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the lock held and the value to read or change; returns what `body` returns.
    /// Not reentrant: `body` must not call `withLock` on the same lock.
    @inlinable
    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body(&value)
    }
}

extension Locked where Value == Void {
    /// A lock that guards state kept elsewhere (fields of its owner, marked as guarded by it).
    package convenience init() {
        self.init(())
    }

    /// Runs `body` with the lock held.
    ///
    /// Takes the mutex itself rather than passing `&value` on: an inout access to a stored `Void`, which has
    /// no storage, is reported by ThreadSanitizer as a write to the object's header, racing with another
    /// thread's unlocked read of that header on its way to the lock (scripts/test-tsan).
    @inlinable
    package func withLock<Result, E: Error>(_ body: () throws(E) -> Result) throws(E) -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body()
    }
}
