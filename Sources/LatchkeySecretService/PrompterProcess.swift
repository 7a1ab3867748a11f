import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Lets another thread end a running prompt (`Dismiss`, or the client leaving the bus), and owns the
/// right to signal the prompter's process.
///
/// A pid names a process only until that process is reaped; after that the kernel may give it to any
/// new process. So the prompter is signalled only under this object's mutex and only while `reap()` has
/// not run, and `reap()` takes that right away (under the mutex) before it calls `waitpid`: a signal
/// sent here reaches the prompter, alive or a zombie, never a process that inherited its pid.
final class PromptCancellation: Sendable {
    /// Whether the prompt is cancelled, and the prompter's pid while it is not reaped (0 otherwise).
    private let state = Locked<(cancelled: Bool, pid: pid_t)>((false, 0))

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Marks the prompt cancelled and stops its program, if one runs.
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            if state.pid > 0 { kill(state.pid, SIGTERM) }
        }
    }

    /// Records the running (unreaped) program; stops it at once if the prompt is already cancelled.
    func started(_ child: pid_t) {
        state.withLock { state in
            state.pid = child
            if state.cancelled { kill(child, SIGTERM) }
        }
    }

    /// Sends `signal` to the prompter if it has not been reaped; returns whether it was sent.
    @discardableResult
    func signal(_ signal: Int32) -> Bool {
        state.withLock { state in
            guard state.pid > 0 else { return false }
            return kill(state.pid, signal) == 0
        }
    }

    /// Reaps the prompter, which must have exited (`PrompterProcess.hasExited`); from now on no signal
    /// is sent for this prompt.
    func reap() {
        let child: pid_t = state.withLock { state in
            defer { state.pid = 0 }
            return state.pid
        }
        guard child > 0 else { return }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
    }
}

/// Waiting for the prompter without reaping it (`waitid` with `WNOWAIT`): the zombie keeps its pid
/// until `PromptCancellation.reap()`.
enum PrompterProcess {
    /// Whether `pid` (our child) has exited; it stays a zombie.
    static func hasExited(_ pid: pid_t) -> Bool {
        wait(pid, options: WNOHANG)
    }

    /// Blocks until `pid` (our child) has exited; it stays a zombie.
    static func waitForExit(_ pid: pid_t) {
        _ = wait(pid, options: 0)
    }

    private static func wait(_ pid: pid_t, options: Int32) -> Bool {
        while true {
            var info = siginfo_t()
            // Linux zeroes `info` when WNOHANG finds nothing to report.
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT | options) == 0 {
                return info.si_signo == SIGCHLD
            }
            if errno != EINTR { return true }  // ECHILD: not ours, or already reaped
        }
    }
}

/// The environment a prompter runs with (docs/SECRET-SERVICE.md §5): only what a pinentry needs to
/// find its display, its terminal, the session bus and the user's language, never the rest of the
/// agent's environment (which, for an agent started by D-Bus activation, any client of the bus can
/// have added to with `UpdateActivationEnvironment`).
enum PrompterEnvironment {
    /// Passed when the agent has them.
    static let names: Set<String> = [
        "PATH", "HOME", "XDG_RUNTIME_DIR",  // finding programs, settings, the Wayland socket
        "DISPLAY", "XAUTHORITY", "WAYLAND_DISPLAY",  // graphical pinentries
        "DBUS_SESSION_BUS_ADDRESS",  // pinentry-gnome3 asks gcr over the session bus
        "GPG_TTY", "TERM",  // pinentry-curses and -tty
        "LANG", "LANGUAGE",  // the prompt's language
    ]
    /// Passed too: the locale categories, and variables meant for the prompter itself (such as
    /// `LATCHKEY_PROMPTER_FILE` of contrib/dbus/latchkey-file-prompter).
    static let prefixes = ["LC_", "LATCHKEY_PROMPTER_"]
    static let defaultPath = "/usr/local/bin:/usr/bin:/bin"

    /// The prompter's environment from `entries` (`NAME=value` strings): the variables above, `PATH`
    /// defaulted when missing, and `DBUS_SESSION_BUS_ADDRESS` set to `busAddress` when given (the bus
    /// the service runs on, which may be a handed-over one, docs/SECRET-SERVICE.md §7).
    static func build(from entries: [String], busAddress: String?) -> [String] {
        var result: [String] = []
        var seen = Set<String>()
        for entry in entries {
            guard let equals = entry.firstIndex(of: "=") else { continue }
            let name = String(entry[..<equals])
            guard names.contains(name) || prefixes.contains(where: { name.hasPrefix($0) }),
                seen.insert(name).inserted
            else { continue }
            if name == "DBUS_SESSION_BUS_ADDRESS", busAddress != nil { continue }
            result.append(entry)
        }
        if !seen.contains("PATH") { result.append("PATH=" + defaultPath) }
        if let busAddress { result.append("DBUS_SESSION_BUS_ADDRESS=" + busAddress) }
        return result
    }

    /// `build` from the agent's environment.
    static func current(busAddress: String?) -> [String] {
        build(from: Environment.entries(), busAddress: busAddress)
    }
}
