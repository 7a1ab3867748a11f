import LatchkeyCrypto
import LatchkeyEngine

/// Searches that could not be evaluated when they were made, each standing as one locked item
/// (docs/SECRET-SERVICE.md §4, "Before the first unlock").
///
/// An agent that never had the password (a fresh start, an autologin desktop) holds no index key, so
/// `SearchItems` cannot tell which items match. Answering `IsLocked` leaves libsecret without a prompt,
/// and listing every item as locked would make it unlock and read the first one, whatever it is. So the
/// search itself is answered as one locked item, at an item path of its own: `Unlock` of it asks for the
/// password like any locked item, and the prompt's `Completed` (or `Unlock`'s reply, if the keychain was
/// unlocked meanwhile) lists the items the search matches then. Once the keychain can be searched, the
/// path stands for the first match (every call to it reaches that item), or names nothing when there
/// is none. So `secret-tool lookup` prompts and prints the secret it asked for.
///
/// A pending search belongs to the connection that made it (another gets `NoSuchObject`) and is
/// forgotten when that connection leaves the bus. At most 16 per connection and 1,024 in all, each
/// query at most 16 KiB: past that, the search answers `IsLocked` as before.
///
/// Loop thread only.
final class PendingSearches {
    static let maxPerClient = 16
    static let maxTotal = 1_024
    static let maxQueryBytes = 16 << 10

    struct Search {
        let owner: String
        let query: SecretAttributes
        /// The collection searched; nil for the service's search (every collection).
        let collection: String?
        /// The first match, once the keychain could be searched; nil inside when nothing matched.
        var resolved: SecretServiceItemInfo??
    }

    private var searches: [[UInt8]: Search] = [:]

    /// A new pending search's id (its path's last element); nil when the caps say no.
    func add(owner: String, query: SecretAttributes, collection: String?) -> [UInt8]? {
        let size = query.pairs.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
        guard size <= Self.maxQueryBytes, searches.count < Self.maxTotal,
            searches.values.filter({ $0.owner == owner }).count < Self.maxPerClient,
            let id = try? SecureRandom.bytes(16)
        else { return nil }
        searches[id] = Search(owner: owner, query: query, collection: collection)
        return id
    }

    /// The pending search `id` if `caller` made it.
    func search(_ id: [UInt8], caller: String) -> Search? {
        guard let search = searches[id], search.owner == caller else { return nil }
        return search
    }

    /// Whether `id` is a pending search, whoever made it (such an id never names a keychain item).
    func contains(_ id: [UInt8]) -> Bool { searches[id] != nil }

    func setResolved(_ id: [UInt8], _ match: SecretServiceItemInfo?) {
        searches[id]?.resolved = .some(match)
    }

    /// Forgets the searches of a connection that left the bus.
    func removeAll(owner: String) {
        searches = searches.filter { $0.value.owner != owner }
    }
}
