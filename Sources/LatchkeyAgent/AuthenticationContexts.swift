import LatchkeyCrypto
import LatchkeyModel
import LatchkeySystem

/// The process an authentication context belongs to: its pid and start time name it and no other,
/// also after the pid is reused (docs/IDENTITY.md).
package struct ContextOwner: Hashable, Sendable {
    package let pid: Int32
    package let started: UInt64

    package init(pid: Int32, started: UInt64) {
        self.pid = pid
        self.started = started
    }
}

/// The agent's `LAContext`s (docs/ACCESS-CONTROL.md §7). A context is the agent's state, not the
/// library's: the library holds an unguessable handle, and the agent keeps, under it, which process
/// the context belongs to and which user checks it passed, when (a monotonic clock), and before which
/// lock. The request layer asks it what a request's context is worth (`evaluation`) and grants that to
/// the request's `UserCheckSession`, where `PresenceGate` decides; it never lets an item through itself.
///
/// A handle works only for the process it was made for: another process, even of the same user, that
/// learnt it gets errSecAuthFailed, as for a handle that never existed or was invalidated. Evaluations
/// end with their window (`window(reuse:)`), with any lock of the keychain, and with `invalidate`.
package final class AuthenticationContexts: Sendable {
    /// How long an evaluation serves when the context asks for no reuse duration of its own.
    package static let defaultWindow: Duration = .seconds(30)
    /// Apple's `LATouchIDAuthenticationMaximumAllowableReuseDuration`: no evaluation serves longer.
    package static let maximumWindow: Duration = .seconds(300)
    /// Contexts one process holds at once; making another drops its least recently used one, so a
    /// program that makes an `LAContext` per call and never invalidates it goes on working.
    package static let maximumPerProcess = 32
    /// Contexts the agent holds at once; beyond that (after dropping those of exited processes) making
    /// one is errSecAllocate, so that no number of processes can make the agent grow without end.
    package static let maximumContexts = 1024

    /// What one context passed: the checks, when, and the keychain's lock count then.
    struct Evaluation: Sendable {
        var passed: Set<UserCheckKind>
        var at: ContinuousClock.Instant
        var lockCount: UInt64
    }

    private struct Entry: Sendable {
        let owner: ContextOwner
        var reuse: Duration
        var evaluation: Evaluation?
        var lastUsed: ContinuousClock.Instant
    }

    private let entries = Locked([[UInt8]: Entry]())
    private let now: @Sendable () -> ContinuousClock.Instant
    private let lockCount: @Sendable () -> UInt64
    private let isRunning: @Sendable (ContextOwner) -> Bool

    /// - Parameters:
    ///   - now: the monotonic clock (ContinuousClock counts a suspend, which must not lengthen a window).
    ///   - lockCount: how many times the keychain was locked so far (`Keychain.lockCount`).
    ///   - isRunning: whether a process still runs (checked only when the registry is full).
    package init(
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        lockCount: @escaping @Sendable () -> UInt64,
        isRunning: @escaping @Sendable (ContextOwner) -> Bool
    ) {
        self.now = now
        self.lockCount = lockCount
        self.isRunning = isRunning
    }

    /// How long an evaluation serves: the context's reuse duration when it gives one, capped at
    /// `maximumWindow`; `defaultWindow` when it gives none (docs/ACCESS-CONTROL.md §7).
    package static func window(reuse: Duration) -> Duration {
        reuse > .zero ? min(reuse, maximumWindow) : defaultWindow
    }

    /// Makes a context for `owner`, not yet evaluated; its handle (32 random bytes).
    package func make(for owner: ContextOwner, reuse: Duration) throws(SecError) -> [UInt8] {
        let handle: [UInt8]
        do {
            handle = try SecureRandom.bytes(SecKeys.authenticationContextLength)
        } catch {
            throw SecError(SecStatus.internalComponent, "no random bytes for a context handle")
        }
        let time = now()
        try entries.withLock { (entries) throws(SecError) in
            let mine = entries.filter { $0.value.owner == owner }
            if mine.count >= Self.maximumPerProcess,
                let oldest = mine.min(by: { $0.value.lastUsed < $1.value.lastUsed })
            {
                entries[oldest.key] = nil
            }
            if entries.count >= Self.maximumContexts {
                // The contexts of processes that exited serve nobody (no other process is the same
                // pid and start time): drop them first, checking each process once.
                var running: [ContextOwner: Bool] = [:]
                entries = entries.filter { _, entry in
                    if let known = running[entry.owner] { return known }
                    let alive = isRunning(entry.owner)
                    running[entry.owner] = alive
                    return alive
                }
            }
            guard entries.count < Self.maximumContexts else {
                throw SecError(SecStatus.allocate, "too many authentication contexts (\(Self.maximumContexts))")
            }
            entries[handle] = Entry(owner: owner, reuse: reuse, evaluation: nil, lastUsed: time)
        }
        // A copy in storage of its own: the server wipes every data value of a response in place once
        // it is sent (`SecValue.wipeDataInPlace`), which must not reach the key kept here.
        return handle.withUnsafeBufferPointer { Array($0) }
    }

    /// Sets the reuse duration of `owner`'s context `handle` (errSecAuthFailed when it is not one).
    package func update(_ handle: [UInt8], of owner: ContextOwner, reuse: Duration) throws(SecError) {
        try entries.withLock { (entries) throws(SecError) in
            guard var entry = entries[handle], entry.owner == owner else { throw Self.unknown }
            entry.reuse = reuse
            entry.lastUsed = now()
            entries[handle] = entry
        }
    }

    /// The checks `owner`'s context `handle` passed and that still serve: nil when it holds none (never
    /// evaluated, or its window ended, or the keychain was locked since). errSecAuthFailed when `handle`
    /// is not a context of `owner` (invalidated, dropped, never made, or another process's), as Apple
    /// answers for a context that cannot be used.
    package func evaluation(_ handle: [UInt8], of owner: ContextOwner) throws(SecError) -> Set<UserCheckKind>? {
        let time = now()
        let locks = lockCount()
        return try entries.withLock { (entries) throws(SecError) -> Set<UserCheckKind>? in
            guard var entry = entries[handle], entry.owner == owner else { throw Self.unknown }
            entry.lastUsed = time
            if let evaluation = entry.evaluation,
                evaluation.lockCount != locks || time >= evaluation.at + Self.window(reuse: entry.reuse)
                    || time < evaluation.at
            {
                entry.evaluation = nil
            }
            entries[handle] = entry
            return entry.evaluation?.passed
        }
    }

    /// Records that `owner`'s context `handle` passed `passed` now; `lockCount` is the keychain's lock
    /// count from before the check began, so that a lock while the user was asked ends it at once.
    /// A context invalidated meanwhile records nothing.
    package func record(_ passed: Set<UserCheckKind>, for handle: [UInt8], of owner: ContextOwner, lockCount: UInt64) {
        let time = now()
        entries.withLock { entries in
            guard var entry = entries[handle], entry.owner == owner else { return }
            entry.evaluation = Evaluation(passed: passed, at: time, lockCount: lockCount)
            entry.lastUsed = time
            entries[handle] = entry
        }
    }

    /// `LAContext.invalidate()`: `owner`'s context `handle` never serves again. Silent for a handle that
    /// is not `owner`'s, which learns nothing about other processes' contexts.
    package func invalidate(_ handle: [UInt8], of owner: ContextOwner) {
        entries.withLock { entries in
            if entries[handle]?.owner == owner { entries[handle] = nil }
        }
    }

    /// How many contexts are held (tests).
    package var count: Int { entries.withLock { $0.count } }

    private static let unknown = SecError(SecStatus.authFailed, "the authentication context is not valid")
}
