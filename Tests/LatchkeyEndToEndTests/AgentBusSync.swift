import LatchkeyDBus
import XCTest

extension AgentTestCase {
    /// Returns once the agent has handled every signal `connection` sent before: it pings each of the
    /// agent's connections to the bus from `connection`, and the bus delivers one sender's messages in
    /// order, so the agent's watcher has run its handler (and the lock policy its rules) for those signals
    /// by the time the replies are back. No fixed wait.
    func waitUntilAgentHandled(
        _ connection: BusConnection, file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        let pid = try XCTUnwrap(agentPID(), file: file, line: line)
        let pinged = try connection.sync { bus -> Int in
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
                // sd-bus answers org.freedesktop.DBus.Peer.Ping on every connection, in its loop.
                _ = try bus.call(destination: name, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping")
                pinged += 1
            }
            return pinged
        }
        XCTAssertGreaterThan(pinged, 0, "the agent is on the bus", file: file, line: line)
    }
}
