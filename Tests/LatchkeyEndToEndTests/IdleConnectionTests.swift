import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Connections that hold the agent without using it: silent sockets, the idle connections of
/// long-running programs, requests stalled halfway (docs/PROTOCOL.md §1 "Connections"). None of them
/// may lock out the CLI or a new program, and a limit that is really reached gets an answer that says so
/// (issue 10, defect 2). Root's hand-off through the same crowd is in LatchkeyPAMTests.
final class IdleConnectionTests: AgentTestCase {
    private var socketPath: String { runtimeDirectory + "/latchkey/agent.sock" }

    override func tearDown() {
        unsetenv("LATCHKEY_CONNECTION_IDLE")
        super.tearDown()
    }

    func testAThousandSilentConnectionsLeaveTheAgentServing() throws {
        let limit = try DescriptorLimit(soft: 4096)
        defer { limit.restore() }
        try createKeychain()
        XCTAssertEqual(Self.add("before"), errSecSuccess)
        let silent = RawConnections(count: 1000, to: socketPath)
        defer { silent.closeAll() }

        let found = try cliWithin(30, ["find-generic-password", "-s", "svc", "-a", "before", "-w"])
        XCTAssertEqual(found.status, 0, found.err)
        XCTAssertEqual(found.out, "pw-before\n")

        // A new program: the library on a connection of its own, reading and writing.
        AgentClient.shared.resetConnection()
        XCTAssertEqual(within(30) { Self.read("before").value }, "pw-before")
        XCTAssertEqual(within(30) { Self.add("during") }, errSecSuccess)

        // An idle connection costs the agent a descriptor, not a thread: once the connections have been
        // quiet for a moment, the agent is back to a handful of threads.
        let pid = try XCTUnwrap(agentPID())
        XCTAssertTrue(
            Poll.until(within: 20, every: 0.1) { (threadCount(of: pid) ?? .max) < 32 },
            "the agent keeps \(threadCount(of: pid) ?? -1) threads for 1,000 idle connections")
    }

    func testSilentConnectionsBeyondTheLimitEvictTheOldestIdleOne() throws {
        // The agent runs with a limit of 512 open files, room for fewer connections than the test opens
        // (a hard limit: the agent raises a soft one at start).
        setenv("LATCHKEYD", try AgentProcesses.starter(descriptorLimit: 512, in: runtimeDirectory), 1)
        try createKeychain()
        let high = try DescriptorLimit(soft: 4096)
        defer { high.restore() }
        // The library's persistent connection is now the oldest idle one.
        XCTAssertEqual(Self.add("kept"), errSecSuccess)
        let silent = RawConnections(count: 1000, to: socketPath)
        defer { silent.closeAll() }
        XCTAssertEqual(silent.fds.count, 1000)

        XCTAssertTrue(
            Poll.until(within: 20) { RawConnections.isClosedByPeer(silent.fds[0]) },
            "the oldest silent connection was not closed to make room")
        XCTAssertFalse(RawConnections.isClosedByPeer(silent.fds[999]), "the newest connection was closed")
        let found = try cliWithin(30, ["find-generic-password", "-s", "svc", "-a", "kept", "-w"])
        XCTAssertEqual(found.status, 0, found.err)
        XCTAssertEqual(found.out, "pw-kept\n")

        // The library's connection went first; its next request travels on a new one, exactly once.
        XCTAssertEqual(within(30) { Self.add("after") }, errSecSuccess)
        XCTAssertEqual(within(30) { Self.add("after") }, errSecDuplicateItem)
    }

    /// The agent closes a connection idle for longer than LATCHKEY_CONNECTION_IDLE seconds; the library
    /// sends its next request on a new connection, without the caller noticing and without running it
    /// twice (an add twice would be errSecDuplicateItem).
    func testLibraryReconnectsAfterTheAgentClosesItsIdleConnection() throws {
        setenv("LATCHKEY_CONNECTION_IDLE", "1", 1)
        try createKeychain()
        XCTAssertEqual(Self.add("first"), errSecSuccess)
        XCTAssertTrue(
            Poll.until(within: 20, every: 0.05) { AgentClient.shared.isConnectionClosedByAgent },
            "the agent kept a connection idle for more than a second open")

        XCTAssertEqual(Self.add("second"), errSecSuccess, LatchkeyDiagnostics.lastErrorDetail ?? "")
        XCTAssertEqual(Self.read("second").value, "pw-second")
        XCTAssertEqual(Self.add("second"), errSecDuplicateItem)
    }

