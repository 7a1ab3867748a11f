#if canImport(Glibc)
import Glibc
#endif
import LatchkeyModel

/// The one mutex that serialises the engine: the lock state, the store and the observers are touched
/// only while it is held, so every request sees one consistent set of keys and one store.
///
/// A pthread mutex as before the engine was split; issue 9 replaces the package's locks all at once.
final class EngineMutex: @unchecked Sendable {
    private var mutex = pthread_mutex_t()

    init() {
        pthread_mutex_init(&mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(&mutex)
    }

    /// Runs `body` with the mutex held.
    func locked<T>(_ body: () throws(SecError) -> T) throws(SecError) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body()
    }

    /// Runs `body`, which cannot fail, with the mutex held.
    func withLock<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }
}
