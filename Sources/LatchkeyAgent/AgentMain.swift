import CLatchkeySystem
import LatchkeyDesktop
import LatchkeyEngine
import LatchkeyLog
import LatchkeyModel
import LatchkeySecretService
import LatchkeySystem
import LatchkeyTokens
import LatchkeyTransport
import LatchkeyWire
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// `latchkeyd` start-up: options, hardening, daemonising, the readiness signal and the server.
package enum AgentMain {
    static let usage = """
        usage: latchkeyd [--keychain DIR] [--lock-grace SECONDS] [--idle-lock MINUTES] [--no-desktop]
                         [--no-secret-service] [--prompter COMMAND] [--secret-service-activation]
                         [--log-limit BYTES] [--daemon] [--version]

        The latchkey agent: holds the keychain's class keys and its encrypted store, and serves the
        Latchkey library and the latchkey command over $XDG_RUNTIME_DIR/latchkey/agent.sock.
        Clients start it on demand; see latchkeyd(8).

          --keychain DIR  keychain directory (default: $XDG_DATA_HOME/latchkey, or ~/.local/share/latchkey)
          --lock-grace SECONDS
                          after the screen locks, drop the WhenUnlocked keys this much later
                          (default 5, or $LATCHKEY_LOCK_GRACE; 0 = at once)
          --idle-lock MINUTES
                          drop the WhenUnlocked keys after this long without keychain use
                          (default never, or $LATCHKEY_IDLE_LOCK; 0 = never; at most 525600, a year)
          --no-desktop    do not watch logind and screen savers on D-Bus
          --no-secret-service
                          do not serve org.freedesktop.secrets on the session bus
          --prompter COMMAND
                          the pinentry-compatible program that asks for the keychain password when a
                          Secret Service client unlocks (default pinentry, or $LATCHKEY_PROMPTER)
          --secret-service-activation
                          started by D-Bus activation: if an agent already runs, hand it the bus
                          and exit (docs/SECRET-SERVICE.md)
          --log-limit BYTES
                          when standard error is $XDG_RUNTIME_DIR/latchkey/agent.log, rename it to
                          agent.log.1 once it passes BYTES (default 1048576, or $LATCHKEY_LOG_LIMIT;
                          0 = never)
          --daemon        detach from the terminal (used when a client starts the agent)
          --version       print the version and exit

        """

    package static func run(arguments: [String]) -> Never {
        // The only bootstrap in the package: every module below logs through a Logger it is given (or
        // AgentLog.logger), and this handler writes the agent's line format to standard error.
        LoggingSystem.bootstrap { _ in AgentLogHandler() }
        closeInheritedDescriptors()
        // p11-kit would also load the PKCS#11 modules of ~/.config/pkcs11, which any program of the user can
        // write: only root chooses the code the agent runs (docs/TOKENS.md §1). Set before any thread starts
        // (setenv is not safe beside a getenv on another thread).
        setenv(TokenConfiguration.noUserConfigVariable, "1", 1)
        // A token module reads variables of its own, and some choose code (OpenSC's OPENSC_CONF names
        // libraries it loads) or another program to trust as the card: a user's agent drops them however
        // it was started (root's, in tests, is set up by root).
        if geteuid() != 0 {
            for entry in Environment.codeVariables { unsetenv(String(entry.dropLast())) }
        }
        var directory: String?
        var daemon = false
        var watchDesktop = true
        var serveSecretService = true
        var activation = false
        var prompterFromOption = false
        // Started by a service manager (D-Bus activation, or systemd socket activation: LISTEN_PID is this
        // process), the agent's environment is one that any client of the session bus can change.
        // (INVOCATION_ID would say "a systemd unit" too, but every program a desktop started through
        // systemd inherits it, so it cannot tell the agent's own unit from a terminal's.)
        let socketActivated = Environment.value("LISTEN_PID").flatMap(Int32.init) == getpid()
        let sharedEnvironment = arguments.contains("--secret-service-activation") || socketActivated
        let starter =
            arguments.contains("--secret-service-activation") ? "D-Bus activation" : "systemd socket activation"
        if sharedEnvironment { ignoreSharedEnvironment(starter: starter) }
        var prompter =
            Environment.value("LATCHKEY_PROMPTER").map(PinentryPrompter.init(commandLine:))
            ?? PinentryPrompter(command: ["pinentry"])
        var policy = LockPolicy.Settings()
        var logLimit = LogOutput.defaultLimit
        if let value = Environment.value("LATCHKEY_LOG_LIMIT") {
            guard let bytes = Int(value), bytes >= 0 else {
                usageError("LATCHKEY_LOG_LIMIT=\(value) is not a number of bytes")
            }
            logLimit = bytes
        }
        if let value = Environment.value("LATCHKEY_LOCK_GRACE") {
            guard let seconds = Double(value), seconds >= 0, seconds <= 86_400 else {
                usageError("LATCHKEY_LOCK_GRACE=\(value) is not a number of seconds")
            }
            policy.grace = seconds
        }
        if let value = Environment.value("LATCHKEY_IDLE_LOCK") {
            guard let minutes = Double(value), minutes >= 0, minutes <= 525_600 else {
                usageError("LATCHKEY_IDLE_LOCK=\(value) is not a number of minutes")
            }
            policy.idleLimit = minutes > 0 ? minutes * 60 : nil
        }
        var index = 1
        while index < arguments.count {
            switch arguments[index] {
            case "--keychain" where index + 1 < arguments.count:
                index += 1
                directory = arguments[index]
            case "--lock-grace" where index + 1 < arguments.count:
                index += 1
                guard let seconds = Double(arguments[index]), seconds >= 0, seconds <= 86_400 else {
                    usageError("--lock-grace needs a number of seconds")
                }
                policy.grace = seconds
            case "--idle-lock" where index + 1 < arguments.count:
                index += 1
                guard let minutes = Double(arguments[index]), minutes >= 0, minutes <= 525_600 else {
                    usageError("--idle-lock needs a number of minutes")
                }
                policy.idleLimit = minutes > 0 ? minutes * 60 : nil
            case "--no-desktop":
                watchDesktop = false
            case "--no-secret-service":
                serveSecretService = false
            case "--prompter" where index + 1 < arguments.count:
                index += 1
                prompter = PinentryPrompter(commandLine: arguments[index])
                prompterFromOption = true
                guard !prompter.command.isEmpty, !arguments[index].isEmpty else {
                    usageError("--prompter needs a command")
                }
            case "--log-limit" where index + 1 < arguments.count:
                index += 1
                guard let bytes = Int(arguments[index]), bytes >= 0 else {
                    usageError("--log-limit needs a number of bytes")
                }
                logLimit = bytes
            case "--secret-service-activation":
                activation = true
            case "--daemon":
                daemon = true
            case "--version":
                print("latchkeyd \(AgentService.version) (protocol \(Wire.protocolVersion))")
                exit(0)
            case "--help", "-h":
                print(usage, terminator: "")
                exit(0)
            default:
                usageError("unknown option '\(arguments[index])'")
            }
            index += 1
        }
        if sharedEnvironment && !prompterFromOption && Environment.value("LATCHKEY_PROMPTER") != nil {
            // Started by the bus: its activation environment can be changed by any client
            // (UpdateActivationEnvironment), so it must not choose who asks for the password.
            prompter = PinentryPrompter(command: ["pinentry"])
            AgentLog.warning("ignoring LATCHKEY_PROMPTER: started by \(starter) (use --prompter in the .service file)")
        }
        if daemon { daemonize() }
        for warning in Hardening.apply() { AgentLog.warning(warning) }
        // Before anything sizes itself from the limit (the connection cap, in AgentServer).
        if let warning = ConnectionLimits.raiseDescriptorLimit() { AgentLog.warning(warning) }

        let location = KeychainLocation(directory: directory ?? defaultKeychainDirectory())
        let endpoint = AgentEndpoint.current()
        let server: AgentServer
        let keychain: Keychain
        let lockPolicy: LockPolicy
        let tokens: TokenService
        do {
            // The locks first: the keychain is opened (its store, perhaps migrated) only by the one
            // agent that may serve it.
            let locks = try AgentLocks.take(binding: Listener.isInherited ? nil : endpoint, keychain: location)
            let presence = UserPresence(prompter: prompter)
            tokens = makeTokens(presence)
            keychain = Keychain(location: location, policy: AccessGroupPolicy(), tokens: tokens)
            lockPolicy = LockPolicy(keychain: keychain, settings: policy)
            server = try AgentServer(
                endpoint: endpoint, locks: locks, keychain: keychain,
                onItemRequest: { lockPolicy.noteUse() },
                onUnlock: { lockPolicy.cancelPendingLock() },
                presence: presence)
        } catch let error as ListenerError {
            if error.alreadyRunning && activation {
                // D-Bus started us for org.freedesktop.secrets: the running agent takes the bus.
                exit(SecretServiceHost.handOffActivation(runtimeDirectory: endpoint.directory, log: AgentLog.logger))
            }
            AgentLog.write(error.alreadyRunning ? .info : .error, error.description)
            if error.socketTakenByAnother { signalReady(.anotherAgentListens) }
            exit(error.alreadyRunning ? 0 : 1)
        } catch {
            AgentLog.error("\(error)")
            exit(1)
        }
        installSignalHandlers(server)
        watchSocketFile(server)
        // The socket directory is checked (ours, 0700) now, so rotation may create files in it. Only the
        // agent.log a client opened for us is capped; the journal, a pipe or a file of the user's choice
        // is left alone.
        LogOutput.standardError.bound(path: endpoint.logPath, limit: logLimit)
        let status = keychain.status()
        if let problem = status.problem { AgentLog.error(problem) }
        AgentLog.info(
            "listening on \(server.socketPath); keychain \(location.directory)"
                + (status.exists ? "" : " (not created yet)"))
        if let warning = Hardening.mlockWarning() { AgentLog.warning(warning) }
        if watchDesktop {
            // Missing buses are logged once by the watcher and do not stop the agent.
            let service = server.service
            desktopWatcher = LockWatcher(
                onEvent: { lockPolicy.handle($0) }, onSessionRemoved: { service.logindSessionRemoved($0) },
                log: AgentLog.logger)
            // Wait (briefly) until the signal matches are in place, so a lock right after start is seen.
            if desktopWatcher?.waitUntilReady(timeout: .seconds(2)) == false {
                AgentLog.warning("the desktop buses did not answer within 2 s; watching them anyway")
            }
        }
        if serveSecretService {
            // A missing session bus, or another owner of the name, is logged once and changes nothing else.
            let host = SecretServiceHost(
                keychain: keychain, prompter: prompter, runtimeDirectory: endpoint.directory,
                log: AgentLog.logger, policy: server.policy)
            host.start()
            secretServiceHost = host
        }
        // Modules load and tokens are scanned on threads of their own; the agent answers meanwhile.
        tokens.start()
        signalReady()
        server.run()
    }

    /// The token service (docs/TOKENS.md) with the configuration in effect; PINs are asked through the
    /// same queue of prompts as the user checks.
    private static func makeTokens(_ presence: UserPresence) -> TokenService {
        let (configuration, warnings) = TokenConfiguration.load()
        for warning in warnings { AgentLog.warning("tokens: \(warning)") }
        return TokenService(
            configuration: configuration, askPIN: { request throws(SecError) in try presence.askPIN(request) },
            log: AgentLog.logger)
    }

    /// `$XDG_DATA_HOME/latchkey`, or `~/.local/share/latchkey`.
    package static func defaultKeychainDirectory() -> String {
        if let data = Environment.value("XDG_DATA_HOME"), data.hasPrefix("/") {
            return data + "/latchkey"
        }
        return homeDirectory() + "/.local/share/latchkey"
    }

    static func homeDirectory() -> String {
        if let home = Environment.value("HOME") { return home }
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { return String(cString: dir) }
        return "/"
    }

    /// Forks so the starting client can reap the parent at once, and leaves the terminal's session.
    private static func daemonize() {
        let pid = fork()
        if pid < 0 {
            AgentLog.error("fork: \(String(cString: strerror(errno)))")
            exit(1)
        }
        if pid > 0 { _exit(0) }
        setsid()
        chdir("/")
    }

    /// Settings an agent started by a service manager never takes from its environment: any client of
    /// the session bus can change the environment D-Bus activation and the systemd user manager start
    /// services with (`UpdateActivationEnvironment`), and none of them may weaken the agent (a day-long
    /// screen-lock grace, no idle lock, a log that rotates away at once, a tiny Secret Service session
    /// cap, connections dropped every second). The unit's or .service file's command line sets them. `LATCHKEY_PROMPTER` is handled where
    /// the prompter is chosen (`--prompter` may replace it). This is defence in depth: such a client
    /// runs as the user (docs/SECURITY.md, attacker 5).
    static let sharedEnvironmentIgnored = [
        "LATCHKEY_LOCK_GRACE", "LATCHKEY_IDLE_LOCK", "LATCHKEY_LOG_LIMIT",
        "LATCHKEY_MAX_SESSIONS", "LATCHKEY_CONNECTION_IDLE", "LATCHKEY_PRESENCE_TIMEOUT",
    ]
    /// Where an agent started by a service manager looks for programs (the prompter): a PATH from the
    /// shared environment would choose which program receives the keychain password.
    static let trustedPath = "/usr/local/bin:/usr/bin:/bin"

    private static func ignoreSharedEnvironment(starter: String) {
        for name in sharedEnvironmentIgnored where getenv(name) != nil {
            unsetenv(name)
            AgentLog.warning("ignoring \(name): started by \(starter) (use the option in the .service file)")
        }
        if let path = Environment.value("PATH"), path != trustedPath {
            AgentLog.warning("ignoring PATH=\(path): started by \(starter); programs are looked for in \(trustedPath)")
        }
        setenv("PATH", trustedPath, 1)
    }

    /// Tells a client that started us how the start went: it passed the write end of a pipe in
    /// LATCHKEY_READY_FD and waits for one byte (or for EOF, if we die first). The values are in
    /// `AgentReadiness` (docs/PROTOCOL.md §1).
    private static func signalReady(_ readiness: AgentReadiness = .listening) {
        guard let value = Environment.value("LATCHKEY_READY_FD"), let fd = Int32(value), fd > 2 else { return }
        unsetenv("LATCHKEY_READY_FD")
        var byte = readiness.rawValue
        _ = write(fd, &byte, 1)
        close(fd)
    }

    nonisolated(unsafe) private static var serverForSignals: AgentServer?
    /// Kept for the process's life.
    nonisolated(unsafe) private static var desktopWatcher: LockWatcher?
    /// Kept for the process's life.
    nonisolated(unsafe) private static var secretServiceHost: SecretServiceHost?

    /// Closes every descriptor above stderr that is not ours by contract: the readiness pipe and
    /// systemd's listening sockets. Anything else was leaked by the starter (a client's own pipes),
    /// and holding it would keep that starter's reader waiting for an EOF that never comes.
    private static func closeInheritedDescriptors() {
        var keep: [Int32] = []
        if let value = Environment.value("LATCHKEY_READY_FD"), let fd = Int32(value), fd > 2 { keep.append(fd) }
        if Environment.value("LISTEN_PID").flatMap(Int32.init) == getpid(),
            let count = Environment.value("LISTEN_FDS").flatMap(Int32.init), count > 0, count < 64
        {
            keep += (0..<count).map { 3 + $0 }
        }
        latchkey_close_inherited_fds(keep, Int32(keep.count))
    }

    private static func usageError(_ message: String) -> Never {
        // The message may quote an environment value that anyone on the session bus chose: escaped, so
        // it cannot forge a line of the journal.
        AgentLog.printError("latchkeyd: \(LogLine.escaped(message))\n\(usage)")
        exit(64)
    }

    /// Exits once the socket file is removed or replaced (`SocketWatch`), rather than run on where no
    /// client can reach it. The keychain lock goes with the process, so the agent that a client then
    /// starts, or has started already and is waiting for that lock (`AgentLocks`), serves the socket
    /// the client found. Nothing is unlinked: the path names nothing of ours any more.
    ///
    /// Binding again in the new directory was the other choice. It would keep the keys in memory across
    /// a logout and a login, though the logout ended the session this agent belongs to (its session bus,
    /// its logind session, its environment), and an agent of the new session gets all of them right.
    private static func watchSocketFile(_ server: AgentServer) {
        guard let file = server.listener.socketFile else { return }
        let started = SocketWatch.start(file) {
            AgentLog.warning(
                "\(file.path) was removed or replaced (a logout removes $XDG_RUNTIME_DIR); exiting, so that "
                    + "an agent started for the socket clients now find serves the keychain")
            _exit(0)
        }
        if !started { AgentLog.warning("cannot watch \(file.path); the agent will not notice if it is removed") }
    }

    private static func installSignalHandlers(_ server: AgentServer) {
        serverForSignals = server
        let handler: @convention(c) (Int32) -> Void = { signal in
            AgentMain.serverForSignals?.removeSocketFile()
            _exit(signal == SIGTERM || signal == SIGINT ? 0 : 1)
        }
        signal(SIGTERM, handler)
        signal(SIGINT, handler)
        signal(SIGHUP, handler)
        // A program that started the agent from a thread blocking these signals (a Dispatch worker
        // thread blocks nearly all) passed that mask on through exec: every thread of the agent would
        // block SIGTERM, which then stayed pending, and logout, `systemctl --user stop` and `kill`
        // could not stop it. This thread takes them again; one thread not blocking them is enough.
        var wanted = sigset_t()
        sigemptyset(&wanted)
        for number in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&wanted, number) }
        pthread_sigmask(SIG_UNBLOCK, &wanted, nil)
    }
}
