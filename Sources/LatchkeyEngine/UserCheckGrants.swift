import LatchkeyModel
import LatchkeySystem

/// The user checks Secret Service clients passed (docs/SECRET-SERVICE.md §4c): an `Unlock` naming an item
/// whose `kSecAttrAccessControl` needs the user present runs the agent's user check, and on success the
/// item is unlocked for that bus client (its unique name) alone, for `reuseWindow`; then, or when the
/// client leaves the bus, it is locked again. The engine decides with it (`SecretServiceStorage`), as
/// `PresenceGate` does for SecItem requests: a grant covers an item only if the checks that passed
/// satisfy the item's constraint.
package final class UserCheckGrants: Sendable {
    /// How long an item stays unlocked for the client that passed its check. Apple's longest reuse
    /// duration (`LATouchIDAuthenticationMaximumAllowableReuseDuration`) is 300 s; two minutes is
    /// enough to read what the client asked for, and short enough that an unattended program does not
    /// keep the item open.
    package static let reuseWindow: Duration = .seconds(120)
    /// Shortens the window (whole seconds, 1 up to `reuseWindow`), for tests; it can never lengthen it,
    /// so whoever sets the agent's environment weakens nothing.
    package static let windowVariable = "LATCHKEY_SECRET_SERVICE_REUSE"

    /// This registry's window: `reuseWindow`, or shorter as `windowVariable` says.
    package let window: Duration
    /// Items one client may hold unlocked at once; an `Unlock` beyond it is refused rather than grow
    /// without end.
    package static let maximumPerClient = 4096

    private struct Grant {
        var passed: Set<UserCheckKind>
        var until: ContinuousClock.Instant
        /// The keychain's lock count before the check began: any lock since ends the grant.
        var lockCount: UInt64
    }
    private let grants = Locked([String: [[UInt8]: Grant]]())

    package init() {
        let longest = Int(Self.reuseWindow.components.seconds)
        let asked = Environment.value(Self.windowVariable).flatMap(Int.init).flatMap {
            (1...longest).contains($0) ? $0 : nil
        }
        window = .seconds(asked ?? longest)
    }

    /// Unlocks `items` for `client` until the reuse window ends; false (nothing granted) past the cap.
    @discardableResult
    package func grant(
        _ items: [[UInt8]], passed: Set<UserCheckKind>, to client: String, lockCount: UInt64,
        now: ContinuousClock.Instant = .now
    ) -> Bool {
        grants.withLock { grants in
            var mine = grants[client] ?? [:]
            for item in items { mine[item] = Grant(passed: passed, until: now + window, lockCount: lockCount) }
            guard mine.count <= Self.maximumPerClient else { return false }
            grants[client] = mine
            return true
        }
    }

    /// Whether `client` holds a grant for `item` that satisfies `constraint` now.
    func covers(
        _ item: [UInt8], _ constraint: AccessConstraint, client: String, lockCount: UInt64,
        now: ContinuousClock.Instant = .now
    ) -> Bool {
        grants.withLock { grants in
            guard let grant = grants[client]?[item], now < grant.until, grant.lockCount == lockCount else {
                return false
            }
            return constraint.isSatisfied(by: grant.passed)
        }
    }

    /// Drops every grant of a client that left the bus; returns the items it held.
    @discardableResult
    package func forget(client: String) -> [[UInt8]] {
        grants.withLock { grants in Array((grants.removeValue(forKey: client) ?? [:]).keys) }
    }

    /// Drops every grant (after a lock, which ends them all).
    package func forgetAll() {
        grants.withLock { $0 = [:] }
    }

    /// Drops the grants whose window has ended; returns, for each client, the items locked again.
    package func expire(now: ContinuousClock.Instant = .now) -> [(client: String, items: [[UInt8]])] {
        grants.withLock { grants in
            var ended: [(client: String, items: [[UInt8]])] = []
            for (client, mine) in grants {
                let gone = mine.filter { now >= $0.value.until }.map(\.key)
                guard !gone.isEmpty else { continue }
                ended.append((client, gone))
                var kept = mine
                for item in gone { kept[item] = nil }
                grants[client] = kept.isEmpty ? nil : kept
            }
            return ended
        }
    }

    /// One client's view, which the Secret Service hands to the engine with each of its calls.
    package struct Client: Sendable {
        let grants: UserCheckGrants
        let name: String
        package init(_ grants: UserCheckGrants, name: String) {
            self.grants = grants
            self.name = name
        }
    }
}
