#if canImport(Glibc)
import Glibc
#endif

/// Watches the desktop for screen locks and sleep, so that the agent can drop the `WhenUnlocked` class
/// keys.
///
/// Sources:
/// - system bus, logind (`org.freedesktop.login1`): `Session.Lock`/`Unlock` and the `LockedHint` property of
///   the sessions of `uid` (from `Manager.ListSessions`, kept current with `SessionNew`/`SessionRemoved`),
///   and `Manager.PrepareForSleep`;
/// - session bus: `ActiveChanged(b)` of `org.freedesktop.ScreenSaver`, `org.gnome.ScreenSaver` and
///   `org.xfce.ScreenSaver`, on any object path.
///
/// A signal counts only when its sender is the current owner of the well-known name it belongs to (tracked
/// with `GetNameOwner` and `NameOwnerChanged`); anything else is ignored and logged at `.debug`, because any
/// client can emit these signals. An `.unlocked` event is a hint, never authentication (see `LockEvent`).
///
/// A bus that cannot be reached is logged once and skipped. A bus that disconnects later is logged once and
/// no longer watched; there is no reconnection (the system bus going away means the machine is shutting
/// down, the session bus going away means the session ended). logind restarting on a live bus is handled.
///
/// Threading: each bus has its own loop thread. `onEvent` and `log` run on those threads: events from one
/// bus arrive in order, but the two buses may call concurrently. Both callbacks must return quickly.
/// The watcher's methods may be called from any other thread.
public final class LockWatcher: Sendable {
    /// How much a log line matters: `.debug` is per-signal detail (ignored and spoofed signals).
    public enum LogLevel: Sendable, Equatable {
        case debug, info, warning
    }

    private let connections: [BusConnection]
    private let readiness: Readiness

    /// Starts watching. Connecting blocks briefly (until each bus daemon answers `Hello`); the initial
    /// queries run in the background, see `waitUntilReady`.
    ///
    /// - Parameters:
    ///   - systemBus: where logind is watched; `.system` by default, nil to skip.
    ///   - sessionBus: where the screen savers are watched; `.session` by default, nil to skip.
    ///   - uid: whose logind sessions count (default: the caller's real uid).
    ///   - onEvent: receives each lock, unlock, sleep and resume event.
    ///   - log: receives diagnostics; never given a secret.
    public init(systemBus: BusEndpoint? = .system, sessionBus: BusEndpoint? = .session, uid: uid_t = getuid(),
                onEvent: @escaping @Sendable (LockEvent) -> Void,
                log: @escaping @Sendable (LogLevel, String) -> Void) {
        let readiness = Readiness()
        var connections: [BusConnection] = []
        let plan: [(String, BusEndpoint?, @Sendable (Bus, @escaping () -> Void) throws -> Void)] = [
            ("system bus", systemBus, { bus, ready in
                try LogindWatch(uid: uid, emit: onEvent, log: log).start(on: bus, ready: ready)
            }),
            ("session bus", sessionBus, { bus, ready in
                try ScreenSaverWatch(emit: onEvent, log: log).start(on: bus, ready: ready)
            }),
        ]
        for (label, endpoint, start) in plan {
            guard let endpoint else { continue }
            let token = readiness.add()
            let connection: BusConnection
            do {
                connection = try BusConnection(endpoint) { error in
                    log(.warning, "\(label) disconnected (\(error.message)); no longer watching it")
                    readiness.done(token)
                }
            } catch {
                log(.warning, "\(label) unavailable (\(error.message)); not watching it")
                readiness.done(token)
                continue
            }
            connections.append(connection)
            let queued = connection.perform { bus in
                do {
                    try start(bus) { readiness.done(token) }
                } catch {
                    log(.warning, "cannot watch the \(label): \(error)")
                    readiness.done(token)
                }
            }
            if !queued { readiness.done(token) } // lost already; onDisconnect has logged it
        }
        self.connections = connections
        self.readiness = readiness
    }

    deinit { stop() }

    /// Waits until every reachable bus has answered the initial queries (name owners, logind's sessions),
    /// so that signals sent afterwards are judged with complete state. Returns false on timeout.
    public func waitUntilReady(timeout: Duration) -> Bool {
        readiness.wait(timeout: timeout)
    }

    /// Stops watching and closes the connections. When it returns, no callback is running and none will run
    /// again. Do not call it (or drop the last reference) from `onEvent` or `log`: it waits for the loop
    /// threads those run on.
    public func stop() {
        for connection in connections { connection.close() }
    }
}

/// Counts the buses whose initial state is still being fetched.
private final class Readiness: @unchecked Sendable {
    private let monitor = Monitor()
    private var pending: Set<Int> = [] // guarded by monitor
    private var next = 0               // guarded by monitor

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
        let (seconds, attoseconds) = timeout.components
        return monitor.wait(timeout: Double(seconds) + Double(attoseconds) / 1e18) { pending.isEmpty }
    }
}
