import LatchkeyModel
import LatchkeySystem

/// The one mutex that serialises the engine: the lock state, the store and the observers are touched
/// only while it is held, so every request sees one consistent set of keys and one store. It guards
/// fields of its owners (`Keychain`, `LockState`), so it is the stateless form of `Locked`.
final class EngineMutex: Sendable {
    private let lock = Locked()

    /// Runs `body` with the mutex held.
    func locked<T>(_ body: () throws(SecError) -> T) throws(SecError) -> T {
        try lock.withLock(body)
    }

    /// Runs `body`, which cannot fail, with the mutex held.
    func withLock<T>(_ body: () -> T) -> T {
        lock.withLock(body)
    }
}
