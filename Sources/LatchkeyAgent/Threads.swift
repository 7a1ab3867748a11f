#if canImport(Glibc)
import Glibc
#endif

/// A counter shared between the accept loop and connection threads.
final class AtomicCounter: @unchecked Sendable {
    private var value = 0
    private var mutex = pthread_mutex_t()
    init() { pthread_mutex_init(&mutex, nil) }

    /// Increments if below `limit`; returns whether it did.
    func increment(below limit: Int) -> Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        guard value < limit else { return false }
        value += 1
        return true
    }

    func decrement() {
        pthread_mutex_lock(&mutex)
        value -= 1
        pthread_mutex_unlock(&mutex)
    }
}
