/// Who is calling the engine: a socket caller or a Secret Service client, with the access groups the
/// agent's `CallerPolicy` gave it (docs/IDENTITY.md, docs/APPLICATIONS.md). The access policy
/// (`AccessGroupPolicy`) lets it use those groups only (or any, for an administrator who proved the
/// keychain password), and puts items added without `kSecAttrAccessGroup` in its first group.
package struct Caller: Sendable, Equatable {
    /// The group items go to when the caller names none.
    package static let defaultAccessGroup = "default"
    /// Apple's `kSecAttrAccessGroupToken`: the group of the items that tokens (smart cards) provide.
    /// Every caller may read it; no caller may add, change or delete in it (its items are the tokens'),
    /// as securityd keeps it out of the writable groups (docs/APPLICATIONS.md, "Special groups").
    package static let tokenAccessGroup = "com.apple.token"

    package var uid: UInt32
    package var pid: Int32
    /// The caller's executable (`/proc/PID/exe`), when it could be read.
    package var executable: String?
    /// The caller's access groups, in order; the first is where new items go.
    package var accessGroups: [String]
    /// Whether the caller may use groups outside `accessGroups` (`latchkey --all-groups` after the
    /// keychain password; the engine's own tests).
    package var mayUseAnyGroup: Bool

    package init(
        uid: UInt32, pid: Int32, executable: String? = nil,
        accessGroups: [String] = [Caller.defaultAccessGroup], mayUseAnyGroup: Bool = false
    ) {
        self.uid = uid
        self.pid = pid
        self.executable = executable
        self.accessGroups = accessGroups
        self.mayUseAnyGroup = mayUseAnyGroup
    }

    /// Whether the caller may read or write items of `group`.
    package func mayUse(group: String) -> Bool {
        mayUseAnyGroup || accessGroups.contains { Caller.sameAccessGroup($0, group) }
    }

    /// Whether two access group names are the same group: the same bytes, as the store's keyed hashes
    /// select them. (Swift's `==` on strings is canonical equivalence: "café" spelt with a combining
    /// accent equals it precomposed, so a caller granted one spelling would pass checks for items
    /// stored under the other.)
    package static func sameAccessGroup(_ a: String, _ b: String) -> Bool {
        a.utf8.elementsEqual(b.utf8)
    }
}
