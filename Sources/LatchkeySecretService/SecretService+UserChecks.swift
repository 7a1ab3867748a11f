import LatchkeyDBus
import LatchkeyEngine
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Items whose access control needs the user present (docs/SECRET-SERVICE.md §4c): locked for every
/// client until an `Unlock` of them passes the user check, then unlocked for that client alone
/// (`UserCheckGrants`, which the engine decides with) until the reuse window ends or the client leaves.
/// Their `Locked` is that client's own, so its changes are signalled to that client only. Loop thread only.
extension SecretService {
    /// The items of `paths` were unlocked for `client`: says so to it, and locks them again (and says
    /// so) when the reuse window ends.
    func userCheckGranted(_ paths: [String], to client: String, _ bus: Bus) {
        var mine = grantedPaths[client] ?? []
        mine.formUnion(paths)
        grantedPaths[client] = mine
        lockedChanged(paths, locked: false, for: client, bus)
        let connection = connection
        let started = startDetachedThread { [self] in
            // A little past the window, so every grant made with this one has ended.
            var request = timespec(tv_sec: Int(userChecks.window.components.seconds) + 1, tv_nsec: 0)
            var left = timespec()
            while nanosleep(&request, &left) != 0 && errno == EINTR { request = left }
            _ = connection.perform { bus in self.expireUserChecks(bus) }
        }
        if !started { log.warning("Secret Service: no thread to lock items again; they lock on their next use") }
    }

    /// After any lock (the engine already refuses every grant made before it), forgets the grants and
    /// tells each client its items are locked again.
    func endUserChecksAfterLock(_ bus: Bus) {
        let locks = keychain.lockCount()
        guard locks != seenLockCount else { return }
        seenLockCount = locks
        userChecks.forgetAll()
        for (client, paths) in grantedPaths { lockedChanged(Array(paths), locked: true, for: client, bus) }
        grantedPaths = [:]
    }

    /// Locks again the items whose reuse window ended, and tells their clients.
    func expireUserChecks(_ bus: Bus) {
        for (client, _) in userChecks.expire() {
            guard let paths = grantedPaths[client] else { continue }
            // A path is still unlocked while another grant of the client covers its item.
            let locked = paths.filter { path in
                (try? serving(client, bus) { try lockedState(of: path) }) != false
            }
            grantedPaths[client] = paths.subtracting(locked).isEmpty ? nil : paths.subtracting(locked)
            lockedChanged(Array(locked), locked: true, for: client, bus)
        }
    }

    /// `PropertiesChanged` of `Locked` on item `paths`, to `client` only (the state is its own).
    func lockedChanged(_ paths: [String], locked: Bool, for client: String, _ bus: Bus) {
        for path in paths.sorted() {
            propertiesChanged(
                bus, path, SS.Interface.item, changed: [("Locked", .boolean(locked))], destination: client)
        }
    }
}
