import LatchkeySystem

/// The one thread that calls a PKCS#11 module (docs/TOKENS.md, "Threads"). Every call to the module is a
/// job run here, in order, so a slow or hung token holds up only its own module's jobs: a request waits
/// for its job with a deadline and then gives up (the job, when it finally runs, finds nobody waiting),
/// and the agent's request threads, its engine mutex and the other modules go on.
final class ModuleWorker: @unchecked Sendable {
    /// Jobs that may wait at once; more are refused at once: a hung module must not collect a thread's
    /// worth of closures per request for ever.
    static let maximumQueued = 32

    private let monitor = Monitor()
    /// Guarded by `monitor`.
    private var jobs: [() -> Void] = []
    /// Guarded by `monitor`: the logouts a keychain lock asked for, by session, run before the next job.
    /// Not capped by `maximumQueued`: a program that keeps the queue full must not keep a token logged
    /// in through a screen lock. One entry per session, so it is bounded by the module's sessions.
    private var logouts: [UInt: () -> Void] = [:]
    /// Guarded by `monitor`: whether the thread is inside a job now, and since when (a hung module).
    private var busySince: ContinuousClock.Instant?
    private let name: String

    /// Starts the thread; nil when no thread could be started.
    init?(name: String) {
        self.name = name
        guard startDetachedThread({ [self] in loop() }) else { return nil }
    }

    /// Whether a job has been running for longer than `limit`: the module hangs.
    func isStuck(longerThan limit: Duration) -> Bool {
        monitor.locked { busySince.map { ContinuousClock.now - $0 > limit } ?? false }
    }

    /// Runs `body` on the module's thread and waits for it at most `timeout`; nil when it did not finish
    /// in time or could not be queued. `body` must not wait for anything but the module.
    func run<T: Sendable>(timeout: Duration, _ body: @escaping @Sendable () -> T) -> T? {
        let slot = ResultSlot<T>()
        let queued = monitor.locked { () -> Bool in
            guard jobs.count < Self.maximumQueued else { return false }
            jobs.append { [monitor] in
                let value = body()
                monitor.locked { slot.value = value }
            }
            return true
        }
        guard queued else { return nil }
        monitor.broadcast()
        let done = monitor.wait(timeout: timeout) { slot.value != nil }
        return done ? monitor.locked { slot.value } : nil
    }

    /// `run` for a job that must not run late (a login with the PIN): when the wait ends at its deadline,
    /// the job is cancelled under the monitor, so it has either started already or never will, and
    /// `body` is released at once with what it holds (the PIN, wiped as its last reference goes).
    func runUnlessLate<T: Sendable>(timeout: Duration, _ body: @escaping @Sendable () -> T) -> T? {
        let slot = ResultSlot<T>()
        let pending = PendingJob(body)
        let queued = monitor.locked { () -> Bool in
            guard jobs.count < Self.maximumQueued else { return false }
            jobs.append { [monitor] in
                guard let body = monitor.locked({ pending.take() }) else { return }
                let value = body()
                monitor.locked { slot.value = value }
            }
            return true
        }
        guard queued else { return nil }
        monitor.broadcast()
        let done = monitor.wait(timeout: timeout) { slot.value != nil }
        if done { return monitor.locked { slot.value } }
        monitor.locked { pending.cancel() }
        return nil
    }

    /// Queues `body` without waiting for it (the watcher's scans); false when the queue is full.
    @discardableResult
    func post(_ body: @escaping @Sendable () -> Void) -> Bool {
        let queued = monitor.locked { () -> Bool in
            guard jobs.count < Self.maximumQueued else { return false }
            jobs.append(body)
            return true
        }
        if queued { monitor.broadcast() }
        return queued
    }

    /// Queues the logout of `session`, which is never refused and runs before any job still queued.
    func logout(session: UInt, _ body: @escaping @Sendable () -> Void) {
        monitor.locked { logouts[session] = body }
        monitor.broadcast()
    }

    private func loop() {
        while true {
            var job: (() -> Void)?
            monitor.wait { !jobs.isEmpty || !logouts.isEmpty }
            monitor.locked {
                if let session = logouts.keys.first {
                    job = logouts.removeValue(forKey: session)
                } else {
                    job = jobs.removeFirst()
                }
                busySince = .now
            }
            job?()
            monitor.locked { busySince = nil }
            monitor.broadcast()
        }
    }
}

/// Where a job leaves its result; read and written under the worker's monitor only.
private final class ResultSlot<T>: @unchecked Sendable {
    var value: T?
    init() {}
}

/// A job's body until the job starts or its caller gives up; read and written under the worker's monitor.
private final class PendingJob<T>: @unchecked Sendable {
    private var body: (() -> T)?
    init(_ body: @escaping () -> T) { self.body = body }
    /// The body, once: nil when the caller gave up first.
    func take() -> (() -> T)? {
        defer { body = nil }
        return body
    }
    func cancel() { body = nil }
}
