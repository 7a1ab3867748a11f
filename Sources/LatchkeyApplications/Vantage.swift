#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent stands: its user namespace, mount namespace and root directory, which a caller's are
/// compared with (`ProcessInspection`). A caller in the agent's namespaces is a host program, whose
/// executable the kernel vouches for; one elsewhere may be in a sandbox.
package struct Vantage: Sendable, Equatable {
    package var userNamespace: FileKey?
    package var mountNamespace: FileKey?
    package var root: FileKey?

    /// The agent's own, read once.
    package static let agent = Vantage(process: "self") ?? Vantage()

    /// Nothing known: every caller is elsewhere.
    init() {}

    /// The view of the process `/proc/<process>` (a pid, or `self`); nil when it cannot be read. Tests
    /// take another process's view to stand where it stands.
    package init?(process: String) {
        let fd = open("/proc/\(process)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        func key(_ name: String) -> FileKey? {
            var info = stat()
            return fstatat(fd, name, &info, 0) == 0 ? FileKey(info) : nil
        }
        userNamespace = key("ns/user")
        mountNamespace = key("ns/mnt")
        root = key("root")
        guard userNamespace != nil, mountNamespace != nil, root != nil else { return nil }
    }
}
