#if canImport(Glibc)
    import Glibc
#endif

/// Starts a detached POSIX thread running `body`; returns false, without running `body` (and releasing
/// it), when the thread cannot be created.
///
/// The agent, the D-Bus loops and the Secret Service use plain threads rather than Foundation's `Thread`
/// (they avoid Foundation) or Swift concurrency (their work blocks: sockets, sd-bus, waitpid).
///
/// - Parameter stackSize: the new thread's stack in bytes, or nil for the system's default. A size the
///   system refuses, or cannot map, makes the call return false.
package func startDetachedThread(stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var attributes = pthread_attr_t()
    guard pthread_attr_init(&attributes) == 0 else { return false }
    defer { pthread_attr_destroy(&attributes) }
    guard pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) == 0 else { return false }
    if let stackSize, stackSize < 0 || pthread_attr_setstacksize(&attributes, stackSize) != 0 { return false }
    // The thread owns one retain of the box; it is taken back here if the thread never starts.
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, &attributes,
        { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, context)
    if result != 0 {
        Unmanaged<Box>.fromOpaque(context).release()
        return false
    }
    return true
}
