import CP11Kit

/// The loop of a module's slot-event thread (docs/TOKENS.md, "The watcher"): it waits in the blocking
/// `C_WaitForSlotEvent`, and on each event asks for a look at the module, which runs on the module's own
/// thread. Bounded against a module that misbehaves: events are rate-limited (a burst of `burst`, then one
/// a second, as polling would look), errors pause the loop, and a module that keeps failing, or that turns
/// out not to wait at all, ends the loop, after which the module is polled again. The calls it makes are
/// parameters, so that its bounds are tested without a module.
struct SlotEventLoop {
    /// How a loop ended.
    enum End: Equatable, Sendable {
        /// The module was finalised (`CKR_CRYPTOKI_NOT_INITIALIZED`): the agent is done with it.
        case finalized
        /// The module does not wait for events after all (`CKR_FUNCTION_NOT_SUPPORTED`), or failed
        /// `maximumErrors` times in a row: its last answer.
        case failed(CK_RV)
    }

    /// Events taken at once before the rate limit applies (an insertion may report several slots).
    static let burst = 10.0
    /// Events taken a second once the burst is spent: a module that reports events in a tight loop
    /// gets no more looks than polling every second would make.
    static let eventsPerSecond = 1.0
    /// The pause after a failed wait, so a module that fails at once does not spin a core.
    static let errorPause: Duration = .seconds(1)
    /// Failed waits in a row that end the loop.
    static let maximumErrors = 5

    /// The blocking C_WaitForSlotEvent.
    var wait: () -> CK_RV
    /// Queues a look at the module (coalesced by the caller: one look at a time).
    var event: () -> Void
    /// Sleeps for the duration.
    var pause: (Duration) -> Void
    /// The clock the rate limit reads.
    var now: () -> ContinuousClock.Instant

    /// Runs until the module is finalised or given up on.
    func run() -> End {
        var errors = 0
        var credit = Self.burst
        var last = now()
        while true {
            let rv = wait()
            switch rv {
            case CKR_OK:
                errors = 0
                let time = now()
                credit = min(Self.burst, credit + Self.seconds(time - last) * Self.eventsPerSecond)
                last = time
                if credit < 1 {
                    // Out of credit: wait until one event's worth has come back, then look.
                    pause(.seconds((1 - credit) / Self.eventsPerSecond))
                    credit = 1
                    last = now()
                }
                credit -= 1
                event()
            case CKR_CRYPTOKI_NOT_INITIALIZED:
                return .finalized
            case CKR_FUNCTION_NOT_SUPPORTED:
                return .failed(rv)
            default:
                errors += 1
                if errors >= Self.maximumErrors { return .failed(rv) }
                pause(Self.errorPause)
            }
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
