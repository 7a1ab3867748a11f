import LatchkeyDBus
import Logging

/// Watches the screen savers' `ActiveChanged(b)` on the session bus. Loop thread only; kept alive by the
/// handlers it registers.
final class ScreenSaverWatch {
    /// Each name is also the interface its owner emits `ActiveChanged` on; any object path is accepted
    /// (GNOME uses /org/gnome/ScreenSaver, KDE /ScreenSaver and /org/freedesktop/ScreenSaver).
    static let names = ["org.freedesktop.ScreenSaver", "org.gnome.ScreenSaver", "org.xfce.ScreenSaver"]

    private let emit: @Sendable (LockEvent) -> Void
    private let log: Logger
    private var owners: NameOwners!

    init(emit: @escaping @Sendable (LockEvent) -> Void, log: Logger) {
        self.emit = emit
        self.log = log
    }

    // Runs when the connection is freed (stop, or a lost bus): the handlers were the last owners.
    deinit { log.debug("stopped watching the screen savers") }

    func start(on bus: Bus, ready: @escaping () -> Void) throws(BusError) {
        owners = NameOwners(names: Self.names) { [log] name, owner in
            if let owner {
                log.info("screen saver \(name) is now \(owner)")
            } else {
                log.info("screen saver \(name) left the session bus")
            }
        }
        for name in Self.names {
            try bus.addMatch(Bus.signalRule(interface: name, member: "ActiveChanged")) { [self] message in
                activeChanged(message, name: name)
            }
        }
        try owners.start(on: bus) { [self] in
            let present = Self.names.filter { owners.owner(of: $0) != nil }
            log.info(
                present.isEmpty
                    ? "no screen saver on the session bus yet; watching for one"
                    : "watching screen saver \(present.joined(separator: ", "))")
            ready()
        }
    }

    private func activeChanged(_ message: BusMessage, name: String) {
        // Anyone can emit ActiveChanged; only the name's current owner is believed.
        let owner = owners.owner(of: name)
        guard let sender = message.sender, sender == owner else {
            return log.debug(
                """
                ignored \(name).ActiveChanged from \(message.sender ?? "an unknown sender"): \
                the owner of \(name) is \(owner ?? "nobody")
                """)
        }
        guard let arguments = try? message.arguments(), arguments.count == 1, let active = arguments[0].bool else {
            return log.debug("ignored \(name).ActiveChanged with signature \(message.signature)")
        }
        emit(active ? .locked(source: name) : .unlocked(source: name))
    }
}