    /// More requests stalled halfway than the agent serves at once: a new request waits a moment for a
    /// slot, then gets errSecNotAvailable with a message saying the agent is busy, from the CLI and the
    /// library alike, rather than a reset connection reported as "could not be reached or started".
    func testAnAgentWithEverySlotBusyAnswersThatItIsBusy() throws {
        try createKeychain()
        XCTAssertEqual(Self.add("x"), errSecSuccess)
        AgentClient.shared.resetConnection()
        // More than the agent's 64 request slots, each stalled after one byte of its frame.
        let stalled = RawConnections(count: 80, to: socketPath, stalled: true)
        defer { stalled.closeAll() }

        let library = inBackground { () -> (status: OSStatus, detail: String?) in
            (Self.read("x").status, LatchkeyDiagnostics.lastErrorDetail)
        }
        let cli = try cliWithin(30, ["find-generic-password", "-s", "svc", "-a", "x", "-w"])
        XCTAssertEqual(cli.status, 1, cli.err)
        XCTAssertTrue(cli.err.contains("(-25291)"), cli.err)
        XCTAssertTrue(cli.err.contains("busy"), cli.err)
        XCTAssertFalse(cli.err.contains("could not be reached"), cli.err)
        let answer = try XCTUnwrap(library(30), "the library call did not return")
        XCTAssertEqual(answer.status, errSecNotAvailable)
        XCTAssertTrue(answer.detail?.contains("busy") == true, answer.detail ?? "no detail")

        // The stalled requests time out (10 s) and the agent serves again.
        XCTAssertTrue(
            try Poll.until(within: 40, every: 0.5) {
                try cliWithin(30, ["find-generic-password", "-s", "svc", "-a", "x", "-w"]).status == 0
            }, "the agent did not recover once the stalled requests timed out")
    }

    /// An agent whose every connection is in the middle of a request, none idle to close, turns a new
    /// connection away at once with the same answer; the client reads it even when its own send already
    /// failed because the agent had closed the connection.
    func testAFullAgentTurnsNewConnectionsAwayWithBusy() throws {
        // A limit of 128 open files leaves the agent room for 64 connections, its 64 request slots.
        setenv("LATCHKEYD", try AgentProcesses.starter(descriptorLimit: 128, in: runtimeDirectory), 1)
        try createKeychain()
        AgentClient.shared.resetConnection()
        let stalled = RawConnections(count: 70, to: socketPath, stalled: true)
        defer { stalled.closeAll() }

        let cli = try cliWithin(30, ["find-generic-password", "-s", "svc", "-a", "x", "-w"])
        XCTAssertEqual(cli.status, 1, cli.err)
        XCTAssertTrue(cli.err.contains("latchkey: detail: latchkeyd is busy"), cli.err)
        XCTAssertFalse(cli.err.contains("could not be reached"), cli.err)
        let answer = try XCTUnwrap(within(30) { (Self.read("x").status, LatchkeyDiagnostics.lastErrorDetail) })
        XCTAssertEqual(answer.0, errSecNotAvailable)
        XCTAssertTrue(answer.1?.hasPrefix("latchkeyd is busy") == true, answer.1 ?? "no detail")

        // Once the stalled clients go, the agent serves again.
        stalled.closeAll()
        XCTAssertTrue(
            try Poll.until(within: 20, every: 0.2) {
                try cliWithin(30, ["find-generic-password", "-s", "svc", "-a", "x"]).status == 44
            }, "the agent did not serve again once the stalled connections closed")
    }

    // MARK: Helpers

    private static func add(_ account: String) -> OSStatus {
        SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "svc", kSecAttrAccount: account,
                kSecValueData: Data("pw-\(account)".utf8),
            ] as NSDictionary, nil)
    }

    private static func read(_ account: String) -> (status: OSStatus, value: String?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "svc", kSecAttrAccount: account,
                kSecReturnData: true,
            ] as NSDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    /// The CLI under a deadline: `timeout` kills it (exit 137) rather than let a stuck agent hang the test.
    private func cliWithin(_ seconds: Int, _ arguments: [String]) throws -> TestProcess.Output {
        try TestProcess.run(
            "/usr/bin/timeout", ["-s", "KILL", String(seconds), Self.binDirectory + "/latchkey"] + arguments)
    }

    /// Runs `body` on a thread of its own and waits at most `seconds` for it; nil when it did not finish.
    private func within<T>(_ seconds: Double, _ body: @escaping @Sendable () -> T) -> T? {
        inBackground(body)(seconds)
    }

    /// Starts `body` on a thread of its own; the returned function waits at most the given seconds for
    /// its result (nil when it did not finish in time).
    private func inBackground<T>(_ body: @escaping @Sendable () -> T) -> (Double) -> T? {
        let box = ResultBox<T>()
        Thread.detachNewThread {
            box.value = body()
            box.done.signal()
        }
        return { seconds in
            box.done.wait(timeout: .now() + seconds) == .success ? box.value : nil
        }
    }
}

/// A result handed from a worker thread to the test, published by the semaphore.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
    let done = DispatchSemaphore(value: 0)
}
