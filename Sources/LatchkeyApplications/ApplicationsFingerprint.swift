#if canImport(Glibc)
    import Glibc
#endif

/// What a registry was loaded from, as `lstat` saw it: every directory on the way to each applications.d
/// directory, each file read, and each executable named with the directories above it. When any of
/// them changes (a file added, edited, replaced, removed, chmod'ed or chown'ed; a package upgrade that
/// replaces an executable, whose recorded inode then names nothing), the registry is out of date. Of
/// the directories on the way and the executables only the file, its owner and its mode count, so
/// that the daily traffic in `/etc` or `/usr/bin` does not make the agent reread anything.
///
/// A stat per path is cheap (tens of paths, microseconds), needs no thread and no inotify descriptor,
/// and also sees the executables, which are in directories too busy to watch.
package struct ApplicationsFingerprint: Sendable {
    /// Timestamps come from a clock that ticks coarsely (a jiffy): a change in the same tick as the
    /// observation could leave every field as it was. A load that saw a status change this recent (as
    /// git calls it, a racy one) counts as out of date from the start, so the registry is read again;
    /// once the change is this old, a load is no longer racy and settles.
    static let settleSeconds = 1

    private let observations: [TrustedPaths.Observation]
    private let racy: Bool

    init(observations: [TrustedPaths.Observation], loadStarted: timespec) {
        self.observations = observations
        let threshold = timespec(tv_sec: loadStarted.tv_sec - Self.settleSeconds, tv_nsec: loadStarted.tv_nsec)
        racy = observations.contains { observation in
            guard observation.content, let state = observation.state else { return false }
            return !Self.less(state.changed, threshold)
        }
    }

    /// Whether every path is as it was when the registry was loaded, and no change was too recent to be
    /// sure of.
    package func isCurrent() -> Bool {
        !racy && observations.allSatisfy { $0.isUnchanged() }
    }

    /// The number of paths it watches.
    package var count: Int { observations.count }

    /// The wall clock, which file timestamps come from.
    static func now() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
    }

    private static func less(_ a: timespec, _ b: timespec) -> Bool {
        a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec)
    }

}
