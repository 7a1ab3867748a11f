#if canImport(Glibc)
import Glibc
#endif
import LatchkeyDesktop
import LatchkeyEngine
import Logging

/// Runs the Secret Service for the agent: connects to the session bus at start, logs once when there
/// is none or another program owns the name, and connects again when a `latchkeyd` started by D-Bus
/// activation hands over a bus address (docs/SECRET-SERVICE.md §7).
public final class SecretServiceHost: @unchecked Sendable {
    /// The file, in the agent's socket directory, through which an activated `latchkeyd` hands over
    /// the bus address it was given.
    public static let handOffFileName = "session-bus"

    private let keychain: Keychain
    private let prompter: PinentryPrompter
    private let runtimeDirectory: String
    private let log: Logger
    private var mutex = pthread_mutex_t()
    private var service: SecretService?      // guarded by mutex
    private var reported: Set<String> = []   // guarded: problems already logged

    /// A host for `keychain`'s Secret Service; it logs to `log` (the agent's logger: info for what it
    /// did, warning for what it could not do; never a secret).
    public init(keychain: Keychain, prompter: PinentryPrompter, runtimeDirectory: String,
                log: Logger) {
        self.keychain = keychain
        self.prompter = prompter
        self.runtimeDirectory = runtimeDirectory
        self.log = log
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    private var handOffPath: String { runtimeDirectory + "/" + Self.handOffFileName }

    /// Serves the session bus (or a handed-over address), and watches for hand-overs.
    public func start() {
        attach(.session)
        if !isServing, let address = readHandOff() { attach(.address(address)) }
        if !startDetachedThread({ [self] in watchHandOffs() }) {
            log.warning("Secret Service: cannot watch for D-Bus activation hand-overs")
        }
    }

    /// Whether the service currently owns the name on a live connection.
    public var isServing: Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return service?.isRunning == true
    }

    func attach(_ endpoint: BusEndpoint) {
        guard !isServing else { return }
        do {
            let started = try SecretService.start(on: endpoint, keychain: keychain, prompter: prompter, log: log)
            pthread_mutex_lock(&mutex)
            service = started
            pthread_mutex_unlock(&mutex)
            log.info("Secret Service: serving \(SS.busName) on \(endpoint)")
        } catch {
            let key: String
            switch error {
            case .busUnavailable: key = "bus"
            case .nameTaken: key = "taken"
            case .failed: key = "failed"
            }
            let first = withMutex { reported.insert(key).inserted }
            guard first else { return }
            switch error {
            case .busUnavailable(let why):
                log.info("Secret Service: \(why); the agent works without it")
            case .nameTaken(let who):
                log.warning("Secret Service: \(who); Secret Service disabled, the agent works without it")
            case .failed(let why):
                log.warning("Secret Service: \(why)")
            }
        }
    }

    private func withMutex<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }

    // MARK: - Activation hand-over

    /// Blocks on inotify for the hand-over file; attaches to each address written there.
    private func watchHandOffs() {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard inotify_add_watch(fd, runtimeDirectory, UInt32(IN_CLOSE_WRITE | IN_MOVED_TO)) >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            // Any event in the directory: look at the file (cheap, and events may be coalesced).
            if !isServing, let address = readHandOff() {
                log.info("Secret Service: a D-Bus activation asked for the service")
                attach(.address(address))
            }
        }
    }

    /// The address in the hand-over file (removed once read), if it is a regular file of ours.
    private func readHandOff() -> String? {
        let fd = open(handOffPath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_uid == getuid() else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &buffer, buffer.count)
        unlink(handOffPath)
        guard count > 0 else { return nil }
        let address = String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespace()
        guard Self.isLocalSocketAddress(address) else {
            if !address.isEmpty { log.warning("Secret Service: ignored a hand-over to a bus that is not a local socket") }
            return nil
        }
        return address
    }

    /// Only `unix:path=` and `unix:abstract=` buses are taken over: sd-bus would also run a program
    /// for `unixexec:` or connect anywhere for `tcp:`, which a planted hand-over file must never cause.
    static func isLocalSocketAddress(_ address: String) -> Bool {
        guard !address.isEmpty, !address.contains(";") else { return false }
        return address.hasPrefix("unix:path=") || address.hasPrefix("unix:abstract=")
    }

    /// What a `latchkeyd --secret-service-activation` does when an agent already runs: hands it the
    /// bus address from `DBUS_SESSION_BUS_ADDRESS`, waits until `org.freedesktop.secrets` has an
    /// owner, and returns the exit status (0 when it has).
    public static func handOffActivation(runtimeDirectory: String, timeoutSeconds: Int = 10,
                                         log: Logger) -> Int32 {
        guard let raw = getenv("DBUS_SESSION_BUS_ADDRESS") else {
            log.warning("Secret Service activation: DBUS_SESSION_BUS_ADDRESS is not set")
            return 1
        }
        let address = String(cString: raw)
        let path = runtimeDirectory + "/" + handOffFileName
        let temporary = path + ".\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            log.warning("Secret Service activation: cannot write \(temporary): \(String(cString: strerror(errno)))")
            return 1
        }
        var bytes = Array((address + "\n").utf8)
        let written = write(fd, &bytes, bytes.count)
        close(fd)
        guard written == bytes.count, rename(temporary, path) == 0 else {
            unlink(temporary)
            log.warning("Secret Service activation: cannot write \(path)")
            return 1
        }
        guard let bus = try? BusConnection(.address(address)) else {
            log.warning("Secret Service activation: cannot connect to \(address)")
            return 1
        }
        defer { bus.close() }
        for _ in 0..<(timeoutSeconds * 20) {
            let owned = (try? bus.sync { bus -> Bool in
                let reply = try bus.call(destination: SS.daemon, path: SS.daemonPath, interface: SS.daemon,
                                         member: "NameHasOwner", [.string(SS.busName)])
                return try reply.arguments().first?.bool ?? false
            }) ?? false
            if owned { return 0 }
            usleep(50_000)
        }
        log.warning("Secret Service activation: the running agent did not take \(SS.busName) within \(timeoutSeconds) s")
        return 1
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
