import LatchkeyDBus
import LatchkeyEngine
import LatchkeySystem
import Logging
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the Secret Service for the agent: connects to the session bus at start, logs once when there
/// is none or another program owns the name, and connects again when a `latchkeyd` started by D-Bus
/// activation hands over a bus address (docs/SECRET-SERVICE.md §7).
package final class SecretServiceHost: @unchecked Sendable {
    /// The file, in the agent's socket directory, through which an activated `latchkeyd` hands over
    /// the bus address it was given.
    package static let handOffFileName = "session-bus"
    /// The most of the hand-over file read: a bus address is far shorter.
    static let handOffMaximumSize = 4096

    private let keychain: Keychain
    private let prompter: PinentryPrompter
    private let runtimeDirectory: String
    private let log: Logger
    private let policy: any BusClientPolicy
    /// The running service, and the problems already logged (each is logged once).
    private let state = Locked<(service: SecretService?, reported: Set<String>)>((nil, []))

    /// A host for `keychain`'s Secret Service; it logs to `log` (the agent's logger: info for what it
    /// did, warning for what it could not do; never a secret). `policy` decides what each bus client
    /// may reach.
    package init(
        keychain: Keychain, prompter: PinentryPrompter, runtimeDirectory: String,
        log: Logger, policy: any BusClientPolicy = UnlistedBusClients()
    ) {
        self.policy = policy
        self.keychain = keychain
        self.prompter = prompter
        self.runtimeDirectory = runtimeDirectory
        self.log = log
    }

    private var handOffPath: String { runtimeDirectory + "/" + Self.handOffFileName }

    /// Serves the session bus (or a handed-over address), and watches for hand-overs.
    package func start() {
        attach(.session)
        if !isServing, let address = readHandOff() { attach(.address(address)) }
        if !startDetachedThread({ [self] in watchHandOffs() }) {
            log.warning("Secret Service: cannot watch for D-Bus activation hand-overs")
        }
    }

    /// Whether the service currently owns the name on a live connection.
    package var isServing: Bool {
        state.withLock { $0.service?.isRunning == true }
    }

    func attach(_ endpoint: BusEndpoint) {
        guard !isServing else { return }
        do {
            let started = try SecretService.start(
                on: endpoint, keychain: keychain, prompter: prompter, log: log, policy: policy)
            state.withLock { $0.service = started }
            log.info("Secret Service: serving \(SS.busName) on \(endpoint)")
        } catch {
            let key: String
            switch error {
            case .busUnavailable: key = "bus"
            case .nameTaken: key = "taken"
            case .failed: key = "failed"
            }
            let first = state.withLock { $0.reported.insert(key).inserted }
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

    /// The address in the hand-over file (removed once read), if it is a regular file of ours (never
    /// through a symbolic link, never blocking on a FIFO).
    private func readHandOff() -> String? {
        // A file that is not ours, or not a regular file, is left where it is.
        guard let bytes = try? Files.read(FilePath(handOffPath), upTo: Self.handOffMaximumSize, owner: getuid()) else {
            return nil
        }
        unlink(handOffPath)
        guard !bytes.isEmpty else { return nil }
        let address = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        guard Self.isLocalSocketAddress(address) else {
            if !address.isEmpty {
                log.warning("Secret Service: ignored a hand-over to a bus that is not a local socket")
            }
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
    package static func handOffActivation(
        runtimeDirectory: String, timeoutSeconds: Int = 10,
        log: Logger
    ) -> Int32 {
        guard let address = Environment.value("DBUS_SESSION_BUS_ADDRESS") else {
            log.warning("Secret Service activation: DBUS_SESSION_BUS_ADDRESS is not set")
            return 1
        }
        let path = runtimeDirectory + "/" + handOffFileName
        let temporary = path + ".\(getpid())"
        // Written aside and renamed, so the running agent never reads half an address; the agent's
        // runtime directory is not worth an fsync.
        do {
            try Files.replace(
                FilePath(path), with: Array((address + "\n").utf8), through: FilePath(temporary),
                durable: false)
        } catch {
            // FileError names the step's file: the temporary one, or `path` for the rename.
            log.warning("Secret Service activation: cannot write \(error)")
            return 1
        }
        guard let bus = try? BusConnection(.address(address)) else {
            log.warning("Secret Service activation: cannot connect to \(address)")
            return 1
        }
        defer { bus.close() }
        for _ in 0..<(timeoutSeconds * 20) {
            let owned =
                (try? bus.sync { bus -> Bool in
                    let reply = try bus.call(
                        destination: SS.daemon, path: SS.daemonPath, interface: SS.daemon,
                        member: "NameHasOwner", [.string(SS.busName)])
                    return try reply.arguments().first?.bool ?? false
                }) ?? false
            if owned { return 0 }
            usleep(50_000)
        }
        log.warning(
            "Secret Service activation: the running agent did not take \(SS.busName) within \(timeoutSeconds) s")
        return 1
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}
