import LatchkeySystem

/// A serving thread out of descriptors asks the accept thread, which alone closes idle connections
/// (`ConnectionPoller`), to close one so that it can open the descriptor it needs; it waits a bounded
/// time for the answer.
///
/// Used for the pidfd of a login process (`PeerProcess.of`): without it, the session would count until
/// its close, though its login process may die first (the agent's descriptors are sized for every
/// session, but a low hard limit can leave fewer). An idle connection is the cheapest thing to give up:
/// its client reconnects without noticing (docs/PROTOCOL.md §1 "Idle connections").
final class DescriptorRoom: @unchecked Sendable {
    /// How long a serving thread waits for the accept thread to answer: it answers as soon as it wakes,
    /// which the request itself makes it do.
    static let answerWait: Duration = .seconds(1)

    private let monitor = Monitor()
    /// Requests made so far, numbered from 1 (guarded by monitor).
    private var requested: UInt64 = 0
    /// Requests the accept thread has taken up (guarded by monitor).
    private var taken: UInt64 = 0
    /// Answers not yet collected, by request number (guarded by monitor).
    private var answers: [UInt64: Bool] = [:]
    /// Requests whose thread stopped waiting before an answer came (guarded by monitor): nothing is
    /// closed for them, and an answer already on its way is dropped, so nothing is left behind.
    private var abandoned: Set<UInt64> = []

    /// Asks for an idle connection to be closed, wakes the accept thread through `wake`, and waits for
    /// the answer: whether one was closed. False when no answer comes within `answerWait`.
    func request(wake: WakePipe) -> Bool {
        let ticket = monitor.locked { () -> UInt64 in
            requested += 1
            return requested
        }
        wake.notify()
        monitor.wait(timeout: DescriptorRoom.answerWait) { answers[ticket] != nil }
        return monitor.locked {
            if let answer = answers.removeValue(forKey: ticket) { return answer }
            abandoned.insert(ticket)
            return false
        }
    }

    /// On the accept thread: answers every pending request with what `closeIdle` does for it.
    func answer(_ closeIdle: () -> Bool) {
        let pending = monitor.locked { () -> [UInt64] in
            guard taken < requested else { return [] }
            defer { taken = requested }
            return ((taken + 1)...requested).filter { abandoned.remove($0) == nil }
        }
        guard !pending.isEmpty else { return }
        let results = pending.map { ($0, closeIdle()) }
        monitor.locked {
            for (ticket, closed) in results where abandoned.remove(ticket) == nil { answers[ticket] = closed }
        }
        monitor.broadcast()
    }
}
