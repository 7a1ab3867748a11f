#if canImport(Glibc)
import Glibc
#endif

/// Starts a detached POSIX thread running `body` (the agent avoids Foundation).
func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    let result = pthread_create(&thread, &attributes, { raw in
        let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
        box.body()
        return nil
    }, context)
    if result != 0 {
        Unmanaged<Box>.fromOpaque(context).release()
        return false
    }
    return true
}

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
