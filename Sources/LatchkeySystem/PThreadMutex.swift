#if canImport(Glibc)
    import Glibc
#endif

/// A POSIX mutex at a fixed heap address: the one pthread mutex of the package, under `Locked` and
/// `Monitor`.
///
/// Heap-allocated because pthread objects must not move, and Swift does not promise a stable address for a
/// stored property passed with `&` (the pattern the package's earlier hand-rolled wrappers used).
@usableFromInline
final class PThreadMutex {
    @usableFromInline let pointer = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    @usableFromInline init() {
        // A default (non-recursive, non-robust) mutex: no use here locks it twice or across fork.
        pthread_mutex_init(pointer, nil)
    }

    deinit {
        pthread_mutex_destroy(pointer)
        pointer.deallocate()
    }

    // Inlinable, with `Locked.withLock`, so that taking a lock from another module is a direct call.
    @inlinable func lock() { pthread_mutex_lock(pointer) }
    @inlinable func unlock() { pthread_mutex_unlock(pointer) }
}
