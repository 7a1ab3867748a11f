import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel

/// Searches answered before the keychain could be searched (`PendingSearches`): making them, and what
/// their paths stand for afterwards. Loop thread only.
extension SecretService {
    /// What the path of a pending search stands for now.
    enum PendingTarget {
        /// The keychain still cannot be searched: a locked item to the client.
        case locked
        /// The search's first match.
        case item(SecretServiceItemInfo)
        /// Nothing matched, or it is another connection's search.
        case nothing
    }

    /// `query` (in `collection`, or nil: every collection) as one pending search of `caller`'s; its
    /// path, or nil when the caps say no.
    func pendingSearchPath(_ query: SecretAttributes, in collection: String?, caller: String) -> String? {
        guard let id = pendingSearches.add(owner: caller, query: query, collection: collection) else { return nil }
        return ObjectPath.itemPath(collection ?? SecretServiceKeychain.login, id)
    }

    /// What item `id` is to `caller` if it is a pending search; nil when it is none.
    func pendingTarget(_ id: [UInt8], caller: String) throws -> PendingTarget? {
        guard let search = pendingSearches.search(id, caller: caller) else {
            return pendingSearches.contains(id) ? .nothing : nil
        }
        if let resolved = search.resolved { return resolved.map(PendingTarget.item) ?? .nothing }
        let found: [SecretServiceItemInfo]
        do {
            found = try self.search(search.query, in: search.collection)
        } catch let error as SecError where error.status == SecStatus.interactionNotAllowed {
            return .locked
        }
        // Resolved once: the path keeps naming the same item.
        pendingSearches.setResolved(id, found.first)
        return found.first.map(PendingTarget.item) ?? .nothing
    }

    /// The matches of the pending search at `path`, when `path` is one of `caller`'s and the keychain
    /// can be searched now: what `Unlock` and its prompt report for it. nil when `path` is no pending
    /// search of `caller`'s; `.locked` when it still cannot be evaluated.
    func pendingMatches(_ path: String, caller: String) -> PendingMatches? {
        guard case .item(_, let id)? = ObjectPath(path), let search = pendingSearches.search(id, caller: caller)
        else { return nil }
        guard let found = try? self.search(search.query, in: search.collection) else { return .locked }
        return .found(found)
    }

    enum PendingMatches {
        case locked
        case found([SecretServiceItemInfo])
    }

    /// What `Unlock` reports as unlocked for `path` now: the path when it names a collection or item
    /// that is unlocked, the unlocked matches of a pending search of `caller`'s, else nothing.
    func unlockedPaths(for path: String, caller: String) -> [String] {
        switch pendingMatches(path, caller: caller) {
        case .found(let items)?:
            return items.filter { !$0.locked }.map { ObjectPath.itemPath($0.collection, $0.id) }
        case .locked?:
            return []
        case nil:
            return (try? lockedState(of: path)) == false ? [path] : []
        }
    }
}
