/// Who is calling the engine: the peer of an agent connection, as `SO_PEERCRED` and `/proc` tell it (or a
/// Secret Service client).
///
/// Access groups are carried now so that per-application groups can be enforced later without changing
/// the engine's interface: the access policy (`AccessGroupPolicy`) lets every caller of the user's own uid
/// use every group, and puts items added without `kSecAttrAccessGroup` in the caller's first group,
/// `Caller.defaultAccessGroup` unless it says otherwise.
package struct Caller: Sendable, Equatable {
    /// The group items go to when the caller names none.
    package static let defaultAccessGroup = "default"

    package var uid: UInt32
    package var pid: Int32
    /// The caller's executable (`/proc/PID/exe`), when it could be read.
    package var executable: String?
    /// The caller's access groups, in order; the first is where new items go.
    package var accessGroups: [String]
    /// Whether the caller may use groups outside `accessGroups` (true until per-application groups exist).
    package var mayUseAnyGroup: Bool

    package init(
        uid: UInt32, pid: Int32, executable: String? = nil,
        accessGroups: [String] = [Caller.defaultAccessGroup], mayUseAnyGroup: Bool = true
    ) {
        self.uid = uid
        self.pid = pid
        self.executable = executable
        self.accessGroups = accessGroups
        self.mayUseAnyGroup = mayUseAnyGroup
    }

    /// Whether the caller may read or write items of `group`.
    package func mayUse(group: String) -> Bool {
        mayUseAnyGroup || accessGroups.contains(group)
    }
}
