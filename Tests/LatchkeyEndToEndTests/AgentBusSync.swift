import LatchkeyDBus
import LatchkeyTestSupport
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
        let pinged = try connection.pingConnections(ofProcess: pid)
        XCTAssertGreaterThan(pinged, 0, "the agent is on the bus", file: file, line: line)
    }
}
