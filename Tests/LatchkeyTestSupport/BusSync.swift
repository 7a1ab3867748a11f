import LatchkeyDBus

#if canImport(Glibc)
    import Glibc
#endif

extension BusConnection {
    /// Pings every connection that process `pid` has on this connection's bus, from this connection, and
    /// returns how many answered. The bus delivers one sender's messages in order and sd-bus answers
    /// `org.freedesktop.DBus.Peer.Ping` in its loop, so once the replies are back that process has
    /// handled every signal this connection sent before: tests wait for an agent this way, with no
    /// fixed sleep.
    package func pingConnections(ofProcess pid: pid_t) throws -> Int {
        try sync { bus -> Int in
            let daemon = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
            let names =
                try bus.call(destination: daemon.0, path: daemon.1, interface: daemon.2, member: "ListNames")
                .arguments().first?.elements?.compactMap(\.string) ?? []
            var pinged = 0
            for name in names where name.hasPrefix(":") {
                let owner = try? bus.call(
                    destination: daemon.0, path: daemon.1, interface: daemon.2,
                    member: "GetConnectionUnixProcessID", [.string(name)]
                ).arguments().first?.uint32
                guard owner == UInt32(pid) else { continue }
                _ = try bus.call(destination: name, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping")
                pinged += 1
            }
            return pinged
        }
    }
}
