import CP11Kit
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Slot events (docs/TOKENS.md, "The watcher"): a module that reports insertions and removals through
/// `C_WaitForSlotEvent` (OpenSC with pcscd) gets a thread of its own that waits in the blocking call and
/// queues a look at once on each event, so a card is seen as it comes and goes; such a module is polled
/// only every `eventPollSeconds` besides. A module that does not report them (SoftHSM2, p11-kit's proxy)
/// is polled every `poll-seconds`, as is one whose waits keep failing.
extension TokenService {
    /// Seconds between two looks at a module whose slot events are watched (or `poll-seconds`, if more):
    /// objects another program changes on a present token raise no slot event.
    static let eventPollSeconds = 30.0

    /// Starts the slot-event thread of module `index` if the module reports slot events. Called on the
    /// module's thread right after its C_Initialize. Not for a module named by `restart`: finalising it at
    /// each look would end every wait (its tokens come and go only through that restart anyway).
    func watchSlotEvents(_ index: Int, _ module: PKCS11Module) {
        guard !configuration.restart.contains(module.name) else { return }
        // A second thread only in a module p11-kit manages: it initialises those for threads
        // (CKF_OS_LOCKING_OK); one it could not wrap got C_Initialize(NULL), which means one thread.
        guard p11_kit_module_get_flags(module.functions) & Int32(P11_KIT_MODULE_UNMANAGED) == 0 else {
            log.info("tokens: module \(module.name) is not managed by p11-kit; polled")
            return
        }
        // CKF_DONT_BLOCK: answers at once. CKR_NO_EVENT or CKR_OK say the module knows the call; whether
        // it also waits is told by the first blocking call (SoftHSM2 refuses that one).
        let probe = module.waitForSlotEvent(block: false)
        guard probe == CKR_OK || probe == CKR_NO_EVENT else {
            log.info("tokens: module \(module.name) reports no slot events (\(PKCS11Errors.name(probe))); polled")
            return
        }
        monitor.locked { _ = state.eventDriven.insert(index) }
        log.info("tokens: module \(module.name) answers C_WaitForSlotEvent; waiting for its slot events")
        let started = startDetachedThread { [self] in
            let loop = SlotEventLoop(
                wait: { module.waitForSlotEvent(block: true) },
                event: { [self] in queueLook(index, event: true) },
                pause: { duration in Self.sleep(duration) },
                now: { ContinuousClock.now })
            let end = loop.run()
            // Polled again from here on, at poll-seconds: never left unwatched.
            monitor.locked { _ = state.eventDriven.remove(index) }
            switch end {
            case .finalized:
                log.info("tokens: module \(module.name) finalised; its slot-event thread ends")
            case .failed(let rv) where rv == CKR_FUNCTION_NOT_SUPPORTED:
                log.info("tokens: module \(module.name) does not wait for slot events; polled")
            case .failed(let rv):
                log.warning(
                    "tokens: module \(module.name): C_WaitForSlotEvent failed (\(PKCS11Errors.name(rv))); polled")
            }
        }
        if !started {
            monitor.locked { _ = state.eventDriven.remove(index) }
            log.warning("tokens: no thread for the slot events of \(module.name); polled")
        }
        // The first look, now rather than at the watcher's next round.
        queueLook(index)
    }

    static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&pause, &remaining) == -1 && errno == EINTR { pause = remaining }
    }
}
