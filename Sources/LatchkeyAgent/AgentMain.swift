#if canImport(Glibc)
import Glibc
#endif
import LatchkeyEngine
import LatchkeyTransport
import LatchkeyWire

/// `latchkeyd` start-up: options, hardening, daemonising, the readiness signal and the server.
public enum AgentMain {
    static let usage = """
        usage: latchkeyd [--keychain DIR] [--daemon] [--version]

        The latchkey agent: holds the keychain's class keys and its encrypted store, and serves the
        Latchkey library and the latchkey command over $XDG_RUNTIME_DIR/latchkey/agent.sock.
        Clients start it on demand; see latchkeyd(8).

          --keychain DIR  keychain directory (default: $XDG_DATA_HOME/latchkey, or ~/.local/share/latchkey)
          --daemon        detach from the terminal (used when a client starts the agent)
          --version       print the version and exit

        """

    public static func run(arguments: [String]) -> Never {
        var directory: String?
        var daemon = false
        var index = 1
        while index < arguments.count {
            switch arguments[index] {
            case "--keychain" where index + 1 < arguments.count:
                index += 1
                directory = arguments[index]
            case "--daemon":
                daemon = true
            case "--version":
                print("latchkeyd \(AgentService.version) (protocol \(Wire.protocolVersion))")
                exit(0)
            case "--help", "-h":
                print(usage, terminator: "")
                exit(0)
            default:
                AgentLog.printError("latchkeyd: unknown option '\(arguments[index])'\n\(usage)")
                exit(64)
            }
            index += 1
        }
        if daemon { daemonize() }
        for warning in Hardening.apply() { AgentLog.warning(warning) }

        let location = KeychainLocation(directory: directory ?? defaultKeychainDirectory())
        let endpoint = AgentEndpoint.current()
        let server: AgentServer
        let keychain = Keychain(location: location)
        do {
            server = try AgentServer(endpoint: endpoint, keychain: keychain)
        } catch let error as ListenerError {
            AgentLog.write(error.alreadyRunning ? .info : .error, error.description)
            exit(error.alreadyRunning ? 0 : 1)
        } catch {
            AgentLog.error("\(error)")
            exit(1)
        }
        installSignalHandlers(server)
        let status = keychain.status()
        if let problem = status.problem { AgentLog.error(problem) }
        AgentLog.info("listening on \(server.socketPath); keychain \(location.directory)"
                      + (status.exists ? "" : " (not created yet)"))
        if let warning = Hardening.mlockWarning() { AgentLog.warning(warning) }
        signalReady()
        server.run()
    }

    /// `$XDG_DATA_HOME/latchkey`, or `~/.local/share/latchkey`.
    public static func defaultKeychainDirectory() -> String {
        if let data = AgentEndpoint.environment("XDG_DATA_HOME"), data.hasPrefix("/") {
            return data + "/latchkey"
        }
        return homeDirectory() + "/.local/share/latchkey"
    }

    static func homeDirectory() -> String {
        if let home = AgentEndpoint.environment("HOME") { return home }
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { return String(cString: dir) }
        return "/"
    }

    /// Forks so the starting client can reap the parent at once, and leaves the terminal's session.
    private static func daemonize() {
        let pid = fork()
        if pid < 0 { AgentLog.error("fork: \(String(cString: strerror(errno)))"); exit(1) }
        if pid > 0 { _exit(0) }
        setsid()
        chdir("/")
    }

    /// Tells a client that started us that the socket is listening: it passed the write end of a pipe
    /// in LATCHKEY_READY_FD and waits for one byte (or for EOF, if we die first).
    private static func signalReady() {
        guard let value = AgentEndpoint.environment("LATCHKEY_READY_FD"), let fd = Int32(value), fd > 2 else { return }
        unsetenv("LATCHKEY_READY_FD")
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)
        close(fd)
    }

    nonisolated(unsafe) private static var serverForSignals: AgentServer?

    private static func installSignalHandlers(_ server: AgentServer) {
        serverForSignals = server
        let handler: @convention(c) (Int32) -> Void = { signal in
            AgentMain.serverForSignals?.removeSocketFile()
            _exit(signal == SIGTERM || signal == SIGINT ? 0 : 1)
        }
        signal(SIGTERM, handler)
        signal(SIGINT, handler)
        signal(SIGHUP, handler)
    }
}
