import LatchkeySystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent listens: `$XDG_RUNTIME_DIR/latchkey/agent.sock`; without `XDG_RUNTIME_DIR`,
/// `/run/user/UID/latchkey/agent.sock` when the user has a logind runtime directory, else
/// `/tmp/latchkey-UID/agent.sock` (`current()`). The directory is private to the user (mode 0700, owned
/// by the user, not a symlink); both the agent and its clients check that before trusting it
/// (docs/PROTOCOL.md §1).
package struct AgentEndpoint: Sendable, Equatable {
    package var directory: String

    package var socketPath: String { directory + "/agent.sock" }
    /// Held with `flock` by the agent that listens here, so that two agents never bind one socket path
    /// (`KeychainLocation.agentLockPath` keeps one keychain to one agent).
    package var lockPath: String { directory + "/agent.lock" }
    /// Where an agent started on demand writes its log.
    package var logPath: String { directory + "/agent.log" }

    package init(directory: String) {
        self.directory = directory
    }

    /// Where logind makes each user's runtime directory (`/run/user/UID`).
    package static let userRuntimeRoot = "/run/user"

    /// The endpoint for the current user, from the environment.
    package static func current() -> AgentEndpoint {
        current(runtimeDirectory: Environment.value("XDG_RUNTIME_DIR"), uid: getuid())
    }

    /// The endpoint for `uid` when `XDG_RUNTIME_DIR` is `runtimeDirectory` (docs/PROTOCOL.md §1):
    ///
    /// 1. `$XDG_RUNTIME_DIR/latchkey` when it is set to an absolute path;
    /// 2. else `/run/user/UID/latchkey` when `/run/user/UID` is a directory (lstat: not a symbolic link)
    ///    owned by `uid` with mode exactly 0700, as logind makes it;
    /// 3. else `/tmp/latchkey-UID`.
    ///
    /// Rule 2 is for programs started without the session's environment (cron, `su -`, `sudo -u`): they
    /// reach the agent the desktop uses, and an agent they start lives in the directory that logind
    /// removes at logout (`SocketWatch` then stops it), instead of one in /tmp that nothing ever stops and
    /// whose keychain lock keeps every later agent out. pam_latchkey must choose the same way.
    package static func current(
        runtimeDirectory: String?, uid: uid_t, userRuntimeRoot: String = AgentEndpoint.userRuntimeRoot
    ) -> AgentEndpoint {
        if let runtime = runtimeDirectory, runtime.hasPrefix("/") {
            return AgentEndpoint(directory: runtime + "/latchkey")
        }
        let userRuntime = "\(userRuntimeRoot)/\(uid)"
        if isPrivateDirectory(userRuntime, of: uid) {
            return AgentEndpoint(directory: userRuntime + "/latchkey")
        }
        return AgentEndpoint(directory: "/tmp/latchkey-\(uid)")
    }

    /// Whether `path` is a directory, not a symbolic link, owned by `uid`, with mode 0700 and no other
    /// bit (no set-id, no sticky bit).
    private static func isPrivateDirectory(_ path: String, of uid: uid_t) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return info.st_mode & S_IFMT == S_IFDIR && info.st_uid == uid && info.st_mode & 0o7777 == 0o700
    }

    /// Whether a process holds the socket lock (`lockPath`) now: a shared `flock` tried without waiting
    /// and released at once. False when the file is missing; true when the lock is held or the probe
    /// cannot tell (another kind of file, another owner, an error: the caller then keeps waiting).
    ///
    /// A client told that another agent holds the lock (`AgentReadiness.anotherAgentListens`) waits for
    /// that agent to listen; the holder may instead be an agent on its way out (stopped, its last threads
    /// still exiting), which never will. Once the lock is free, the client starts an agent again.
    /// pam_latchkey's `lk_agent_lock_held` does the same.
    package func socketLockIsHeld() -> Bool {
        let fd = open(lockPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return errno != ENOENT && errno != ELOOP }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return true }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else { return true }
        while flock(fd, LOCK_SH | LOCK_NB) != 0 {
            if errno != EINTR { return true }
        }
        _ = flock(fd, LOCK_UN)
        return false
    }

    /// Creates the directory if needed and checks it is the user's own private directory.
    /// Returns a description of the problem, or nil when the directory is fit to use.
    package func prepareDirectory(create: Bool) -> String? {
        if create, mkdir(directory, 0o700) != 0, errno != EEXIST {
            return "cannot create \(directory): \(String(cString: strerror(errno)))"
        }
        // lstat: a symbolic link in its place is not a directory.
        let info: Stat
        do {
            info = try FilePath(directory).stat(followTargetSymlink: false)
        } catch {
            return "\(directory): \(error)"
        }
        guard info.type == .directory else { return "\(directory) is not a directory" }
        let owner = info.userID.rawValue
        guard owner == getuid() else { return "\(directory) is owned by uid \(owner), not by uid \(getuid())" }
        if info.permissions.rawValue & 0o077 != 0 {
            // Our own directory with loose permissions: tighten it rather than refuse.
            guard chmod(directory, 0o700) == 0 else { return "\(directory) is accessible to others" }
        }
        return nil
    }
}

/// The byte an agent started on demand writes to `LATCHKEY_READY_FD` (docs/PROTOCOL.md §1). EOF
/// without a byte: the agent exited before listening (its reason is in `agent.log`).
package enum AgentReadiness: UInt8, Sendable {
    /// The agent listens on the socket.
    case listening = 1
    /// Another agent holds this socket path's lock and listens there, or will once it has opened the
    /// keychain; the agent that was started exits. The client waits for the socket.
    case anotherAgentListens = 2
}
