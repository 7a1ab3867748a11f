/// Tracks which connection is the primary owner of some well-known names, so that signals can be
/// accepted only from the real owner. Loop thread only.
///
/// Anyone on a bus may emit any signal, and a message names its sender by unique name (`:1.5`), never by
/// well-known name. The owner comes from `GetNameOwner` at start and `NameOwnerChanged` afterwards: the
/// match is installed before the query is sent, and the daemon delivers the reply and the signals in the
/// order it processed them, so the last one seen always holds.
///
/// `package`: the lock watcher (LatchkeyDesktop) uses it; it is no part of the binding's public API.
package final class NameOwners {
    static let daemon = "org.freedesktop.DBus"

    private var owners: [String: String] = [:]
    private let names: [String]
    private let onChange: (_ name: String, _ owner: String?) -> Void
    private var pendingQueries = 0

    /// - Parameter onChange: runs when a name's owner changes after the initial query (nil: no owner).
    package init(names: [String], onChange: @escaping (_ name: String, _ owner: String?) -> Void) {
        self.names = names
        self.onChange = onChange
    }

    /// The unique name of `name`'s primary owner, if any.
    package func owner(of name: String) -> String? { owners[name] }

    /// Subscribes to ownership changes and queries the current owners; `ready` runs once all answered.
    package func start(on bus: Bus, ready: @escaping () -> Void) throws(BusError) {
        for name in names {
            let rule = Bus.signalRule(
                sender: Self.daemon, path: "/org/freedesktop/DBus", interface: Self.daemon,
                member: "NameOwnerChanged", arg0: name)
            try bus.addMatch(rule) { [self] message in
                // Only the daemon can send as org.freedesktop.DBus; a peer's copy of this signal is ignored.
                guard message.sender == Self.daemon, let arguments = try? message.arguments(), arguments.count == 3,
                    arguments[0].string == name, let owner = arguments[2].string
                else { return }
                update(name, owner.isEmpty ? nil : owner, notify: pendingQueries == 0)
            }
        }
        pendingQueries = names.count
        for name in names {
            try bus.callAsync(
                destination: Self.daemon, path: "/org/freedesktop/DBus", interface: Self.daemon,
                member: "GetNameOwner", [.string(name)]
            ) { [self] result in
                // NameHasNoOwner, or any failure: treat the name as unowned (signals are then refused).
                let owner = try? result.get().arguments().first?.string
                update(name, owner, notify: false)
                pendingQueries -= 1
                if pendingQueries == 0 { ready() }
            }
        }
    }

    private func update(_ name: String, _ owner: String?, notify: Bool) {
        guard owners[name] != owner else { return }
        owners[name] = owner
        if notify { onChange(name, owner) }
    }
}
