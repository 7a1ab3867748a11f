#if canImport(Glibc)
import Glibc
#endif

/// Where the agent listens: `$XDG_RUNTIME_DIR/latchkey/agent.sock`, or `/tmp/latchkey-UID/agent.sock`
/// when `XDG_RUNTIME_DIR` is unset. The directory is private to the user (mode 0700, owned by the user,
/// not a symlink); both the agent and its clients check that before trusting it (docs/PROTOCOL.md).
public struct AgentEndpoint: Sendable, Equatable {
    public var directory: String

    public var socketPath: String { directory + "/agent.sock" }
    /// Held with `flock` by the running agent, so that two agents never serve one user.
    public var lockPath: String { directory + "/agent.lock" }
    /// Where an agent started on demand writes its log.
    public var logPath: String { directory + "/agent.log" }

    public init(directory: String) {
        self.directory = directory
    }

    /// The endpoint for the current user, from the environment.
    public static func current() -> AgentEndpoint {
        if let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") {
            return AgentEndpoint(directory: runtime + "/latchkey")
        }
        return AgentEndpoint(directory: "/tmp/latchkey-\(getuid())")
    }

    /// Creates the directory if needed and checks it is the user's own private directory.
    /// Returns a description of the problem, or nil when the directory is fit to use.
    public func prepareDirectory(create: Bool) -> String? {
        if create, mkdir(directory, 0o700) != 0, errno != EEXIST {
            return "cannot create \(directory): \(String(cString: strerror(errno)))"
        }
        var st = stat()
        guard lstat(directory, &st) == 0 else {
            return "\(directory): \(String(cString: strerror(errno)))"
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return "\(directory) is not a directory" }
        guard st.st_uid == getuid() else { return "\(directory) is owned by uid \(st.st_uid), not by uid \(getuid())" }
        if st.st_mode & 0o077 != 0 {
            // Our own directory with loose permissions: tighten it rather than refuse.
            guard chmod(directory, 0o700) == 0 else { return "\(directory) is accessible to others" }
        }
        return nil
    }

    /// Reads an environment variable without Foundation.
    public static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let string = String(cString: value)
        return string.isEmpty ? nil : string
    }
}
