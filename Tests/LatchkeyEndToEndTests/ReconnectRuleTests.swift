import Foundation
import LatchkeyTestSupport
import LatchkeyTransport
import LatchkeyWire
import XCTest

@testable import Latchkey

/// The library's rule for sending a request again (docs/PROTOCOL.md §1 "Connections"): only when the
/// agent provably never read it. On a Unix stream socket a peer that closes with bytes of ours still
/// unread leaves us ECONNRESET, and one that read them all and closed leaves a plain EOF; the first is
/// what an agent closing an idle connection just as a request arrives looks like, the second an agent
/// that died while carrying the request out. A scripted listener in the agent's place plays both, so the
/// timing is exact.
final class ReconnectRuleTests: AgentTestCase {
    private var listener: Int32 = -1

    override func setUpWithError() throws {
        try super.setUpWithError()
        let directory = runtimeDirectory + "/latchkey"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((directory + "/agent.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(bound, 0, String(cString: strerror(errno)))
        XCTAssertEqual(listen(listener, 8), 0)
    }

    override func tearDown() {
        close(listener)
        AgentClient.shared.resetConnection()
        // No real agent ran: nothing to stop.
    }

    func testARequestTheAgentNeverReadIsSentAgainAndOneItReadIsNot() throws {
        let add = Request.add(["class": .string("genp"), "acct": .string("a")])

        // The agent answers hello, then closes the connection with the next request unread. (Each new
        // connection starts with the library's own hello, answered first: docs/PROTOCOL.md §1.)
        let first = script { [listener] in
            let connection = try Self.accept(listener)
            try Self.answerGreeting(connection)
            _ = try Self.readRequest(connection)
            try Self.reply(connection)
            try Self.waitReadable(connection)
            close(connection)  // unread: the client sees ECONNRESET
            let second = try Self.accept(listener)
            defer { close(second) }
            try Self.answerGreeting(second)
            let resent = try Self.readRequest(second)
            try Self.reply(second)
            return [resent]
        }
        XCTAssertEqual(AgentClient.shared.send(.hello).status, 0)
        let response = AgentClient.shared.send(add)
        XCTAssertEqual(response.status, 0, response.message ?? "")
        XCTAssertEqual(try first.result(), [add.opcode], "the unread request was not sent again")

        // The agent reads the next request whole and dies before answering: it may have been carried out,
        // so the client reports and never sends it again.
        let second = script { [listener] in
            let connection = try Self.accept(listener)
            try Self.answerGreeting(connection)
            _ = try Self.readRequest(connection)
            close(connection)
            var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            // A client that resent would connect again at once; a second is plenty to see it.
            return poll(&pfd, 1, 1000) > 0 ? [add.opcode] : []
        }
        let failed = AgentClient.shared.send(add)
        XCTAssertEqual(failed.status, errSecNotAvailable)
        XCTAssertEqual(try second.result(), [], "a request the agent had read was sent again")
    }

    /// An agent that turns a connection away answers "busy" and closes it without reading; when that
    /// happens before the client sends, the send fails, and the answer waiting on the connection is what
    /// the client reports (the request never ran, and sending it again would be turned away too).
    func testAnAnswerLeftOnAClosedConnectionIsWhatTheClientReports() throws {
        let busy = "latchkeyd is busy: a test says so; try again"
        let script = script { [listener] in
            let connection = try Self.accept(listener)
            try Self.answerGreeting(connection)
            _ = try Self.readRequest(connection)
            try Self.reply(connection)
            try FrameIO.writeFrame(
                Response(status: errSecNotAvailable, value: nil, message: busy).encode(), to: connection,
                deadline: .now + .seconds(10))
            close(connection)
            var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            return poll(&pfd, 1, 1000) > 0 ? [.hello] : []
        }
        XCTAssertEqual(AgentClient.shared.send(.hello).status, 0)
        // The answer and the close have both arrived before the next request is written.
        XCTAssertTrue(Poll.until(within: 10) { AgentClient.shared.isConnectionClosedByAgent })
        let response = AgentClient.shared.send(.status)
        XCTAssertEqual(response.status, errSecNotAvailable)
        XCTAssertEqual(response.message, busy)
        XCTAssertEqual(try script.result(), [], "the client connected again after being turned away")
    }

    // MARK: The scripted agent

    private struct ScriptFailure: Error, CustomStringConvertible { var description: String }

    /// Runs `body` on a thread of its own; `result()` waits for it (at most 30 s).
    private func script(_ body: @escaping @Sendable () throws -> [Opcode]) -> Script {
        let script = Script()
        Thread.detachNewThread {
            do { script.outcome = .success(try body()) } catch { script.outcome = .failure(error) }
            script.done.signal()
        }
        return script
    }

    private final class Script: @unchecked Sendable {
        var outcome: Result<[Opcode], Error>?
        let done = DispatchSemaphore(value: 0)

        func result() throws -> [Opcode] {
            guard done.wait(timeout: .now() + 30) == .success, let outcome else {
                throw ScriptFailure(description: "the scripted agent did not finish")
            }
            return try outcome.get()
        }
    }

    private static func accept(_ listener: Int32) throws -> Int32 {
        try waitReadable(listener)
        let fd = Glibc.accept(listener, nil, nil)
        guard fd >= 0 else { throw ScriptFailure(description: "accept: \(String(cString: strerror(errno)))") }
        return fd
    }

    /// Reads the hello a new connection starts with and answers it.
    private static func answerGreeting(_ connection: Int32) throws {
        let greeting = try readRequest(connection)
        guard greeting == .hello else { throw ScriptFailure(description: "the connection began with \(greeting)") }
        try reply(connection)
    }

    private static func waitReadable(_ fd: Int32) throws {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 10_000) > 0 else { throw ScriptFailure(description: "nothing arrived within 10 s") }
    }

    private static func readRequest(_ fd: Int32) throws -> Opcode {
        var payload = try FrameIO.readFrame(from: fd, maxLength: Wire.maxRequestFrame, deadline: .now + .seconds(10))
        return try Request.decode(wiping: &payload).opcode
    }

    private static func reply(_ fd: Int32) throws {
        try FrameIO.writeFrame(
            Response(status: 0, value: nil, message: nil).encode(), to: fd, deadline: .now + .seconds(10))
    }
}
