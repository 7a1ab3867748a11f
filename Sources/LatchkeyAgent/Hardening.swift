import CLatchkeySystem
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// Process hardening applied before the agent holds any key, as ssh-agent does: no core dumps, not
/// ptrace-attachable or readable through /proc by other processes of the user, private file modes.
enum Hardening {
    /// Returns warnings to log (hardening that could not be applied); never fails the start.
    static func apply() -> [String] {
        var warnings: [String] = []
        umask(0o077)
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        if setrlimit(Int32(RLIMIT_CORE.rawValue), &noCore) != 0 {
            warnings.append("could not disable core dumps: \(String(cString: strerror(errno)))")
        }
        // Non-dumpable: no core, no ptrace attach by the same uid, /proc/PID/mem unreadable.
        if latchkey_set_nondumpable() != 0 {
            warnings.append("could not make the process non-dumpable: \(String(cString: strerror(errno)))")
        }
        signal(SIGPIPE, SIG_IGN)
        return warnings
    }

    /// The warning to log once if secrets could not be locked in memory (RLIMIT_MEMLOCK too small).
    static func mlockWarning() -> String? {
        guard SecretBytes.mlockHasFailed else { return nil }
        return
            "could not lock key memory (RLIMIT_MEMLOCK is \(latchkey_memlock_limit()) bytes): keys may be swapped out"
    }
}
