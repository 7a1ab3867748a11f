import LatchkeySystem

/// A counter shared between the accept loop and connection threads.
final class AtomicCounter: Sendable {
    private let value = Locked(0)

    /// Increments if below `limit`; returns whether it did.
    func increment(below limit: Int) -> Bool {
        value.withLock { value in
            guard value < limit else { return false }
            value += 1
            return true
        }
    }

    func decrement() {
        value.withLock { $0 -= 1 }
    }
}
