import LatchkeySystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent listens: `$XDG_RUNTIME_DIR/latchkey/agent.sock`, or `/tmp/latchkey-UID/agent.sock`
/// when `XDG_RUNTIME_DIR` is unset. The directory is private to the user (mode 0700, owned by the user,
/// not a symlink); both the agent and its clients check that before trusting it (docs/PROTOCOL.md).
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

    /// The endpoint for the current user, from the environment.
    package static func current() -> AgentEndpoint {
        if let runtime = Environment.value("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") {
            return AgentEndpoint(directory: runtime + "/latchkey")
        }
        return AgentEndpoint(directory: "/tmp/latchkey-\(getuid())")
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
