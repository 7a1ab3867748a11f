import LatchkeyModel
import LatchkeySystem

/// The one Argon2id derivation an engine runs at a time (issue 10, defect 3).
///
/// A derivation runs on the thread of the request that asked for it and cannot be interrupted:
/// libargon2 has no way to stop a run, and the engine does not see when a client gives up. A client that
/// timed out and asked again would start a second derivation beside the first, and a third, each a thread
/// at full speed. So the cost of one is bounded (the keybag's derivation limits, checked before anything
/// is derived), and a request that needs a derivation while one runs is refused as busy at once rather
/// than queued: a queue would run, one after the other, the derivations of clients that have long given
/// up. What is left is the one running derivation, which finishes within the limits even when its client
/// has gone.
final class DerivationSlot: Sendable {
    private let running = Locked(false)

    /// The refusal of a request that needs a derivation while another runs.
    static let busy = SecError(
        SecStatus.badReq,
        "busy: the agent is already deriving a key from a password (an unlock, a password change or a "
            + "creation); try again when it has finished")

    /// Runs `body`, which derives, unless another derivation is running: then throws `busy` at once.
    func run<T>(_ body: () throws(SecError) -> T) throws(SecError) -> T {
        let taken = running.withLock { running in
            if running { return false }
            running = true
            return true
        }
        guard taken else { throw Self.busy }
        defer { running.withLock { $0 = false } }
        return try body()
    }
}
