import LatchkeyDBus
import LatchkeySystem
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Watches the desktop for screen locks and sleep, so that the agent can drop the `WhenUnlocked` class
/// keys.
///
/// Sources:
/// - system bus, logind (`org.freedesktop.login1`): `Session.Lock`/`Unlock` and the `LockedHint` property of
///   the sessions of `uid` (from `Manager.ListSessions`, kept current with `SessionNew`/`SessionRemoved`),
///   `Manager.PrepareForSleep`, and `Manager.SessionRemoved` of any session (for the agent's login sessions);
/// - session bus: `ActiveChanged(b)` of `org.freedesktop.ScreenSaver`, `org.gnome.ScreenSaver` and
///   `org.xfce.ScreenSaver`, on any object path.
///
/// A signal counts only when its sender is the current owner of the well-known name it belongs to (tracked
/// with `GetNameOwner` and `NameOwnerChanged`); anything else is ignored and logged at `.debug`, because any
/// client can emit these signals. An `.unlocked` event is a hint, never authentication (see `LockEvent`).
///
/// A bus that cannot be reached, or that goes away later (a session bus restarted by a new login while
/// the agent lives on; dbus-broker restarting), is logged once and tried again in the background, every
/// `retry.initial` seconds doubling up to `retry.maximum`, until it is back: then it is logged once more
/// and watched as before. logind restarting on a live bus is handled by `LogindWatch` itself.
///
/// Threading: each bus has its own loop thread, and a supervisor thread that reconnects it. `onEvent`
/// and the logger's handler run on those threads: events from one bus arrive in order, but the two buses
/// may call concurrently. Both must return quickly. The watcher's methods may be called from any other
/// thread.
package final class LockWatcher: Sendable {
    /// When to try a lost or missing bus again.
    package struct Retry: Sendable, Equatable {
        /// Seconds before the first new attempt.
        package var initial: Double
        /// The longest wait between attempts.
        package var maximum: Double

        package init(initial: Double = 1, maximum: Double = 30) {
            self.initial = initial
            self.maximum = maximum
        }
    }

    private let buses: [WatchedBus]
    private let readiness: Readiness

    /// Starts watching. Connecting blocks briefly (until each bus daemon answers `Hello`); the initial
    /// queries run in the background, see `waitUntilReady`.
    ///
    /// - Parameters:
    ///   - systemBus: where logind is watched; `.system` by default, nil to skip.
    ///   - sessionBus: where the screen savers are watched; `.session` by default, nil to skip.
    ///   - uid: whose logind sessions count (default: the caller's real uid).
    ///   - retry: when a lost or missing bus is tried again.
    ///   - onEvent: receives each lock, unlock, sleep and resume event.
    ///   - onSessionRemoved: receives the id of every session logind removes (`Manager.SessionRemoved`
    ///     from the owner of org.freedesktop.login1), on the system bus's thread.
    ///   - log: where diagnostics go (never a secret): `.info` and `.warning` for what changed or failed,
    ///     `.debug` for per-signal detail (ignored and spoofed signals).
    package init(
        systemBus: BusEndpoint? = .system, sessionBus: BusEndpoint? = .session, uid: uid_t = getuid(),
        retry: Retry = Retry(), onEvent: @escaping @Sendable (LockEvent) -> Void,
        onSessionRemoved: @escaping @Sendable (String) -> Void = { _ in }, log: Logger
    ) {
        let readiness = Readiness()
        let plan: [(String, BusEndpoint?, WatchedBus.Start)] = [
            (
                "system bus", systemBus,
                { bus, ready in
                    try LogindWatch(uid: uid, emit: onEvent, sessionRemoved: onSessionRemoved, log: log)
                        .start(on: bus, ready: ready)
                }
            ),
            (
                "session bus", sessionBus,
                { bus, ready in
                    try ScreenSaverWatch(emit: onEvent, log: log).start(on: bus, ready: ready)
                }
            ),
        ]
        var buses: [WatchedBus] = []
        for (label, endpoint, start) in plan {
            guard let endpoint else { continue }
            let bus = WatchedBus(label: label, endpoint: endpoint, retry: retry, start: start, log: log)
            bus.begin(readiness: readiness)
            buses.append(bus)
        }
        self.buses = buses
        self.readiness = readiness
    }

    deinit { stop() }

    /// Waits until every reachable bus has answered the initial queries (name owners, logind's sessions),
    /// so that signals sent afterwards are judged with complete state. Returns false on timeout.
    package func waitUntilReady(timeout: Duration) -> Bool {
        readiness.wait(timeout: timeout)
    }

    /// Stops watching and closes the connections. When it returns, no callback is running and none will run
    /// again. Do not call it (or drop the last reference) from `onEvent` or a log handler: it waits for the loop
    /// threads those run on.
    package func stop() {
        for bus in buses { bus.stop() }
    }
}

