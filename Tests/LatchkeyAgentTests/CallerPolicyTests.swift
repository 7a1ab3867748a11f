import LatchkeyApplications
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
}
