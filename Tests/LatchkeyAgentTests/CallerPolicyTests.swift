import LatchkeyApplications
import LatchkeyEngine
import XCTest

@testable import LatchkeyAgent

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent reads application files from: the packaged and administrator's directories, and
/// other ones only for an agent running as root (tests). A user's agent ignores the variable: whoever
/// starts it could otherwise drop every grant, or the administrator's overrides.
final class CallerPolicyTests: XCTestCase {
    override func tearDown() {
        unsetenv(CallerPolicy.directoriesVariable)
    }

    func testOnlyAnAgentRunningAsRootHonoursTheDirectoriesVariable() {
        setenv(CallerPolicy.directoriesVariable, "/nonexistent:/run/other", 1)
        XCTAssertEqual(CallerPolicy.configuredDirectories(euid: 0), ["/nonexistent", "/run/other"])
        XCTAssertEqual(CallerPolicy.configuredDirectories(euid: 1000), ApplicationRegistry.defaultDirectories)
        unsetenv(CallerPolicy.directoriesVariable)
        XCTAssertEqual(CallerPolicy.configuredDirectories(euid: 0), ApplicationRegistry.defaultDirectories)
    }

    /// A connection reuses the caller made for it while its standing and authorization stay and for at
    /// most `decisionLifetime`; any change makes it anew.
    func testAConnectionsCallerIsMadeAgainWhenWhatItCameFromChanges() {
        let policy = CallerPolicy(directories: ["/nonexistent"])
        let identity = CallerIdentity(uid: getuid(), pid: getpid())
        var connection = Connection(
            fd: -1, caller: Caller(uid: getuid(), pid: getpid(), accessGroups: []), peer: .user, identity: identity,
            standing: .confirmed, idleSince: .now)
        let start = ContinuousClock.now
        XCTAssertEqual(policy.caller(for: &connection, now: start).accessGroups, [Caller.defaultAccessGroup])
        // Reused: a stale decision planted in the connection is what comes back while it holds.
        let planted = Caller(uid: getuid(), pid: getpid(), accessGroups: ["planted"])
        connection.decided = DecidedCaller(
            caller: planted, standing: .confirmed, authorization: GroupAuthorization(), until: start + .seconds(1))
        XCTAssertEqual(policy.caller(for: &connection, now: start + .milliseconds(500)), planted)
        XCTAssertEqual(
            policy.caller(for: &connection, now: start + .seconds(1)).accessGroups, [Caller.defaultAccessGroup],
            "made again once its time is up")
        connection.decided = DecidedCaller(
            caller: planted, standing: .confirmed, authorization: GroupAuthorization(), until: start + .seconds(5))
        connection.authorization.groups = ["mail"]
        XCTAssertEqual(
            policy.caller(for: &connection, now: start).accessGroups, [Caller.defaultAccessGroup, "mail"],
            "made again when the authorization changed")
        connection.decided = DecidedCaller(
            caller: planted, standing: .confirmed, authorization: connection.authorization, until: start + .seconds(5))
        connection.standing = .refused
        XCTAssertEqual(
            policy.caller(for: &connection, now: start).accessGroups, [Caller.defaultAccessGroup, "mail"],
            "made again when the standing changed")
        XCTAssertNotEqual(connection.decided?.caller, planted)
    }
}
