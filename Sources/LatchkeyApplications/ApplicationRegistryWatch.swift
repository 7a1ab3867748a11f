import LatchkeySystem

/// The registry the agent uses, read again when its files change, without a restart and without a
/// thread: whoever asks for it (`current()`, at each connection) checks at most once per
/// `checkInterval` whether what it was loaded from is still there as it was
/// (`ApplicationsFingerprint`), and reloads if not.
///
/// Thread-safe: one lock around the check and the reload, so concurrent callers wait for one reload
/// rather than each doing their own. A reload is bounded (capped entries, file sizes and paths).
package final class ApplicationRegistryWatch: Sendable {
    private struct State {
        var registry: ApplicationRegistry
        var lastCheck: ContinuousClock.Instant
        var reloads = 0
    }

    private let directories: [String]
    private let checkInterval: Duration
    private let state: Locked<State>

    /// Loads `directories` (lowest precedence first) now.
    ///
    /// - Parameter checkInterval: the least time between two looks at the files; `.zero` looks at
    ///   every call (tests). A second is far below how fast an administrator edits files and far above
    ///   what costs anything.
    package init(
        directories: [String] = ApplicationRegistry.defaultDirectories, checkInterval: Duration = .seconds(1)
    ) {
        self.directories = directories
        self.checkInterval = checkInterval
        state = Locked(State(registry: ApplicationRegistry(directories: directories), lastCheck: .now))
    }

    /// The registry in force, reloaded first if it is time to look and the files changed.
    package func current() -> ApplicationRegistry {
        state.withLock { state in
            let now = ContinuousClock.now
            guard now - state.lastCheck >= checkInterval else { return state.registry }
            state.lastCheck = now
            if !state.registry.fingerprint.isCurrent() {
                state.registry = ApplicationRegistry(directories: directories)
                state.reloads += 1
            }
            return state.registry
        }
    }

    /// How many times it has reloaded (for the agent's log and for tests).
    package var reloads: Int {
        state.withLock { $0.reloads }
    }
}
