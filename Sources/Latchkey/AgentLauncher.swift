import CLatchkeySystem
import LatchkeySystem
import LatchkeyTransport
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#endif

/// Starts `latchkeyd --daemon` for the current user and waits until it listens.
///
/// The agent inherits the write end of a pipe (`LATCHKEY_READY_FD`) and writes one byte once its socket
/// listens (`AgentReadiness`), or says that another agent holds the socket's lock (two clients started
/// one each; the other may still be opening the keychain). If it cannot be executed, or exits first for
/// another reason, the pipe reaches EOF and the caller learns at once instead of waiting out a timeout.
enum AgentLauncher {
    /// How a start ended, when it did not fail.
    enum Started {
        /// The agent listens (or exited without saying why: connecting tells).
        case listening
        /// Another agent holds the socket's lock: it listens, or will; wait for the socket.
        case anotherAgentListens
    }

    /// Why the agent could not be started.
    struct StartFailure: Error {
        var message: String
    }

    /// Starts the agent; returns how it went, or why it could not be started.
    static func start(endpoint: AgentEndpoint, timeoutMilliseconds: Int32) -> Result<Started, StartFailure> {
        guard let executable = agentExecutable() else {
            return fail(
                "latchkeyd not found (set LATCHKEYD to its path, or install it in \(installedAgents[0]), next to "
                    + "latchkey or on PATH)")
        }
        if let problem = endpoint.prepareDirectory(create: true) { return fail(problem) }
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { return fail("pipe: \(String(cString: strerror(errno)))") }
        defer { close(pipeFDs[0]) }
        _ = fcntl(pipeFDs[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipeFDs[1], F_SETFD, FD_CLOEXEC)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, endpoint.logPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 3)  // dup2 clears FD_CLOEXEC on fd 3

        var environment = Environment.entries().filter { entry in
            !entry.hasPrefix("LATCHKEY_READY_FD=") && !entry.hasPrefix("LISTEN_PID=") && !entry.hasPrefix("LISTEN_FDS=")
                && !codeVariables.contains { entry.hasPrefix($0) }
        }
        environment.append("LATCHKEY_READY_FD=3")
        let arguments = [executable, "--daemon"]
        var pid = pid_t()
        let spawned = withCStrings(arguments) { argv in
            withCStrings(environment) { envp in
                posix_spawn(&pid, executable, &actions, nil, argv, envp)
            }
        }
        close(pipeFDs[1])
        guard spawned == 0 else { return fail("cannot run \(executable): \(String(cString: strerror(spawned)))") }

        // `--daemon` forks at once; reap the intermediate process so no zombie is left behind.
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}

        var pollFD = pollfd(fd: pipeFDs[0], events: Int16(POLLIN), revents: 0)
        var ready = poll(&pollFD, 1, timeoutMilliseconds)
        while ready < 0 && errno == EINTR { ready = poll(&pollFD, 1, timeoutMilliseconds) }
        guard ready > 0 else {
            return fail("latchkeyd did not become ready within \(timeoutMilliseconds) ms (see \(endpoint.logPath))")
        }
        var byte: UInt8 = 0
        if read(pipeFDs[0], &byte, 1) == 1, byte == AgentReadiness.anotherAgentListens.rawValue {
            return .success(.anotherAgentListens)
        }
        // EOF: the agent exited before listening; connecting tells whether another agent serves.
        return .success(.listening)
    }

    private static func fail(_ message: String) -> Result<Started, StartFailure> {
        .failure(StartFailure(message: message))
    }

    /// Variables that would put code or programs of the caller's choosing into the agent (the dynamic
    /// loader's, glibc's iconv modules, OpenSSL's configuration and modules, the Swift runtime's crash
    /// handler). The agent needs none of them, and pam_latchkey hands no key to an agent started with
    /// one (pam/peer.c keeps the same list), so a shell that sets LD_LIBRARY_PATH does not leave the
    /// keychain locked at every login. The list is `Environment.codeVariables`.
    static let codeVariables = Environment.codeVariables

    /// Where the package (`/usr`) and `make install` (`/usr/local`) put the agent: the root-owned
    /// directory pam_latchkey trusts it in (its `agent=` default), not on PATH.
    static let installedAgents = ["/usr/libexec/latchkey/latchkeyd", "/usr/local/libexec/latchkey/latchkeyd"]

    /// `$LATCHKEYD`; else `latchkeyd` next to the running executable (a build directory);
    /// else `../libexec/latchkey/latchkeyd` from it (`/usr/bin/latchkey` finds the package's agent);
    /// else the installed agents, for an application anywhere that links the library; else PATH.
    /// Every candidate but `$LATCHKEYD` must be one nobody else could have put there
    /// (`trustedExecutable`): a program run from `/tmp/x/` would otherwise start whatever another user
    /// left at `/tmp/libexec/latchkey/latchkeyd`, as the user running it. In a setuid or file-capability
    /// program (`AT_SECURE`) the environment chooses nothing: neither `$LATCHKEYD` nor PATH is read.
    static func agentExecutable() -> String? {
        let secure = latchkey_secure_execution() != 0
        if !secure, let path = Environment.value("LATCHKEYD") {
            return access(path, X_OK) == 0 ? path : nil
        }
        var candidates: [String] = []
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if n > 0 {
            let selfPath = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let slash = selfPath.lastIndex(of: "/") {
                let directory = String(selfPath[..<slash])
                candidates.append(directory + "/latchkeyd")
                if let parentSlash = directory.lastIndex(of: "/") {
                    candidates.append(String(directory[..<parentSlash]) + "/libexec/latchkey/latchkeyd")
                }
            }
        }
        candidates += installedAgents
        let path = secure ? nil : Environment.value("PATH")
        // A relative PATH entry would name a file relative to wherever the program was started.
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where directory.hasPrefix("/") {
            candidates.append(String(directory) + "/latchkeyd")
        }
        for candidate in candidates where access(candidate, X_OK) == 0 {
            if let trusted = trustedExecutable(candidate) { return trusted }
        }
        return nil
    }

    /// `path` resolved, if it is a regular file owned by root or by this user that group and others
    /// cannot write, in directories owned by root or this user that nobody else can change (a
    /// world-writable one only if sticky, as /tmp is): pam_latchkey's `lk_agent_trusted` (pam/handoff.c),
    /// for the user's own processes. nil otherwise.
    static func trustedExecutable(_ path: String, euid: uid_t = geteuid()) -> String? {
        guard let resolvedPointer = realpath(path, nil) else { return nil }
        let resolved = String(cString: resolvedPointer)
        free(resolvedPointer)
        func trusted(_ path: String, directory: Bool) -> Bool {
            var info = stat()
            guard stat(path, &info) == 0 else { return false }
            let kind = info.st_mode & S_IFMT
            guard directory ? kind == S_IFDIR : kind == S_IFREG else { return false }
            guard info.st_uid == 0 || info.st_uid == euid else { return false }
            if info.st_mode & (S_IWGRP | S_IWOTH) == 0 { return true }
            return directory && info.st_mode & S_ISVTX != 0
        }
        guard trusted(resolved, directory: false) else { return nil }
        var directory = resolved
        while let slash = directory.lastIndex(of: "/") {
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
            guard trusted(directory, directory: true) else { return nil }
            if directory == "/" { break }
        }
        return resolved
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R)
        -> R
    {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