/// One bus the watcher follows: its current connection, and the supervisor that reconnects it.
private final class WatchedBus: @unchecked Sendable {
    typealias Start = @Sendable (Bus, @escaping () -> Void) throws -> Void

    private let label: String
    private let endpoint: BusEndpoint
    private let retry: LockWatcher.Retry
    private let start: Start
    private let log: Logger
    private let monitor = Monitor()
    // Guarded by monitor:
    private var connection: BusConnection?
    private var lost = false
    private var stopped = false

    init(label: String, endpoint: BusEndpoint, retry: LockWatcher.Retry, start: @escaping Start, log: Logger) {
        self.label = label
        self.endpoint = endpoint
        self.retry = retry
        self.start = start
        self.log = log
    }

    /// The first attempt, synchronous (as callers expect of `LockWatcher.init`); then the supervisor.
    func begin(readiness: Readiness) {
        let token = readiness.add()
        do {
            try connect { readiness.done(token) }
        } catch {
            log.warning("\(label) unavailable (\(error.message)); not watching it until it appears")
            readiness.done(token)
        }
        if !startDetachedThread({ [self] in supervise() }) {
            log.warning("cannot start a thread to reconnect the \(label); it will not be watched again if lost")
        }
    }

    /// Connects and starts the watch; `ready` runs when the initial queries are answered (or failed).
    private func connect(ready: @escaping @Sendable () -> Void) throws(BusError) {
        let label = self.label
        let made = try BusConnection(endpoint) { [weak self, log] error in
            log.warning("\(label) disconnected (\(error.message)); watching for it to come back")
            ready()
            guard let self else { return }
            monitor.locked { lost = true }
            monitor.broadcast()
        }
        let keep = monitor.locked { () -> Bool in
            guard !stopped else { return false }
            connection = made
            lost = false
            return true
        }
        guard keep else {
            made.close()
            ready()
            return
        }
        let start = self.start
        let queued = made.perform { [log] bus in
            do {
                try start(bus, ready)
            } catch {
                log.warning("cannot watch the \(label): \(error)")
                ready()
            }
        }
        if !queued { ready() }  // lost already; the disconnect handler has logged it
    }

    /// Waits for the bus to be lost (or never to have come), then tries again with growing pauses.
    private func supervise() {
        var delay = retry.initial
        while true {
            _ = monitor.wait { stopped || lost || connection == nil }
            let (old, isStopped) = monitor.locked { () -> (BusConnection?, Bool) in
                defer { if lost { connection = nil } }
                return (lost ? connection : nil, stopped)
            }
            old?.close()
            if isStopped { return }
            // Pause (stop() wakes it), then try.
            _ = monitor.wait(timeout: delay) { stopped }
            if monitor.locked({ stopped }) { return }
            do {
                try connect(ready: {})
                log.info("\(label) reachable again; watching it")
                delay = retry.initial
            } catch {
                log.debug(
                    "\(label) still unavailable (\(error.message)); next try in \(min(delay * 2, retry.maximum)) s")
                delay = min(delay * 2, retry.maximum)
            }
        }
    }

    func stop() {
        let current = monitor.locked { () -> BusConnection? in
            stopped = true
            defer { connection = nil }
            return connection
        }
        monitor.broadcast()
        current?.close()
    }
}

/// Counts the buses whose initial state is still being fetched.
private final class Readiness: @unchecked Sendable {
    private let monitor = Monitor()
    private var pending: Set<Int> = []  // guarded by monitor
    private var next = 0  // guarded by monitor

    func add() -> Int {
        monitor.locked {
            next += 1
            pending.insert(next)
            return next
        }
    }

    /// Marks a bus as ready (or given up); repeated calls are harmless.
    func done(_ token: Int) {
        monitor.locked { _ = pending.remove(token) }
        monitor.broadcast()
    }

    func wait(timeout: Duration) -> Bool {
        monitor.wait(timeout: timeout) { pending.isEmpty }
    }
}
