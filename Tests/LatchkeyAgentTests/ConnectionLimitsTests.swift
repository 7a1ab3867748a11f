import XCTest

@testable import LatchkeyAgent

#if canImport(Glibc)
    import Glibc
#endif

/// The connection limits the agent derives from its descriptor limit and its environment
/// (docs/PROTOCOL.md §1 "Idle connections").
final class ConnectionLimitsTests: XCTestCase {
    override func tearDown() {
        unsetenv("LATCHKEY_CONNECTION_IDLE")
    }

    func testTheConnectionCapLeavesTheReserveAndNeverDropsBelowTheSlots() {
        XCTAssertEqual(ConnectionLimits.userConnections(descriptorLimit: 1024), 960, "the usual soft limit")
        XCTAssertEqual(ConnectionLimits.userConnections(descriptorLimit: 512), 448)
        XCTAssertEqual(ConnectionLimits.userConnections(descriptorLimit: 1088), 1024)
        XCTAssertEqual(ConnectionLimits.userConnections(descriptorLimit: 1_048_576), 1024)
        XCTAssertEqual(ConnectionLimits.userConnections(descriptorLimit: rlim_t.max), 1024, "RLIM_INFINITY")
        XCTAssertEqual(ConnectionLimits.userConnections(descriptorLimit: 100), ConnectionLimits.userRequestSlots)
        XCTAssertEqual(ConnectionLimits.userConnections(descriptorLimit: 0), ConnectionLimits.userRequestSlots)
    }

    func testTheIdleTimeoutTakesOnlySecondsFromOneToAnHour() {
        XCTAssertEqual(ConnectionLimits.current().idleTimeout, .seconds(60))
        for (value, expected) in [
            ("1", Duration.seconds(1)), ("2.5", .milliseconds(2500)), ("3600", .seconds(3600)),
            ("0", .seconds(60)), ("0.5", .seconds(60)), ("3601", .seconds(60)), ("-5", .seconds(60)),
            ("nan", .seconds(60)), ("inf", .seconds(60)), ("", .seconds(60)), ("60s", .seconds(60)),
        ] {
            setenv("LATCHKEY_CONNECTION_IDLE", value, 1)
            XCTAssertEqual(ConnectionLimits.current().idleTimeout, expected, "LATCHKEY_CONNECTION_IDLE=\(value)")
        }
    }
}
