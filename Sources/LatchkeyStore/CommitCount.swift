import CSQLite
import Synchronization

/// How many transactions every store of this process has committed: a stamp that tells whoever
/// remembers something derived from the database (the Secret Service's `Items` in its signals)
/// whether anything may have changed since. Counted by SQLite's commit hook, so every commit is
/// counted, explicit or a single statement's, whatever code made it; a commit that fails after the
/// hook counts too, which only makes a remembered value be recomputed.
package enum CommitCount {
    private static let counter = Atomic<UInt64>(0)

    /// The number of commits so far. Two equal readings mean no commit happened in between.
    package static var current: UInt64 { counter.load(ordering: .sequentiallyConsistent) }

    /// Counts the commits of connection `db`.
    static func install(on db: OpaquePointer) {
        sqlite3_commit_hook(
            db,
            { _ in
                CommitCount.counter.add(1, ordering: .sequentiallyConsistent)
                return 0  // 0: let the commit go ahead.
            }, nil)
    }
}
